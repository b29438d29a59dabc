/* The hot path in a loop: T threads, each making N cuLaunchKernel calls and N
 * cuMemAlloc_v2 + cuMemFree_v2 pairs. Prints ns per launch and per alloc/free pair (wall
 * clock, median of 5 repetitions). Usage: hot_loop N [T] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned int);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);

static long n;
static pthread_barrier_t start;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *launches(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < n; i++)
        if (cuLaunchKernel((void *)0x1000, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) abort();
    return NULL;
}

static void *allocs(void *arg) {
    (void)arg;
    CUdeviceptr p;
    pthread_barrier_wait(&start);
    for (long i = 0; i < n; i++)
        if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p)) abort();
    return NULL;
}

static double run(void *(*f)(void *), int t) {
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, t + 1);
    for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, f, NULL);
    double t0 = now();
    pthread_barrier_wait(&start);
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    double dt = now() - t0;
    pthread_barrier_destroy(&start);
    return dt / ((double)n * t);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 1000000;
    int t = argc > 2 ? atoi(argv[2]) : 1;
    if (t < 1 || t > 64) return 2;
    if (cuInit(0)) return 1;
    double l[5], a[5];
    for (int r = 0; r < 5; r++) { l[r] = run(launches, t); a[r] = run(allocs, t); }
    qsort(l, 5, sizeof l[0], cmp);
    qsort(a, 5, sizeof a[0], cmp);
    printf("threads=%d launch_ns=%.2f alloc_free_pair_ns=%.2f\n", t, l[2], a[2]);
    return 0;
}
