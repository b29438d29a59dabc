/* Context lifetime and asynchronous safety: each scenario named on the command
 * line makes one classic mistake and prints what every call returned and whether the data
 * came through. Against the fake driver, launches and copies wait in their stream until
 * something synchronises it, a copy reads its source only then, and destroying a context
 * loses its queued work. Exits 0 unless a setup call fails. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD16Async(CUdeviceptr, unsigned short, size_t, CUstream);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned int, size_t, CUstream);
CUresult cuMemsetD2D8Async(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
CUresult cuMemsetD2D16Async(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
CUresult cuMemsetD2D32Async(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemsetD16Async_ptsz(CUdeviceptr, unsigned short, size_t, CUstream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr, unsigned int, size_t, CUstream);
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
typedef struct CUgraphExec_st *CUgraphExec;
typedef void (*CUhostFn)(void *);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuLaunchHostFunc(CUstream, CUhostFn, void *);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);

#define N 4096
#define SHOW(what, call) printf("%s -> %d\n", what, (int)(call))

static CUcontext created(void) {
    CUdevice dev;
    CUcontext ctx;
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    return ctx;
}

/* A runtime teardown before the work finished: results are copied back on a stream, the
 * context is destroyed, then the stream is synchronised. */
static void destroy_before_sync(void) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    unsigned char *src = malloc(N), *dst = malloc(N);
    memset(src, 0x11, N);
    memset(dst, 0, N);
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuMemHostRegister_v2(src, N, 0));
    SETUP(cuMemHostRegister_v2(dst, N, 0));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuLaunchKernel on the stream", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    SHOW("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2(d, src, N, s));
    SHOW("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2(dst, d, N, s));
    SHOW("cuCtxDestroy before synchronising", cuCtxDestroy_v2(ctx));
    SHOW("cuStreamSynchronize after the destroy", cuStreamSynchronize(s));
    check("results", dst, N, 0x11);
}

/* Stream operations other than launches and copies (the fake driver queues each like a
 * launch; it has no graphs, so any non-null CUgraphExec is taken). */
#define GRAPH ((CUgraphExec)0x6000)
static void host_fn(void *data) { (void)data; }

/* One memset, graph launch or host function on a stream (`which`), then the context is
 * destroyed before anything synchronised it, then the stream is synchronised. */
static void op_then_destroy(const char *which) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    if (strcmp(which, "memset") == 0)
        SHOW("cuMemsetD32Async on the stream", cuMemsetD32Async(d, 0xdeadbeef, N / 4, s));
    else if (strcmp(which, "graph") == 0)
        SHOW("cuGraphLaunch on the stream", cuGraphLaunch(GRAPH, s));
    else
        SHOW("cuLaunchHostFunc on the stream", cuLaunchHostFunc(s, host_fn, NULL));
    SHOW("cuCtxDestroy before synchronising", cuCtxDestroy_v2(ctx));
    SHOW("cuStreamSynchronize after the destroy", cuStreamSynchronize(s));
}

/* Every asynchronous memset: the plain entry points on a created stream, the `_ptsz` ones
 * on the per-thread default stream (stream 0), then the context is destroyed. */
static void memset_variants(void) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuMemsetD8Async", cuMemsetD8Async(d, 1, N, s));
    SHOW("cuMemsetD16Async", cuMemsetD16Async(d, 2, N / 2, s));
    SHOW("cuMemsetD32Async", cuMemsetD32Async(d, 3, N / 4, s));
    SHOW("cuMemsetD2D8Async", cuMemsetD2D8Async(d, 64, 4, 64, 8, s));
    SHOW("cuMemsetD2D16Async", cuMemsetD2D16Async(d, 64, 5, 32, 8, s));
    SHOW("cuMemsetD2D32Async", cuMemsetD2D32Async(d, 64, 6, 16, 8, s));
    SHOW("cuMemsetD8Async_ptsz", cuMemsetD8Async_ptsz(d, 1, N, NULL));
    SHOW("cuMemsetD16Async_ptsz", cuMemsetD16Async_ptsz(d, 2, N / 2, NULL));
    SHOW("cuMemsetD32Async_ptsz", cuMemsetD32Async_ptsz(d, 3, N / 4, NULL));
    SHOW("cuMemsetD2D8Async_ptsz", cuMemsetD2D8Async_ptsz(d, 64, 4, 64, 8, NULL));
    SHOW("cuMemsetD2D16Async_ptsz", cuMemsetD2D16Async_ptsz(d, 64, 5, 32, 8, NULL));
    SHOW("cuMemsetD2D32Async_ptsz", cuMemsetD2D32Async_ptsz(d, 64, 6, 16, 8, NULL));
    SHOW("cuCtxDestroy before synchronising", cuCtxDestroy_v2(ctx));
}

