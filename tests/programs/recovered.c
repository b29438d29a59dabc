/* Failures a program recovers from, and the same failures without the recovery. Each
 * scenario prints what the driver returned for each call; exits 0 unless a set-up call
 * fails (or, for "give_up_exit", 3 on purpose).
 *
 *   lazy_context      a new thread's first cuMemAllocAsync before any context is current
 *                     there (CUDA_ERROR_INVALID_CONTEXT), then the primary context retained
 *                     and made current, then the same call again: what the CUDA runtime does
 *                     on PyTorch's autograd thread with backend:cudaMallocAsync
 *   fabric_fallback   cuMemCreate asking for a fabric handle (CUDA_ERROR_NOT_PERMITTED on a
 *                     host without IMEX), then for a POSIX file descriptor: PyTorch's
 *                     expandable segments
 *   no_retry          the thread's cuMemAllocAsync fails as in lazy_context, and the thread
 *                     goes on to other work (a stream created) without asking again
 *   no_retry_thread_exit  the same, and the thread ends right after the failure
 *   fabric_no_retry   the fabric cuMemCreate fails and the program goes on without memory
 *   give_up_exit      the fabric cuMemCreate fails and the program exits at once (exit(3))
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

typedef unsigned long long CUmemGenericAllocationHandle;

/* cuda.h (CUDA 13.0) CUmemAllocationProp, 32 bytes. */
typedef struct {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
    int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1, FABRIC = 8 */
    struct { int type; int id; } location; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;

CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);

#define MIB ((size_t)1 << 20)
#define SHOW(what, call) printf("%s -> %d\n", what, (int)(call))

static CUcontext primary;
static const char *scenario = "";

static void *worker(void *unused) {
    (void)unused;
    CUdeviceptr p = 0;
    CUcontext c;
    CUstream s;
    SHOW("cuMemAllocAsync (no current context)", cuMemAllocAsync(&p, 4096, NULL));
    if (strcmp(scenario, "no_retry_thread_exit") == 0) return NULL;
    if (strcmp(scenario, "lazy_context") == 0) {
        SHOW("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&c, 0));
        SHOW("cuCtxSetCurrent", cuCtxSetCurrent(c));
        SHOW("cuMemAllocAsync", cuMemAllocAsync(&p, 4096, NULL));
        SHOW("cuMemFreeAsync", cuMemFreeAsync(p, NULL));
        SHOW("cuStreamSynchronize", cuStreamSynchronize(NULL));
        SHOW("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2(0));
    } else {
        SHOW("cuCtxSetCurrent", cuCtxSetCurrent(primary));
        SHOW("cuStreamCreate", cuStreamCreate(&s, 0));
        SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
    }
    return NULL;
}

static CUresult create(int handle_types, CUmemGenericAllocationHandle *h) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.requestedHandleTypes = handle_types;
    prop.location.type = 1;
    prop.location.id = 0;
    return cuMemCreate(h, 2 * MIB, &prop, 0);
}

int main(int argc, char **argv) {
    CUdevice dev;
    scenario = argc > 1 ? argv[1] : "";
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&primary, dev) ||
        cuCtxSetCurrent(primary)) {
        printf("setup failed\n");
        return 1;
    }
    if (strncmp(scenario, "lazy_context", 12) == 0 || strncmp(scenario, "no_retry", 8) == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) || pthread_join(t, NULL)) return 1;
        printf("thread done\n");
    } else if (strcmp(scenario, "fabric_fallback") == 0) {
        CUmemGenericAllocationHandle h = 0;
        SHOW("cuMemCreate (fabric handle)", create(8, &h));
        SHOW("cuMemCreate (POSIX fd handle)", create(1, &h));
        SHOW("cuMemRelease", cuMemRelease(h));
    } else if (strcmp(scenario, "fabric_no_retry") == 0) {
        CUmemGenericAllocationHandle h = 0;
        CUstream s;
        SHOW("cuMemCreate (fabric handle)", create(8, &h));
        SHOW("cuStreamCreate", cuStreamCreate(&s, 0));
        SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
    } else if (strcmp(scenario, "give_up_exit") == 0) {
        CUmemGenericAllocationHandle h = 0;
        CUresult r = create(8, &h);
        SHOW("cuMemCreate (fabric handle)", r);
        fflush(stdout);
        if (r) exit(3);
    } else {
        printf("unknown scenario %s\n", scenario);
        return 2;
    }
    if (cuDevicePrimaryCtxRelease_v2(dev)) return 1;
    return 0;
}
