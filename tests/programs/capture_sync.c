/* A synchronisation of a stream while it is captured into a graph (what PyTorch's .item()
 * inside torch.cuda.graph does): the driver refuses it with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900) and the capture's end with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901). Exits 1 after printing both results. */
#include "cuda_min.h"
#include <stdio.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned int);
CUresult cuStreamBeginCapture_v2(CUstream, unsigned int);
CUresult cuStreamEndCapture(CUstream, void **);
CUresult cuStreamSynchronize(CUstream);

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    void *graph = 0;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&s, 1) || cuStreamBeginCapture_v2(s, 0))
        return 2;
    CUresult sync = cuStreamSynchronize(s);
    CUresult end = cuStreamEndCapture(s, &graph);
    printf("sync %d, end %d\n", sync, end);
    return 1;
}