/* The same operations, synchronised before the teardown. */
static void ops_clean(void) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuMemsetD8Async", cuMemsetD8Async(d, 0, N, s));
    SHOW("cuMemsetD2D32Async", cuMemsetD2D32Async(d, 64, 6, 16, 8, s));
    SHOW("cuGraphLaunch", cuGraphLaunch(GRAPH, s));
    SHOW("cuLaunchHostFunc", cuLaunchHostFunc(s, host_fn, NULL));
    SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
    SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
    SHOW("cuMemFree", cuMemFree_v2(d));
    SHOW("cuCtxDestroy", cuCtxDestroy_v2(ctx));
}

/* The same operations looked up as the CUDA runtime does (cuGetProcAddress; with the
 * per-thread default stream flag for the memset and the graph launch, so the driver hands
 * out their `_ptsz` variants), then the context is destroyed before synchronising. */
static void *proc(const char *name, unsigned long long flags) {
    void *p = NULL;
    int status = -1;
    SETUP(cuGetProcAddress_v2(name, &p, 13000, flags, &status));
    if (status != 0 || !p) {
        printf("setup failed: cuGetProcAddress(%s)\n", name);
        exit(1);
    }
    return p;
}

static void ops_procaddr(void) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t, CUstream) = proc("cuMemsetD8Async", 2);
    CUresult (*graph)(CUgraphExec, CUstream) = proc("cuGraphLaunch", 2);
    CUresult (*host)(CUstream, CUhostFn, void *) = proc("cuLaunchHostFunc", 0);
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuMemsetD8Async (per-thread) on the default stream", memset8(d, 9, N, NULL));
    SHOW("cuGraphLaunch (per-thread) on the default stream", graph(GRAPH, NULL));
    SHOW("cuLaunchHostFunc on the stream", host(s, host_fn, NULL));
    SHOW("cuCtxDestroy before synchronising", cuCtxDestroy_v2(ctx));
}

/* Exits with a memset never synchronised. */
static void leave_memset(void) {
    CUstream s;
    CUdeviceptr d;
    CUcontext ctx = created();
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuMemsetD8Async", cuMemsetD8Async(d, 0, N, s));
    (void)ctx;
}

/* An event outlives a reset of the primary context (cudaDeviceReset), then is destroyed. */
static void event_after_reset(void) {
    CUdevice dev;
    CUcontext p;
    CUevent e;
    CUstream s;
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuDevicePrimaryCtxRetain(&p, dev));
    SETUP(cuCtxSetCurrent(p));
    SETUP(cuEventCreate(&e, 0));
    SETUP(cuStreamCreate(&s, 0));
    SETUP(cuEventRecord(e, s));
    SETUP(cuStreamSynchronize(s));
    SHOW("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2(dev));
    SHOW("cuEventDestroy after the reset", cuEventDestroy_v2(e));
    SHOW("cuStreamDestroy after the reset", cuStreamDestroy_v2(s));
}

static CUdeviceptr late_mem;
static CUstream late_stream;
static CUevent late_event;

static void late_cleanup(void) {
    SHOW("atexit cuMemFree", cuMemFree_v2(late_mem));
    SHOW("atexit cuStreamDestroy", cuStreamDestroy_v2(late_stream));
    SHOW("atexit cuEventDestroy", cuEventDestroy_v2(late_event));
    fflush(stdout);
}

/* Static-destructor style cleanup after the context is gone. */
static void atexit_free(void) {
    CUcontext ctx = created();
    SETUP(cuMemAlloc_v2(&late_mem, N));
    SETUP(cuStreamCreate(&late_stream, 0));
    SETUP(cuEventCreate(&late_event, 0));
    atexit(late_cleanup);
    SHOW("cuCtxDestroy", cuCtxDestroy_v2(ctx));
}

static void deinit_cleanup(void) {
    SHOW("atexit cuMemFree after deinit", cuMemFree_v2(late_mem));
    SHOW("atexit cuDevicePrimaryCtxRelease after deinit", cuDevicePrimaryCtxRelease_v2(0));
    fflush(stdout);
}

/* Calls after the driver shut down (FAKE_CUDA_DEINIT_AT_EXIT=1): the handler is registered
 * before cuInit, so it runs after the driver's own exit handler. */
static void after_deinit(void) {
    CUcontext p;
    atexit(deinit_cleanup);
    SETUP(cuInit(0));
    SETUP(cuDevicePrimaryCtxRetain(&p, 0));
    SETUP(cuCtxSetCurrent(p));
    SETUP(cuMemAlloc_v2(&late_mem, N));
    printf("exiting\n");
}

