/* Races between asynchronous copies on pinned host memory: each scenario named on the
 * command line queues a 64 KiB cuMemcpyHtoDAsync from a pinned buffer on stream A behind a
 * kernel, then touches the same buffer from another stream, and prints whether the device
 * got the bytes the buffer held when the first copy was queued (what a program that
 * synchronised stream A first gets). Against the fake driver a copy reads and writes host
 * memory when its stream runs, which is when the program synchronises it: these programs
 * synchronise stream B first, as a GPU runs B's copy while A is still busy with the kernel.
 * The healthy scenarios order the streams correctly and must stay silent under the shim.
 * Exits 0 unless a setup call fails. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_calls.h"

CUresult cuMemcpyAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventQuery(CUevent);
CUresult cuEventRecordWithFlags(CUevent, CUstream, unsigned int);
CUresult fakeEventRecordUnseen(CUevent, CUstream); /* the fake's record no shim sees */
CUresult cuCtxRecordEvent(CUcontext, CUevent);
CUresult cuCtxWaitEvent(CUcontext, CUevent);
CUresult cuStreamBeginCapture_v2(CUstream, unsigned int);
/* CUDA_MEMCPY2D of cuda.h (the _v2 layout). */
typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} copy2d_t;
CUresult cuMemcpy2DAsync_v2(const copy2d_t *, CUstream);
CUresult cuStreamEndCapture(CUstream, void **);
CUresult cuStreamWaitValue32_v2(CUstream, CUdeviceptr, unsigned int, unsigned int);
CUresult cuStreamWriteValue32_v2(CUstream, CUdeviceptr, unsigned int, unsigned int);
typedef CUresult (*record_with_flags_fn)(CUevent, CUstream, unsigned int);
typedef CUresult (*get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult *);

#define N (64 * 1024)

static CUcontext ctx;
static CUstream a, b;
static CUdeviceptr d_in, d_out;
static unsigned char *pinned;

/* A context, two streams, a pinned buffer of N bytes holding 0x11, a device buffer for the
 * first copy and one holding 0x22 (what a later copy brings back into the buffer). */
static void open_streams(void) {
    CUdevice dev;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    SETUP(cuStreamCreate(&a, 0));
    SETUP(cuStreamCreate(&b, 0));
}

/* `pinned` holding 0x11 and the two device buffers. */
static void fill_buffers(void) {
    static unsigned char fill[N];
    memset(pinned, 0x11, N);
    SETUP(cuMemAlloc_v2(&d_in, N));
    SETUP(cuMemAlloc_v2(&d_out, N));
    memset(fill, 0x22, N);
    SETUP(cuMemcpyHtoD_v2(d_out, fill, N));
}

static void setup(int registered) {
    open_streams();
    if (registered) {
        pinned = aligned_alloc(4096, N);
        SETUP(cuMemHostRegister_v2(pinned, N, 0));
    } else {
        SETUP(cuMemHostAlloc((void **)&pinned, N, 0));
    }
    fill_buffers();
}

/* The streams, the context. */
static void close_streams(void) {
    SETUP(cuStreamDestroy_v2(a));
    SETUP(cuStreamDestroy_v2(b));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* The first copy: a kernel, then the buffer (from `off`, `n` bytes) to the device on A. */
static void first_copy(size_t off, size_t n) {
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL));
    SETUP(cuMemcpyHtoDAsync_v2(d_in + off, pinned + off, n, a));
}

static void finish(const char *what, size_t off, size_t n) {
    static unsigned char got[N];
    SETUP(cuStreamSynchronize(b));
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemcpyDtoH_v2(got, d_in + off, n));
    check(what, got, n, 0x11);
}

static void teardown(int registered) {
    SETUP(cuCtxSynchronize());
    if (registered) {
        SETUP(cuMemHostUnregister(pinned));
        free(pinned);
    } else {
        SETUP(cuMemFreeHost(pinned));
    }
    close_streams();
}

