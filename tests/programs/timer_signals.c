/* The program's signal handlers run on its own threads (e2e::libs). A natively
 * single-threaded program with an interval timer (setitimer ITIMER_REAL, 1 kHz) whose
 * SIGALRM handler is slow every fourth run (it spins 1.5 ms, so the next tick comes while
 * it runs and the kernel hands it to any other thread that does not block SIGALRM). Usage:
 *   timer_signals threads   cuInit, then driver calls for 300 ms; prints how many handler
 *                           runs there were and on how many threads other than the main one
 *                           (natively none: the process has no other thread);
 *   timer_signals exit N    the same, driver calls and malloc in a loop until the handler's
 *                           Nth run, which calls exit(7) wherever it interrupted the
 *                           program (a line left in stdout's buffer is written by exit).
 *   timer_signals inside    one tick, 100 ms after cuInit, while the program is inside
 *                           cuDeviceGetName (FAKE_CUDA_NAME_DELAY_MS holds the driver's
 *                           lock): its handler calls exit(7).
 *   timer_signals malloc N  a context with an allocation alive, then only malloc and free
 *                           (sizes the allocator serves under its arena lock) in a loop
 *                           until the handler's Nth run, which calls exit(7): the exit
 *                           nearly always interrupts the C library's allocator.
 *   timer_signals calls N   the same with only driver calls in the loop (a device name,
 *                           the count, an allocation made and freed, a failed cuDeviceGet):
 *                           the exit interrupts the shim or the driver (with
 *                           FAKE_CUDA_NAME_DELAY_MS, mostly the driver, inside
 *                           cuDeviceGetName holding its lock).
 * Everything the handler does is async-signal-safe but exit(). */
#define _GNU_SOURCE
#include "cuda_min.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuDeviceGetName(char *, int, CUdevice);

static pid_t main_tid;
static volatile sig_atomic_t runs, elsewhere, exit_at;
static void *volatile kept;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void on_alarm(int sig) {
    (void)sig;
    runs = runs + 1;
    if ((pid_t)syscall(SYS_gettid) != main_tid) elsewhere = elsewhere + 1;
    if (exit_at && runs == exit_at) exit(7);
    if (runs % 4 == 0) {
        long long until = now_ns() + 1500000;
        while (now_ns() < until) {
        }
    }
}

static void start_timer(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void stop_timer(void) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
}

/* Driver calls that take the shim's own work (a context, an allocation, a failed call),
 * and the C library's allocator. */
static void some_work(CUdevice dev) {
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;
    CUdevice bad;
    int n;
    cuDeviceGetCount(&n);
    if (cuCtxCreate_v2(&ctx, 0, dev) == 0) {
        if (cuMemAlloc_v2(&p, 4096) == 0) cuMemFree_v2(p);
        cuCtxDestroy_v2(ctx);
    }
    cuDeviceGet(&bad, 99);
    kept = malloc(1000 + (size_t)(now_ns() % 5000));
    free(kept);
}

/* The C library's allocator only: sizes above its per-thread cache (1032 bytes) and below
 * its mmap threshold, so each call takes the arena's lock. Many rounds between two looks at
 * the clock, which may be a system call (on a virtual machine without a usable TSC), on
 * whose return the signal would nearly always be delivered instead. */
static void allocator_work(void) {
    for (int i = 0; i < 100000; i++) {
        /* Through a volatile pointer: the compiler may not drop a malloc/free pair. */
        kept = malloc(2048 + (size_t)(i * 977) % 30000);
        void *a = kept;
        kept = malloc(4096 + (size_t)(i * 311) % 20000);
        free(a);
        free(kept);
    }
}

/* Driver calls only, in the current context: the shim's work around them and the driver's
 * own (cuDeviceGetName holds the fake driver's lock for FAKE_CUDA_NAME_DELAY_MS). */
static void driver_work(CUdevice dev) {
    CUdeviceptr p = 0;
    CUdevice bad;
    char name[64];
    int n;
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetCount(&n);
    if (cuMemAlloc_v2(&p, 4096) == 0) cuMemFree_v2(p);
    cuDeviceGet(&bad, 99);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    CUdevice dev = 0;
    main_tid = (pid_t)syscall(SYS_gettid);
    if (cuInit(0) || cuDeviceGet(&dev, 0)) {
        printf("setup failed\n");
        return 10;
    }
    if (strcmp(how, "inside") == 0) {
        /* One tick 100 ms from now, whose handler calls exit(7), while the program is
         * inside cuDeviceGetName (the fake holds its lock for FAKE_CUDA_NAME_DELAY_MS). */
        char name[64];
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sigaction(SIGALRM, &sa, NULL);
        exit_at = 1;
        printf("started\n"); /* left in the buffer */
        struct itimerval once = {{0, 0}, {0, 100000}};
        setitimer(ITIMER_REAL, &once, NULL);
        cuDeviceGetName(name, sizeof name, dev);
        printf("not interrupted\n");
        return 0;
    }
    int only_malloc = strcmp(how, "malloc") == 0, only_calls = strcmp(how, "calls") == 0;
    if ((only_malloc || only_calls) && argc > 2) {
        /* A context with an allocation alive: the exit has a lifetime report to make. */
        CUcontext ctx = NULL;
        CUdeviceptr p = 0;
        if (cuCtxCreate_v2(&ctx, 0, dev) || cuMemAlloc_v2(&p, 1 << 20)) {
            printf("setup failed\n");
            return 10;
        }
        /* The exit comes after start-up is over (as the program's work would). */
        usleep(200000);
        exit_at = atoi(argv[2]);
        printf("started\n"); /* left in the buffer */
        start_timer();
        long long until = now_ns() + 10000000000LL;
        while (now_ns() < until) {
            if (only_malloc)
                allocator_work();
            else
                driver_work(dev);
        }
        stop_timer();
        printf("handler ran %d times, no exit\n", (int)runs);
        return 0;
    }
    if (strcmp(how, "exit") == 0 && argc > 2) exit_at = atoi(argv[2]);
    printf("started\n"); /* left in the buffer */
    start_timer();
    /* 300 ms; with exit N, until the handler's Nth run (at most 10 s: a loaded machine
     * runs the handler less often than the timer asks). */
    long long until = now_ns() + (exit_at ? 10000000000LL : 300000000LL);
    while (now_ns() < until) some_work(dev);
    stop_timer();
    printf("handler ran %s, %d times on another thread\n", runs > 0 ? "yes" : "no", (int)elsewhere);
    return 0;
}
