/* T threads in one context (made by the main thread), each with its own non-blocking stream,
 * its own event, a pageable 256-byte buffer and a device buffer, making N rounds of: a
 * cuMemcpyHtoDAsync on its stream; every 4th round a cuStreamSynchronize of it, every 4th
 * (two rounds later) a cuEventRecord on it and a cuEventSynchronize of that event. Then
 * thread i submits i + 1 more copies and stops; after every thread is done the main thread
 * destroys the context, abandoning exactly those copies (the fake driver queues work until
 * it is synchronised). Usage: sync_threads T N (N a multiple of 4). Prints the successful
 * calls of the threads; exits 0 unless a setup call fails. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_calls.h"

CUresult cuEventSynchronize(CUevent);

#define BYTES 256
#define NON_BLOCKING 1

static CUcontext ctx;
static long n;
static long ok_calls[64];

static void *work(void *arg) {
    long id = (long)arg;
    CUstream s;
    CUevent ev;
    CUdeviceptr d;
    static unsigned char host[64][BYTES];
    SETUP(cuCtxSetCurrent(ctx));
    SETUP(cuStreamCreate(&s, NON_BLOCKING));
    SETUP(cuEventCreate(&ev, 0));
    SETUP(cuMemAlloc_v2(&d, BYTES));
    for (long i = 0; i < n; i++) {
        if (cuMemcpyHtoDAsync_v2(d, host[id], BYTES, s) == 0) ok_calls[id]++;
        if (i % 4 == 1 && cuStreamSynchronize(s) == 0) ok_calls[id]++;
        if (i % 4 == 3 && cuEventRecord(ev, s) == 0 && cuEventSynchronize(ev) == 0)
            ok_calls[id] += 2;
    }
    for (long i = 0; i <= id; i++)
        if (cuMemcpyHtoDAsync_v2(d, host[id], BYTES, s) == 0) ok_calls[id]++;
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 8;
    n = argc > 2 ? atol(argv[2]) : 4000;
    pthread_t th[64];
    CUdevice dev;
    if (t < 1 || t > 64 || n % 4 != 0) return 2;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuCtxCreate_v2(&ctx, 0, dev));
    for (long i = 0; i < t; i++) pthread_create(&th[i], NULL, work, (void *)i);
    long total = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        total += ok_calls[i];
    }
    SETUP(cuCtxDestroy_v2(ctx));
    printf("ok_calls=%ld\n", total);
    return 0;
}
