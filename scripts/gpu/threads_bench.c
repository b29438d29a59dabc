/* Thread-scaling benchmark of the driver calls the shim tracks (scripts/gpu-threads.sh).
 *
 *   threads_bench THREADS ITERATIONS
 *
 * Starts THREADS host threads, each with its own non-blocking stream, a 4 KiB pinned
 * buffer (cuMemHostAlloc), a 4 KiB pageable buffer (malloc), a 4 KiB device buffer and two
 * events, all on device 0's primary context. For each operation in turn every thread runs
 * ITERATIONS of it between two barriers, and the wall time of the slowest thread is printed
 * as nanoseconds per operation per thread:
 *
 *   pinned_copy    cuMemcpyHtoDAsync_v2 from the pinned buffer, cuStreamSynchronize every 64
 *   pageable_copy  the same from the pageable buffer
 *   launch         cuLaunchKernel of an empty kernel, cuStreamSynchronize every 64
 *   alloc_free     cuMemAlloc_v2 + cuMemFree_v2 of 4 KiB (ITERATIONS / 50 pairs: a pair takes
 *                  about 68 us, docs/design.md fact 8)
 *   event_wait     cuEventRecord on the stream + cuStreamWaitEvent of it on the same stream,
 *                  after a pinned copy, cuStreamSynchronize every 64
 *
 * Output, one line per operation: "op NAME threads T ns_per_op N". Exit status 1 on any
 * driver failure (its name and code on stderr). */
#include <cuda.h>
#include "cu_check.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry empty()\n{\n\tret;\n}\n";


enum { PINNED, PAGEABLE, LAUNCH, ALLOC, EVENT, OPS };
static const char *names[OPS] = {"pinned_copy", "pageable_copy", "launch", "alloc_free",
                                 "event_wait"};

static CUcontext ctx;
static CUfunction kernel;
static int iterations;
static pthread_barrier_t barrier;
static double elapsed[OPS][1024];

struct worker {
    int index;
};

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *run(void *arg) {
    struct worker *w = arg;
    CUstream s;
    CUevent e;
    CUdeviceptr d;
    void *pinned;
    size_t bytes = 4096;
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CHECK(cuMemAlloc(&d, bytes));
    CHECK(cuMemHostAlloc(&pinned, bytes, 0));
    char *pageable = malloc(bytes);
    memset(pinned, 1, bytes);
    memset(pageable, 2, bytes);
    for (int op = 0; op < OPS; op++) {
        pthread_barrier_wait(&barrier);
        int n = op == ALLOC ? (iterations / 50 > 0 ? iterations / 50 : 1) : iterations;
        double t0 = now_ns();
        for (int i = 1; i <= n; i++) {
            switch (op) {
            case PINNED:
                CHECK(cuMemcpyHtoDAsync(d, pinned, bytes, s));
                break;
            case PAGEABLE:
                CHECK(cuMemcpyHtoDAsync(d, pageable, bytes, s));
                break;
            case LAUNCH:
                CHECK(cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
                break;
            case ALLOC: {
                CUdeviceptr p;
                CHECK(cuMemAlloc(&p, bytes));
                CHECK(cuMemFree(p));
                break;
            }
            case EVENT:
                CHECK(cuMemcpyHtoDAsync(d, pinned, bytes, s));
                CHECK(cuEventRecord(e, s));
                CHECK(cuStreamWaitEvent(s, e, 0));
                break;
            }
            if (op != ALLOC && i % 64 == 0) CHECK(cuStreamSynchronize(s));
        }
        CHECK(cuStreamSynchronize(s));
        elapsed[op][w->index] = (now_ns() - t0) / n;
        pthread_barrier_wait(&barrier);
    }
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree(d));
    CHECK(cuEventDestroy(e));
    CHECK(cuStreamDestroy(s));
    free(pageable);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s THREADS ITERATIONS\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    iterations = atoi(argv[2]);
    if (threads < 1 || threads > 1024 || iterations < 1) return 2;
    CUdevice dev;
    CUmodule mod;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&kernel, mod, "empty"));
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    struct worker *w = calloc((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        w[i].index = i;
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    for (int op = 0; op < OPS; op++) {
        double worst = 0;
        for (int i = 0; i < threads; i++)
            if (elapsed[op][i] > worst) worst = elapsed[op][i];
        printf("op %s threads %d ns_per_op %.0f\n", names[op], threads, worst);
    }
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
