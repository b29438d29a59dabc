/* The few CUDA driver API declarations the test programs need, with the ABIs of cuda.h
 * (CUDA 13.0). The tests build without the CUDA toolkit, against the fake driver. */
#ifndef SEEDANCE_TEST_CUDA_MIN_H
#define SEEDANCE_TEST_CUDA_MIN_H
#include <stddef.h>
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUfunc_st *CUfunction;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef int CUdriverProcAddressQueryResult;
#define CU_GET_PROC_ADDRESS_DEFAULT 0
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2

typedef CUresult (*PFN_cuInit)(unsigned int);
typedef CUresult (*PFN_cuDriverGetVersion)(int *);
typedef CUresult (*PFN_cuDeviceGetCount)(int *);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *, int);
typedef CUresult (*PFN_cuCtxCreate_v2)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*PFN_cuCtxDestroy_v2)(CUcontext);
typedef CUresult (*PFN_cuCtxSynchronize_v2)(CUcontext);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v2)(CUdevice);
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr *, size_t);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr);
typedef CUresult (*PFN_cuMemHostAlloc)(void **, size_t, unsigned int);
typedef CUresult (*PFN_cuMemFreeHost)(void *);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                       unsigned, unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*PFN_cuStreamSynchronize)(CUstream);
typedef CUresult (*PFN_cuEventCreate)(CUevent *, unsigned int);
typedef CUresult (*PFN_cuEventRecordWithFlags)(CUevent, CUstream, unsigned int);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char *, void **, int, cuuint64_t,
                                            CUdriverProcAddressQueryResult *);

/* The entry points one program run uses, however it found them. */
struct driver {
    PFN_cuInit init;
    PFN_cuDriverGetVersion driver_get_version;
    PFN_cuDeviceGetCount device_get_count;
    PFN_cuDeviceGet device_get;
    PFN_cuCtxCreate_v2 ctx_create;
    PFN_cuCtxDestroy_v2 ctx_destroy;
    PFN_cuCtxSynchronize_v2 ctx_synchronize;
    PFN_cuDevicePrimaryCtxRetain primary_retain;
    PFN_cuDevicePrimaryCtxRelease_v2 primary_release;
    PFN_cuMemAlloc_v2 mem_alloc;
    PFN_cuMemFree_v2 mem_free;
    PFN_cuMemHostAlloc mem_host_alloc;
    PFN_cuMemFreeHost mem_free_host;
    PFN_cuLaunchKernel launch;          /* legacy default stream variant */
    PFN_cuLaunchKernel launch_ptsz;     /* per-thread default stream variant */
    PFN_cuStreamSynchronize stream_sync_ptsz;
    PFN_cuEventCreate event_create;
    /* what the CUDA 13 runtime's cudaEventRecord calls (docs/design.md, fact 12), in its
     * per-thread default stream variant */
    PFN_cuEventRecordWithFlags event_record_ptsz;
    PFN_cuEventDestroy_v2 event_destroy;
};
#endif
