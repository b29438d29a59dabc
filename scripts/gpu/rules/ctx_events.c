/* Context-wide events and green contexts around pinned copies (driver API, CUDA 12.5+ for
 * cuCtxRecordEvent / cuCtxWaitEvent, 12.4+ for green contexts; build: nvcc -o ctx_events
 * ctx_events.c -lcuda). Run by scripts/gpu/rules.sh (section H):
 *
 *   ctx_events SCENARIO
 *
 * Every scenario: a 4 MiB pinned buffer (cuMemHostAlloc) holding a pattern is copied up
 * (H2D, cuMemcpyHtoDAsync) on stream A behind a 100 ms spin kernel, so the copy is really
 * pending; then a device buffer holding 0xdeadbeef is copied down (D2H, cuMemcpyDtoHAsync)
 * into the same pinned bytes on stream B. What comes between the two decides the scenario:
 *
 *   ctx_record          cuCtxRecordEvent(primary, e) + cuEventSynchronize(e)        correct
 *   ctx_wait            cuEventRecord(e, A) + cuCtxWaitEvent(primary, e)            correct
 *   ctx_record_stream_wait  cuCtxRecordEvent(primary, e) + cuStreamWaitEvent(B, e)  correct
 *   green_record        A, B from cuGreenCtxStreamCreate; cuGreenCtxRecordEvent(g, e)
 *                       + cuEventSynchronize(e)                                     correct
 *   green_wait          green streams; cuEventRecord(e, A) + cuGreenCtxWaitEvent(g, e) correct
 *   green_ctx_record    green streams; cuCtxRecordEvent(cuCtxFromGreenCtx(g), e)
 *                       + cuEventSynchronize(e)                                     correct
 *   green_primary_record green streams; cuCtxRecordEvent(primary, e) + cuEventSynchronize(e)
 *                       (a primary context's event captures its green contexts' work) correct
 *   green_primary_wait  green streams; cuEventRecord(e, A) + cuCtxWaitEvent(primary, e)
 *                       (the primary context's green contexts wait too)             correct
 *   faulty              nothing: the D2H overwrites the pinned bytes the pending H2D
 *                       has yet to read (a race)                                    faulty
 *   green_faulty        the same on green-context streams                           faulty
 *   ctx_record_early    cuCtxRecordEvent(primary, e) + cuEventSynchronize(e) BEFORE the H2D
 *                       was queued: the event covers nothing of it (still a race)   faulty
 *
 * The green scenarios make the green context current (cuCtxFromGreenCtx + cuCtxPushCurrent)
 * and load the kernel, allocate and create their events there. Where green contexts are not
 * available (no resource API on the device, creation refused) they print
 * "result: skipped: ..." and exit 0.
 *
 * Output: "result: ..." lines, identical run to run (no addresses, no times):
 *   result: SCENARIO h2d pending at the ordering call = yes|no   (correct scenarios)
 *   result: SCENARIO device checksum = X expected = Y
 *   result: SCENARIO device copy intact = yes|no     (the H2D carried the original bytes)
 *   result: SCENARIO pinned holds the d2h = yes|no
 * Exit 0 once every call succeeded (whatever the data: the caller judges the lines), 1 when a
 * call failed ("result: CALL failed: CODE"), 2 on bad usage or no device.
 *
 * Rule checked ("unknown means silent"): the correct scenarios print the same lines as
 * without the shim, with no "seedance: " line and no hazard record, in observe and fix; the
 * faulty one is reported in observe ("seedance: " line naming the copy) with the same exit
 * status and lines as without the shim. Written from the shim's description only.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../result_check.h"

#define WORDS (1024u * 1024u) /* 4 MiB of uint32_t */
#define BYTES ((size_t)WORDS * sizeof(uint32_t))
#define SPIN_NS 100000000ull /* 100 ms */
#define D2H_WORD 0xdeadbeefu



enum order {
  CTX_RECORD,     /* cuCtxRecordEvent(ctx) + cuEventSynchronize */
  CTX_WAIT,       /* cuEventRecord(A) + cuCtxWaitEvent(ctx) */
  CTX_RECORD_SW,  /* cuCtxRecordEvent(ctx) + cuStreamWaitEvent(B) */
  GREEN_RECORD,   /* cuGreenCtxRecordEvent(g) + cuEventSynchronize */
  GREEN_WAIT,     /* cuEventRecord(A) + cuGreenCtxWaitEvent(g) */
  NONE,           /* the race */
  EARLY_RECORD,   /* cuCtxRecordEvent + sync before the H2D was queued */
};

struct scenario {
  const char *name;
  int green;        /* streams from the green context */
  enum order order;
  int record_ctx;   /* CTX_*: 0 primary context, 1 the green context's CUcontext */
  int correct;
};

