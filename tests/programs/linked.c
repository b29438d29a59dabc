/* Path (a): a program linked with -lcuda that calls the exported driver symbols. */
#include "workload.h"

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSynchronize_v2(CUcontext);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemHostAlloc(void **, size_t, unsigned int);
CUresult cuMemFreeHost(void *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
CUresult cuStreamSynchronize_ptsz(CUstream);
CUresult cuEventCreate(CUevent *, unsigned int);
CUresult cuEventRecordWithFlags_ptsz(CUevent, CUstream, unsigned int);
CUresult cuEventDestroy_v2(CUevent);

int main(void) {
    struct driver d = {
        cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuCtxCreate_v2,
        cuCtxDestroy_v2, cuCtxSynchronize_v2, cuDevicePrimaryCtxRetain,
        cuDevicePrimaryCtxRelease_v2, cuMemAlloc_v2, cuMemFree_v2, cuMemHostAlloc,
        cuMemFreeHost, cuLaunchKernel, cuLaunchKernel_ptsz, cuStreamSynchronize_ptsz,
        cuEventCreate, cuEventRecordWithFlags_ptsz, cuEventDestroy_v2,
    };
    return run_workload(&d);
}
