/* Initialises the driver, forks; the child makes one failing call and exits, the parent
 * waits for it and makes its own calls.
 *
 * With the argument "launch": the parent first makes a context current and one legal
 * launch (block 32x32x1), then the child launches with a block of 32x33x1 = 1056 threads,
 * over the fake device's limit of 1024, and prints what it got.
 *
 * With the argument "pause": the parent waits 200 ms after cuInit before it forks, while
 * work that cuInit started on other threads (a preloaded library's) may still be inside
 * the driver; a child still running 10 s later is ended by SIGALRM. */
#include "cuda_min.h"
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

#define KERNEL ((CUfunction)0x1000)

int main(int argc, char **argv) {
    CUdevice d;
    CUcontext ctx;
    int launch = argc > 1 && strcmp(argv[1], "launch") == 0;
    int pause = argc > 1 && strcmp(argv[1], "pause") == 0;
    if (cuInit(0)) return 1;
    if (pause) usleep(200 * 1000);
    if (launch) {
        if (cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
            return 1;
        printf("parent launch -> %d\n",
               cuLaunchKernel(KERNEL, 1, 1, 1, 32, 32, 1, 0, NULL, NULL, NULL));
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CUresult r;
        /* A child that deadlocks dies after 10 s instead of outliving the test. */
        if (pause) alarm(10);
        if (launch) {
            r = cuLaunchKernel(KERNEL, 1, 1, 1, 32, 33, 1, 0, NULL, NULL, NULL);
            printf("child launch 32x33x1 -> %d\n", r);
        } else {
            r = cuDeviceGet(&d, 9);
            printf("child cuDeviceGet(9) -> %d\n", r);
        }
        fflush(stdout);
        _exit(r == (launch ? 1 : 101) ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CUresult r = cuDeviceGet(&d, 0);
    printf("parent cuDeviceGet(0) -> %d, child exit %d\n", r, WEXITSTATUS(status));
    return r;
}
