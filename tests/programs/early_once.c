/* Driver calls from pthread_once bodies. Usage: early_once ORDINAL. 8 threads, 4 rounds:
 * in each round every thread waits at a barrier, then calls pthread_once on that round's
 * once-control, whose body (run by one thread while the other 7 wait inside pthread_once)
 * makes the round's driver calls: cuInit, cuDeviceGet(ORDINAL), cuCtxCreate_v2. Then every
 * thread makes the round's context current and synchronises it. The first round's body makes
 * the process's first driver call. At exit, an atexit handler starts a thread that destroys
 * the 4 contexts, and waits for it. Prints how often each body ran, the devices the contexts
 * are on, the threads' successful calls, and (from the atexit handler) the destroys. */
#include "cuda_min.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuCtxDestroy_v2(CUcontext);

#define THREADS 8
#define ROUNDS 4

static pthread_once_t once[ROUNDS] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                      PTHREAD_ONCE_INIT};
static pthread_barrier_t barrier;
static __thread int round_no;
static int ordinal;
static int body_runs[ROUNDS], body_failed[ROUNDS];
static CUdevice dev[ROUNDS];
static CUcontext ctx[ROUNDS];
static int ok[THREADS];

static void body(void) {
    int k = round_no;
    body_runs[k]++;
    dev[k] = -1;
    body_failed[k] = cuInit(0) || cuDeviceGet(&dev[k], ordinal) ||
                     cuCtxCreate_v2(&ctx[k], 0, dev[k]);
}

static void *work(void *arg) {
    long id = (long)arg;
    for (int k = 0; k < ROUNDS; k++) {
        pthread_barrier_wait(&barrier);
        round_no = k;
        if (pthread_once(&once[k], body)) return NULL;
        if (!body_failed[k] && cuCtxSetCurrent(ctx[k]) == 0 && cuCtxSynchronize() == 0)
            ok[id]++;
    }
    return NULL;
}

static void *destroy_all(void *arg) {
    int *destroyed = arg;
    for (int k = 0; k < ROUNDS; k++)
        if (!body_failed[k] && cuCtxDestroy_v2(ctx[k]) == 0) (*destroyed)++;
    return NULL;
}

/* At exit, from a thread the handler starts and joins. */
static void at_exit(void) {
    pthread_t t;
    int destroyed = 0;
    if (pthread_create(&t, NULL, destroy_all, &destroyed) == 0) pthread_join(t, NULL);
    printf("atexit thread: %d contexts destroyed\n", destroyed);
}

int main(int argc, char **argv) {
    pthread_t th[THREADS];
    ordinal = argc > 1 ? atoi(argv[1]) : 0;
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (long i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, work, (void *)i);
    int total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += ok[i];
    }
    printf("once bodies:");
    for (int k = 0; k < ROUNDS; k++) printf(" %d", body_runs[k]);
    printf("; devices:");
    for (int k = 0; k < ROUNDS; k++) printf(" %d", body_failed[k] ? -1 : dev[k]);
    printf("; threads' calls ok: %d of %d\n", total, THREADS * ROUNDS);
    fflush(stdout);
    atexit(at_exit);
    return total == THREADS * ROUNDS ? 0 : 1;
}
