/* Allocation faults: each scenario named on the command line makes allocations
 * that fail for a reason the shim explains, then the legal one, and prints what the driver
 * returned for each. Exits 0 unless a setup call fails; destroys its context first. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cuda_calls.h"

typedef unsigned long long CUmemGenericAllocationHandle;

/* cuda.h (CUDA 13.0) CUmemAllocationProp, 32 bytes. */
typedef struct {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes;
    struct { int type; int id; } location; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);

#define MIB ((size_t)1 << 20)
#define SHOW(what, call) printf("%s -> %d\n", what, (int)(call))

int main(int argc, char **argv) {
    CUcontext ctx;
    CUdeviceptr p = 0, q = 0;
    const char *s = argc > 1 ? argv[1] : "";
    if (cuInit(0) || cuCtxCreate_v2(&ctx, 0, 0)) { printf("setup failed\n"); return 1; }
    if (strcmp(s, "zero") == 0) {
        SHOW("cuMemAlloc 0 bytes", cuMemAlloc_v2(&p, 0));
        SHOW("cuMemAllocManaged 0 bytes", cuMemAllocManaged(&p, 0, 1));
        void *h = NULL;
        SHOW("cuMemHostAlloc 0 bytes", cuMemHostAlloc(&h, 0, 0));
        SHOW("cuMemAlloc 4096 bytes", cuMemAlloc_v2(&p, 4096));
    } else if (strcmp(s, "negative") == 0) {
        long long n = -4096;
        SHOW("cuMemAlloc (size_t)-4096", cuMemAlloc_v2(&p, (size_t)n));
        SHOW("cuMemAlloc 4096", cuMemAlloc_v2(&p, 4096));
    } else if (strcmp(s, "oom") == 0) {
        SHOW("cuMemAlloc 256 MiB", cuMemAlloc_v2(&p, 256 * MIB));
        SHOW("cuMemAlloc 256 MiB", cuMemAlloc_v2(&q, 256 * MIB));
        SHOW("cuMemFree", cuMemFree_v2(q));
        SHOW("cuMemAlloc 2 GiB", cuMemAlloc_v2(&q, 2048 * MIB));
        SHOW("cuMemAlloc 512 MiB", cuMemAlloc_v2(&q, 512 * MIB));
    } else if (strcmp(s, "create") == 0) {
        CUmemAllocationProp prop;
        CUmemGenericAllocationHandle h = 0;
        memset(&prop, 0, sizeof prop);
        prop.type = 1;
        prop.location.type = 1;
        prop.location.id = 0;
        SHOW("cuMemCreate 3 MiB", cuMemCreate(&h, 3 * MIB, &prop, 0));
        SHOW("cuMemCreate 4 MiB", cuMemCreate(&h, 4 * MIB, &prop, 0));
        SHOW("cuMemRelease", cuMemRelease(h));
    } else {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    /* A tidy exit: the context's memory goes with it. */
    if (cuCtxDestroy_v2(ctx)) return 1;
    return 0;
}
