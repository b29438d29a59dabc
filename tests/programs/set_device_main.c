/* cudaSetDevice(N) through the (fake) shared runtime, then report the device of the current
 * context by PCI bus id. */
#include "cuda_min.h"
#include <stdio.h>
#include <stdlib.h>

int cudaSetDevice(int);
int cudaGetDevice(int *);
int cudaGetLastError(void);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);

int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 0, got = -1;
    int e = cudaSetDevice(want);
    printf("cudaSetDevice(%d) -> %d, last error %d\n", want, e, cudaGetLastError());
    if (e) return 1;
    CUdevice dev;
    char bus[32];
    cudaGetDevice(&got);
    if (cuCtxGetDevice(&dev) || cuDeviceGetPCIBusId(bus, sizeof bus, dev)) return 1;
    printf("runtime device %d, context on %s\n", got, bus);
    return 0;
}
