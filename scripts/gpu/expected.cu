// Expected failures and context cost on a real GPU (scripts/gpu/expected.sh): the CUDA
// runtime's start-up (its cuGetProcAddress_v2 version probes), LIVE cudaMalloc buffers in the
// primary context, then PAIRS cuCtxCreate_v2 + cuCtxDestroy_v2 through the driver API, timed.
// Usage: expected PAIRS LIVE. Prints the runtime and driver versions and the time per pair.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 200;
    int live = argc > 2 ? atoi(argv[2]) : 1000;
    if (pairs < 1 || live < 0) return 2;
    if (cudaFree(0) != cudaSuccess) { printf("cudaFree(0) failed\n"); return 1; }
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("runtime=%d driver=%d\n", rt, drv);
    void **bufs = (void **)calloc(live ? live : 1, sizeof(void *));
    for (int i = 0; i < live; i++)
        if (cudaMalloc(&bufs[i], 4096) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    CUdevice dev;
    if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return 1;
    double t0 = now_us();
    for (int i = 0; i < pairs; i++) {
        CUcontext c;
#if CUDA_VERSION >= 13000
        CUresult r = cuCtxCreate(&c, NULL, 0, dev);
#else
        CUresult r = cuCtxCreate(&c, 0, dev);
#endif
        if (r != CUDA_SUCCESS) { printf("cuCtxCreate failed: %d\n", (int)r); return 1; }
        if (cuCtxDestroy(c) != CUDA_SUCCESS) { printf("cuCtxDestroy failed\n"); return 1; }
    }
    double dt = now_us() - t0;
    for (int i = 0; i < live; i++) cudaFree(bufs[i]);
    printf("pairs=%d live=%d\n", pairs, live);
    printf("pair_us=%.1f\n", dt / pairs);
    return 0;
}
