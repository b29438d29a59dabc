/* Host writes into the source of a pending host-to-device copy from pinned memory, made in
 * the ways a real program makes them, for the host-write guard (SEEDANCE_HOST_GUARD). Each
 * scenario queues a 64 KiB cuMemcpyHtoDAsync_v2 from a pinned buffer holding 0x11 on a
 * stream, writes into the buffer (or not) while the copy is pending, synchronises, and
 * prints what the device got ("device copy: intact" when it holds 0x11). Against the fake
 * driver a copy reads its source when its stream runs (at its synchronisation), so a write
 * made before that reaches the device without the shim. Exits 0 unless a setup call fails.
 *
 *   threads        8 threads write the buffer while the copy is pending
 *   pipe_read      read(2) from a pipe into the buffer while the copy is pending, and again
 *                  after its completion was learnt through an event and a stream wait
 *   sig_dfl        signal(SIGSEGV, SIG_DFL), then a write while the copy is pending
 *   blocked        a thread with every signal blocked writes while the copy is pending
 *   free_pending   cuMemFreeHost of the buffer while its copy is pending
 *   sync_dtoh      a synchronous cuMemcpyDtoH_v2 into the buffer while the copy is pending
 *                  on a non-blocking stream
 *   unified        the copy made with cuMemcpyAsync (unified addresses), then a write
 *   ring           a correct event-ordered ring of 3 buffers, with a consumer stream and
 *                  more work queued behind each copy: no write during any copy */
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_calls.h"

CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
CUresult cuMemcpyAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream);
CUresult cuEventSynchronize(CUevent);

#define N (64 * 1024)
#define THREADS 8

static CUcontext ctx;
static CUstream s;
static CUdeviceptr d_in, d_other;
static unsigned char *pinned;

static void setup(unsigned int stream_flags) {
    CUdevice dev;
    static unsigned char fill[N];
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    SETUP(cuStreamCreate(&s, stream_flags));
    SETUP(cuMemHostAlloc((void **)&pinned, N, 0));
    memset(pinned, 0x11, N);
    SETUP(cuMemAlloc_v2(&d_in, N));
    SETUP(cuMemAlloc_v2(&d_other, N));
    memset(fill, 0x22, N);
    SETUP(cuMemcpyHtoD_v2(d_other, fill, N));
}

/* A kernel, then the copy of the whole buffer, on s. */
static void copy(void) {
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    SETUP(cuMemcpyHtoDAsync_v2(d_in, pinned, N, s));
}

static void device_check(const char *what) {
    static unsigned char got[N];
    SETUP(cuMemcpyDtoH_v2(got, d_in, N));
    check(what, got, N, 0x11);
}

static void teardown(int free_pinned) {
    SETUP(cuCtxSynchronize());
    if (free_pinned) SETUP(cuMemFreeHost(pinned));
    SETUP(cuStreamDestroy_v2(s));
    SETUP(cuCtxDestroy_v2(ctx));
}

static void *writer(void *arg) {
    size_t i = (size_t)arg;
    memset(pinned + i * (N / THREADS), 0x33, N / THREADS);
    return NULL;
}

