/* Device ordinals under CUDA_VISIBLE_DEVICES on a 2-GPU host (driver API; build: nvcc -o
 * ordinals_visible ordinals_visible.c -lcuda). Run by scripts/gpu/multi.sh (section 5) under
 * CUDA_VISIBLE_DEVICES=1 (one device visible: physical GPU 1 is ordinal 0) and
 * CUDA_VISIBLE_DEVICES=1,0 (two visible, renumbered: ordinal 0 = physical GPU 1, ordinal 1 =
 * physical GPU 0):
 *
 *   ordinals_visible CASE
 *
 *   count_then_each     cuDeviceGetCount(&n), then for every i < n: cuDeviceGet(i), a context,
 *                       1 MiB allocated, written, read back (correct in every environment)
 *   count_then_01       cuDeviceGetCount(&n), then ordinals 0 and 1 each looked up and used
 *                       (context + allocation) whatever n said: correct with 2 visible; with
 *                       CUDA_VISIBLE_DEVICES=1 ordinal 1 is the mistake (a context was made on
 *                       ordinal 0 between the two look-ups, which per docs/configuration.md
 *                       starts the thread's history anew: the look-up of 1 is a first look-up)
 *   count_then_probe01  cuDeviceGetCount(&n), cuDeviceGet(0), cuDeviceGet(1) with nothing in
 *                       between ("is there a second GPU?"), then work on ordinal 0 only: with
 *                       CUDA_VISIBLE_DEVICES=1 a question about an ordinal the variable
 *                       renumbered (docs: the driver's answer stands, one line explains it)
 *   direct_one          cuDeviceGet(1) first, no count (a hard-coded rank), then work on it
 *
 * Output: deterministic "result: ..." lines (codes, PCI bus ids, work verdicts; no addresses,
 * no times). Exit 0 when it ran through, whatever the driver answered; 2 when cuInit or
 * cuDeviceGetCount failed or on bad usage.
 *
 * Built with -DMULTI_FAKE_DRIVER against the repository's fake driver (crates/fake-cuda) and
 * a cuda.h for local tests of scripts/gpu/multi.sh: the fake has no synchronous memset, so
 * the buffer is written with cuMemcpyHtoD in both builds.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../result_check.h"


/* "bus=0000:07:00.0" (lower case), or "bus=?" */
static void bus_of(CUdevice d, char *out, size_t n) {
  char id[64] = {0};
  if (cuDeviceGetPCIBusId(id, (int)sizeof id, d) != CUDA_SUCCESS) {
    snprintf(out, n, "?");
    return;
  }
  for (char *p = id; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  snprintf(out, n, "%s", id);
}

/* A context on dev, 1 MiB allocated, written and read back, then cleaned up. */
static int small_work(const char *label, CUdevice dev) {
  static unsigned char host[1 << 20], back[1 << 20];
  CUcontext ctx = NULL;
  CUdeviceptr p = 0;
  int ok = 0;
  CUresult r = create_ctx(&ctx, dev);
  if (r != CUDA_SUCCESS) {
    printf("result: %s work = failed (ctx create %d)\n", label, (int)r);
    return 1;
  }
  memset(host, 0x5a, sizeof host);
  memset(back, 0, sizeof back);
  r = cuMemAlloc(&p, sizeof host);
  if (r == CUDA_SUCCESS) {
    if (cuMemcpyHtoD(p, host, sizeof host) == CUDA_SUCCESS &&
        cuMemcpyDtoH(back, p, sizeof back) == CUDA_SUCCESS)
      ok = memcmp(host, back, sizeof host) == 0;
    cuMemFree(p);
  }
  if (ok)
    printf("result: %s work = ok\n", label);
  else
    printf("result: %s work = failed (alloc %d)\n", label, (int)r);
  cuCtxDestroy(ctx);
  return ok ? 0 : 1;
}

/* cuDeviceGet(ordinal), printed as "code=C bus=B" (bus "-" on failure). */
static CUresult get_and_print(const char *label, int ordinal, CUdevice *out) {
  CUdevice d = -1;
  char bus[64] = "-";
  CUresult r = cuDeviceGet(&d, ordinal);
  if (r == CUDA_SUCCESS) bus_of(d, bus, sizeof bus);
  printf("result: %s cuDeviceGet(%d): code=%d bus=%s\n", label, ordinal, (int)r, bus);
  if (out) *out = d;
  return r;
}

/* Looks ordinal up, says whether it is the device ordinal 0 names, and works on it. */
static void request_then_work(int ordinal) {
  CUdevice d = -1, d0 = -1;
  char label[32];
  snprintf(label, sizeof label, "ordinal %d", ordinal);
  if (get_and_print("request", ordinal, &d) != CUDA_SUCCESS) {
    printf("result: %s work = skipped (no device)\n", label);
    return;
  }
  if (ordinal != 0 && cuDeviceGet(&d0, 0) == CUDA_SUCCESS)
    printf("result: ordinal %d same device as ordinal 0 = %s\n", ordinal, d0 == d ? "yes" : "no");
  small_work(label, d);
}

static int count_or_die(void) {
  int n = -1;
  CUresult r = cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuDeviceGetCount failed: %d\n", (int)r);
    exit(2);
  }
  printf("result: count = %d\n", n);
  return n;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(c, "count_then_each") && strcmp(c, "count_then_01") &&
      strcmp(c, "count_then_probe01") && strcmp(c, "direct_one")) {
    fprintf(stderr, "usage: %s count_then_each|count_then_01|count_then_probe01|direct_one\n",
            argv[0]);
    return 2;
  }
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuInit failed: %d\n", (int)r);
    return 2;
  }
  if (!strcmp(c, "count_then_each")) {
    int n = count_or_die();
    for (int i = 0; i < n; i++) request_then_work(i);
  } else if (!strcmp(c, "count_then_01")) {
    count_or_die();
    request_then_work(0);
    request_then_work(1);
  } else if (!strcmp(c, "count_then_probe01")) {
    int n = count_or_die();
    CUdevice d0 = -1, d1 = -1;
    CUresult r0 = get_and_print("probe", 0, &d0);
    CUresult r1 = get_and_print("probe", 1, &d1);
    printf("result: second device answer agrees with count = %s\n",
           (r1 == CUDA_SUCCESS) == (n >= 2) ? "yes" : "no");
    if (r0 == CUDA_SUCCESS) small_work("ordinal 0", d0);
  } else {
    request_then_work(1);
  }
  return 0;
}
