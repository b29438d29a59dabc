/* A CUDA 13.1 runtime on a 13.0 driver: what cudart does at start-up, asking
 * cuGetProcAddress_v2 for entry points with cudaVersion 13010; three of them exist only in
 * the newer CUDA (the driver answers CUDA_ERROR_NOT_FOUND with symbolStatus
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) and one exists in none (SYMBOL_NOT_FOUND).
 * Then cuInit and cuDriverGetVersion through the pointers it got. Prints every answer. */
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
    gpa = (gpa_t)ask("cuGetProcAddress", 13010);
    if (!gpa) return 2;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))ask("cuInit", 13010);
    CUresult (*version)(int *) = (CUresult(*)(int *))ask("cuDriverGetVersion", 13010);
    ask("cuFutureEntryPointA", 13010);
    ask("cuFutureEntryPointB", 13010);
    ask("cuFutureEntryPointA", 13010);
    ask("cuNoSuchEntryPoint", 13000);
    if (!init || !version) return 2;
    int v = 0;
    printf("cuInit -> %d\n", init(0));
    CUresult r = version(&v);
    printf("cuDriverGetVersion -> %d (%d)\n", r, v);
    return 0;
}
