/* Initialises the driver, then exits; libteardown's destructor makes two more calls. */
#include "cuda_min.h"
#include <stdio.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    int r = cuInit(0) | cuDeviceGet(&dev, 0) | cuDevicePrimaryCtxRetain(&ctx, dev) | cuCtxSetCurrent(ctx);
    printf("setup=%d\n", r);
    return r;
}
