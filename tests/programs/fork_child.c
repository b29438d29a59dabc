/* Initialises the driver, forks; the child makes one failing call and exits, the parent
 * waits for it and makes its own calls. */
#include "cuda_min.h"
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);

int main(void) {
    CUdevice d;
    if (cuInit(0)) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CUresult r = cuDeviceGet(&d, 9);
        printf("child cuDeviceGet(9) -> %d\n", r);
        fflush(stdout);
        _exit(r == 101 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CUresult r = cuDeviceGet(&d, 0);
    printf("parent cuDeviceGet(0) -> %d, child exit %d\n", r, WEXITSTATUS(status));
    return r;
}
