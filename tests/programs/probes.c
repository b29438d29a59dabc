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
 *   get:N    cuDeviceGet(&d, N), printing the device it got (a one-device request)
 *   rank     cuDeviceGetCount(&n), then cuDeviceGet(&d, n) with a context and an allocation:
 *            a rank used after the count was checked (rank 1 on a 1-GPU host)
 *   desc     for (i = 7; i >= 0; i--) count the ordinals cuDeviceGet finds
 *   from1    for (i = 1; i < 8; i++) stop at the first ordinal cuDeviceGet refuses
 *   second   cuDeviceGet(&d, 0), then "is there a second GPU?" with cuDeviceGet(&d, 1)
 *   same     ordinal 1 asked five ways: cuDeviceGet, cuDeviceGetCount then cuDeviceGet,
 *            cuDevicePrimaryCtxRetain(1), and on a second thread cuDeviceGet(0) then
 *            cuDeviceGet(1): one ordinal must get one answer */
#include "cuda_min.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetCount(int *);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

static void *other_thread(void *out) {
    CUdevice d0 = -7, d1 = -7;
    CUresult r0 = cuDeviceGet(&d0, 0);
    CUresult r1 = cuDeviceGet(&d1, 1);
    snprintf((char *)out, 128, "thread: cuDeviceGet(0) -> %d, cuDeviceGet(1) -> %d, device %d",
             r0, r1, r1 == 0 ? d1 : -1);
    return NULL;
}

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
        } else if (strcmp(s, "rank") == 0) {
            int n = -1;
            CUdeviceptr p = 0;
            cuDeviceGetCount(&n);
            CUresult r = cuDeviceGet(&d, n);
            printf("rank %d of %d: cuDeviceGet -> %d", n, n, r);
            if (r == 0) {
                r = cuDevicePrimaryCtxRetain(&ctx, d);
                if (r == 0) r = cuCtxSetCurrent(ctx);
                if (r == 0) r = cuMemAlloc_v2(&p, 1 << 20);
                printf(", device %d, work -> %d", d, r);
            }
            printf("\n");
        } else if (strcmp(s, "desc") == 0) {
            int found = 0;
            for (int o = 7; o >= 0; o--)
                if (cuDeviceGet(&d, o) == 0) found++;
            printf("desc: %d of 8 ordinals found\n", found);
        } else if (strcmp(s, "from1") == 0) {
            int highest = 0;
            for (int o = 1; o < 8; o++) {
                if (cuDeviceGet(&d, o) != 0) break;
                highest = o;
            }
            printf("from1: highest ordinal found %d\n", highest);
        } else if (strcmp(s, "second") == 0) {
            CUresult r0 = cuDeviceGet(&d, 0);
            CUresult r1 = cuDeviceGet(&d, 1);
            printf("second: cuDeviceGet(0) -> %d, a second GPU: %s\n", r0, r1 == 0 ? "yes" : "no");
        } else if (strcmp(s, "same") == 0) {
            int n = -1;
            CUdevice a = -7, b = -7;
            CUresult r1 = cuDeviceGet(&a, 1);
            cuDeviceGetCount(&n);
            CUresult r2 = cuDeviceGet(&b, 1);
            CUresult r3 = cuDevicePrimaryCtxRetain(&ctx, 1);
            printf("same: cuDeviceGet(1) -> %d, device %d; after count %d -> %d, device %d; "
                   "cuDevicePrimaryCtxRetain(1) -> %d\n",
                   r1, r1 == 0 ? a : -1, n, r2, r2 == 0 ? b : -1, r3);
            char line[128] = "";
            pthread_t t;
            pthread_create(&t, NULL, other_thread, line);
            pthread_join(t, NULL);
            printf("%s\n", line);
        } else {
            printf("unknown scenario %s\n", s);
            return 2;
        }
    }
    return 0;
}