static const struct scenario scenarios[] = {
    {"ctx_record", 0, CTX_RECORD, 0, 1},
    {"ctx_wait", 0, CTX_WAIT, 0, 1},
    {"ctx_record_stream_wait", 0, CTX_RECORD_SW, 0, 1},
    {"green_record", 1, GREEN_RECORD, 0, 1},
    {"green_wait", 1, GREEN_WAIT, 0, 1},
    {"green_ctx_record", 1, CTX_RECORD, 1, 1},
    {"green_primary_record", 1, CTX_RECORD, 0, 1},
    {"green_primary_wait", 1, CTX_WAIT, 0, 1},
    {"faulty", 0, NONE, 0, 0},
    {"green_faulty", 1, NONE, 0, 0},
    {"ctx_record_early", 0, EARLY_RECORD, 0, 0},
};
#define NSCEN (sizeof(scenarios) / sizeof(scenarios[0]))

static CUcontext primary;

static int uses_ctx_events(const struct scenario *sc) {
  return sc->order == CTX_RECORD || sc->order == CTX_WAIT || sc->order == CTX_RECORD_SW ||
         sc->order == EARLY_RECORD;
}

/* An event of context `ctx` (made current for the call, then the previous one again). */
static CUevent event_in(CUcontext ctx) {
  CUevent e;
  CUcontext popped;
  CHECK(cuCtxPushCurrent(ctx));
  CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CHECK(cuCtxPopCurrent(&popped));
  return e;
}

#if CUDA_VERSION >= 12040
/* A green context on part of the device's SMs (all of them if the split is refused);
 * 0 on success, else prints "result: skipped: ..." and returns 1. */
