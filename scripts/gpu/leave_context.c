/* A driver program that ends without destroying its context or freeing its memory (as
 * NVIDIA's clock_nvrtc, matrixMul_nvrtc and vectorAdd_nvrtc samples do): the driver
 * reclaims both when the process ends. Prints "left" and exits 0. */
#include <cuda.h>
#include <stdio.h>

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, NULL, 0, dev) ||
        cuMemAlloc(&d, 1 << 20)) {
        printf("setup failed\n");
        return 1;
    }
    printf("left\n");
    return 0;
}