/* A pool recycles the block: a copy back into it on stream B before A's copy ran. */
static void recycle(void) {
    setup(0);
    first_copy(0, N);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    teardown(0);
}

static void *second_thread(void *arg) {
    (void)arg;
    SETUP(cuCtxSetCurrent(ctx));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    SETUP(cuStreamSynchronize(b));
    return NULL;
}

/* The same from a second thread sharing the pool. */
static void recycle_thread(void) {
    pthread_t t;
    setup(0);
    first_copy(0, N);
    if (pthread_create(&t, NULL, second_thread, NULL) != 0) exit(1);
    pthread_join(t, NULL);
    finish("device copy", 0, N);
    teardown(0);
}

/* Interior pointers of one registered block: the first copy reads bytes 4096..12288, the
 * second writes 8192..16384 (overlapping by 4 KiB). */
static void interior(void) {
    setup(1);
    first_copy(4096, 8192);
    SETUP(cuMemcpyDtoHAsync_v2(pinned + 8192, d_out, 8192, b));
    finish("device copy", 4096, 8192);
    teardown(1);
}

/* Unified addressing: cuMemcpyAsync in both directions. */
static void unified(void) {
    setup(0);
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL));
    SETUP(cuMemcpyAsync(d_in, (CUdeviceptr)pinned, N, a));
    SETUP(cuMemcpyAsync((CUdeviceptr)pinned, d_out, N, b));
    finish("device copy", 0, N);
    teardown(0);
}

/* Stream A is destroyed while its copy from the buffer may still run (legal: the driver
 * finishes the work), then a copy back into the buffer on B: a race no event on A can
 * order any more. */
static void destroyed_first(void) {
    static unsigned char got[N];
    setup(0);
    first_copy(0, N);
    SETUP(cuStreamDestroy_v2(a));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    SETUP(cuStreamSynchronize(b));
    SETUP(cuCtxSynchronize());
    SETUP(cuMemcpyDtoH_v2(got, d_in, N));
    check("device copy", got, N, 0x11);
    SETUP(cuMemFreeHost(pinned));
    SETUP(cuStreamDestroy_v2(b));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* recycle, with the first copy a 2D one (16 rows of N/16 bytes, pitch = width: one
 * contiguous run, as cudaMemcpy2DAsync of a packed tensor). */
static void recycle_2d(void) {
    copy2d_t c = {0};
    setup(0);
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL));
    c.srcMemoryType = 1; /* CU_MEMORYTYPE_HOST */
    c.srcHost = pinned;
    c.srcPitch = N / 16;
    c.dstMemoryType = 2; /* CU_MEMORYTYPE_DEVICE */
    c.dstDevice = d_in;
    c.dstPitch = N / 16;
    c.WidthInBytes = N / 16;
    c.Height = 16;
    SETUP(cuMemcpy2DAsync_v2(&c, a));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    teardown(0);
}

/* A copy back into the buffer is pending on A; B reads it before A wrote it. */
static void write_then_read(void) {
    static unsigned char got[N];
    setup(0);
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, a));
    SETUP(cuMemcpyHtoDAsync_v2(d_in, pinned, N, b));
    SETUP(cuStreamSynchronize(b));
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemcpyDtoH_v2(got, d_in, N));
    check("device copy", got, N, 0x22);
    teardown(0);
}

/* A host write (memset) into the last page of the source while the copy is pending. */
void host_write(void) {
    setup(0);
    first_copy(0, N);
    memset(pinned + N - 4096, 0x33, 4096);
    finish("device copy", 0, N);
    teardown(0);
}

/* A child forked while the copy is pending writes into its source (its own copy of the
 * page): the child only forwards, so the guard it inherited waits for nothing there. The
 * parent's copy is intact in every mode. */
static void fork_write(void) {
    setup(0);
    first_copy(0, N);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        memset(pinned + N - 4096, 0x33, 4096);
        printf("child wrote\n");
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    finish("device copy", 0, N);
    teardown(0);
}

