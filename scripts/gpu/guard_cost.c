/* Cost of the host-write guard per copy size (scripts/bench/gpu-guard-cost.sh).
 *
 *   guard_cost BYTES COPIES
 *
 * One pinned buffer of BYTES (cuMemHostAlloc) and one device buffer; COPIES times an
 * asynchronous H2D copy of the whole buffer on a non-blocking stream followed by
 * cuStreamSynchronize (the point where the guard compares its digest). Prints
 * "bytes B ns_per_copy N". Exit status 1 on any driver failure. */
#include <cuda.h>
#include "cu_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t bytes = strtoull(argv[1], NULL, 10);
    int copies = atoi(argv[2]);
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr d;
    void *h;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc(&d, bytes));
    CHECK(cuMemHostAlloc(&h, bytes, 0));
    memset(h, 3, bytes);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < copies; i++) {
        CHECK(cuMemcpyHtoDAsync(d, h, bytes, s));
        CHECK(cuStreamSynchronize(s));
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / copies;
    printf("bytes %zu ns_per_copy %.0f\n", bytes, ns);
    CHECK(cuMemFreeHost(h));
    CHECK(cuMemFree(d));
    CHECK(cuStreamDestroy(s));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
