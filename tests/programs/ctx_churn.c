/* Context churn over two devices: `ctx_churn PAIRS` makes PAIRS cuCtxCreate_v2 +
 * cuCtxDestroy_v2 pairs, alternating devices 0 and 1, then prints "pairs PAIRS". */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_calls.h"

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 1000;
    CUdevice dev[2];
    if (cuInit(0) || cuDeviceGet(&dev[0], 0) || cuDeviceGet(&dev[1], 1)) return 2;
    for (long i = 0; i < pairs; i++) {
        CUcontext c;
        if (cuCtxCreate_v2(&c, 0, dev[i % 2]) || cuCtxDestroy_v2(c)) return 3;
    }
    printf("pairs %ld\n", pairs);
    return 0;
}