/* The same write after the copy was waited for: correct. */
static void write_after_sync(void) {
    setup(0);
    first_copy(0, N);
    SETUP(cuStreamSynchronize(a));
    memset(pinned + N - 4096, 0x33, 4096);
    finish("device copy", 0, N - 4096);
    teardown(0);
}

static sigjmp_buf jump;
static void own_handler(int sig) {
    (void)sig;
    siglongjmp(jump, 1);
}

/* The program's own SIGSEGV handler gets its own faults while a guarded copy is pending
 * (the guard installs no handler): the program writes into a page it protected itself. */
static void foreign_fault(void) {
    char *page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    signal(SIGSEGV, own_handler);
    setup(0);
    first_copy(0, N);
    if (sigsetjmp(jump, 1) == 0) {
        page[0] = 1;
        printf("no fault\n");
    } else {
        printf("the program's handler ran\n");
    }
    finish("device copy", 0, N);
    teardown(0);
}

/* ---- Healthy programs: every one orders its streams. ---- */

/* The skeleton of the event scenarios: the first copy on A, then `order` with an event of
 * the context (it records, waits for or synchronises it), then the copy back into the
 * buffer on stream B. */
static void reuse_after(void (*order)(CUevent)) {
    CUevent e;
    setup(0);
    SETUP(cuEventCreate(&e, 2));
    first_copy(0, N);
    order(e);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    SETUP(cuEventDestroy_v2(e));
    teardown(0);
}

/* cudf-style staging: an event recorded after the first copy, waited for by stream B. */
static void record_then_wait(CUevent e) {
    SETUP(cuEventRecord(e, a));
    SETUP(cuStreamWaitEvent(b, e, 0));
}
static void event_ordered(void) { reuse_after(record_then_wait); }

/* cuEventRecordWithFlags as each kind of program reaches it: "exported" (linked), "dlsym"
 * (PyTorch's way, on the driver's handle), "procaddr" and "procaddr_ptsz" (the CUDA 13
 * runtime's way: cuGetProcAddress for "cuEventRecordWithFlags" at 11010, flags 0 or
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). */
static record_with_flags_fn record_with_flags(const char *path) {
    if (strcmp(path, "exported") == 0) return cuEventRecordWithFlags;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) exit(1);
    if (strcmp(path, "dlsym") == 0) {
        void *p = dlsym(h, "cuEventRecordWithFlags");
        if (!p) exit(1);
        return (record_with_flags_fn)p;
    }
    get_proc_address_fn gpa = (get_proc_address_fn)dlsym(h, "cuGetProcAddress_v2");
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    if (!gpa) exit(1);
    SETUP(gpa("cuGetProcAddress", &p, 12000, 0, &st));
    gpa = (get_proc_address_fn)p;
    p = NULL;
    SETUP(gpa("cuEventRecordWithFlags", &p, 11010, strcmp(path, "procaddr_ptsz") == 0 ? 2 : 0,
              &st));
    if (!p || st != 0) exit(1);
    return (record_with_flags_fn)p;
}

/* event_ordered with the record the CUDA 13 runtime makes (cudaEventRecord). */
/* The runtime's record, as record_with_flags found it for the scenario's path. */
static record_with_flags_fn runtime_record;
static void runtime_record_then_wait(CUevent e) {
    SETUP(runtime_record(e, a, 0));
    SETUP(cuStreamWaitEvent(b, e, 0));
}
static void event_ordered_with_flags(const char *path) {
    runtime_record = record_with_flags(path);
    reuse_after(runtime_record_then_wait);
}

/* event_synchronized with the runtime's record. */
static void runtime_record_then_synchronize(CUevent e) {
    SETUP(runtime_record(e, a, 0));
    SETUP(cuEventSynchronize(e));
}
static void event_synchronized_with_flags(const char *path) {
    runtime_record = record_with_flags(path);
    reuse_after(runtime_record_then_synchronize);
}

/* Completion through a wait: the first copy's event is waited for by stream B, and B is
 * synchronised (how = "stream") or an event recorded on B after the wait is
 * (how = "event"): the first copy is complete, so a copy back into the buffer on a third
 * stream C is ordered after it. */