/* Pinned memory freed while a copy from it is still queued; `offset` copies from inside
 * the block. */
static void pinned_free(size_t offset, size_t n) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    unsigned char *p, out[N];
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuMemHostAlloc((void **)&p, N, 0));
    memset(p, 0x22, N);
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuMemcpyHtoDAsync from pinned memory", cuMemcpyHtoDAsync_v2(d, p + offset, n, s));
    SHOW("cuMemFreeHost before synchronising", cuMemFreeHost(p));
    SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
    SETUP(cuMemcpyDtoH_v2(out, d, n));
    check("device copy", out, n, 0x22);
    SETUP(cuStreamDestroy_v2(s));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* Registered memory unregistered and reused while a copy from it is queued. */
static void unregister_reuse(void) {
    CUcontext ctx = created();
    CUstream s;
    CUdeviceptr d;
    unsigned char *buf = malloc(N), out[N];
    memset(buf, 0x44, N);
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuStreamCreate(&s, 0));
    SETUP(cuMemHostRegister_v2(buf, N, 0));
    SHOW("cuMemcpyHtoDAsync from registered memory", cuMemcpyHtoDAsync_v2(d, buf + 64, 256, s));
    SHOW("cuMemHostUnregister before synchronising", cuMemHostUnregister(buf));
    memset(buf, 0x55, N); /* the buffer is reused */
    SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
    SETUP(cuMemcpyDtoH_v2(out, d, 256));
    check("device copy", out, 256, 0x44);
    SETUP(cuStreamDestroy_v2(s));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* Memory of a primary context that was reset, freed after the runtime made a new one. */
