/* A daemon-style program's descriptors. `daemon_fds DATA MODE`:
 *   keep:   cuInit, 5 failing cuCtxSynchronize, then opens DATA (keeping every descriptor),
 *           10 failing cuCtxDestroy_v2(NULL), writes its two lines to DATA, exits with DATA
 *           still open;
 *   close3: the same, but closes every descriptor from 3 up before opening DATA (which
 *           then gets descriptor 3, where the trace file was);
 *   close2: the same, closing every descriptor from 2 up (DATA gets descriptor 2, the
 *           program's stderr until then);
 *   dup2:   points descriptor 2 at DATA (dup2) before its first driver call, then as keep.
 * Prints the descriptor DATA got. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda_calls.h"

CUresult cuCtxSynchronize(void);

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *mode = argv[2];
    int fd = -1;
    if (strcmp(mode, "dup2") == 0) {
        fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) != 2) return 3;
        close(fd);
        fd = 2;
    }
    if (cuInit(0) != 0) return 4;
    for (int i = 0; i < 5; i++) cuCtxSynchronize();
    if (strcmp(mode, "close3") == 0 || strcmp(mode, "close2") == 0) {
        fflush(stdout);
        for (int i = strcmp(mode, "close2") == 0 ? 2 : 3; i < 1024; i++) close(i);
    }
    if (fd < 0) {
        fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
        if (fd < 0) return 5;
    }
    printf("data fd %d\n", fd);
    fflush(stdout);
    if (write(fd, "data begins\n", 12) != 12) return 6;
    for (int i = 0; i < 10; i++) cuCtxDestroy_v2(NULL);
    if (write(fd, "data ends\n", 10) != 10) return 7;
    return 0;
}
