/* Run by e2e::secure, with the shim in /etc/ld.so.preload (of a private mount namespace)
 * and, in the secure runs, as a setuid or file-capability binary. Prints:
 *
 *   at_secure=<getauxval(AT_SECURE)> uid=<ruid> euid=<euid> gid=<rgid> egid=<egid>
 *   env SEEDANCE_<NAME>=<value or (unset)>   for the variables the test sets: what the
 *                                           process itself sees (the loader does not
 *                                           strip SEEDANCE_* in secure mode)
 *   shim=<1 if libseedance_fix.so is loaded, else 0>
 *
 * then uses the device ordinal given as argv[1] as ordinals.c does (cuDeviceGet, primary
 * context, allocation, which device did the work), printing "ordinal N -> <bus id>" or the
 * failing call; then every loaded libcuda, as "driver <path>", so the test sees which
 * library the shim forwarded to. Exits 1 at the first failure (after the driver lines). */
#define _GNU_SOURCE
#include "cuda_min.h"
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

static const char *const VARS[] = {
    "SEEDANCE_MODE", "SEEDANCE_TRACE_DIR", "SEEDANCE_LIBCUDA", "SEEDANCE_QUIET",
    "SEEDANCE_FALLBACK", "SEEDANCE_METRICS_FILE",
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *want = data;
    if (info->dlpi_name && strstr(info->dlpi_name, want)) {
        if (strcmp(want, "libcuda") == 0)
            printf("driver %s\n", info->dlpi_name);
        else
            return 1;
    }
    return 0;
}

static int work(int ordinal) {
    CUdevice dev, used;
    CUcontext ctx;
    CUdeviceptr p;
    char bus[32];
    CUresult r = cuInit(0);
    if (r) { printf("cuInit -> %d\n", r); return 1; }
    r = cuDeviceGet(&dev, ordinal);
    if (r) { printf("ordinal %d: cuDeviceGet -> %d\n", ordinal, r); return 1; }
    r = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r) { printf("ordinal %d: cuDevicePrimaryCtxRetain -> %d\n", ordinal, r); return 1; }
    if (cuCtxSetCurrent(ctx) || cuMemAlloc_v2(&p, 1 << 20) || cuCtxGetDevice(&used) ||
        cuDeviceGetPCIBusId(bus, sizeof bus, used)) {
        printf("ordinal %d: work failed\n", ordinal);
        return 1;
    }
    printf("ordinal %d -> %s\n", ordinal, bus);
    return 0;
}

int main(int argc, char **argv) {
    printf("at_secure=%lu uid=%u euid=%u gid=%u egid=%u\n", getauxval(AT_SECURE),
           (unsigned)getuid(), (unsigned)geteuid(), (unsigned)getgid(), (unsigned)getegid());
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) {
        const char *v = getenv(VARS[i]);
        printf("env %s=%s\n", VARS[i], v ? v : "(unset)");
    }
    printf("shim=%d\n", dl_iterate_phdr(find_object, "libseedance_fix.so"));
    int rc = work(argc > 1 ? atoi(argv[1]) : 0);
    dl_iterate_phdr(find_object, "libcuda");
    fflush(stdout);
    return rc;
}
