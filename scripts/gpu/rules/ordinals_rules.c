/* Device-ordinal rules for libseedance_fix.so (driver API; build: nvcc -o ordinals_rules
 * ordinals_rules.c -lcuda -lpthread). Run by scripts/gpu/rules.sh as
 *
 *   ordinals_rules CASE
 *
 * Every case prints deterministic "result: ..." lines on stdout and exits 0 when it ran
 * through (whatever the driver answered), 2 on an unexpected failure (cuInit).
 *
 * Faulty cases (a request for a device the process cannot have; the runner uses
 * CUDA_VISIBLE_DEVICES=0 so that exactly one device is visible):
 *   count_then_rank     cuDeviceGetCount(&n) then cuDeviceGet(&d, n): the rank-equals-count
 *                       mistake (rank 1 on a 1-GPU host). Rule: observe explains it (one
 *                       "seedance: " line) and changes nothing; fix repairs it (the call
 *                       succeeds with device 0), then a context and a cuMemAlloc work.
 *   cvd_count_then_one  cuDeviceGetCount, then literally cuDeviceGet(&d, 1) (run under
 *                       CUDA_VISIBLE_DEVICES=0). Rule: observe explains it.
 *   direct_one          cuDeviceGet(&d, 1) with no count query (a hard-coded rank).
 * Their correct counterparts (healthy: same output as without the shim, silent):
 *   count_then_last     cuDeviceGetCount(&n) then cuDeviceGet(&d, n - 1).
 *   direct_zero         cuDeviceGet(&d, 0).
 * Questions (healthy: the driver's answer in every mode, no "seedance: " line):
 *   ascending_probe     n = 0; while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;
 *   descending_probe    for (i = 7; i >= 0; i--) if (cuDeviceGet(&d, i) == 0) found++;
 *   from_one            for (i = 1; i < 8; i++) if (cuDeviceGet(&d, i) != 0) break;
 *   second_gpu          cuDeviceGet(&d, 0), then "is there a second GPU?" cuDeviceGet(&d, 1)
 *   (each asks cuDeviceGetCount only after its probe and prints whether the probe agrees)
 * Consistency:
 *   same_answer_threads thread A: cuDeviceGet(1), cuDeviceGetCount, cuDeviceGet(1) again,
 *                       cuDevicePrimaryCtxRetain of the handle it got (if any); then thread
 *                       B: cuDeviceGet(0), cuDeviceGet(1). Rule: one ordinal gets the same
 *                       answer (code and device) everywhere in the process.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../result_check.h"


/* A context on dev, a 1 MiB allocation, a memset and a read-back, then clean-up. */
static int small_work(CUdevice dev) {
  CUcontext ctx = NULL;
  CUdeviceptr p = 0;
  static unsigned char host[4096];
  CUresult r = create_ctx(&ctx, dev);
  printf("result: ctx create = %d\n", (int)r);
  if (r != CUDA_SUCCESS) return 1;
  r = cuMemAlloc(&p, 1 << 20);
  printf("result: mem alloc = %d\n", (int)r);
  int ok = 0;
  if (r == CUDA_SUCCESS) {
    if (cuMemsetD8(p, 0x5a, 1 << 20) == CUDA_SUCCESS &&
        cuMemcpyDtoH(host, p, sizeof host) == CUDA_SUCCESS) {
      ok = 1;
      for (size_t i = 0; i < sizeof host; i++)
        if (host[i] != 0x5a) ok = 0;
    }
    cuMemFree(p);
  }
  printf("result: work = %s\n", ok ? "ok" : "failed");
  cuCtxDestroy(ctx);
  return ok ? 0 : 1;
}

/* Prints the answer to cuDeviceGet(ordinal) as "code=C dev=D" (dev "-" on failure). */
static CUresult get_and_print(const char *label, int ordinal, CUdevice *out) {
  CUdevice d = -1;
  CUresult r = cuDeviceGet(&d, ordinal);
  if (r == CUDA_SUCCESS)
    printf("result: %s cuDeviceGet(%d): code=%d dev=%d\n", label, ordinal, (int)r, (int)d);
  else
    printf("result: %s cuDeviceGet(%d): code=%d dev=-\n", label, ordinal, (int)r);
  if (out) *out = d;
  return r;
}

/* The faulty request, then (when it succeeded) whether it is device 0 and a small workload. */
static int request_then_work(int ordinal) {
  CUdevice d = -1;
  CUresult r = get_and_print("request", ordinal, &d);
  if (r != CUDA_SUCCESS) {
    printf("result: work = skipped (no device)\n");
    return 0;
  }
  CUdevice d0 = -1;
  if (cuDeviceGet(&d0, 0) == CUDA_SUCCESS)
    printf("result: same device as ordinal 0 = %s\n", d0 == d ? "yes" : "no");
  return small_work(d);
}

