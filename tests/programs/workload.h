/* The same sequence of driver calls for every way of reaching the driver. Prints one line
 * per call with its result, so runs with and without the shim can be compared byte for
 * byte. Exits 0 when every call that should succeed did. */
#include "cuda_min.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(call, expect)                                                              \
    do {                                                                                 \
        CUresult r_ = (call);                                                            \
        printf("%-40s -> %d\n", #call, r_);                                              \
        if (r_ != (expect)) failures++;                                                  \
    } while (0)

static int run_workload(const struct driver *d) {
    int version = 0, count = 0;
    CUdevice dev = -1, bad = -1;
    CUcontext ctx = NULL, primary = NULL;
    CUdeviceptr ptr = 0, zero = 0;
    void *host = NULL;
    CUfunction fn = (CUfunction)0x1000;
    CUevent ev = NULL;

    CHECK(d->init(0), 0);
    CHECK(d->driver_get_version(&version), 0);
    CHECK(d->device_get_count(&count), 0);
    printf("version=%d count=%d\n", version, count);
    CHECK(d->device_get(&dev, 0), 0);
    CHECK(d->device_get(&bad, 7), 101);               /* CUDA_ERROR_INVALID_DEVICE */
    CHECK(d->primary_retain(&primary, dev), 0);
    CHECK(d->ctx_create(&ctx, 0, dev), 0);
    CHECK(d->mem_alloc(&ptr, 4096), 0);
    printf("ptr=%#llx\n", ptr);
    CHECK(d->mem_alloc(&zero, 0), 1);                  /* CUDA_ERROR_INVALID_VALUE */
    CHECK(d->mem_host_alloc(&host, 256, 0), 0);
    if (host) memset(host, 0xab, 256);
    CHECK(d->launch(fn, 4, 2, 1, 128, 1, 1, 0, NULL, NULL, NULL), 0);
    CHECK(d->launch(fn, 1, 1, 1, 32, 33, 1, 0, NULL, NULL, NULL), 1); /* 1056 threads */
    CHECK(d->launch_ptsz(fn, 8, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), 0);
    CHECK(d->event_create(&ev, 2), 0);                /* CU_EVENT_DISABLE_TIMING */
    CHECK(d->event_record_ptsz(ev, NULL, 0), 0);
    CHECK(d->stream_sync_ptsz(NULL), 0);
    CHECK(d->event_destroy(ev), 0);
    CHECK(d->ctx_synchronize(NULL), 0);
    CHECK(d->mem_free(ptr), 0);
    CHECK(d->mem_free_host(host), 0);
    CHECK(d->ctx_destroy(ctx), 0);
    CHECK(d->primary_release(dev), 0);
    printf("failures=%d\n", failures);
    return failures == 0 ? 0 : 1;
}
