/* Rule: freeing pinned memory while an asynchronous copy from it is pending.
 *
 *   free_pending synced   correct: a host-to-device copy from a pinned buffer on a non-blocking
 *                         stream, cuStreamSynchronize, then cuMemFreeHost.
 *   free_pending pending  cuMemFreeHost while the copy is still queued (behind device-to-device
 *                         copies on the same stream), then cuStreamSynchronize. The driver waits
 *                         in cuMemFreeHost for the pending copy (driver 580): the device still
 *                         receives the bytes intact; what happened is a hidden synchronisation,
 *                         never a corruption.
 *
 * Prints whether the device buffer received the pinned bytes (0x33). Exit 0 unless a driver call
 * fails. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    const char *variant = argc > 1 ? argv[1] : "synced";
    int pending;
    if (strcmp(variant, "synced") == 0) {
        pending = 0;
    } else if (strcmp(variant, "pending") == 0) {
        pending = 1;
    } else {
        fprintf(stderr, "usage: %s synced|pending\n", argv[0]);
        return 2;
    }
    const size_t n = (size_t)256 << 20;
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));

    unsigned char *h;
    CUdeviceptr d, scratch;
    CK(cuMemHostAlloc((void **)&h, n, 0));
    memset(h, 0x33, n);
    CK(cuMemAlloc(&d, n));
    CK(cuMemAlloc(&scratch, n));
    CK(cuMemsetD8(scratch, 0x44, n));
    CK(cuCtxSynchronize());

    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 4; i++)
        CK(cuMemcpyDtoDAsync(d, scratch, n, s));
    CK(cuMemcpyHtoDAsync(d, h, n, s));
    if (pending) {
        CK(cuMemFreeHost(h));
        CK(cuStreamSynchronize(s));
    } else {
        CK(cuStreamSynchronize(s));
        CK(cuMemFreeHost(h));
    }
    printf("variant=%s device copy %s\n", variant, count_not(d, n, 0x33) ? "corrupted" : "intact");

    CK(cuStreamDestroy(s));
    CK(cuMemFree(d));
    CK(cuMemFree(scratch));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
