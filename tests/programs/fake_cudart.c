/* A stand-in for the shared CUDA runtime's device selection, enough to test the shim's
 * exported cudaSetDevice: like the real libcudart (measured on an H200, CUDA 13.0), it
 * checks the ordinal against the driver's device count itself and answers
 * cudaErrorInvalidDevice (101) without asking cuDeviceGet. */
#include "cuda_min.h"

CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);

static int current = 0;
static __thread int last_error = 0; /* like the runtime: the last failed call's error */

static int fail(int e) {
    last_error = e;
    return e;
}

int cudaSetDevice(int device) {
    int count = 0;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGetCount(&count)) return fail(3); /* cudaErrorInitializationError */
    if (device < 0 || device >= count) return fail(101);        /* cudaErrorInvalidDevice */
    if (cuDeviceGet(&dev, device)) return fail(101);
    CUresult r = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r == 46) return fail(46);                                /* cudaErrorDevicesUnavailable */
    if (r || cuCtxSetCurrent(ctx)) return fail(999);
    current = device;
    return 0;
}

int cudaGetLastError(void) {
    int e = last_error;
    last_error = 0;
    return e;
}

int cudaGetDevice(int *device) {
    *device = current;
    return 0;
}
