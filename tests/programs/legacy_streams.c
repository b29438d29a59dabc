/* The legacy default stream's implicit synchronisation, as NVIDIA's simpleStreams sample
 * relies on it: a copy into a pinned buffer on stream A, an event recorded on stream 0 and
 * synchronised (or another call that waits for the legacy default stream), then a copy
 * into part of the same buffer on stream B. With blocking streams (cuStreamCreate flags 0)
 * the event completes only after A's copy (CUDA programming guide, "Default Stream"): the
 * buffer ends holding B's bytes in its first quarter and A's elsewhere. With
 * CU_STREAM_NON_BLOCKING streams nothing orders A's copy before B's: against the fake
 * driver, which runs a stream's copies when it is synchronised, the program synchronises B
 * before A (as a GPU runs B's copy while A is still busy) and A's bytes land over B's.
 *
 * Usage: legacy_streams blocking|non_blocking|priority|priority_non_blocking
 *                       event|event_query|memcpy|memset|sync0|sync_legacy|ctx_sync
 *        legacy_streams per_thread
 * Prints "host buffer: as ordered" or what went wrong; exits 0 unless a setup call fails. */
#include <pthread.h>
#include <string.h>

#include "cuda_calls.h"

CUresult cuStreamCreateWithPriority(CUstream *, unsigned int, int);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventQuery(CUevent);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *, CUdeviceptr, size_t, CUstream);
CUresult cuEventRecord_ptsz(CUevent, CUstream);

#define N (64 * 1024)
#define PART (N / 4)
#define CU_STREAM_NON_BLOCKING 1
#define CU_STREAM_LEGACY ((CUstream)0x1)

static CUcontext ctx;
static CUstream a, b;
static CUevent ev;
static CUdeviceptr d_a, d_b, d_scratch;
static unsigned char *pinned;

/* A context, streams A and B made as `kind` says, an event, the pinned buffer holding
 * 0x11, device buffers holding 0x33 (A's copy) and 0x22 (B's). */
static void setup(const char *kind) {
    static unsigned char fill[N];
    CUdevice dev;
    unsigned int flags = strstr(kind, "non_blocking") ? CU_STREAM_NON_BLOCKING : 0;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    if (strncmp(kind, "priority", 8) == 0) {
        SETUP(cuStreamCreateWithPriority(&a, flags, -1));
        SETUP(cuStreamCreateWithPriority(&b, flags, 0));
    } else {
        SETUP(cuStreamCreate(&a, flags));
        SETUP(cuStreamCreate(&b, flags));
    }
    SETUP(cuEventCreate(&ev, 0));
    SETUP(cuMemHostAlloc((void **)&pinned, N, 0));
    memset(pinned, 0x11, N);
    SETUP(cuMemAlloc_v2(&d_a, N));
    SETUP(cuMemAlloc_v2(&d_b, N));
    SETUP(cuMemAlloc_v2(&d_scratch, N));
    memset(fill, 0x33, N);
    SETUP(cuMemcpyHtoD_v2(d_a, fill, N));
    memset(fill, 0x22, N);
    SETUP(cuMemcpyHtoD_v2(d_b, fill, N));
}

/* What orders the legacy default stream after A's copy, and waits for it. */
static void between(const char *how) {
    static unsigned char got[64];
    if (strcmp(how, "event") == 0) {
        SETUP(cuEventRecord(ev, 0));
        SETUP(cuEventSynchronize(ev));
    } else if (strcmp(how, "event_query") == 0) {
        SETUP(cuEventRecord(ev, 0));
        /* The fake driver runs the work at the synchronisation: query until it is done. */
        if (cuEventQuery(ev) != 0) SETUP(cuEventSynchronize(ev));
        SETUP(cuEventQuery(ev));
    } else if (strcmp(how, "memcpy") == 0) {
        SETUP(cuMemcpyDtoH_v2(got, d_scratch, sizeof got));
    } else if (strcmp(how, "memset") == 0) {
        /* Device memory: does not block the host, but orders the blocking streams. */
        SETUP(cuMemsetD8_v2(d_scratch, 0, N));
    } else if (strcmp(how, "sync0") == 0) {
        SETUP(cuStreamSynchronize(0));
    } else if (strcmp(how, "sync_legacy") == 0) {
        SETUP(cuStreamSynchronize(CU_STREAM_LEGACY));
    } else if (strcmp(how, "ctx_sync") == 0) {
        SETUP(cuCtxSynchronize());
    } else {
        printf("unknown step %s\n", how);
        exit(2);
    }
}

/* Whether the buffer holds B's bytes in its first quarter and A's elsewhere. */
static void verdict(void) {
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) bad += pinned[i] != (i < PART ? 0x22 : 0x33);
    if (bad == 0)
        printf("host buffer: as ordered\n");
    else
        printf("host buffer: out of order (%zu of %d bytes wrong, first 0x%02x)\n", bad, N,
               pinned[0]);
}

static void teardown(void) {
    SETUP(cuCtxSynchronize());
    SETUP(cuMemFreeHost(pinned));
    SETUP(cuEventDestroy_v2(ev));
    SETUP(cuStreamDestroy_v2(a));
    SETUP(cuStreamDestroy_v2(b));
    SETUP(cuCtxDestroy_v2(ctx));
}

/* simpleStreams' pattern with `how` between the two copies. */
static void pattern(const char *kind, const char *how) {
    setup(kind);
    SETUP(cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, a, NULL, NULL));
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_a, N, a));
    between(how);
    SETUP(cuMemcpyDtoHAsync_v2(pinned, d_b, PART, b));
    SETUP(cuStreamSynchronize(b));
    SETUP(cuStreamSynchronize(a));
    verdict();
    teardown();
}

static void *second_thread(void *arg) {
    (void)arg;
    SETUP(cuCtxSetCurrent(ctx));
    /* The second thread's own per-thread default stream: an event recorded on it orders
     * nothing of the first thread's. */
    SETUP(cuEventRecord_ptsz(ev, 0));
    SETUP(cuEventSynchronize(ev));
    SETUP(cuMemcpyDtoHAsync_v2_ptsz(pinned, d_b, PART, 0));
    return NULL;
}

/* Two threads' per-thread default streams: blocking streams of their own, which do not
 * synchronise with each other. */
static void per_thread(void) {
    pthread_t t;
    setup("blocking");
    SETUP(cuMemcpyDtoHAsync_v2_ptsz(pinned, d_a, N, 0));
    if (pthread_create(&t, NULL, second_thread, NULL) != 0) exit(1);
    pthread_join(t, NULL);
    SETUP(cuCtxSynchronize());
    printf("per-thread copies: done\n");
    teardown();
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "per_thread") == 0) {
        per_thread();
        return 0;
    }
    if (argc != 3) {
        printf("usage: legacy_streams KIND STEP | per_thread\n");
        return 2;
    }
    pattern(argv[1], argv[2]);
    return 0;
}
