/* Traces hold no payloads: memory contents reach the driver through
 * kernel arguments, a host-to-device copy, an allocation fault's size and a failing call
 * with a host pointer, each holding a marker string; the test checks that no trace byte
 * holds a marker (nor the value of a non-CUDA environment variable). Prints the results. */
#include <stdio.h>
#include <string.h>

#include "cuda_calls.h"

static char secret[64] = "SEEDANCE-SECRET-PAYLOAD-7f3a";

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d = 0;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return 1;
    printf("alloc -> %d\n", cuMemAlloc_v2(&d, sizeof secret));
    printf("copy -> %d\n", cuMemcpyHtoD_v2(d, secret, sizeof secret));
    void *params[] = {secret, &d};
    /* Over the block limit: explained (launch_fault), the arguments untouched. */
    printf("launch -> %d\n", cuLaunchKernel((CUfunction)0x1000, 1, 1, 1, 2048, 1, 1, 0, NULL,
                                            params, NULL));
    /* A failing call whose argument is a pointer to the secret (cuDeviceGet writes to it):
     * ordinal 9, a mistake the shim explains and repairs (99 would be a question: no driver
     * reports more than 32 devices). */
    printf("device -> %d\n", cuDeviceGet((CUdevice *)secret, 9));
    printf("zero -> %d\n", cuMemAlloc_v2((CUdeviceptr *)secret, 0));
    cuMemFree_v2(d);
    cuCtxDestroy_v2(ctx);
    return 0;
}
