/* CHECK(call): a driver call that must succeed; on failure prints the file, line, call and
 * CUresult on stderr and exits 1. Shared by the GPU benchmark programs (threads_bench.c,
 * guard_cost.c). */
#ifndef SEEDANCE_CU_CHECK_H
#define SEEDANCE_CU_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #call, r_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)
#endif
