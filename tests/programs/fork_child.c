/* Initialises the driver, forks; the child makes a driver call and exits, the parent waits
 * for it and makes its own calls. In a child forked after cuInit every driver call returns
 * CUDA_ERROR_NOT_INITIALIZED (3), cuInit included (driver 580; the fake driver plays it).
 *
 * With the argument "launch": the parent first makes a context current and one legal
 * launch (block 32x32x1), then the child launches with a block of 32x33x1 = 1056 threads,
 * over the fake device's limit of 1024, and prints what it got (3).
 *
 * With the argument "pause": the parent waits 200 ms after cuInit before it forks, while
 * work that cuInit started on other threads (a preloaded library's) may still be inside
 * the driver; a child still running 10 s later is ended by SIGALRM.
 *
 * With the argument "many": the parent also makes a context current and allocates; the
 * child makes five calls (cuDeviceGet twice, cuInit, cuMemAlloc, cuCtxSynchronize), each
 * getting 3, and prints them.
 *
 * With the argument "before": the program asks the driver's version (no cuInit) and forks;
 * the child initialises the driver itself, makes a context current, allocates and frees
 * (each 0), then the parent does the same. */
#include "cuda_min.h"
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

#define KERNEL ((CUfunction)0x1000)

/* cuInit, the primary context of device 0 made current, 4 KiB allocated and freed: the
 * codes, "init=.. ctx=.. alloc=.. free=..". */
static void use_driver(const char *who) {
    CUdevice d = 0;
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;
    CUresult i = cuInit(0);
    CUresult g = cuDeviceGet(&d, 0);
    CUresult c = g ? g : cuDevicePrimaryCtxRetain(&ctx, d);
    if (!c) c = cuCtxSetCurrent(ctx);
    CUresult a = cuMemAlloc_v2(&p, 4096);
    CUresult f = a ? a : cuMemFree_v2(p);
    printf("%s init=%d get=%d ctx=%d alloc=%d free=%d\n", who, i, g, c, a, f);
    fflush(stdout);
}

static int before(void) {
    int version = 0;
    if (cuDriverGetVersion(&version)) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        use_driver("child");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    use_driver("parent");
    printf("child exit %d\n", WEXITSTATUS(status));
    return 0;
}

int main(int argc, char **argv) {
    CUdevice d;
    CUcontext ctx;
    CUdeviceptr p;
    const char *what = argc > 1 ? argv[1] : "";
    int launch = strcmp(what, "launch") == 0;
    int pause = strcmp(what, "pause") == 0;
    int many = strcmp(what, "many") == 0;
    if (strcmp(what, "before") == 0) return before();
    if (cuInit(0)) return 1;
    if (pause) usleep(200 * 1000);
    if (launch || many) {
        if (cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
            return 1;
    }
    if (launch)
        printf("parent launch -> %d\n",
               cuLaunchKernel(KERNEL, 1, 1, 1, 32, 32, 1, 0, NULL, NULL, NULL));
    if (many) printf("parent alloc -> %d\n", cuMemAlloc_v2(&p, 4096));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CUresult r;
        /* A child that deadlocks dies after 10 s instead of outliving the test. */
        if (pause) alarm(10);
        if (launch) {
            r = cuLaunchKernel(KERNEL, 1, 1, 1, 32, 33, 1, 0, NULL, NULL, NULL);
            printf("child launch 32x33x1 -> %d\n", r);
        } else if (many) {
            CUdeviceptr q;
            CUresult g0 = cuDeviceGet(&d, 0), g1 = cuDeviceGet(&d, 1), i = cuInit(0);
            CUresult a = cuMemAlloc_v2(&q, 4096), s = cuCtxSynchronize();
            printf("child get=%d get=%d init=%d alloc=%d sync=%d\n", g0, g1, i, a, s);
            r = g0 | g1 | i | a | s;
        } else {
            r = cuDeviceGet(&d, 9);
            printf("child cuDeviceGet(9) -> %d\n", r);
        }
        fflush(stdout);
        _exit(r == 3 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CUresult r = cuDeviceGet(&d, 0);
    printf("parent cuDeviceGet(0) -> %d, child exit %d\n", r, WEXITSTATUS(status));
    return r;
}
