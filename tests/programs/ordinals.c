/* Uses each device ordinal given on the command line the way a driver-API program does:
 * cuDeviceGet, retain the primary context (or, with -c, create a context), allocate, and
 * report which device did the work (by PCI bus id). Exits 1 at the first failure. */
#include "cuda_min.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

int main(int argc, char **argv) {
    int create = 0;
    if (cuInit(0) != 0) { printf("cuInit failed\n"); return 1; }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0) { create = 1; continue; }
        int ordinal = atoi(argv[i]);
        CUdevice dev, used;
        CUcontext ctx;
        CUdeviceptr p;
        char bus[32];
        CUresult r = cuDeviceGet(&dev, ordinal);
        if (r) { printf("ordinal %d: cuDeviceGet -> %d\n", ordinal, r); return 1; }
        r = create ? cuCtxCreate_v2(&ctx, 0, dev) : cuDevicePrimaryCtxRetain(&ctx, dev);
        if (r) { printf("ordinal %d: %s -> %d\n", ordinal, create ? "cuCtxCreate_v2" : "cuDevicePrimaryCtxRetain", r); return 1; }
        if (cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&p, 1 << 20) || cuCtxGetDevice(&used) ||
            cuDeviceGetPCIBusId(bus, sizeof bus, used)) {
            printf("ordinal %d: work failed\n", ordinal);
            return 1;
        }
        printf("ordinal %d -> %s\n", ordinal, bus);
    }
    return 0;
}
