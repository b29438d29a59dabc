/* Stray contexts: a process that works on one device and also makes a context on another
 * where it does nothing. Usage: stray SCENARIO [DEVICE]; DEVICE (default 1) is the device
 * the process works on. Each scenario prints what the driver returned for the calls that
 * matter; exit 0 unless a setup call fails.
 *   shutdown  work on DEVICE (64 MiB, 3 launches), then retain device 0's primary context
 *             and exit without releasing it (a torch.distributed barrier or
 *             destroy_process_group made without set_device)
 *   released  the same, then release device 0's primary context again
 *   early     retain device 0 first and make it current (a library initialising device 0),
 *             then work on DEVICE
 *   two       work on device 0 and on DEVICE (a legitimate two-device process)
 *   alone     work on DEVICE only
 *   probe     on every device: a context (cuCtxCreate_v2), cuMemGetInfo, destroyed; then
 *             work on DEVICE (a launcher choosing the emptiest device)
 *   probe_primary  the same with primary-context retain and release */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "cuda_calls.h"

#define MIB ((size_t)1 << 20)

CUresult cuDeviceGetCount(int *);
CUresult cuMemGetInfo_v2(size_t *, size_t *);

/* A context on every device, asked for its free memory, then ended. */
static int probe(int primary) {
    int n = 0;
    if (cuDeviceGetCount(&n)) return 1;
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CUcontext c;
        size_t free_b = 0, total = 0;
        if (cuDeviceGet(&d, i)) return 1;
        if (primary ? cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)
                    : cuCtxCreate_v2(&c, 0, d))
            return 1;
        if (cuMemGetInfo_v2(&free_b, &total)) return 1;
        if (primary ? cuCtxSetCurrent(NULL) || cuDevicePrimaryCtxRelease_v2(d)
                    : cuCtxDestroy_v2(c))
            return 1;
    }
    printf("probed %d devices\n", n);
    return 0;
}

static int work(int ordinal) {
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    if (cuDeviceGet(&d, ordinal) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c))
        return 1;
    if (cuMemAlloc_v2(&p, 64 * MIB)) return 1;
    for (int i = 0; i < 3; i++)
        if (cuLaunchKernel(KERNEL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) return 1;
    if (cuCtxSynchronize()) return 1;
    printf("worked on device %d\n", ordinal);
    return 0;
}

static int retain0(void) {
    CUdevice d;
    CUcontext c = NULL;
    if (cuDeviceGet(&d, 0)) return 1;
    CUresult r = cuDevicePrimaryCtxRetain(&c, d);
    printf("cuDevicePrimaryCtxRetain(0) -> %d\n", r);
    return 0;
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    int k = argc > 2 ? atoi(argv[2]) : 1;
    if (cuInit(0)) { printf("setup failed\n"); return 1; }
    int bad = 0;
    if (strcmp(s, "shutdown") == 0) {
        bad = work(k) || retain0();
    } else if (strcmp(s, "released") == 0) {
        bad = work(k) || retain0();
        if (!bad) printf("cuDevicePrimaryCtxRelease(0) -> %d\n", cuDevicePrimaryCtxRelease_v2(0));
    } else if (strcmp(s, "early") == 0) {
        CUcontext c;
        bad = cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) || work(k);
    } else if (strcmp(s, "two") == 0) {
        bad = work(0) || work(k);
    } else if (strcmp(s, "probe") == 0) {
        bad = probe(0) || work(k);
    } else if (strcmp(s, "probe_primary") == 0) {
        bad = probe(1) || work(k);
    } else if (strcmp(s, "alone") == 0) {
        bad = work(k);
    } else {
        printf("unknown scenario\n");
        return 2;
    }
    if (bad) { printf("setup failed\n"); return 1; }
    return 0;
}
