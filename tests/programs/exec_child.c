/* exec'd children follow their environment: the parent makes a driver
 * call, then forks and execs itself as "child" with its environment kept (inherit),
 * without LD_PRELOAD (unset) or with SEEDANCE_MODE=off (off); the child makes calls
 * including a failing one and prints what it got.
 *
 * SEEDANCE_TEST_EXEC_VIA names an interpreter to exec through (the harness sets it to
 * qemu-aarch64-static when it runs aarch64 builds under emulation, where the kernel has no
 * binfmt_misc handler: tests/harness/target.rs): the child is then "VIA <this program> child". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_calls.h"

int main(int argc, char **argv) {
    CUdevice d = -1;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        cuInit(0);
        CUresult r = cuDeviceGet(&d, 7);
        printf("child: cuDeviceGet(7) -> %d\n", r);
        return 0;
    }
    cuInit(0);
    printf("parent: cuDeviceGet(0) -> %d\n", cuDeviceGet(&d, 0));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char *how = argc > 1 ? argv[1] : "inherit";
        if (strcmp(how, "unset") == 0) unsetenv("LD_PRELOAD");
        if (strcmp(how, "off") == 0) setenv("SEEDANCE_MODE", "off", 1);
        const char *via = getenv("SEEDANCE_TEST_EXEC_VIA");
        if (via && *via) {
            char self[4096];
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n > 0) {
                self[n] = 0;
                execl(via, via, self, "child", (char *)NULL);
            }
        } else {
            execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        }
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
