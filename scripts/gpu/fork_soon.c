/* Forks soon after cuInit, while work the first cuInit started on other threads (a
 * preloaded library's) may still be inside the driver. The child asks the driver two
 * questions and prints the codes; a child still running 20 s later is ended by SIGALRM
 * (exit status 14 in the parent's line). For scripts/gpu/fork.sh.
 *
 *   fork_soon DELAY_US   prints "child count=<code>/<n> get=<code> parent=<code> exit=<status>" */
#include "cuda_min.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);

int main(int argc, char **argv) {
    int delay = argc > 1 ? atoi(argv[1]) : 0;
    if (cuInit(0)) return 1;
    if (delay > 0) usleep((useconds_t)delay);
    fflush(stdout);
    int fds[2];
    if (pipe(fds)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int n = -1;
        CUdevice d;
        CUresult c = cuDeviceGetCount(&n);
        CUresult g = cuDeviceGet(&d, 0);
        dprintf(fds[1], "count=%d/%d get=%d", (int)c, n, (int)g);
        _exit(0);
    }
    close(fds[1]);
    char buf[128] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    (void)got;
    int status = 0;
    waitpid(pid, &status, 0);
    CUdevice d;
    CUresult p = cuDeviceGet(&d, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("child %s parent=%d exit=%d\n", buf[0] ? buf : "(nothing)", (int)p, code);
    return 0;
}
