/* Loops of failing driver calls. `repeat_failures N sync`: synchronises the current context
 * N times with none current (each call fails with CUDA_ERROR_INVALID_CONTEXT, a plain
 * call_failed). `repeat_failures N alloc0`: creates a context on device 0 and asks for 0
 * bytes N times (each fails with CUDA_ERROR_INVALID_VALUE, an explained alloc_fault).
 * `repeat_failures N three`: each of N rounds makes three different failing calls with no
 * context: cuCtxSynchronize_v2(NULL), cuCtxDestroy_v2(NULL) and cuCtxSynchronize_v2 of a
 * made-up handle.
 * Prints how many failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

CUresult cuCtxSynchronize_v2(CUcontext);

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    const char *what = argc > 2 ? argv[2] : "sync";
    if (cuInit(0) != 0) {
        return 2;
    }
    CUcontext ctx = NULL;
    if (strcmp(what, "alloc0") == 0) {
        CUdevice dev;
        if (cuDeviceGet(&dev, 0) != 0 || cuCtxCreate_v2(&ctx, 0, dev) != 0) {
            return 3;
        }
    }
    long failed = 0;
    CUresult last = 0;
    for (long i = 0; i < n; i++) {
        CUresult r;
        if (ctx) {
            CUdeviceptr p;
            r = cuMemAlloc_v2(&p, 0);
        } else if (strcmp(what, "three") == 0) {
            r = cuCtxSynchronize_v2(NULL);
            r = cuCtxDestroy_v2(NULL) ? 1 : r;
            r = cuCtxSynchronize_v2((CUcontext)0x1234) ? r : 0;
        } else {
            r = cuCtxSynchronize_v2(NULL);
        }
        if (r != 0) {
            failed++;
            last = r;
        }
    }
    if (ctx) {
        cuCtxDestroy_v2(ctx);
    }
    printf("%ld of %ld failed, last %d\n", failed, n, last);
    return 0;
}