static void alloc_reset_alloc(void) {
    CUdevice dev;
    CUcontext p, q;
    CUdeviceptr a, b;
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuDevicePrimaryCtxRetain(&p, dev));
    SETUP(cuCtxSetCurrent(p));
    SHOW("cuMemAlloc", cuMemAlloc_v2(&a, N));
    SHOW("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2(dev));
    /* What the runtime does on its next call: retain the primary context again. */
    SETUP(cuDevicePrimaryCtxRetain(&q, dev));
    SETUP(cuCtxSetCurrent(q));
    printf("new primary context: %s\n", q != p ? "new handle" : "same handle");
    SHOW("cuMemAlloc in the new context", cuMemAlloc_v2(&b, N));
    SHOW("cuLaunchKernel in the new context", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    SHOW("cuCtxSynchronize", cuCtxSynchronize());
    SHOW("cuMemFree of the new allocation", cuMemFree_v2(b));
    SHOW("cuMemFree of the allocation from before the reset", cuMemFree_v2(a));
}

/* A stream-ordered free on one stream while a copy into the memory waits on another. */
static void free_async(void) {
    CUcontext ctx = created();
    CUstream a, b;
    CUdeviceptr d, e;
    unsigned char src[256];
    memset(src, 0x77, sizeof src);
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuMemAlloc_v2(&e, N));
    SETUP(cuStreamCreate(&a, 0));
    SETUP(cuStreamCreate(&b, 0));
    SHOW("cuMemcpyHtoDAsync on stream a", cuMemcpyHtoDAsync_v2(d, src, sizeof src, a));
    SHOW("cuMemcpyHtoDAsync on stream b", cuMemcpyHtoDAsync_v2(e, src, sizeof src, b));
    SHOW("cuMemFreeAsync on stream b", cuMemFreeAsync(d, b));
    SHOW("cuStreamSynchronize a", cuStreamSynchronize(a));
    SHOW("cuStreamSynchronize b", cuStreamSynchronize(b));
    SETUP(cuStreamDestroy_v2(a));
    SETUP(cuStreamDestroy_v2(b));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* Exits with a context, memory and unsynchronised work left behind. */
static void leave(void) {
    CUstream s;
    CUdeviceptr d;
    void *p;
    (void)created();
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuMemHostAlloc(&p, 512, 0));
    SETUP(cuStreamCreate(&s, 0));
    SHOW("cuLaunchKernel", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
}

/* A context and its memory left to the driver at exit, no work pending: the driver reclaims
   both when the process ends. */
static void leave_context(void) {
    CUdeviceptr d;
    (void)created();
    SETUP(cuMemAlloc_v2(&d, N));
    printf("left\n");
}

/* The same work done right: synchronised, released in order. */
static void clean(void) {
    CUcontext ctx = created();
    CUstream s;
    CUevent e;
    CUdeviceptr d;
    unsigned char *p, out[N];
    SETUP(cuMemAlloc_v2(&d, N));
    SETUP(cuMemAllocHost_v2((void **)&p, N));
    memset(p, 0x66, N);
    SETUP(cuStreamCreate(&s, 0));
    SETUP(cuEventCreate(&e, 0));
    SHOW("cuLaunchKernel", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    SHOW("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2(d, p, N, s));
    SHOW("cuEventRecord", cuEventRecord(e, s));
    SHOW("cuStreamSynchronize", cuStreamSynchronize(s));
    SHOW("cuMemFreeHost", cuMemFreeHost(p));
    SETUP(cuMemcpyDtoH_v2(out, d, N));
    check("device copy", out, N, 0x66);
    SHOW("cuEventDestroy", cuEventDestroy_v2(e));
    SHOW("cuStreamDestroy", cuStreamDestroy_v2(s));
    SHOW("cuMemFree", cuMemFree_v2(d));
    SHOW("cuCtxDestroy", cuCtxDestroy_v2(ctx));
}

/* Allocations in two contexts, most of them made by another thread (more than one thread's
 * ring of allocations holds): destroying one context releases exactly its own. */
#define WORKER_ALLOCS 600
static CUcontext worker_ctx;
static CUdeviceptr worker_allocs[WORKER_ALLOCS];

static void *alloc_in_worker_ctx(void *arg) {
    (void)arg;
    SETUP(cuCtxSetCurrent(worker_ctx));
    for (int i = 0; i < WORKER_ALLOCS; i++) SETUP(cuMemAlloc_v2(&worker_allocs[i], 256));
    return NULL;
}

static void two_contexts(void) {
    CUdevice dev;
    CUcontext a, b;
    CUdeviceptr a1, b1;
    pthread_t t;
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&a, 0, dev));
    SETUP(cuMemAlloc_v2(&a1, N));
    SETUP(cuCtxCreate_v2(&b, 0, dev));
    SETUP(cuMemAlloc_v2(&b1, N));
    worker_ctx = a;
    if (pthread_create(&t, NULL, alloc_in_worker_ctx, NULL) || pthread_join(t, NULL)) exit(1);
    SHOW("cuCtxDestroy of a", cuCtxDestroy_v2(a));
    SHOW("cuMemFree of a's allocation", cuMemFree_v2(a1));
    SHOW("cuMemFree of the worker's first allocation in a", cuMemFree_v2(worker_allocs[0]));
    SHOW("cuMemFree of the worker's last allocation in a",
         cuMemFree_v2(worker_allocs[WORKER_ALLOCS - 1]));
    SHOW("cuMemFree of b's allocation", cuMemFree_v2(b1));
    SHOW("cuCtxDestroy of b", cuCtxDestroy_v2(b));
}

/* Device memory freed by a thread other than the one that allocated it, while that thread
 * has made no allocation since (the shim holds a thread's latest allocation in the thread's
 * own record): the free must reach that record, or the allocation is left as live. The
 * worker then allocates 8 KiB it never frees and 512 bytes it frees itself. */
static CUdeviceptr handed_over;
static pthread_mutex_t hand_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hand_cond = PTHREAD_COND_INITIALIZER;
static int hand_step;

static void hand_wait(int step) {
    pthread_mutex_lock(&hand_lock);
    while (hand_step < step) pthread_cond_wait(&hand_cond, &hand_lock);
    pthread_mutex_unlock(&hand_lock);
}

static void hand_to(int step) {
    pthread_mutex_lock(&hand_lock);
    hand_step = step;
    pthread_cond_broadcast(&hand_cond);
    pthread_mutex_unlock(&hand_lock);
}

static void *allocate_and_hand_over(void *arg) {
    CUdeviceptr kept, scratch;
    SETUP(cuCtxSetCurrent((CUcontext)arg));
    SETUP(cuMemAlloc_v2(&handed_over, N));
    hand_to(1);
    hand_wait(2);
    SETUP(cuMemAlloc_v2(&kept, 2 * N));
    SETUP(cuMemAlloc_v2(&scratch, 512));
    SETUP(cuMemFree_v2(scratch));
    return NULL;
}

static void free_on_another_thread(void) {
    CUcontext ctx = created();
    pthread_t t;
    if (pthread_create(&t, NULL, allocate_and_hand_over, ctx)) exit(1);
    hand_wait(1);
    SHOW("cuMemFree of the other thread's allocation", cuMemFree_v2(handed_over));
    hand_to(2);
    if (pthread_join(t, NULL)) exit(1);
}

/* Threads that come and go, each leaving its one allocation to the main thread: 24 one
 * after another (the C library reuses a joined thread's stack, so a later thread can get an
 * earlier one's thread pointer and the shim's line for it), then 8 alive at once. Each makes
 * one 4 KiB allocation in the shared context and exits; the main thread then frees every one
 * but the last. Then 8 more threads alive at once each allocate and free 512 bytes of their
 * own (where they find an earlier thread's line, what it left there is published first).
 * Threads alive at once take turns (hand_wait/hand_to), so the driver sees one order of
 * calls in every run. */
#define COME_AND_GO 32
static CUdeviceptr left_behind[COME_AND_GO];
static CUcontext come_and_go_ctx;

struct turn {
    CUdeviceptr *slot; /* where to leave the allocation; NULL: allocate and free 512 bytes */
    int step;          /* the hand step this thread's calls wait for */
    int last;          /* the step every thread of its group waits for before it exits */
};

static void *take_turn(void *arg) {
    struct turn *t = arg;
    hand_wait(t->step);
    SETUP(cuCtxSetCurrent(come_and_go_ctx));
    if (t->slot) {
        SETUP(cuMemAlloc_v2(t->slot, 4096));
    } else {
        CUdeviceptr scratch;
        SETUP(cuMemAlloc_v2(&scratch, 512));
        SETUP(cuMemFree_v2(scratch));
    }
    hand_to(t->step + 1);
    hand_wait(t->last);
    return NULL;
}

/* Runs `n` threads of `turns`, whose steps follow from hand step `base`. */
static void threads_taking_turns(struct turn *turns, int n, int base, int at_once) {
    pthread_t t[8];
    for (int i = 0; i < n; i++) {
        turns[i].step = base + i;
        turns[i].last = at_once ? base + n : base + i + 1;
        if (!at_once || i == 0) hand_to(base + i);
        if (pthread_create(&t[at_once ? i : 0], NULL, take_turn, &turns[i])) exit(1);
        if (!at_once && pthread_join(t[0], NULL)) exit(1);
    }
    if (at_once)
        for (int i = 0; i < n; i++)
            if (pthread_join(t[i], NULL)) exit(1);
}

static void freed_after_their_threads_exit(void) {
    struct turn one_by_one[24], at_once[8], scratch[8];
    come_and_go_ctx = created();
    for (int i = 0; i < 24; i++) one_by_one[i].slot = &left_behind[i];
    for (int i = 0; i < 8; i++) at_once[i].slot = &left_behind[24 + i];
    for (int i = 0; i < 8; i++) scratch[i].slot = NULL;
    threads_taking_turns(one_by_one, 24, 1, 0);
    threads_taking_turns(at_once, 8, 100, 1);
    int failed = 0;
    for (int i = 0; i < COME_AND_GO - 1; i++) failed += cuMemFree_v2(left_behind[i]) != 0;
    printf("frees failed: %d\n", failed);
    threads_taking_turns(scratch, 8, 200, 1);
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "after_deinit") == 0) {
        after_deinit();
        return 0;
    }
    SETUP(cuInit(0));
    if (strcmp(s, "destroy_before_sync") == 0) destroy_before_sync();
    else if (strcmp(s, "event_after_reset") == 0) event_after_reset();
    else if (strcmp(s, "atexit_free") == 0) atexit_free();
    else if (strcmp(s, "pinned_free") == 0) pinned_free(0, N);
    else if (strcmp(s, "pinned_free_interior") == 0) pinned_free(1024, 512);
    else if (strcmp(s, "unregister_reuse") == 0) unregister_reuse();
    else if (strcmp(s, "alloc_reset_alloc") == 0) alloc_reset_alloc();
    else if (strcmp(s, "clean") == 0) clean();
    else if (strcmp(s, "two_contexts") == 0) two_contexts();
    else if (strcmp(s, "free_async") == 0) free_async();
    else if (strcmp(s, "leave") == 0) leave();
    else if (strcmp(s, "leave_context") == 0) leave_context();
    else if (strcmp(s, "free_on_another_thread") == 0) free_on_another_thread();
    else if (strcmp(s, "freed_after_their_threads_exit") == 0) freed_after_their_threads_exit();
    else if (strcmp(s, "memset_destroy") == 0) op_then_destroy("memset");
    else if (strcmp(s, "graph_destroy") == 0) op_then_destroy("graph");
    else if (strcmp(s, "host_func_destroy") == 0) op_then_destroy("host_func");
    else if (strcmp(s, "memset_variants") == 0) memset_variants();
    else if (strcmp(s, "ops_clean") == 0) ops_clean();
    else if (strcmp(s, "leave_memset") == 0) leave_memset();
    else if (strcmp(s, "ops_procaddr") == 0) ops_procaddr();
    else {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
