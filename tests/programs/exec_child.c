/* exec'd children follow their environment (issue 9 item 4): the parent makes a driver
 * call, then forks and execs itself as "child" with its environment kept (inherit),
 * without LD_PRELOAD (unset) or with SEEDANCE_MODE=off (off); the child makes calls
 * including a failing one and prints what it got. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);

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
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("parent: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
