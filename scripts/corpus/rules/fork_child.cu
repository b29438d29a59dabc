/* Rule: CUDA used in a child fork()ed after the parent initialised it (docs/design.md, fact 15).
 *
 *   fork_child after_init   faulty: the parent initialises CUDA (cuInit, its primary context, an
 *                           allocation), forks; the child calls cuInit, cuDeviceGet and cuMemAlloc
 *                           (each gets CUDA_ERROR_NOT_INITIALIZED, 3, on driver 580) and a few
 *                           more, and prints the codes. With the shim: one line naming the first
 *                           call, both pids, the cause and the fix ("forked from pid"), once,
 *                           and a trace of the child's own (lifetime_fault forked_after_init).
 *   fork_child before_init  correct: the program forks before any driver call; the child
 *                           initialises CUDA itself, allocates, fills and reads back; silent.
 *
 * Also prints what cuDriverGetVersion and cuGetErrorName answer in the child (after_init), which
 * fact 15 does not cover yet. The parent then uses its own context again. Exit 0 unless one of
 * the parent's calls, or a correct child's, fails. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* cuInit, the primary context of device 0, 1 MiB allocated, set to 0x5e, read back: the number of
 * bytes that differ (0). Stops with the failing call otherwise. */
static size_t use_cuda(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d;
    size_t n = 1 << 20, bad;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc(&d, n));
    CK(cuMemsetD8(d, 0x5e, n));
    bad = count_not(d, n, 0x5e);
    CK(cuMemFree(d));
    return bad;
}

int main(int argc, char **argv)
{
    const char *variant = argc > 1 ? argv[1] : "after_init";
    int after;
    if (strcmp(variant, "after_init") == 0) {
        after = 1;
    } else if (strcmp(variant, "before_init") == 0) {
        after = 0;
    } else {
        fprintf(stderr, "usage: %s after_init|before_init\n", argv[0]);
        return 2;
    }
    if (after) printf("parent bytes differing: %zu\n", use_cuda());
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        if (after) {
            CUdevice dev = 0;
            CUdeviceptr d = 0;
            int version = 0, count = -1;
            const char *name = NULL;
            CUresult i = cuInit(0);
            CUresult g = cuDeviceGet(&dev, 0);
            CUresult a = cuMemAlloc(&d, 4096);
            CUresult c = cuDeviceGetCount(&count);
            CUresult s = cuCtxSynchronize();
            CUresult v = cuDriverGetVersion(&version);
            CUresult e = cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &name);
            printf("child init=%d get=%d alloc=%d count=%d sync=%d\n", (int)i, (int)g, (int)a,
                   (int)c, (int)s);
            printf("child driver_version=%d (%s) error_name=%d (%s)\n", (int)v,
                   v == CUDA_SUCCESS ? "answered" : "-", (int)e, name ? name : "-");
        } else {
            printf("child bytes differing: %zu\n", use_cuda());
        }
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    if (after) {
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 4096));
        CK(cuMemFree(d));
        printf("parent allocates again: yes\n");
    } else {
        printf("parent bytes differing: %zu\n", use_cuda());
    }
    return 0;
}
