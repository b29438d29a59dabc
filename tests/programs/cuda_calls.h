/* The exported driver functions the test programs linked with -lcuda call, declared with the
 * ABIs of cuda.h (CUDA 13.0), and the helpers those programs share. A program declares any
 * other entry point it needs itself. */
#ifndef SEEDANCE_TEST_CUDA_CALLS_H
#define SEEDANCE_TEST_CUDA_CALLS_H
#include <stdio.h>
#include <stdlib.h>
#include "cuda_min.h"

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemHostAlloc(void **, size_t, unsigned int);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemFreeHost(void *);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned int);
CUresult cuMemHostUnregister(void *);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuStreamCreate(CUstream *, unsigned int);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuEventCreate(CUevent *, unsigned int);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

/* The fake driver accepts any function handle: the kernel the programs launch. */
#define KERNEL ((CUfunction)0x1000)

/* A call the scenario needs to succeed: otherwise say which and exit 1. */
#define SETUP(call)                                                                        \
    do {                                                                                   \
        if ((call) != 0) {                                                                 \
            printf("setup failed: %s\n", #call);                                           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* Prints whether the n bytes at buf all hold want ("intact"), or how many do not. */
static inline void check(const char *what, const unsigned char *buf, size_t n,
                         unsigned char want) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += buf[i] != want;
    if (bad == 0)
        printf("%s: intact\n", what);
    else
        printf("%s: corrupted (%zu of %zu bytes wrong, first 0x%02x)\n", what, bad, n, buf[0]);
}

#endif
