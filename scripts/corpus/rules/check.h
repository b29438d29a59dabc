/* Shared by the rules programs: stop with the call, line and error name when a driver call fails. */
#ifndef CORPUS_RULES_CHECK_H
#define CORPUS_RULES_CHECK_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                    \
    do {                                                                            \
        CUresult r_ = (call);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                   \
            const char *s_ = NULL;                                                  \
            cuGetErrorName(r_, &s_);                                                \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,      \
                    s_ ? s_ : "?", (int)r_);                                        \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

/* Bytes of a device buffer that differ from value (read back through pageable memory). */
static size_t count_not(CUdeviceptr d, size_t n, unsigned char value)
{
    unsigned char *check = (unsigned char *)malloc(n);
    size_t bad = 0, i;
    if (!check) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    CK(cuMemcpyDtoH(check, d, n));
    for (i = 0; i < n; i++)
        bad += check[i] != value;
    free(check);
    return bad;
}
#endif
