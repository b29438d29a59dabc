/* wrong_ordinal: a driver-API program written for a 2-GPU node that always puts its work on
 * GPU 1. Run it where only one GPU is visible (CUDA_VISIBLE_DEVICES=1, a 1-GPU pod) and
 * cuDeviceGet(1) fails with CUDA_ERROR_INVALID_DEVICE.
 *
 * Build, against the fake driver of seedance-fix (no GPU; README, "Your own program, without a GPU"):
 *   cc -o wrong_ordinal wrong_ordinal.c -L"$(seedance-fix fake-driver --print-path)" -l:libcuda.so.1
 *     (pip install or the release tarball; from a cargo build: -Ltarget/release -l:libcuda.so)
 *   CUDA_VISIBLE_DEVICES=1 seedance-fix run --fake-driver -- ./wrong_ordinal
 * or on a machine with a CUDA driver: cc -o wrong_ordinal wrong_ordinal.c -lcuda
 *     (the driver's libcuda.so; with only the CUDA toolkit, add -L/usr/local/cuda/lib64/stubs)
 * Prints the PCI bus id of the device that did the work. */
#include <stdio.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuCtxSynchronize(void);
CUresult cuGetErrorName(CUresult, const char **);

#define CK(call)                                                              \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != 0) {                                                        \
            const char *n_ = "?";                                             \
            cuGetErrorName(r_, &n_);                                          \
            printf("wrong_ordinal: %s failed: %s (%d)\n", #call, n_, r_);     \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(void) {
    const int gpu = 1; /* "the second GPU of the node" */
    CUdevice dev, used;
    CUcontext ctx;
    CUdeviceptr buf;
    char bus[32];
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, gpu));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc_v2(&buf, 64 << 20));
    /* The fake driver accepts any non-null function handle; a real program would have
     * loaded a module. */
    CK(cuLaunchKernel((CUfunction)0x1000, 1024, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
    CK(cuCtxGetDevice(&used));
    CK(cuDeviceGetPCIBusId(bus, sizeof bus, used));
    CK(cuMemFree_v2(buf));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    printf("wrong_ordinal: work done on ordinal %d (%s)\n", used, bus);
    return 0;
}