static void wait_then_complete(const char *how) {
    CUevent e, e2;
    CUstream c;
    setup(0);
    SETUP(cuStreamCreate(&c, 0));
    SETUP(cuEventCreate(&e, 2));
    SETUP(cuEventCreate(&e2, 2));
    first_copy(0, N);
    SETUP(cuEventRecord(e, a));
    SETUP(cuStreamWaitEvent(b, e, 0));
    if (strcmp(how, "event") == 0) {
        SETUP(cuEventRecord(e2, b));
        SETUP(cuEventSynchronize(e2));
    } else {
        SETUP(cuStreamSynchronize(b));
    }
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, c));
    SETUP(cuStreamSynchronize(c));
    finish("device copy", 0, N);
    SETUP(cuEventDestroy_v2(e));
    SETUP(cuEventDestroy_v2(e2));
    SETUP(cuStreamDestroy_v2(c));
    teardown(0);
}

/* The event is recorded where the shim cannot see it (as an IPC event or an unhooked entry
 * point would be), then waited for: correctly ordered, and the shim must not say
 * otherwise. */
static void unseen_record_then_wait(CUevent e) {
    SETUP(fakeEventRecordUnseen(e, a));
    SETUP(cuStreamWaitEvent(b, e, 0));
}
static void unseen_record(void) { reuse_after(unseen_record_then_wait); }

/* Context-wide events (cuCtxRecordEvent, CUDA 12.5+): the event marks the work of every
 * stream of the context; synchronising it completes the first copy, so stream B may reuse
 * the buffer. */
static void ctx_record_then_synchronize(CUevent e) {
    SETUP(cuCtxRecordEvent(ctx, e));
    SETUP(cuEventSynchronize(e));
}
static void ctx_event_synchronized(void) { reuse_after(ctx_record_then_synchronize); }

/* cuCtxWaitEvent: every stream of the context, B among them, waits for the record of the
 * first copy's stream before its later work. */
static void record_then_ctx_wait(CUevent e) {
    SETUP(cuEventRecord(e, a));
    SETUP(cuCtxWaitEvent(ctx, e));
}
static void ctx_waited(void) { reuse_after(record_then_ctx_wait); }

/* A CUDA graph captured around pinned copies (torch.cuda.graph, reduce-overhead): the
 * copy from the buffer on A is captured (it runs when the graph is launched, not now), and
 * stream B copies back into the buffer meanwhile. Nothing runs the captured copy, so no
 * race; and the shim must make no call of its own while the capture is open. */
static void captured(void) {
    void *graph = NULL;
    setup(0);
    SETUP(cuStreamBeginCapture_v2(a, 0)); /* CU_STREAM_CAPTURE_MODE_GLOBAL */
    first_copy(0, N);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    SETUP(cuStreamEndCapture(a, &graph));
    printf("graph %s\n", graph ? "made" : "missing");
    SETUP(cuStreamSynchronize(b));
    check("host copy", pinned, N, 0x22);
    teardown(0);
}

/* Streams ordered through a memory value (cuStreamWriteValue32 after the first copy on A,
 * cuStreamWaitValue32 on B before the second): correct, and beyond what the shim models,
 * so it must forget rather than report. The fake driver does not wait for the value, so
 * A is synchronised first. */
static void value_ordered(void) {
    static unsigned char got[N];
    CUdeviceptr flag;
    setup(0);
    SETUP(cuMemAlloc_v2(&flag, 4));
    first_copy(0, N);
    SETUP(cuStreamWriteValue32_v2(a, flag, 1, 0));
    SETUP(cuStreamWaitValue32_v2(b, flag, 1, 0));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    SETUP(cuStreamSynchronize(a));
    SETUP(cuStreamSynchronize(b));
    SETUP(cuMemcpyDtoH_v2(got, d_in, N));
    check("device copy", got, N, 0x11);
    SETUP(cuMemFree_v2(flag));
    teardown(0);
}

