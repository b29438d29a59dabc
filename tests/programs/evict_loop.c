/* A hooked call in a loop with the caches cleared between calls (scripts/bench/cachegrind-evicted.sh):
 *
 *   evict_loop KIND COUNT      KIND: launch, copy (pageable H2D), pinned (H2D from pinned),
 *                              alloc (cuMemAlloc_v2 + cuMemFree_v2 of 4 KiB),
 *                              event_wait (pinned H2D on a created stream, cuEventRecord
 *                              and cuStreamWaitEvent of that stream, a cuStreamSynchronize
 *                              every 64: threads_bench.c's event_wait)
 *
 * Between two calls it touches 8 MiB, standing for the microseconds of a real driver's own
 * work that evict the shim's cache lines; cachegrind's cache simulation counts what each
 * call then misses. Built against the null driver (tests/programs/null_driver.c). */
#include "cuda_calls.h"
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int n = atoi(argv[2]);
    const char *kind = argv[1];
    CUdevice d;
    CUcontext c;
    CUdeviceptr dp;
    void *pinned;
    cuInit(0);
    cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&c, d);
    cuCtxSetCurrent(c);
    cuMemAlloc_v2(&dp, 4096);
    cuMemHostAlloc(&pinned, 4096, 0);
    char *pageable = malloc(4096);
    CUstream s;
    CUevent e;
    cuStreamCreate(&s, 1);
    cuEventCreate(&e, 2);
    size_t big = (size_t)8 << 20;
    volatile char *junk = malloc(big);
    for (int i = 0; i < n; i++) {
        if (!strcmp(kind, "launch"))
            cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL);
        else if (!strcmp(kind, "alloc")) {
            CUdeviceptr p;
            cuMemAlloc_v2(&p, 4096);
            cuMemFree_v2(p);
        }
        else if (!strcmp(kind, "pinned"))
            cuMemcpyHtoDAsync_v2(dp, pinned, 4096, 0);
        else if (!strcmp(kind, "event_wait")) {
            cuMemcpyHtoDAsync_v2(dp, pinned, 4096, s);
            cuEventRecord(e, s);
            cuStreamWaitEvent(s, e, 0);
            if (i % 64 == 63) cuStreamSynchronize(s);
        }
        else
            cuMemcpyHtoDAsync_v2(dp, pageable, 4096, 0);
        for (size_t j = 0; j < big; j += 64) junk[j]++;
    }
    return 0;
}
