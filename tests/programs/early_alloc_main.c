/* Driver calls under a preloaded allocator interposer (libearly_alloc.so, in LD_PRELOAD
 * before or after the shim). The program's first contact with the driver is
 * dlsym(libcuda, "cuInit"), with the allocator made to look its functions up again on its
 * next call: under the shim that call comes from inside the shim's dlsym (its first-use
 * set-up allocates), so the allocator's dlsym(RTLD_NEXT, "malloc") runs inside dlsym.
 * Then, through the exported symbols: a context, a zero-size allocation and an over-limit
 * launch (explained, not repaired: the shim allocates inside the failing call to explain
 * them), a healthy allocation, launch, synchronise, free and destroy. Prints each result;
 * the last line says whether the allocator served the process and how many look-ups it
 * made while the dlsym of cuInit ran. */
#include "cuda_min.h"
#include <dlfcn.h>
#include <stdio.h>

CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuCtxSynchronize(void);
CUresult cuCtxDestroy_v2(CUcontext);

#define KERNEL ((CUfunction)0x1000)
#define SHOW(what, call) printf("%s -> %d\n", what, (int)(call))

int main(void) {
    void (*mark)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "early_alloc_mark");
    unsigned long (*stats)(int) = (unsigned long (*)(int))dlsym(RTLD_DEFAULT, "early_alloc_stats");
    if (!mark || !stats) { printf("libearly_alloc.so is not preloaded\n"); return 2; }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    unsigned long before = stats(0);
    mark(1);
    PFN_cuInit init = (PFN_cuInit)dlsym(h, "cuInit");
    mark(0);
    unsigned long nested = stats(1);
    if (!init) { printf("no cuInit\n"); return 2; }
    CUdevice dev = -1;
    CUcontext ctx;
    CUdeviceptr p = 0;
    SHOW("cuInit", init(0));
    SHOW("cuDeviceGet(1)", cuDeviceGet(&dev, 1));
    SHOW("cuCtxCreate", cuCtxCreate_v2(&ctx, 0, dev));
    SHOW("cuMemAlloc 0 bytes", cuMemAlloc_v2(&p, 0));
    SHOW("block 32x33x1", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 33, 1, 0, NULL, NULL, NULL));
    SHOW("cuMemAlloc 1 MiB", cuMemAlloc_v2(&p, 1 << 20));
    SHOW("block 32x32x1", cuLaunchKernel(KERNEL, 1, 1, 1, 32, 32, 1, 0, NULL, NULL, NULL));
    SHOW("cuCtxSynchronize", cuCtxSynchronize());
    SHOW("cuMemFree", cuMemFree_v2(p));
    SHOW("cuCtxDestroy", cuCtxDestroy_v2(ctx));
    printf("allocator %s; look-ups inside dlsym(cuInit): %lu\n",
           stats(0) > before ? "in use" : "unused", nested);
    return 0;
}
