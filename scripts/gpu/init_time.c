/* Microseconds spent in the first cuInit(0) (and, with a trace directory, the shim's
 * session_start record: device queries, NVML, trace file). Prints the number. */
#include <cuda.h>
#include <stdio.h>
#include <time.h>

int main(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CUresult r = cuInit(0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (r != CUDA_SUCCESS) return 1;
    printf("%.1f\n", (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3);
    return 0;
}
