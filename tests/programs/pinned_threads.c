/* T threads, each in its own context (the fake driver's synchronous copies and frees
 * synchronise their whole context, which must not run another thread's race), with its own
 * two non-blocking streams A and B, its own 4 KiB pinned buffer (holding 0x11) and device
 * buffers, making N rounds of: a cuMemcpyHtoDAsync from the pinned buffer on A,
 * cuEventRecord of its own event on A and cuStreamWaitEvent(A) on that event; every 64th
 * round a cuStreamSynchronize(A), every 128th followed by a cuStreamQuery(A). Every RACE
 * rounds (third argument, default 500) a race of the thread's own: a cuMemcpyDtoHAsync of
 * 0x22 into the same bytes on B with nothing ordering B after A, then B and A synchronised
 * (B first, as a GPU runs B's copy while A is busy) and the device buffer read back:
 * "intact" when it got 0x11. Usage: pinned_threads T N [RACE]. Prints the total of
 * successful calls and of intact race rounds; exits 0 unless a setup call fails. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_calls.h"

CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int);
CUresult cuStreamQuery(CUstream);

#define BYTES 4096
#define NON_BLOCKING 1

static CUdevice dev;
static long n, race = 500;
static long ok_calls[64], intact[64];

static void *work(void *arg) {
    long id = (long)arg;
    CUstream a, b;
    CUevent ev;
    unsigned char *pinned, got[BYTES], fill[BYTES];
    CUdeviceptr d_in, d_out;
    CUcontext ctx;
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    SETUP(cuStreamCreate(&a, NON_BLOCKING));
    SETUP(cuStreamCreate(&b, NON_BLOCKING));
    SETUP(cuEventCreate(&ev, 0));
    SETUP(cuMemHostAlloc((void **)&pinned, BYTES, 0));
    SETUP(cuMemAlloc_v2(&d_in, BYTES));
    SETUP(cuMemAlloc_v2(&d_out, BYTES));
    memset(fill, 0x22, BYTES);
    SETUP(cuMemcpyHtoD_v2(d_out, fill, BYTES));
    memset(pinned, 0x11, BYTES);
    for (long i = 0; i < n; i++) {
        if (cuMemcpyHtoDAsync_v2(d_in, pinned, BYTES, a) == 0) ok_calls[id]++;
        if (cuEventRecord(ev, a) == 0) ok_calls[id]++;
        if (cuStreamWaitEvent(a, ev, 0) == 0) ok_calls[id]++;
        if (i % 128 == 127) {
            if (cuStreamSynchronize(a) == 0 && cuStreamQuery(a) == 0) ok_calls[id] += 2;
        } else if (i % 64 == 63) {
            if (cuStreamSynchronize(a) == 0) ok_calls[id]++;
        }
        if (i % race == race - 1) {
            if (cuMemcpyDtoHAsync_v2(pinned, d_out, BYTES, b) == 0) ok_calls[id]++;
            SETUP(cuStreamSynchronize(b));
            SETUP(cuStreamSynchronize(a));
            SETUP(cuMemcpyDtoH_v2(got, d_in, BYTES));
            int same = 1;
            for (int k = 0; k < BYTES; k++) same &= got[k] == 0x11;
            intact[id] += same;
            memset(pinned, 0x11, BYTES);
        }
    }
    SETUP(cuStreamSynchronize(a));
    SETUP(cuMemFreeHost(pinned));
    SETUP(cuEventDestroy_v2(ev));
    SETUP(cuStreamDestroy_v2(a));
    SETUP(cuStreamDestroy_v2(b));
    SETUP(cuCtxDestroy_v2(ctx));
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 16;
    n = argc > 2 ? atol(argv[2]) : 2000;
    if (argc > 3) race = atol(argv[3]);
    pthread_t th[64];
    if (t < 1 || t > 64 || race < 1) return 2;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    for (long i = 0; i < t; i++) pthread_create(&th[i], NULL, work, (void *)i);
    long total = 0, whole = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        total += ok_calls[i];
        whole += intact[i];
    }
    printf("ok_calls=%ld intact=%ld\n", total, whole);
    return 0;
}
