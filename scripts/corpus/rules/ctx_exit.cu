/* Rule: a context a driver-API program leaves alive at exit.
 *
 *   ctx_exit destroyed  correct: cuCtxCreate, an allocation and a copy, cuCtxDestroy.
 *   ctx_exit alive      the same without cuCtxDestroy (nor cuMemFree): the process exits with its
 *                       context alive, and the driver reclaims it. A leak the driver reclaims at
 *                       exit belongs in the trace, not on stderr.
 *
 * Prints the value read back. Exit 0 unless a driver call fails. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    const char *variant = argc > 1 ? argv[1] : "destroyed";
    int destroy;
    if (strcmp(variant, "destroyed") == 0) {
        destroy = 1;
    } else if (strcmp(variant, "alive") == 0) {
        destroy = 0;
    } else {
        fprintf(stderr, "usage: %s destroyed|alive\n", argv[0]);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d;
    unsigned int value = 0;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&ctx, NULL, 0, dev)); /* the _v4 ABI in cuda.h of CUDA 13.0 */
    CK(cuMemAlloc(&d, 1 << 20));
    CK(cuMemsetD32(d, 0x5eed, (1 << 20) / 4));
    CK(cuMemcpyDtoH(&value, d, sizeof value));
    printf("variant=%s value=0x%x\n", variant, value);
    if (destroy) {
        CK(cuMemFree(d));
        CK(cuCtxDestroy(ctx));
    }
    return 0;
}
