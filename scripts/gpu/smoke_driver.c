/* GPU smoke test, path (a): a program linked with -lcuda that uses the driver API only.
 * Usage: smoke_driver fill.cubin   Prints a checksum; exits non-zero on any error. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                  \
    do {                                                                          \
        CUresult r_ = (call);                                                     \
        if (r_ != CUDA_SUCCESS) {                                                 \
            const char *n_ = "?";                                                 \
            cuGetErrorName(r_, &n_);                                              \
            printf("%s failed: %s (%d)\n", #call, n_, r_);                        \
            return 1;                                                             \
        }                                                                         \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const int n = 1 << 20;
    CUdevice dev;
    CUcontext primary, own;
    CUmodule mod;
    CUfunction fill;
    CUdeviceptr d;
    int *host = malloc(n * sizeof(int));
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    /* A context of our own, created and destroyed (cuCtxCreate is the _v4 ABI in 13.0). */
#if CUDA_VERSION >= 13000
    CK(cuCtxCreate(&own, NULL, 0, dev));
#else
    CK(cuCtxCreate(&own, 0, dev));
#endif
    CK(cuCtxDestroy(own));
    CK(cuDevicePrimaryCtxRetain(&primary, dev));
    CK(cuCtxSetCurrent(primary));
    CK(cuModuleLoad(&mod, argv[1]));
    CK(cuModuleGetFunction(&fill, mod, "fill"));
    CK(cuMemAlloc(&d, n * sizeof(int)));
    void *args[] = {&d, (void *)&n};
    for (int rep = 0; rep < 10; rep++)
        CK(cuLaunchKernel(fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    CK(cuMemcpyDtoH(host, d, n * sizeof(int)));
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += host[i];
    CK(cuMemFree(d));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("sum=%lld expected=%lld\n", sum, (long long)n * n);
    return sum == (long long)n * n ? 0 : 1;
}