static void threads(void) {
    pthread_t t[THREADS];
    setup(0);
    copy();
    for (size_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, writer, (void *)i);
    for (size_t i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(1);
}

/* Writes 4096 bytes of `v` into the pipe and reads them into the buffer's first page. */
static void pipe_into_buffer(int fd[2], unsigned char v, const char *when) {
    static unsigned char page[4096];
    memset(page, v, sizeof page);
    if (write(fd[1], page, sizeof page) != (ssize_t)sizeof page) exit(1);
    ssize_t n = read(fd[0], pinned, sizeof page);
    printf("read %s: %zd%s%s\n", when, n, n < 0 ? " " : "", n < 0 ? strerror(errno) : "");
}

static void pipe_read(void) {
    int fd[2];
    CUstream t;
    CUevent copied, consumed;
    setup(0);
    SETUP(cuStreamCreate(&t, 0));
    SETUP(cuEventCreate(&copied, 2));
    SETUP(cuEventCreate(&consumed, 2));
    if (pipe(fd) != 0) exit(1);
    copy();
    pipe_into_buffer(fd, 0x44, "during the copy");
    /* Completion learnt through a chain: an event after the copy, a stream waiting for
     * it, an event on that stream synchronised; more work is queued on s behind it. */
    SETUP(cuEventRecord(copied, s));
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    SETUP(cuStreamWaitEvent(t, copied, 0));
    SETUP(cuEventRecord(consumed, t));
    SETUP(cuEventSynchronize(consumed));
    pipe_into_buffer(fd, 0x11, "after the copy");
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    SETUP(cuEventDestroy_v2(copied));
    SETUP(cuEventDestroy_v2(consumed));
    SETUP(cuStreamDestroy_v2(t));
    teardown(1);
}

static void sig_dfl(void) {
    setup(0);
    copy();
    SETUP(cuStreamSynchronize(s));
    signal(SIGSEGV, SIG_DFL);
    copy();
    memset(pinned + N - 4096, 0x33, 4096);
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(1);
}

static void *blocked_writer(void *arg) {
    sigset_t all;
    (void)arg;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    memset(pinned, 0x33, 4096);
    return NULL;
}

static void blocked(void) {
    pthread_t t;
    setup(0);
    copy();
    pthread_create(&t, NULL, blocked_writer, NULL);
    pthread_join(t, NULL);
    printf("blocked thread wrote\n");
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(1);
}

static void free_pending(void) {
    setup(0);
    copy();
    SETUP(cuMemFreeHost(pinned));
    printf("freed\n");
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(0);
}

static void sync_dtoh(void) {
    setup(1 /* CU_STREAM_NON_BLOCKING: the synchronous copy does not wait for it */);
    copy();
    SETUP(cuMemcpyDtoH_v2(pinned, d_other, N));
    printf("buffer after the synchronous copy: 0x%02x\n", pinned[0]);
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(1);
}

static void unified(void) {
    setup(0);
    SETUP(cuMemcpyAsync(d_in, (CUdeviceptr)(uintptr_t)pinned, N, s));
    memset(pinned + 4096, 0x33, 4096);
    SETUP(cuStreamSynchronize(s));
    device_check("device copy");
    teardown(1);
}

static void ring(void) {
    enum { SLOTS = 3, STEPS = 9 };
    unsigned char *buf[SLOTS];
    CUevent copied[SLOTS], consumed[SLOTS];
    CUdeviceptr dst[SLOTS];
    CUstream t;
    static unsigned char got[N];
    setup(0);
    SETUP(cuStreamCreate(&t, 0));
    for (int i = 0; i < SLOTS; i++) {
        SETUP(cuMemAllocHost_v2((void **)&buf[i], N));
        SETUP(cuMemAlloc_v2(&dst[i], N));
        SETUP(cuEventCreate(&copied[i], 2));
        SETUP(cuEventCreate(&consumed[i], 2));
    }
    for (int step = 0; step < STEPS; step++) {
        int i = step % SLOTS;
        if (step >= SLOTS) SETUP(cuEventSynchronize(consumed[i]));
        memset(buf[i], step, N);
        SETUP(cuMemcpyHtoDAsync_v2(dst[i], buf[i], N, s));
        SETUP(cuEventRecord(copied[i], s));
        SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        SETUP(cuStreamWaitEvent(t, copied[i], 0));
        SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, t, NULL, NULL));
        SETUP(cuEventRecord(consumed[i], t));
    }
    SETUP(cuStreamSynchronize(t));
    SETUP(cuStreamSynchronize(s));
    for (int i = 0; i < SLOTS; i++) {
        char what[32];
        SETUP(cuMemcpyDtoH_v2(got, dst[i], N));
        snprintf(what, sizeof what, "slot %d", i);
        check(what, got, N, (unsigned char)(STEPS - SLOTS + i));
        SETUP(cuMemFreeHost(buf[i]));
        SETUP(cuEventDestroy_v2(copied[i]));
        SETUP(cuEventDestroy_v2(consumed[i]));
    }
    SETUP(cuStreamDestroy_v2(t));
    teardown(1);
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "threads") == 0) threads();
    else if (strcmp(s, "pipe_read") == 0) pipe_read();
    else if (strcmp(s, "sig_dfl") == 0) sig_dfl();
    else if (strcmp(s, "blocked") == 0) blocked();
    else if (strcmp(s, "free_pending") == 0) free_pending();
    else if (strcmp(s, "sync_dtoh") == 0) sync_dtoh();
    else if (strcmp(s, "unified") == 0) unified();
    else if (strcmp(s, "ring") == 0) ring();
    else {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
