// Races between asynchronous copies on pinned host memory against the real driver, for
// scripts/gpu/pinned.sh.
//
// Built twice from this one file:
//   nvcc -cubin -arch=sm_90 -DPINNED_KERNELS -o pinned.cubin pinned.cu
//   nvcc -O2 -arch=sm_90 -o pinned pinned.cu -lcuda -lpthread
// and run as `pinned pinned.cubin <case>`, one case per process. Driver API only.
//
// Every racing case queues a ~200 ms spin kernel on stream A, then a 64 MiB
// cuMemcpyHtoDAsync from a pinned buffer (0x11) to the device on A, and then, before
// synchronising anything:
//
//   recycle         a cuMemcpyDtoHAsync of 0x22 into the same buffer on stream B (a pool
//                   recycling the block);
//   recycle_thread  the same D2H issued from a second thread;
//   host_write      a host memset of 0x33 into the last page of the source.
//
// then synchronises the context and reads the device copy back: "device copy: intact" when
// it holds 0x11 everywhere (what the program meant), else "corrupted" with the count.
// Healthy cases (must stay silent under the shim):
//
//   event_ordered   an event recorded on A after the copy, cuStreamWaitEvent(B), then the D2H;
//   pool_query      the event polled with cuEventQuery until done (CuPy's pinned pool);
//   synchronized    cuStreamSynchronize(A) before the D2H;
//   same_stream     the D2H on stream A.
//
//   cost N          N cuMemcpyHtoDAsync of 4 KiB from one pinned block on one stream, each
//                   followed by cuEventRecord (PyTorch's caching host allocator does this),
//                   synchronised every 64; prints "ns per copy: X".
//
// stdout is unbuffered so the shim's stderr lines land next to the output.

#ifdef PINNED_KERNELS

#include "spin.cuh"

#else

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N (64u << 20)
#define PAGE 4096u

#define SETUP(call)                                                                        \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                          \
            printf("setup failed: %s -> %d\n", #call, (int)r_);                             \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static CUcontext ctx;
static CUstream a, b;
static CUfunction spin;
static CUdeviceptr d_in, d_fill;
static unsigned char *pinned;

static void spin_on(CUstream s, unsigned long long ns) {
    void *args[] = {&ns};
    SETUP(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void setup(const char *cubin) {
    CUdevice dev;
    CUmodule mod;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuDevicePrimaryCtxRetain(&ctx, dev));
    SETUP(cuCtxSetCurrent(ctx));
    SETUP(cuModuleLoad(&mod, cubin));
    SETUP(cuModuleGetFunction(&spin, mod, "spin"));
    SETUP(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    SETUP(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    SETUP(cuMemHostAlloc((void **)&pinned, N, 0));
    memset(pinned, 0x11, N);
    SETUP(cuMemAlloc(&d_in, N));
    SETUP(cuMemAlloc(&d_fill, N));
    SETUP(cuMemsetD8(d_in, 0, N));
    SETUP(cuMemsetD8(d_fill, 0x22, N));
    SETUP(cuCtxSynchronize());
}

static void first_copy(void) {
    spin_on(a, 200ull * 1000 * 1000);
    SETUP(cuMemcpyHtoDAsync(d_in, pinned, N, a));
}

static void finish(void) {
    unsigned char *got = (unsigned char *)malloc(N);
    size_t bad = 0;
    SETUP(cuCtxSynchronize());
    SETUP(cuMemcpyDtoH(got, d_in, N));
    for (size_t i = 0; i < N; i++) bad += got[i] != 0x11;
    if (bad == 0)
        printf("device copy: intact\n");
    else
        printf("device copy: corrupted (%zu of %u bytes wrong)\n", bad, N);
    free(got);
    SETUP(cuMemFreeHost(pinned));
}

static void *second_thread(void *arg) {
    (void)arg;
    SETUP(cuCtxSetCurrent(ctx));
    SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, b));
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void cost(long n) {
    CUevent e;
    unsigned char *blk;
    CUdeviceptr d;
    SETUP(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    SETUP(cuMemHostAlloc((void **)&blk, PAGE, 0));
    SETUP(cuMemAlloc(&d, PAGE));
    for (long i = 0; i < 1000; i++) SETUP(cuMemcpyHtoDAsync(d, blk, PAGE, a));
    SETUP(cuStreamSynchronize(a));
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        SETUP(cuMemcpyHtoDAsync(d, blk, PAGE, a));
        SETUP(cuEventRecord(e, a));
        if (i % 64 == 63) SETUP(cuStreamSynchronize(a));
    }
    SETUP(cuStreamSynchronize(a));
    printf("ns per copy: %.0f\n", (now_ns() - t0) / n);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 3) return 2;
    const char *c = argv[2];
    setup(argv[1]);
    if (strcmp(c, "cost") == 0) {
        cost(argc > 3 ? atol(argv[3]) : 10000);
        return 0;
    }
    CUevent e;
    SETUP(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    first_copy();
    if (strcmp(c, "recycle") == 0) {
        SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, b));
    } else if (strcmp(c, "recycle_thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, second_thread, NULL) != 0) return 1;
        pthread_join(t, NULL);
    } else if (strcmp(c, "host_write") == 0) {
        memset(pinned + N - PAGE, 0x33, PAGE);
    } else if (strcmp(c, "event_ordered") == 0) {
        SETUP(cuEventRecord(e, a));
        SETUP(cuStreamWaitEvent(b, e, 0));
        SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, b));
    } else if (strcmp(c, "pool_query") == 0) {
        SETUP(cuEventRecord(e, a));
        CUresult r;
        while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY) {
        }
        SETUP(r);
        SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, b));
    } else if (strcmp(c, "synchronized") == 0) {
        SETUP(cuStreamSynchronize(a));
        SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, b));
    } else if (strcmp(c, "same_stream") == 0) {
        SETUP(cuMemcpyDtoHAsync(pinned, d_fill, N, a));
    } else {
        printf("unknown case %s\n", c);
        return 2;
    }
    finish();
    return 0;
}

#endif
