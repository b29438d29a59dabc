/* T threads, each making N hooked calls (cuLaunchKernel on its own context) and, every
 * 1000 calls, a cuCtxCreate_v2 + cuCtxDestroy_v2 pair. Usage: stress T N. Prints the total
 * of successful calls. */
#include "cuda_min.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

static long n;
static long ok_calls[64];

static void *work(void *arg) {
    long id = (long)arg;
    CUdevice dev;
    CUcontext ctx, extra;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return NULL;
    ok_calls[id] += 2;
    for (long i = 0; i < n; i++) {
        if (cuLaunchKernel((CUfunction)0x1000, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == 0)
            ok_calls[id]++;
        if (i % 1000 == 999) {
            if (cuCtxCreate_v2(&extra, 0, dev) == 0) ok_calls[id]++;
            if (cuCtxDestroy_v2(extra) == 0) ok_calls[id]++;
            if (cuCtxSetCurrent(ctx) == 0) ok_calls[id]++;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 32;
    n = argc > 2 ? atol(argv[2]) : 100000;
    pthread_t th[64];
    if (t < 1 || t > 64 || cuInit(0)) return 2;
    for (long i = 0; i < t; i++) pthread_create(&th[i], NULL, work, (void *)i);
    long total = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        total += ok_calls[i];
    }
    printf("ok_calls=%ld\n", total);
    return 0;
}
