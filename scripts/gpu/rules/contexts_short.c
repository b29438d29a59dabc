/* Short-lived contexts on every device, then real work on device 0 (driver API; build:
 * nvcc -o contexts_short contexts_short.c -lcuda -lpthread). Run by scripts/gpu/rules.sh:
 *
 *   contexts_short created   for each device: cuCtxCreate, cuMemGetInfo, cuCtxDestroy;
 *                            then on device 0 a new context, two 8 MiB allocations, a copy
 *                            up, a memset, a device-to-device copy and a copy back.
 *   contexts_short primary   the same, with cuDevicePrimaryCtxRetain (+ push, cuMemGetInfo,
 *                            pop) and cuDevicePrimaryCtxRelease for each device first, and
 *                            the work in device 0's primary context.
 *   contexts_short stray     faulty, needs 2 devices: device 0's primary context retained
 *                            and kept idle while the work runs on device 1.
 *
 * Rule: a context that was created and destroyed (or retained and released) before any
 * work is no "stray context": the healthy variants print no stderr line containing "stray"
 * (no "seedance: " line at all) in observe or fix and give the same output as without the
 * shim. The stray variant (only where 2 devices exist) is reported.
 * Output: "result: ..." lines (codes, checksum); exit 0 when everything succeeded, 1 when
 * a call failed, 2 on bad usage or no device.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../result_check.h"

#define WORDS (2u * 1024u * 1024u) /* 8 MiB of uint32_t */

/* This program's CHECK returns 1 from the scenario (its caller prints the outcome) where
 * result_check.h's exits. */
#undef CHECK
#define CHECK(call)                                                    \
  do {                                                                 \
    CUresult r_ = (call);                                              \
    if (r_ != CUDA_SUCCESS) {                                          \
      printf("result: %s failed: %d\n", #call, (int)r_);               \
      return 1;                                                        \
    }                                                                  \
  } while (0)

/* Real work in the current context: up, memset, device-to-device, down; checksum. */
static int work(void) {
  uint32_t *host = malloc(WORDS * sizeof(uint32_t));
  uint32_t *back = malloc(WORDS * sizeof(uint32_t));
  if (!host || !back) return 1;
  uint64_t want = 0, got = 0;
  for (uint32_t i = 0; i < WORDS; i++) {
    host[i] = i * 2654435761u;
    want += host[i];
  }
  CUdeviceptr a = 0, b = 0;
  CHECK(cuMemAlloc(&a, WORDS * sizeof(uint32_t)));
  CHECK(cuMemAlloc(&b, WORDS * sizeof(uint32_t)));
  CHECK(cuMemcpyHtoD(a, host, WORDS * sizeof(uint32_t)));
  CHECK(cuMemsetD32(b, 0x01020304u, WORDS));
  CHECK(cuMemcpyDtoD(b, a, WORDS * sizeof(uint32_t)));
  CHECK(cuMemcpyDtoH(back, b, WORDS * sizeof(uint32_t)));
  CHECK(cuCtxSynchronize());
  for (uint32_t i = 0; i < WORDS; i++) got += back[i];
  printf("result: checksum = %llu\n", (unsigned long long)got);
  printf("result: checksum matches = %s\n", got == want ? "yes" : "no");
  CHECK(cuMemFree(a));
  CHECK(cuMemFree(b));
  free(host);
  free(back);
  return got == want ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "";
  int created = !strcmp(v, "created"), primary = !strcmp(v, "primary"), stray = !strcmp(v, "stray");
  if (!created && !primary && !stray) {
    fprintf(stderr, "usage: %s created|primary|stray\n", argv[0]);
    return 2;
  }
  CHECK(cuInit(0));
  int n = 0;
  CHECK(cuDeviceGetCount(&n));
  printf("result: devices = %d\n", n);
  if (n < 1 || (stray && n < 2)) {
    printf("result: not enough devices\n");
    return 2;
  }

  if (stray) {
    CUdevice d0, d1;
    CUcontext idle, busy;
    CHECK(cuDeviceGet(&d0, 0));
    CHECK(cuDeviceGet(&d1, 1));
    CHECK(cuDevicePrimaryCtxRetain(&idle, d0)); /* kept, never used */
    CHECK(cuDevicePrimaryCtxRetain(&busy, d1));
    CHECK(cuCtxSetCurrent(busy));
    int rc = work();
    CHECK(cuCtxSetCurrent(NULL));
    CHECK(cuDevicePrimaryCtxRelease(d1));
    CHECK(cuDevicePrimaryCtxRelease(d0));
    return rc;
  }

  for (int i = 0; i < n; i++) {
    CUdevice d;
    CUcontext ctx = NULL;
    size_t free_b = 0, total_b = 0;
    CHECK(cuDeviceGet(&d, i));
    if (created) {
      CHECK(create_ctx(&ctx, d));
      CHECK(cuMemGetInfo(&free_b, &total_b));
      CHECK(cuCtxDestroy(ctx));
    } else {
      CHECK(cuDevicePrimaryCtxRetain(&ctx, d));
      CHECK(cuCtxPushCurrent(ctx));
      CHECK(cuMemGetInfo(&free_b, &total_b));
      CUcontext popped = NULL;
      CHECK(cuCtxPopCurrent(&popped));
      CHECK(cuDevicePrimaryCtxRelease(d));
    }
    printf("result: device %d short-lived %s context: ok (total memory known = %s)\n", i,
           created ? "created" : "primary", total_b > 0 ? "yes" : "no");
  }

  CUdevice d0;
  CUcontext ctx = NULL;
  CHECK(cuDeviceGet(&d0, 0));
  int rc;
  if (created) {
    CHECK(create_ctx(&ctx, d0));
    rc = work();
    CHECK(cuCtxDestroy(ctx));
  } else {
    CHECK(cuDevicePrimaryCtxRetain(&ctx, d0));
    CHECK(cuCtxSetCurrent(ctx));
    rc = work();
    CHECK(cuCtxSetCurrent(NULL));
    CHECK(cuDevicePrimaryCtxRelease(d0));
  }
  printf("result: work on device 0 = %s\n", rc == 0 ? "ok" : "failed");
  return rc;
}
