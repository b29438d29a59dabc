/* libholder_a.so: a library that allocates most of the device's memory (what JAX's
 * preallocation does), for the holder attribution of the out-of-memory explanation. */
#include "cuda_min.h"

CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

/* Allocates n blocks of bytes each; returns the first failure's code, or 0. */
int holder_a_fill(size_t bytes, int n) {
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        CUresult r = cuMemAlloc_v2(&p, bytes);
        if (r) return r;
    }
    return 0;
}
