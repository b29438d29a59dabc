/* Path (b): what the CUDA runtime does. dlopen libcuda RTLD_LOCAL, dlsym only
 * cuGetProcAddress_v2, ask it for "cuGetProcAddress" itself, then look every entry point up
 * by (base name, cudaVersion, flags) through the pointer it returned. */
#include "workload.h"
#include <dlfcn.h>

static PFN_cuGetProcAddress_v2 gpa;

static void *get(const char *name, int version, cuuint64_t flags) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status = -1;
    CUresult r = gpa(name, &p, version, flags, &status);
    if (r != 0 || status != 0 || !p) {
        printf("cuGetProcAddress(%s, %d, %llu) failed: %d status %d\n", name, version, flags, r,
               status);
        exit(3);
    }
    return p;
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    PFN_cuGetProcAddress_v2 first = (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    if (!first) { printf("no cuGetProcAddress_v2\n"); return 2; }
    gpa = first;
    gpa = (PFN_cuGetProcAddress_v2)get("cuGetProcAddress", 12000, 0);

    /* A name the driver does not have: reported as NOT_FOUND (500), not an error for us. */
    void *none = NULL;
    CUdriverProcAddressQueryResult st = -1;
    printf("unknown symbol -> %d status %d\n", gpa("cuNoSuchEntryPoint", &none, 13000, 0, &st), st);

    struct driver d = {
        get("cuInit", 2000, 0),
        get("cuDriverGetVersion", 2020, 0),
        get("cuDeviceGetCount", 2000, 0),
        get("cuDeviceGet", 2000, 0),
        get("cuCtxCreate", 3020, 0),
        get("cuCtxDestroy", 4000, 0),
        get("cuCtxSynchronize", 13000, 0),
        get("cuDevicePrimaryCtxRetain", 7000, 0),
        get("cuDevicePrimaryCtxRelease", 11000, 0),
        get("cuMemAlloc", 3020, 0),
        get("cuMemFree", 3020, 0),
        get("cuMemHostAlloc", 3020, 0),
        get("cuMemFreeHost", 2000, 0),
        get("cuLaunchKernel", 4000, CU_GET_PROC_ADDRESS_DEFAULT),
        get("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
        get("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
        get("cuEventCreate", 2000, 0),
        get("cuEventRecordWithFlags", 11010, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
        get("cuEventDestroy", 4000, 0),
    };
    return run_workload(&d);
}
