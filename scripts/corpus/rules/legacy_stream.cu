/* Rule: the legacy default stream orders blocking streams, and only them.
 *
 *   legacy_stream blocking     correct: a host-to-device copy from a pinned buffer on blocking
 *                              stream A, an event recorded on stream 0 (the legacy default
 *                              stream, which waits for A's work) and synchronised, then a
 *                              device-to-host copy into the same bytes on blocking stream B.
 *                              The event's completion implies the first copy's: no race.
 *   legacy_stream nonblocking  faulty: the same with both streams made CU_STREAM_NON_BLOCKING.
 *                              Stream 0 no longer waits for A, the event completes at once, and
 *                              B's copy overwrites the pinned bytes while A's copy (queued behind
 *                              device-to-device copies) may still read them: a real race.
 *
 * Prints whether the device buffer received the pinned bytes as they were (0x11) and whether the
 * pinned buffer holds what B copied (0x22). Exit 0 unless a driver call fails. */
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    const char *variant = argc > 1 ? argv[1] : "blocking";
    unsigned int flags;
    if (strcmp(variant, "blocking") == 0) {
        flags = CU_STREAM_DEFAULT;
    } else if (strcmp(variant, "nonblocking") == 0) {
        flags = CU_STREAM_NON_BLOCKING;
    } else {
        fprintf(stderr, "usage: %s blocking|nonblocking\n", argv[0]);
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
    CUdeviceptr d1, d2;
    CK(cuMemHostAlloc((void **)&h, n, 0));
    memset(h, 0x11, n);
    CK(cuMemAlloc(&d1, n));
    CK(cuMemAlloc(&d2, n));
    CK(cuMemsetD8(d2, 0x22, n));
    CK(cuCtxSynchronize());

    CUstream a, b;
    CUevent ev;
    CK(cuStreamCreate(&a, flags));
    CK(cuStreamCreate(&b, flags));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

    /* Work ahead of the pinned copy on A, so that the copy is still pending when B's starts. */
    for (int i = 0; i < 4; i++)
        CK(cuMemcpyDtoDAsync(d1, d2, n, a));
    CK(cuMemcpyHtoDAsync(d1, h, n, a)); /* reads the pinned bytes */
    CK(cuEventRecord(ev, 0));           /* on the legacy default stream */
    CK(cuEventSynchronize(ev));
    CK(cuMemcpyDtoHAsync(h, d2, n, b)); /* writes the same pinned bytes */
    CK(cuCtxSynchronize());

    size_t d1_bad = count_not(d1, n, 0x11);
    size_t h_bad = 0;
    for (size_t i = 0; i < n; i++)
        h_bad += h[i] != 0x22;
    printf("variant=%s device copy %s, pinned buffer %s\n", variant, d1_bad ? "corrupted" : "intact",
           h_bad ? "wrong" : "as copied");

    CK(cuEventDestroy(ev));
    CK(cuStreamDestroy(a));
    CK(cuStreamDestroy(b));
    CK(cuMemFree(d1));
    CK(cuMemFree(d2));
    CK(cuMemFreeHost(h));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
