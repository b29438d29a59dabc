/* A CUDA 13.1 runtime on a 13.0 driver: what cudart does at start-up, asking
 * cuGetProcAddress_v2 for each entry point at the CUDA version that introduced it. As
 * driver 580.159 answers (docs/design.md, fact 11): three look-ups at 13010, above the
 * driver's own version, get CUDA_ERROR_INVALID_VALUE with pfn and symbolStatus untouched,
 * also for a name the driver has (cuMemAlloc); one entry point asked below the version
 * that introduced it gets CUDA_ERROR_NOT_FOUND with VERSION_NOT_SUFFICIENT; one name no
 * CUDA has gets CUDA_SUCCESS, pfn NULL and SYMBOL_NOT_FOUND. Then cuInit and
 * cuDriverGetVersion through the pointers it got. Prints every answer. */
#include "cuda_min.h"
#include <dlfcn.h>
#include <stdio.h>

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static gpa_t gpa;

static void *ask(const char *name, int version) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    CUresult r = gpa(name, &p, version, 0, &st);
    printf("%s %d -> %d status %d%s\n", name, version, r, st, p ? " (found)" : "");
    return p;
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return 2;
    gpa = (gpa_t)ask("cuGetProcAddress", 12000);
    if (!gpa) return 2;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))ask("cuInit", 2000);
    CUresult (*version)(int *) = (CUresult(*)(int *))ask("cuDriverGetVersion", 2020);
    ask("cuFutureEntryPointA", 13010);
    ask("cuFutureEntryPointB", 13010);
    ask("cuFutureEntryPointA", 13010);
    ask("cuMemAlloc", 13010);
    ask("cuLaunchKernelEx", 11000);
    ask("cuNoSuchEntryPoint", 13000);
    ask("cuDeviceGetName", 2000);
    if (!init || !version) return 2;
    int v = 0;
    printf("cuInit -> %d\n", init(0));
    CUresult r = version(&v);
    printf("cuDriverGetVersion -> %d (%d)\n", r, v);
    return 0;
}
