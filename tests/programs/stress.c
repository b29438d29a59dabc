/* T threads, each making N hooked calls (cuLaunchKernel on its own context) and, every
 * 1000 calls, a cuCtxCreate_v2 + cuCtxDestroy_v2 pair. Usage: stress T N. Prints the total
 * of successful calls. With STRESS_ALLOC_EVERY=A, every A calls a thread also allocates 512
 * bytes and swaps the allocation into the next thread's mailbox, freeing what it found there
 * (another thread's allocation: frees across threads). The T found last stay allocated, so
 * allocations and frees are 2 x T x (N / A) - T successful calls. */
#include "cuda_min.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

static long n;
static long ok_calls[64];
static long alloc_every;
static int nthreads;
static CUdeviceptr mailbox[64];

/* Thread id's allocation into the next thread's mailbox; frees the one found there. */
static void hand_over(long id) {
    CUdeviceptr p, found;
    if (cuMemAlloc_v2(&p, 512) != 0) return;
    ok_calls[id]++;
    found = __atomic_exchange_n(&mailbox[(id + 1) % nthreads], p, __ATOMIC_ACQ_REL);
    if (found && cuMemFree_v2(found) == 0) ok_calls[id]++;
}

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
        if (alloc_every > 0 && i % alloc_every == alloc_every - 1) hand_over(id);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 32;
    n = argc > 2 ? atol(argv[2]) : 100000;
    pthread_t th[64];
    const char *every = getenv("STRESS_ALLOC_EVERY");
    alloc_every = every ? atol(every) : 0;
    nthreads = t;
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
