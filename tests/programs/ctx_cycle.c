/* Context create/destroy cost: LIVE allocations are made first in a context that stays
 * alive (the "other contexts"), then T threads each make CYCLES cuCtxCreate_v2 +
 * cuCtxDestroy_v2 pairs, allocating OWN blocks in each context before destroying it (the
 * driver releases them with it). Prints wall-clock ns per pair and the total seconds.
 * Usage: ctx_cycle CYCLES [T] [LIVE] [OWN] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_calls.h"

static long cycles;
static int own;
static CUdevice dev;
static pthread_barrier_t start;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *cycle(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < cycles; i++) {
        CUcontext c;
        CUdeviceptr p;
        if (cuCtxCreate_v2(&c, 0, dev)) abort();
        for (int j = 0; j < own; j++)
            if (cuMemAlloc_v2(&p, 4096)) abort();
        if (cuCtxDestroy_v2(c)) abort();
    }
    return NULL;
}

int main(int argc, char **argv) {
    cycles = argc > 1 ? atol(argv[1]) : 1000;
    int t = argc > 2 ? atoi(argv[2]) : 1;
    long live = argc > 3 ? atol(argv[3]) : 0;
    own = argc > 4 ? atoi(argv[4]) : 0;
    if (t < 1 || t > 64 || cycles < 1 || live < 0 || own < 0) return 2;
    if (cuInit(0) || cuDeviceGet(&dev, 0)) return 1;
    CUcontext keep;
    if (cuCtxCreate_v2(&keep, 0, dev)) return 1;
    for (long i = 0; i < live; i++) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, 4096)) return 1;
    }
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, t + 1);
    for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, cycle, NULL);
    double t0 = now();
    pthread_barrier_wait(&start);
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    double dt = now() - t0;
    printf("threads=%d cycles=%ld live=%ld own=%d pair_ns=%.0f total_s=%.3f\n", t, cycles, live,
           own, dt / ((double)cycles * t), dt / 1e9);
    return 0;
}
