/* A trace that reaches a file size limit, as a full disk cuts it: `trace_limit BYTES`
 * ignores SIGXFSZ and sets RLIMIT_FSIZE to BYTES (0: no limit), so a write past it fails
 * with EFBIG, as one on a full disk fails with ENOSPC, after taking what fits; then makes
 * 10 failing cuCtxSynchronize and 10 failing cuCtxDestroy_v2(NULL) calls (no context) and
 * exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "cuda_calls.h"

int main(int argc, char **argv) {
    long bytes = argc > 1 ? atol(argv[1]) : 0;
    if (bytes > 0) {
        struct rlimit r = {(rlim_t)bytes, (rlim_t)bytes};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &r) != 0) return 2;
    }
    if (cuInit(0) != 0) return 3;
    int failed = 0;
    for (int i = 0; i < 10; i++) failed += cuCtxSynchronize() != 0;
    for (int i = 0; i < 10; i++) failed += cuCtxDestroy_v2(NULL) != 0;
    printf("failed %d\n", failed);
    return 0;
}