static int count_or_die(void) {
  int n = -1;
  CUresult r = cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuDeviceGetCount failed: %d\n", (int)r);
    exit(2);
  }
  return n;
}

/* same_answer_threads */
static void *thread_a(void *arg) {
  (void)arg;
  CUdevice first = -1, again = -1;
  CUresult r1 = get_and_print("A first", 1, &first);
  int n = -1;
  CUresult rc = cuDeviceGetCount(&n);
  printf("result: A cuDeviceGetCount: code=%d n=%d\n", (int)rc, n);
  CUresult r2 = get_and_print("A after count", 1, &again);
  CUdevice handle = r2 == CUDA_SUCCESS ? again : (r1 == CUDA_SUCCESS ? first : -1);
  if (r1 == CUDA_SUCCESS || r2 == CUDA_SUCCESS) {
    CUcontext ctx = NULL;
    CUresult rr = cuDevicePrimaryCtxRetain(&ctx, handle);
    printf("result: A cuDevicePrimaryCtxRetain(handle): code=%d\n", (int)rr);
    if (rr == CUDA_SUCCESS) cuDevicePrimaryCtxRelease(handle);
  } else {
    printf("result: A cuDevicePrimaryCtxRetain(handle): skipped (no handle)\n");
  }
  return NULL;
}

static void *thread_b(void *arg) {
  (void)arg;
  get_and_print("B", 0, NULL);
  get_and_print("B", 1, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuInit failed: %d\n", (int)r);
    return 2;
  }
  CUdevice d = -1;

  if (!strcmp(c, "count_then_rank")) {
    int n = count_or_die();
    printf("result: count = %d\n", n);
    return request_then_work(n);
  }
  if (!strcmp(c, "cvd_count_then_one")) {
    int n = count_or_die();
    printf("result: count = %d\n", n);
    return request_then_work(1);
  }
  if (!strcmp(c, "direct_one")) return request_then_work(1);
  if (!strcmp(c, "count_then_last")) {
    int n = count_or_die();
    printf("result: count = %d\n", n);
    return request_then_work(n - 1);
  }
  if (!strcmp(c, "direct_zero")) return request_then_work(0);

  if (!strcmp(c, "ascending_probe")) {
    int n = 0;
    while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;
    int count = count_or_die();
    printf("result: probe = %d\n", n);
    printf("result: probe equals count = %s\n", n == count ? "yes" : "no");
    return 0;
  }
  if (!strcmp(c, "descending_probe")) {
    int found = 0;
    for (int i = 7; i >= 0; i--)
      if (cuDeviceGet(&d, i) == CUDA_SUCCESS) found++;
    int count = count_or_die();
    printf("result: found = %d\n", found);
    printf("result: found equals count = %s\n", found == (count < 8 ? count : 8) ? "yes" : "no");
    return 0;
  }
  if (!strcmp(c, "from_one")) {
    int highest = 0;
    for (int i = 1; i < 8; i++) {
      if (cuDeviceGet(&d, i) != CUDA_SUCCESS) break;
      highest = i;
    }
    int count = count_or_die();
    printf("result: highest = %d\n", highest);
    printf("result: highest equals count - 1 = %s\n",
           highest == (count < 8 ? count : 8) - 1 ? "yes" : "no");
    return 0;
  }
  if (!strcmp(c, "second_gpu")) {
    CUresult r0 = cuDeviceGet(&d, 0);
    CUresult r1 = cuDeviceGet(&d, 1);
    int count = count_or_die();
    printf("result: first gpu = %s\n", r0 == CUDA_SUCCESS ? "yes" : "no");
    printf("result: second gpu = %s\n", r1 == CUDA_SUCCESS ? "yes" : "no");
    printf("result: answer agrees with count = %s\n",
           (r1 == CUDA_SUCCESS) == (count >= 2) ? "yes" : "no");
    return 0;
  }
  if (!strcmp(c, "same_answer_threads")) {
    pthread_t a, b;
    if (pthread_create(&a, NULL, thread_a, NULL) != 0) return 2;
    pthread_join(a, NULL);
    fflush(stdout);
    if (pthread_create(&b, NULL, thread_b, NULL) != 0) return 2;
    pthread_join(b, NULL);
    return 0;
  }
  fprintf(stderr, "usage: %s count_then_rank|cvd_count_then_one|direct_one|count_then_last|"
                  "direct_zero|ascending_probe|descending_probe|from_one|second_gpu|"
                  "same_answer_threads\n", argv[0]);
  return 64;
}
