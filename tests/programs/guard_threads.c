/* Correct refills from several threads, for the host-write guard (SEEDANCE_HOST_GUARD):
 * `guard_threads T ROUNDS` starts T threads in one context; each has its own stream, its
 * own 64 KiB pinned buffer and device buffer, and ROUNDS times fills its buffer, queues a
 * cuMemcpyHtoDAsync_v2 of it on its stream and synchronises that stream before the next
 * fill. No write is ever made while a copy is pending. Prints "ok" when every thread's
 * device buffer holds its last fill. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

#define N (64 * 1024)

static CUcontext ctx;
static int rounds;
static pthread_barrier_t start;

static void *worker(void *arg) {
    int id = (int)(size_t)arg;
    CUstream s;
    unsigned char *buf;
    CUdeviceptr d;
    static __thread unsigned char got[N];
    if (cuCtxSetCurrent(ctx) || cuStreamCreate(&s, 1) || cuMemAllocHost_v2((void **)&buf, N) ||
        cuMemAlloc_v2(&d, N))
        abort();
    pthread_barrier_wait(&start);
    unsigned char v = 0;
    for (int r = 0; r < rounds; r++) {
        v = (unsigned char)(id * 64 + r);
        memset(buf, v, N);
        if (cuMemcpyHtoDAsync_v2(d, buf, N, s) || cuStreamSynchronize(s)) abort();
    }
    if (cuMemcpyDtoH_v2(got, d, N)) abort();
    int bad = 0;
    for (int i = 0; i < N; i++) bad |= got[i] != v;
    if (cuMemFree_v2(d) || cuMemFreeHost(buf) || cuStreamDestroy_v2(s)) abort();
    return bad ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 4;
    rounds = argc > 2 ? atoi(argv[2]) : 50;
    if (t < 1 || t > 32) return 2;
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return 3;
    pthread_t th[32];
    pthread_barrier_init(&start, NULL, t);
    for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, worker, (void *)(size_t)i);
    int bad = 0;
    for (int i = 0; i < t; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad |= r != NULL;
    }
    if (cuCtxDestroy_v2(ctx)) return 4;
    printf(bad ? "device got other bytes\n" : "ok\n");
    return 0;
}
