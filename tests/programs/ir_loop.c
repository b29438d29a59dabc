/* For instruction counting under callgrind: N hooked calls of one kind, single thread, no
 * timing. Usage: ir_loop launch|alloc|ctx|copy|pinned_copy N. ctx: N cuCtxCreate_v2 +
 * cuCtxDestroy_v2 pairs after 1000 allocations made in another context that stays alive (a
 * destroy must cost what its context owned, not what the process holds). `copy`:
 * cuMemcpyHtoDAsync from pageable memory while a registered (pinned) range exists
 * elsewhere; `pinned_copy`: from the registered range itself, all on one stream (the
 * PyTorch pin_memory pattern). `sync`: a launch on a created stream + cuStreamSynchronize of
 * it; `event_sync`: a launch, cuEventRecord on the stream + cuEventSynchronize of the event
 * (the success paths of synchronisation: docs/performance.md, "Cost in threads");
 * `event_wait`: a copy from the registered range on a created stream, cuEventRecord on it and
 * cuStreamWaitEvent of the same stream on the event, with a cuStreamSynchronize every 64
 * (scripts/gpu/threads_bench.c's event_wait). */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned int);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned int);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, void *);
CUresult cuCtxCreate_v2(void **, unsigned int, int);
CUresult cuCtxDestroy_v2(void *);
CUresult cuStreamCreate(void **, unsigned int);
CUresult cuStreamSynchronize(void *);
CUresult cuEventCreate(void **, unsigned int);
CUresult cuEventRecord(void *, void *);
CUresult cuEventSynchronize(void *);
CUresult cuStreamWaitEvent(void *, void *, unsigned int);

int main(int argc, char **argv) {
    if (argc < 3 || cuInit(0)) return 2;
    long n = atol(argv[2]);
    CUdeviceptr p;
    if (strcmp(argv[1], "launch") == 0) {
        for (long i = 0; i < n; i++)
            if (cuLaunchKernel((void *)0x1000, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) return 1;
    } else if (strcmp(argv[1], "copy") == 0 || strcmp(argv[1], "pinned_copy") == 0) {
        static char pinned[1 << 16], pageable[1 << 16];
        const char *src = strcmp(argv[1], "copy") == 0 ? pageable : pinned;
        if (cuMemHostRegister_v2(pinned, sizeof pinned, 0)) return 1;
        for (long i = 0; i < n; i++)
            if (cuMemcpyHtoDAsync_v2(0x10000, src, 4096, NULL)) return 1;
    } else if (strcmp(argv[1], "sync") == 0 || strcmp(argv[1], "event_sync") == 0) {
        void *s, *e;
        int ev = strcmp(argv[1], "event_sync") == 0;
        if (cuStreamCreate(&s, 1) || cuEventCreate(&e, 2)) return 1;
        for (long i = 0; i < n; i++) {
            if (cuLaunchKernel((void *)0x1000, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL)) return 1;
            if (ev ? cuEventRecord(e, s) || cuEventSynchronize(e) : cuStreamSynchronize(s))
                return 1;
        }
    } else if (strcmp(argv[1], "event_wait") == 0) {
        static char pinned[1 << 16];
        void *s, *e;
        if (cuMemHostRegister_v2(pinned, sizeof pinned, 0)) return 1;
        if (cuStreamCreate(&s, 1) || cuEventCreate(&e, 2)) return 1;
        for (long i = 0; i < n; i++) {
            if (cuMemcpyHtoDAsync_v2(0x10000, pinned, 4096, s) || cuEventRecord(e, s) ||
                cuStreamWaitEvent(s, e, 0))
                return 1;
            if (i % 64 == 63 && cuStreamSynchronize(s)) return 1;
        }
    } else if (strcmp(argv[1], "ctx") == 0) {
        void *keep, *c;
        if (cuCtxCreate_v2(&keep, 0, 0)) return 1;
        for (int i = 0; i < 1000; i++)
            if (cuMemAlloc_v2(&p, 4096)) return 1;
        for (long i = 0; i < n; i++)
            if (cuCtxCreate_v2(&c, 0, 0) || cuCtxDestroy_v2(c)) return 1;
    } else {
        for (long i = 0; i < n; i++)
            if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p)) return 1;
    }
    return 0;
}
