/* A driver that does nothing, for measuring the shim's own cost: every entry point returns
 * CUDA_SUCCESS at once. Built as libcuda.so.1 by the benchmarks and the instruction-count
 * guard (scripts/ci/callgrind-hotpath.sh, scripts/bench/host-threads.sh), never used for behaviour
 * tests. Streams and events get a new handle per create (threads on their own streams
 * share no handle); pinned host memory is malloc'd (the program writes it). */
#include <stddef.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static CUdeviceptr next = 0x10000;

CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem;
    (void)stream; (void)params; (void)extra;
    return 0;
}
/* A thread's last freed allocation is handed out again to its next request of the same
 * rounded size, as a driver's sub-allocator does for a loop of small allocations and frees;
 * other requests get a new address. */
static __thread CUdeviceptr last, reuse;
static __thread size_t last_bytes, reuse_bytes;
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    size_t rounded = (bytes + 255) & ~(size_t)255;
    if (reuse && reuse_bytes == rounded) {
        *p = reuse;
        reuse = 0;
    } else {
        *p = __atomic_fetch_add(&next, rounded, __ATOMIC_RELAXED);
    }
    last = *p;
    last_bytes = rounded;
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (p && p == last) {
        reuse = p;
        reuse_bytes = last_bytes;
        last = 0;
    }
    return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
    (void)p; (void)bytes; (void)flags;
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream) {
    (void)dst; (void)src; (void)bytes; (void)stream;
    return 0;
}
/* The first context made gets one handle, every later one another (a driver hands a
 * destroyed context's handle out again). */
static int contexts_made;
CUresult cuCtxCreate_v2(void **pctx, unsigned int flags, int dev) {
    (void)flags; (void)dev;
    *pctx = (void *)(__atomic_fetch_add(&contexts_made, 1, __ATOMIC_RELAXED) ? 0x5eedc0000200ull
                                                                          : 0x5eedc0000100ull);
    return 0;
}
CUresult cuCtxDestroy_v2(void *ctx) { (void)ctx; return 0; }
/* Streams and events: a new handle per create, 0x100 apart. */
static unsigned long long streams_made, events_made;
CUresult cuStreamCreate(void **ph, unsigned int flags) {
    (void)flags;
    *ph = (void *)(0x5eed5000100ull + 0x100 * __atomic_fetch_add(&streams_made, 1, __ATOMIC_RELAXED));
    return 0;
}
CUresult cuStreamDestroy_v2(void *stream) { (void)stream; return 0; }
CUresult cuStreamSynchronize(void *stream) { (void)stream; return 0; }
CUresult cuEventCreate(void **ph, unsigned int flags) {
    (void)flags;
    *ph = (void *)(0x5eede000100ull + 0x100 * __atomic_fetch_add(&events_made, 1, __ATOMIC_RELAXED));
    return 0;
}
CUresult cuEventDestroy_v2(void *event) { (void)event; return 0; }
CUresult cuEventRecord(void *event, void *stream) { (void)event; (void)stream; return 0; }
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned int flags) {
    (void)stream; (void)event; (void)flags; return 0;
}
CUresult cuEventSynchronize(void *event) { (void)event; return 0; }
/* The primary context and host memory, for scripts/gpu/threads_bench.c. */
CUresult cuDevicePrimaryCtxRetain(void **pctx, int dev) {
    (void)dev;
    *pctx = (void *)0x5eedc0000100ull;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    (void)flags;
    *pp = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    return *pp ? 0 : 2;
}
CUresult cuMemFreeHost(void *p) { free(p); return 0; }
