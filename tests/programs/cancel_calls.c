/* Driver calls on a thread with a pending deferred cancel (e2e::cancel). A worker thread
 * is cancelled (pthread_cancel) while it spins without reaching a cancellation point, then
 * makes driver calls, then calls pthread_testcancel. Scenarios:
 *   failing    cuMemAlloc_v2(0) fails (the shim explains it on stderr);
 *   destroy    cuCtxDestroy of a context with a launch still queued (fix mode
 *              synchronises it first, with cuCtxSynchronize);
 *   forwarded  cuStreamSynchronize, a cancellation point of the fake driver with
 *              FAKE_CUDA_CANCEL_POINTS=cuStreamSynchronize: the thread ends inside it.
 * Prints each call's code (from the worker), whether the worker got past its calls, and
 * how it ended (canceled or returned). A cleanup handler records that the cancellation
 * unwound the worker's frames. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_calls.h"

static const char *scenario;
static volatile int go, reached, cleaned;
static int code1 = -1, code2 = -1;
static CUcontext ctx;
static CUstream stream;

static void cleanup(void *arg) { (void)arg; cleaned = 1; }

static void *worker(void *arg) {
    CUdeviceptr p;
    (void)arg;
    pthread_cleanup_push(cleanup, NULL);
    while (!go) { /* spin: no cancellation point */ }
    if (strcmp(scenario, "failing") == 0) {
        code1 = cuMemAlloc_v2(&p, 0);
        code2 = cuMemAlloc_v2(&p, 0);
    } else if (strcmp(scenario, "destroy") == 0) {
        cuCtxSetCurrent(ctx);
        code1 = cuLaunchKernel((CUfunction)0x1000, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL);
        code2 = cuCtxDestroy_v2(ctx);
    } else {
        cuCtxSetCurrent(ctx);
        code1 = cuStreamSynchronize(stream);
    }
    reached = 1;
    pthread_testcancel();
    pthread_cleanup_pop(0);
    return NULL;
}

int main(int argc, char **argv) {
    CUdevice dev;
    pthread_t t;
    void *res;
    scenario = argc > 1 ? argv[1] : "failing";
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return 2;
    if (cuStreamCreate(&stream, 0)) return 2;
    if (pthread_create(&t, NULL, worker, NULL)) return 2;
    pthread_cancel(t);
    go = 1;
    pthread_join(t, &res);
    printf("%s: codes %d %d, past the calls: %s, ended: %s, cleanup ran: %s\n", scenario, code1,
           code2, reached ? "yes" : "no", res == PTHREAD_CANCELED ? "canceled" : "returned",
           cleaned ? "yes" : "no");
    return 0;
}
