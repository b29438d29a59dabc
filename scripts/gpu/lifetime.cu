// Context lifetime and asynchronous safety against the real driver, for
// scripts/gpu/lifetime.sh.
//
// Built twice from this one file:
//   nvcc -cubin -arch=sm_90 -DLIFETIME_KERNELS -o lifetime.cubin lifetime.cu
//   nvcc -O2 -arch=sm_90 -o lifetime lifetime.cu -lcuda
// and run as `lifetime lifetime.cubin <case>`, one case per process (a destroyed context or a
// sticky error cannot leak into the next case). Driver API only (cuModuleLoad), so every
// call goes through the entry points the shim hooks.
//
// Every case queues a spin kernel of about 200 ms on a stream first, so the work after it
// is still pending when the program makes its mistake; the race is real, not simulated.
// Each call prints its result and how long it took (a call that waits for the device shows
// it), then the case prints whether the data came through:
//
//   destroy_before_sync   spin, fill a device buffer, copy it back (registered host memory)
//                         on the stream; cuCtxDestroy; cuStreamSynchronize; then the frees
//                         a static destructor would make (cuMemFree, cuStreamDestroy).
//   pinned_free           spin, copy from cuMemHostAlloc memory to the device; cuMemFreeHost
//                         right away; synchronise; read the device copy back.
//   pinned_free_interior  the same with a copy from inside the pinned block.
//   unregister_reuse      spin, copy from cuMemHostRegister'ed memory; cuMemHostUnregister
//                         and overwrite the buffer (reuse) right away; synchronise; read back.
//   clean                 the same work done right (synchronise first): must stay silent.
//
// stdout is unbuffered so that the shim's stderr lines land next to the call they explain
// when both go to one file. Exit status: 0, or 1 when a setup call failed.

#ifdef LIFETIME_KERNELS

#include "spin.cuh"

// Writes `v` to `n` bytes at `out`.
extern "C" __global__ void fill(unsigned char *out, int v, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = (unsigned char)v;
}

#else

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N (1 << 20)

static const char *name(CUresult r) {
    const char *s = nullptr;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

static double now_ms() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Runs one call and prints `  <what> -> <code> <name> (<ms> ms)`.
#define CALL(what, call)                                                                     \
    do {                                                                                     \
        double t0_ = now_ms();                                                               \
        CUresult r_ = (call);                                                                \
        printf("  %-44s -> %d %s (%.1f ms)\n", what, (int)r_, name(r_), now_ms() - t0_);     \
    } while (0)

#define SETUP(call)                                                                          \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_ != CUDA_SUCCESS) {                                                            \
            printf("setup failed: %s -> %d %s\n", #call, (int)r_, name(r_));                 \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static void check(const char *what, const unsigned char *buf, size_t n, unsigned char want) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += buf[i] != want;
    if (bad == 0)
        printf("  result %s: intact\n", what);
    else
        printf("  result %s: corrupted (%zu of %zu bytes wrong, first 0x%02x)\n", what, bad, n,
               buf[0]);
}

struct Setup {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction spin, fill;
    CUstream s;
    unsigned long long spin_ns;
};

// cuCtxCreate is the 4-argument _v4 in CUDA 13 headers, the 3-argument _v2 before.
static CUresult ctx_create(CUcontext *c, CUdevice d) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(c, nullptr, 0, d);
#else
    return cuCtxCreate(c, 0, d);
#endif
}

static Setup setup(const char *cubin) {
    Setup s;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&s.dev, 0));
    SETUP(ctx_create(&s.ctx, s.dev));
    SETUP(cuModuleLoad(&s.mod, cubin));
    SETUP(cuModuleGetFunction(&s.spin, s.mod, "spin"));
    SETUP(cuModuleGetFunction(&s.fill, s.mod, "fill"));
    SETUP(cuStreamCreate(&s.s, CU_STREAM_NON_BLOCKING));
    s.spin_ns = 200ULL * 1000 * 1000;
    return s;
}

static CUresult spin(Setup &s) {
    void *args[] = {&s.spin_ns};
    return cuLaunchKernel(s.spin, 1, 1, 1, 32, 1, 1, 0, s.s, args, nullptr);
}

static CUresult fill(Setup &s, CUdeviceptr d, int v, int n) {
    void *args[] = {&d, &v, &n};
    return cuLaunchKernel(s.fill, 64, 1, 1, 256, 1, 1, 0, s.s, args, nullptr);
}