/* The staging buffer is reused only once the event says the first copy is done. */
static void record_then_synchronize(CUevent e) {
    SETUP(cuEventRecord(e, a));
    SETUP(cuEventSynchronize(e));
}
static void event_synchronized(void) { reuse_after(record_then_synchronize); }

/* CuPy's pinned memory pool: a block freed back to the pool carries an event recorded on
 * the stream that used it; the pool hands it out again only when cuEventQuery says done
 * (here the work has run: a synchronous copy drained the context). */
static void record_then_query_after_draining(CUevent e) {
    static unsigned char tmp[16];
    SETUP(cuEventRecord(e, a));
    SETUP(cuMemcpyDtoH_v2(tmp, d_out, sizeof tmp));
    printf("cuEventQuery -> %d\n", cuEventQuery(e));
}
static void pool_query(void) { reuse_after(record_then_query_after_draining); }

/* A stream polled with cuStreamQuery until idle before the buffer is reused; the first poll
 * comes while the work is queued (CUDA_ERROR_NOT_READY, 600). */
static void stream_polled(void) {
    static unsigned char tmp[16];
    setup(0);
    first_copy(0, N);
    printf("cuStreamQuery while queued -> %d\n", cuStreamQuery(a));
    SETUP(cuMemcpyDtoH_v2(tmp, d_out, sizeof tmp));
    printf("cuStreamQuery -> %d\n", cuStreamQuery(a));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    teardown(0);
}

/* The first stream synchronised before the buffer is reused. */
static void synchronized(void) {
    setup(0);
    first_copy(0, N);
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    teardown(0);
}

/* PyTorch's DataLoader with pin_memory and non_blocking copies: batches staged into pinned
 * blocks by a host thread, copied on one stream, each block reused after the event recorded
 * after its copy completed (the caching host allocator's rule); stream B (a consumer)
 * waits for each batch's event. */
static void dataloader(void) {
    CUevent e[2];
    unsigned char *blk[2];
    static unsigned char got[N];
    setup(0);
    for (int i = 0; i < 2; i++) {
        SETUP(cuEventCreate(&e[i], 2));
        SETUP(cuMemAllocHost_v2((void **)&blk[i], N));
    }
    for (int step = 0; step < 6; step++) {
        int i = step % 2;
        if (step >= 2) SETUP(cuEventSynchronize(e[i]));
        memset(blk[i], 0x11, N);
        SETUP(cuMemcpyHtoDAsync_v2(d_in, blk[i], N, a));
        SETUP(cuEventRecord(e[i], a));
        SETUP(cuStreamWaitEvent(b, e[i], 0));
    }
    SETUP(cuStreamSynchronize(b));
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemcpyDtoH_v2(got, d_in, N));
    check("device copy", got, N, 0x11);
    for (int i = 0; i < 2; i++) {
        SETUP(cuMemFreeHost(blk[i]));
        SETUP(cuEventDestroy_v2(e[i]));
    }
    teardown(0);
}

/* Both copies on the same stream: stream order. */
static void same_stream(void) {
    setup(0);
    first_copy(0, N);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, a));
    finish("device copy", 0, N);
    teardown(0);
}

/* Disjoint halves of one block on two streams. */
static void disjoint(void) {
    setup(0);
    first_copy(0, N / 2);
    SETUP(cuMemcpyDtoHAsync_v2(pinned + N / 2, d_out, N / 2, b));
    finish("device copy", 0, N / 2);
    teardown(0);
}

/* A block of 3N bytes whose first and last N are registered and whose middle N are
 * pageable (inside every box around the pinned ranges); `pinned` is the N bytes at `at`
 * (0: the first registered block, N: the pageable middle), with the device buffers. */
static unsigned char *open_block(size_t at) {
    open_streams();
    unsigned char *block = aligned_alloc(4096, 3 * N);
    SETUP(cuMemHostRegister_v2(block, N, 0));
    SETUP(cuMemHostRegister_v2(block + 2 * N, N, 0));
    pinned = block + at;
    fill_buffers();
    return block;
}