static int make_green(CUdevice dev, CUgreenCtx *g) {
  CUdevResource sm, part, rest;
  CUdevResourceDesc desc;
  CUresult r = cuDeviceGetDevResource(dev, &sm, CU_DEV_RESOURCE_TYPE_SM);
  if (r != CUDA_SUCCESS) {
    printf("result: skipped: cuDeviceGetDevResource(SM) -> %d (no green contexts here)\n", (int)r);
    return 1;
  }
  unsigned int groups = 1;
  CUdevResource *use = &sm;
  r = cuDevSmResourceSplitByCount(&part, &groups, &sm, &rest, 0, 16);
  if (r == CUDA_SUCCESS && groups == 1) use = &part;
  printf("result: green context on a split of the SMs = %s\n", use == &part ? "yes" : "no");
  r = cuDevResourceGenerateDesc(&desc, use, 1);
  if (r != CUDA_SUCCESS) {
    printf("result: skipped: cuDevResourceGenerateDesc -> %d\n", (int)r);
    return 1;
  }
  r = cuGreenCtxCreate(g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
  if (r != CUDA_SUCCESS) {
    printf("result: skipped: cuGreenCtxCreate -> %d\n", (int)r);
    return 1;
  }
  return 0;
}
#endif

static int run(const struct scenario *sc, CUdevice dev) {
  CUgreenCtx green = NULL;
  CUcontext gctx = NULL, work_ctx = primary, popped;
  CUstream a, b;
  if (sc->green) {
#if CUDA_VERSION >= 12040
    if (make_green(dev, &green)) return 0;
    CHECK(cuCtxFromGreenCtx(&gctx, green));
    CHECK(cuCtxPushCurrent(gctx));
    work_ctx = gctx;
    CHECK(cuGreenCtxStreamCreate(&a, green, CU_STREAM_NON_BLOCKING, 0));
    CHECK(cuGreenCtxStreamCreate(&b, green, CU_STREAM_NON_BLOCKING, 0));
#else
    (void)dev;
    printf("result: skipped: built against CUDA %d, green contexts need 12.4\n", CUDA_VERSION);
    return 0;
#endif
  } else {
    CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  }
  CUmodule mod;
  CUfunction spin;
  CHECK(cuModuleLoadData(&mod, SPIN_PTX));
  CHECK(cuModuleGetFunction(&spin, mod, "spin"));

  uint32_t *pin = NULL;
  CHECK(cuMemHostAlloc((void **)&pin, BYTES, 0));
  uint32_t *orig = malloc(BYTES), *back = malloc(BYTES);
  if (!orig || !back) {
    printf("result: out of host memory\n");
    return 1;
  }
  for (uint32_t i = 0; i < WORDS; i++) orig[i] = pin[i] = (i * 2654435761u) ^ 0x5eed5eedu;
  CUdeviceptr dev_a, dev_b;
  CHECK(cuMemAlloc(&dev_a, BYTES));
  CHECK(cuMemAlloc(&dev_b, BYTES));
  CHECK(cuMemsetD32(dev_a, 0, WORDS));
  CHECK(cuMemsetD32(dev_b, D2H_WORD, WORDS));
  CHECK(cuCtxSynchronize());

  /* Events: a context-wide record needs an event of that context; the green-context calls
   * and stream records take one of the context the streams belong to. */
  CUcontext record_in = work_ctx;
  if (sc->order == CTX_RECORD || sc->order == CTX_RECORD_SW || sc->order == EARLY_RECORD)
    record_in = sc->record_ctx ? gctx : primary;
  CUevent e = event_in(record_in);

  unsigned long long ns = SPIN_NS;
  void *args[] = {&ns};
  if (sc->order == EARLY_RECORD) {
#if CUDA_VERSION >= 12050
    CHECK(cuCtxRecordEvent(primary, e)); /* before anything of the copy is queued */
    CHECK(cuEventSynchronize(e));
#endif
  }
  CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
  CHECK(cuMemcpyHtoDAsync(dev_a, pin, BYTES, a)); /* pending behind the spin */
  if (sc->correct) {
    CUresult q = cuStreamQuery(a);
    printf("result: %s h2d pending at the ordering call = %s\n", sc->name,
           q == CUDA_ERROR_NOT_READY ? "yes" : "no");
  }

  switch (sc->order) {
#if CUDA_VERSION >= 12050
    case CTX_RECORD:
      CHECK(cuCtxRecordEvent(sc->record_ctx ? gctx : primary, e));
      CHECK(cuEventSynchronize(e));
      break;
    case CTX_WAIT:
      CHECK(cuEventRecord(e, a));
      CHECK(cuCtxWaitEvent(primary, e));
      break;
    case CTX_RECORD_SW:
      CHECK(cuCtxRecordEvent(primary, e));
      CHECK(cuStreamWaitEvent(b, e, 0));
      break;
#endif
#if CUDA_VERSION >= 12040
    case GREEN_RECORD:
      CHECK(cuGreenCtxRecordEvent(green, e));
      CHECK(cuEventSynchronize(e));
      break;
    case GREEN_WAIT:
      CHECK(cuEventRecord(e, a));
      CHECK(cuGreenCtxWaitEvent(green, e));
      break;
#endif
    default:
      break; /* NONE, EARLY_RECORD: no ordering between the copies */
  }

  CHECK(cuMemcpyDtoHAsync(pin, dev_b, BYTES, b)); /* into the same pinned bytes */
  CHECK(cuStreamSynchronize(b));
  CHECK(cuStreamSynchronize(a));
  CHECK(cuCtxSynchronize());

  CHECK(cuMemcpyDtoH(back, dev_a, BYTES)); /* what the H2D delivered, into pageable memory */
  uint64_t got = 0, want = 0;
  int d2h = 1;
  for (uint32_t i = 0; i < WORDS; i++) {
    got += (uint64_t)back[i] * (i | 1u);
    want += (uint64_t)orig[i] * (i | 1u);
    if (pin[i] != D2H_WORD) d2h = 0;
  }
  int intact = memcmp(back, orig, BYTES) == 0;
  printf("result: %s device checksum = %llu expected = %llu\n", sc->name,
         (unsigned long long)got, (unsigned long long)want);
  printf("result: %s device copy intact = %s\n", sc->name, intact ? "yes" : "no");
  printf("result: %s pinned holds the d2h = %s\n", sc->name, d2h ? "yes" : "no");
  fflush(stdout);

  CHECK(cuEventDestroy(e));
  CHECK(cuMemFree(dev_a));
  CHECK(cuMemFree(dev_b));
  CHECK(cuMemFreeHost(pin));
  CHECK(cuModuleUnload(mod));
  CHECK(cuStreamDestroy(a));
  CHECK(cuStreamDestroy(b));
  free(orig);
  free(back);
  if (sc->green) {
#if CUDA_VERSION >= 12040
    CHECK(cuCtxPopCurrent(&popped));
    CHECK(cuGreenCtxDestroy(green));
#endif
  }
  (void)popped;
  return 0;
}

int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "";
  const struct scenario *sc = NULL;
  for (size_t i = 0; i < NSCEN; i++)
    if (!strcmp(v, scenarios[i].name)) sc = &scenarios[i];
  if (!sc) {
    fprintf(stderr, "usage: %s SCENARIO; scenarios:", argv[0]);
    for (size_t i = 0; i < NSCEN; i++) fprintf(stderr, " %s", scenarios[i].name);
    fprintf(stderr, "\n");
    return 2;
  }
  CHECK(cuInit(0));
  int n = 0, drv = 0;
  CHECK(cuDeviceGetCount(&n));
  CHECK(cuDriverGetVersion(&drv));
  if (n < 1) {
    printf("result: no device\n");
    return 2;
  }
  int need = sc->green ? 12040 : 0;
  if (uses_ctx_events(sc)) need = 12050;
  if (drv < need || CUDA_VERSION < need) {
    printf("result: skipped: driver %d, headers %d; %s needs %d\n", drv, CUDA_VERSION, sc->name,
           need);
    return 0;
  }
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
  CHECK(cuCtxSetCurrent(primary));
  int rc = run(sc, dev);
  CHECK(cuCtxSetCurrent(NULL));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return rc;
}
