/* What a CUDA runtime linked statically into a program or an extension module does for
 * cudaSetDevice(N) (CuPy 14's cupy_backends/cuda/api/runtime, cuda-python 13's
 * cuda/bindings/_internal/runtime): it initialises the driver, asks the device count, and
 * refuses an ordinal at or above the count itself (cudaErrorInvalidDevice, 101) without
 * asking the driver for that device. Exits 1 then, as a Python program does after the
 * exception. */
#include "cuda_min.h"
#include <stdio.h>
#include <stdlib.h>

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGetCount(int *);

int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 0, version = 0, count = 0;
    if (cuInit(0) || cuDriverGetVersion(&version) || cuDeviceGetCount(&count)) return 2;
    if (want < 0 || want >= count) {
        fprintf(stderr, "cudaErrorInvalidDevice: invalid device ordinal\n");
        return 1;
    }
    printf("device %d of %d\n", want, count);
    return 0;
}
