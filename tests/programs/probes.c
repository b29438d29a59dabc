/* Device questions: each scenario named on the command line asks the driver something whose
 * failure the program expects, and prints the answer. Natively every one of them gets
 * CUDA_ERROR_INVALID_DEVICE (101) from the driver; a shim must leave those answers alone.
 *
 *   loop     while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;   (stops at 100 if never refused)
 *   scan     for (i = 0; i < 64; i++) count the ordinals cuDeviceGet finds
 *   count    cuDeviceGetCount(&n), then cuDeviceGet(&d, n): the negative test
 *   minus1   cuDeviceGet(&d, -1)
 *   intmin   cuDeviceGet(&d, INT_MIN)
 *   retain   cuDevicePrimaryCtxRetain(&ctx, -1)
 *   create   cuCtxCreate_v2(&ctx, 0, 12345)
 *   get:N    cuDeviceGet(&d, N), printing the device it got (a one-device request) */
#include "cuda_min.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetCount(int *);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);

int main(int argc, char **argv) {
    CUdevice d = -7;
    CUcontext ctx = NULL;
    if (cuInit(0) != 0) { printf("cuInit failed\n"); return 1; }
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "loop") == 0) {
            int n = 0;
            while (n < 100 && cuDeviceGet(&d, n) == 0) n++;
            printf("loop: %d devices\n", n);
        } else if (strcmp(s, "scan") == 0) {
            int found = 0;
            for (int o = 0; o < 64; o++)
                if (cuDeviceGet(&d, o) == 0) found++;
            printf("scan: %d of 64 ordinals found\n", found);
        } else if (strcmp(s, "count") == 0) {
            int n = -1;
            CUresult c = cuDeviceGetCount(&n);
            printf("cuDeviceGetCount -> %d, %d; cuDeviceGet(%d) -> %d\n", c, n, n,
                   cuDeviceGet(&d, n));
        } else if (strcmp(s, "minus1") == 0) {
            printf("cuDeviceGet(-1) -> %d\n", cuDeviceGet(&d, -1));
        } else if (strcmp(s, "intmin") == 0) {
            printf("cuDeviceGet(INT_MIN) -> %d\n", cuDeviceGet(&d, INT_MIN));
        } else if (strcmp(s, "retain") == 0) {
            printf("cuDevicePrimaryCtxRetain(-1) -> %d\n", cuDevicePrimaryCtxRetain(&ctx, -1));
        } else if (strcmp(s, "create") == 0) {
            printf("cuCtxCreate_v2(dev=12345) -> %d\n", cuCtxCreate_v2(&ctx, 0, 12345));
        } else if (strncmp(s, "get:", 4) == 0) {
            int o = atoi(s + 4);
            d = -7;
            CUresult r = cuDeviceGet(&d, o);
            printf("cuDeviceGet(%d) -> %d, device %d\n", o, r, r == 0 ? d : -1);
        } else {
            printf("unknown scenario %s\n", s);
            return 2;
        }
    }
    return 0;
}
