/* A program whose library (libholder_a.so) holds most of the device's memory: the library
 * allocates 3 x 256 MiB, the program itself 64 MiB, then asks for 512 MiB more, which the
 * device (1 GiB free) cannot give. */
#include "cuda_min.h"
#include <stdio.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
int holder_a_fill(size_t bytes, int n);

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr own, big;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return 2;
    int a = holder_a_fill(256u << 20, 3);
    int m = cuMemAlloc_v2(&own, 64u << 20);
    int r = cuMemAlloc_v2(&big, 512u << 20);
    printf("library %d, own %d, big %d\n", a, m, r);
    return r ? 1 : 0;
}