static void destroy_before_sync(const char *cubin) {
    Setup s = setup(cubin);
    CUdeviceptr d;
    unsigned char *dst = (unsigned char *)malloc(N);
    memset(dst, 0, N);
    SETUP(cuMemAlloc(&d, N));
    SETUP(cuMemHostRegister(dst, N, 0));
    CALL("spin kernel (~200 ms)", spin(s));
    CALL("fill kernel", fill(s, d, 0x11, N));
    CALL("cuMemcpyDtoHAsync (registered memory)", cuMemcpyDtoHAsync(dst, d, N, s.s));
    CALL("cuCtxDestroy before synchronising", cuCtxDestroy(s.ctx));
    CALL("cuStreamSynchronize after the destroy", cuStreamSynchronize(s.s));
    check("copied back", dst, N, 0x11);
    // What static destructors do next.
    CALL("cuMemFree after the destroy", cuMemFree(d));
    CALL("cuStreamDestroy after the destroy", cuStreamDestroy(s.s));
}

static void pinned_free(const char *cubin, size_t offset, size_t n) {
    Setup s = setup(cubin);
    CUdeviceptr d;
    unsigned char *p;
    unsigned char *out = (unsigned char *)malloc(N);
    SETUP(cuMemAlloc(&d, N));
    SETUP(cuMemHostAlloc((void **)&p, N, 0));
    memset(p, 0x22, N);
    CALL("spin kernel (~200 ms)", spin(s));
    CALL("cuMemcpyHtoDAsync from pinned memory", cuMemcpyHtoDAsync(d, p + offset, n, s.s));
    CALL("cuMemFreeHost before synchronising", cuMemFreeHost(p));
    CALL("cuStreamSynchronize", cuStreamSynchronize(s.s));
    SETUP(cuMemcpyDtoH(out, d, n));
    check("device copy", out, n, 0x22);
    SETUP(cuMemFree(d));
    SETUP(cuStreamDestroy(s.s));
    SETUP(cuCtxDestroy(s.ctx));
}

static void unregister_reuse(const char *cubin) {
    Setup s = setup(cubin);
    CUdeviceptr d;
    unsigned char *buf = (unsigned char *)malloc(N);
    unsigned char *out = (unsigned char *)malloc(N);
    memset(buf, 0x44, N);
    SETUP(cuMemAlloc(&d, N));
    SETUP(cuMemHostRegister(buf, N, 0));
    CALL("spin kernel (~200 ms)", spin(s));
    CALL("cuMemcpyHtoDAsync from registered memory", cuMemcpyHtoDAsync(d, buf + 4096, N / 2, s.s));
    CALL("cuMemHostUnregister before synchronising", cuMemHostUnregister(buf));
    memset(buf, 0x55, N); // the buffer is reused at once
    CALL("cuStreamSynchronize", cuStreamSynchronize(s.s));
    SETUP(cuMemcpyDtoH(out, d, N / 2));
    check("device copy", out, N / 2, 0x44);
    SETUP(cuMemFree(d));
    SETUP(cuStreamDestroy(s.s));
    SETUP(cuCtxDestroy(s.ctx));
}

static void clean(const char *cubin) {
    Setup s = setup(cubin);
    CUdeviceptr d;
    unsigned char *p;
    unsigned char *out = (unsigned char *)malloc(N);
    SETUP(cuMemAlloc(&d, N));
    SETUP(cuMemHostAlloc((void **)&p, N, 0));
    memset(p, 0x66, N);
    CALL("spin kernel (~200 ms)", spin(s));
    CALL("cuMemcpyHtoDAsync from pinned memory", cuMemcpyHtoDAsync(d, p, N, s.s));
    CALL("cuStreamSynchronize", cuStreamSynchronize(s.s));
    CALL("cuMemFreeHost", cuMemFreeHost(p));
    SETUP(cuMemcpyDtoH(out, d, N));
    check("device copy", out, N, 0x66);
    CALL("cuMemFree", cuMemFree(d));
    CALL("cuStreamDestroy", cuStreamDestroy(s.s));
    CALL("cuCtxDestroy", cuCtxDestroy(s.ctx));
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: %s lifetime.cubin <case>\n", argv[0]);
        return 2;
    }
    const char *cubin = argv[1], *c = argv[2];
    printf("case %s\n", c);
    if (strcmp(c, "destroy_before_sync") == 0) destroy_before_sync(cubin);
    else if (strcmp(c, "pinned_free") == 0) pinned_free(cubin, 0, N);
    else if (strcmp(c, "pinned_free_interior") == 0) pinned_free(cubin, 4096, N / 4);
    else if (strcmp(c, "unregister_reuse") == 0) unregister_reuse(cubin);
    else if (strcmp(c, "clean") == 0) clean(cubin);
    else {
        printf("unknown case %s\n", c);
        return 2;
    }
    return 0;
}

#endif