/* Unregisters the block's `registered` ranges (2: the outer ones; 3: the middle too). */
static void close_block(unsigned char *block, int registered) {
    SETUP(cuCtxSynchronize());
    for (int i = 0; i < 3; i++)
        if (registered == 3 || i != 1) SETUP(cuMemHostUnregister(block + i * N));
    free(block);
    close_streams();
}

/* Pageable bytes between two registered blocks (so inside every box around the pinned
 * ranges) are copied from on A until the thread knows they touch no pinned range; then they
 * are registered themselves, and the recycle race runs on them: the shim must see the new
 * range, not its earlier answer for those bytes. */
static void registered_later(void) {
    unsigned char *block = open_block(N);
    for (int i = 0; i < 3; i++) SETUP(cuMemcpyHtoDAsync_v2(d_in, pinned, N, a));
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemHostRegister_v2(pinned, N, 0));
    first_copy(0, N);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    finish("device copy", 0, N);
    close_block(block, 3);
}

/* A copy from a registered block fails (a device address the driver does not know), right
 * after the thread learnt that the pageable bytes beside it touch no pinned range, and a
 * copy from those bytes follows; then a copy back into the block on B. The failed copy
 * never ran: nothing races. */
static void failed_then_pageable(void) {
    unsigned char *block = open_block(0);
    SETUP(cuMemcpyHtoDAsync_v2(d_in, block + N, N, a));
    if (cuMemcpyHtoDAsync_v2(0x10, pinned, N, a) == 0) {
        printf("the copy to device address 0x10 succeeded\n");
        exit(1);
    }
    SETUP(cuMemcpyHtoDAsync_v2(d_in, block + N, N, a));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_out, N, b));
    SETUP(cuStreamSynchronize(b));
    check("device copy", pinned, N, 0x22);
    close_block(block, 2);
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    const char *path = argc > 2 ? argv[2] : "exported";
    if (strcmp(s, "recycle") == 0) recycle();
    else if (strcmp(s, "recycle_thread") == 0) recycle_thread();
    else if (strcmp(s, "interior") == 0) interior();
    else if (strcmp(s, "unified") == 0) unified();
    else if (strcmp(s, "write_then_read") == 0) write_then_read();
    else if (strcmp(s, "destroyed_first") == 0) destroyed_first();
    else if (strcmp(s, "recycle_2d") == 0) recycle_2d();
    else if (strcmp(s, "host_write") == 0) host_write();
    else if (strcmp(s, "write_after_sync") == 0) write_after_sync();
    else if (strcmp(s, "fork_write") == 0) fork_write();
    else if (strcmp(s, "foreign_fault") == 0) foreign_fault();
    else if (strcmp(s, "event_ordered") == 0) event_ordered();
    else if (strcmp(s, "event_synchronized") == 0) event_synchronized();
    else if (strcmp(s, "wait_then_complete") == 0) wait_then_complete(path);
    else if (strcmp(s, "unseen_record") == 0) unseen_record();
    else if (strcmp(s, "captured") == 0) captured();
    else if (strcmp(s, "ctx_event_synchronized") == 0) ctx_event_synchronized();
    else if (strcmp(s, "ctx_waited") == 0) ctx_waited();
    else if (strcmp(s, "value_ordered") == 0) value_ordered();
    else if (strcmp(s, "event_ordered_with_flags") == 0) event_ordered_with_flags(path);
    else if (strcmp(s, "event_synchronized_with_flags") == 0)
        event_synchronized_with_flags(path);
    else if (strcmp(s, "pool_query") == 0) pool_query();
    else if (strcmp(s, "stream_polled") == 0) stream_polled();
    else if (strcmp(s, "synchronized") == 0) synchronized();
    else if (strcmp(s, "dataloader") == 0) dataloader();
    else if (strcmp(s, "same_stream") == 0) same_stream();
    else if (strcmp(s, "disjoint") == 0) disjoint();
    else if (strcmp(s, "registered_later") == 0) registered_later();
    else if (strcmp(s, "failed_then_pageable") == 0) failed_then_pageable();
    else {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
