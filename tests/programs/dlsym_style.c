/* Path (c): what PyTorch does. dlopen libcuda RTLD_LOCAL and dlsym each versioned name. */
#include "workload.h"
#include <dlfcn.h>

static void *h;

static void *get(const char *name) {
    void *p = dlsym(h, name);
    if (!p) { printf("dlsym(%s) failed\n", name); exit(3); }
    return p;
}

int main(void) {
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    /* A name the library lacks must stay NULL under the shim, too. */
    printf("missing symbol -> %s\n", dlsym(h, "cuNoSuchEntryPoint") ? "found" : "NULL");
    struct driver d = {
        get("cuInit"), get("cuDriverGetVersion"), get("cuDeviceGetCount"), get("cuDeviceGet"),
        get("cuCtxCreate_v2"), get("cuCtxDestroy_v2"), get("cuCtxSynchronize_v2"),
        get("cuDevicePrimaryCtxRetain"), get("cuDevicePrimaryCtxRelease_v2"),
        get("cuMemAlloc_v2"), get("cuMemFree_v2"), get("cuMemHostAlloc"), get("cuMemFreeHost"),
        get("cuLaunchKernel"), get("cuLaunchKernel_ptsz"), get("cuStreamSynchronize_ptsz"),
        get("cuEventCreate"), get("cuEventRecordWithFlags_ptsz"), get("cuEventDestroy_v2"),
    };
    return run_workload(&d);
}
