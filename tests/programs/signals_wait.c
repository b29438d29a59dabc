/* Makes a few driver calls, one of them a device fault (cuDeviceGet(9) with the fake
 * driver's 2 devices), prints "ready" and then waits for the test to end it:
 *
 *   signals_wait            waits reading stdin: the test sends a signal (SIGTERM, SIGINT,
 *                           SIGKILL); end of input returns 0, a line "_exit" calls _exit(4)
 *   signals_wait thread     a second thread reads stdin while the main thread is blocked in
 *                           pause(); on a line "exit" that thread makes two more driver calls
 *                           (cuDriverGetVersion, cuDeviceGet(1)), prints its thread id
 *                           and calls exit(3)
 *
 * SIGINT and SIGTERM are set to their default action first: a test runner started in the
 * background by a shell without job control has SIGINT ignored, and children inherit that.
 * No handler is installed (the shim installs none either). */
#include "cuda_min.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);

static void *exit_from_thread(void *arg) {
    char line[64];
    int version = 0;
    CUdevice dev;
    (void)arg;
    if (!fgets(line, sizeof line, stdin) || strcmp(line, "exit\n") != 0) _exit(20);
    CUresult a = cuDriverGetVersion(&version);
    CUresult b = cuDeviceGet(&dev, 1);
    printf("thread %ld: cuDriverGetVersion -> %d, cuDeviceGet(1) -> %d; exit(3)\n",
           (long)syscall(SYS_gettid), a, b);
    fflush(stdout);
    exit(3);
}

int main(int argc, char **argv) {
    int count = -1;
    CUdevice dev;
    char line[64];
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (cuInit(0) || cuDeviceGetCount(&count) || cuDeviceGet(&dev, 0)) {
        printf("setup failed\n");
        return 10;
    }
    CUresult bad = cuDeviceGet(&dev, 9);
    printf("ready: %d devices, cuDeviceGet(9) -> %d\n", count, bad);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, exit_from_thread, NULL)) return 11;
        for (;;) pause();
    }
    if (!fgets(line, sizeof line, stdin)) return 0;
    if (strcmp(line, "_exit\n") == 0) _exit(4);
    return 12;
}
