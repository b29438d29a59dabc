/* Peer and cross-GPU copies with one pinned staging buffer shared by two GPUs' streams
 * (driver API; build: nvcc -o peer_copies peer_copies.c -lcuda). Run by
 * scripts/gpu/multi.sh (section 3):
 *
 *   peer_copies SCENARIO
 *
 * Setup: the primary contexts of devices 0 and 1 (peer access enabled both ways where
 * cuDeviceCanAccessPeer allows it), a non-blocking stream in each (s0 on device 0, s1 on
 * device 1), two 4 MiB pinned buffers P and Q (cuMemHostAlloc, CU_MEMHOSTALLOC_PORTABLE),
 * device buffers a0 (device 0), b1 and c1 (device 1), an event e0 of device 0. Every
 * scenario queues a 100 ms spin kernel on s0 first, so what follows it on s0 is really
 * pending when s1's copies are queued.
 *
 *   peer_event   s0: H2D P -> a0, cuMemcpyPeerAsync a0 -> b1, cuEventRecord(e0, s0);
 *                cuStreamWaitEvent(s1, e0); s1: D2H c1 -> P (the staging buffer reused),
 *                D2H b1 -> Q                                                       correct
 *   peer_sync    the same, ordered by cuStreamSynchronize(s0) instead of the wait  correct
 *   peer_racing  the same with no ordering: s1's D2H into P overwrites the bytes s0's
 *                pending H2D has yet to read, and b1 is read before the peer copy    racing
 *   stage_event  device 0 -> host -> device 1: s0: D2H a0 -> P, cuEventRecord(e0, s0);
 *                cuStreamWaitEvent(s1, e0); s1: H2D P -> b1                         correct
 *   stage_racing the same with no wait: s1's H2D reads P before s0's D2H wrote it    racing
 *
 * Output: "result: ..." lines, identical run to run (no addresses, no times):
 *   result: SCENARIO devices = N, peer access = yes|no
 *   result: SCENARIO s0 busy at the ordering point = yes|no
 *   peer_*:  result: SCENARIO device 0 copy intact = yes|no   (a0 got P's original bytes)
 *            result: SCENARIO peer copy reached device 1 = yes|no  (Q holds them)
 *            result: SCENARIO pinned holds the d2h = yes|no
 *   stage_*: result: SCENARIO device 1 got device 0's data = yes|no
 * Exit 0 once every call succeeded (whatever the data: the caller judges the lines), 1 when
 * a call failed ("result: CALL failed: CODE"), 2 on bad usage. With fewer than 2 devices it
 * prints "result: skipped: needs 2 devices" and exits 0.
 *
 * Built with -DMULTI_FAKE_DRIVER against the repository's fake driver (crates/fake-cuda) and a
 * cuda.h for local tests of scripts/gpu/multi.sh: the fake has no modules and no peer
 * copies, so the kernel is a handle the fake accepts and the peer copy is a cuMemcpyAsync.
 * (The fake runs a stream's work when it is synchronised: s1 is synchronised first, as a GPU
 * runs s1's copies while s0 still spins.)
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

static CUcontext ctx0, ctx1;
static CUstream s0, s1;
static CUevent e0;
static CUfunction spin;
static CUdeviceptr a0, b1, c1;
static uint32_t *P, *Q, *tmp;

static uint32_t pat(uint32_t i) { return i * 2654435761u + 7u; }

static void fill(uint32_t *buf, uint32_t word, int pattern) {
  for (uint32_t i = 0; i < WORDS; i++) buf[i] = pattern ? pat(i) : word;
}

static int holds(const uint32_t *buf, uint32_t word, int pattern) {
  for (uint32_t i = 0; i < WORDS; i++)
    if (buf[i] != (pattern ? pat(i) : word)) return 0;
  return 1;
}

/* Device buffer d (of context c) := word everywhere, or the pattern; synchronous. */
static void set_device(CUcontext c, CUdeviceptr d, uint32_t word, int pattern) {
  fill(tmp, word, pattern);
  CHECK(cuCtxSetCurrent(c));
  CHECK(cuMemcpyHtoD(d, tmp, BYTES));
}

/* Reads device buffer d (of context c) into tmp; synchronous. */
static void read_device(CUcontext c, CUdeviceptr d) {
  CHECK(cuCtxSetCurrent(c));
  CHECK(cuMemcpyDtoH(tmp, d, BYTES));
}

static void spin_s0(void) {
  unsigned long long ns = SPIN_NS;
  void *args[] = {&ns};
  CHECK(cuCtxSetCurrent(ctx0));
  CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s0, args, NULL));
}

static CUresult peer_copy(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                          size_t n, CUstream s) {
#ifdef MULTI_FAKE_DRIVER
  (void)dctx;
  (void)sctx;
  return cuMemcpyAsync(dst, src, n, s);
#else
  return cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s);
#endif
}

static const char *yesno(int b) { return b ? "yes" : "no"; }

static void setup(int *peer) {
  CUdevice d0, d1;
  CHECK(cuDeviceGet(&d0, 0));
  CHECK(cuDeviceGet(&d1, 1));
  CHECK(cuDevicePrimaryCtxRetain(&ctx0, d0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx1, d1));
  *peer = 0;
#ifndef MULTI_FAKE_DRIVER
  int can01 = 0, can10 = 0;
  CHECK(cuDeviceCanAccessPeer(&can01, d0, d1));
  CHECK(cuDeviceCanAccessPeer(&can10, d1, d0));
  if (can01 && can10) {
    CUresult r;
    CHECK(cuCtxSetCurrent(ctx0));
    r = cuCtxEnablePeerAccess(ctx1, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CHECK(r);
    CHECK(cuCtxSetCurrent(ctx1));
    r = cuCtxEnablePeerAccess(ctx0, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) CHECK(r);
    *peer = 1;
  }
  CUmodule mod;
  CHECK(cuCtxSetCurrent(ctx0));
  CHECK(cuModuleLoadData(&mod, SPIN_PTX));
  CHECK(cuModuleGetFunction(&spin, mod, "spin"));
#else
  spin = (CUfunction)0x1000;
#endif
  CHECK(cuCtxSetCurrent(ctx0));
  CHECK(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING));
  CHECK(cuMemAlloc(&a0, BYTES));
  CHECK(cuMemHostAlloc((void **)&P, BYTES, CU_MEMHOSTALLOC_PORTABLE));
  CHECK(cuMemHostAlloc((void **)&Q, BYTES, CU_MEMHOSTALLOC_PORTABLE));
  CHECK(cuCtxSetCurrent(ctx1));
  CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CHECK(cuMemAlloc(&b1, BYTES));
  CHECK(cuMemAlloc(&c1, BYTES));
  tmp = malloc(BYTES);
  if (!tmp) exit(1);
}

/* s0 still has work queued (the spin, and what follows it)? */
static int s0_busy(void) {
  CHECK(cuCtxSetCurrent(ctx0));
  CUresult r = cuStreamQuery(s0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) CHECK(r);
  return r == CUDA_ERROR_NOT_READY;
}

/* order: 0 none, 1 event wait, 2 stream synchronize */
static void peer(const char *name, int order) {
  fill(P, 0, 1);
  fill(Q, 0, 0);
  set_device(ctx1, c1, D2H_WORD, 0);
  set_device(ctx1, b1, 0x11111111u, 0);
  set_device(ctx0, a0, 0x22222222u, 0);
  spin_s0();
  CHECK(cuMemcpyHtoDAsync(a0, P, BYTES, s0));
  CHECK(peer_copy(b1, ctx1, a0, ctx0, BYTES, s0));
  CHECK(cuEventRecord(e0, s0));
  printf("result: %s s0 busy at the ordering point = %s\n", name, yesno(s0_busy()));
  if (order == 2) {
    CHECK(cuCtxSetCurrent(ctx0));
    CHECK(cuStreamSynchronize(s0));
  }
  CHECK(cuCtxSetCurrent(ctx1));
  if (order == 1) CHECK(cuStreamWaitEvent(s1, e0, 0));
  CHECK(cuMemcpyDtoHAsync(P, c1, BYTES, s1)); /* the staging buffer reused */
  CHECK(cuMemcpyDtoHAsync(Q, b1, BYTES, s1));
  CHECK(cuStreamSynchronize(s1));
  CHECK(cuCtxSetCurrent(ctx0));
  CHECK(cuStreamSynchronize(s0));
  read_device(ctx0, a0);
  printf("result: %s device 0 copy intact = %s\n", name, yesno(holds(tmp, 0, 1)));
  printf("result: %s peer copy reached device 1 = %s\n", name, yesno(holds(Q, 0, 1)));
  printf("result: %s pinned holds the d2h = %s\n", name, yesno(holds(P, D2H_WORD, 0)));
}

static void stage(const char *name, int wait) {
  set_device(ctx0, a0, 0, 1);
  set_device(ctx1, b1, 0, 0);
  fill(P, 0x33333333u, 0);
  spin_s0();
  CHECK(cuMemcpyDtoHAsync(P, a0, BYTES, s0));
  CHECK(cuEventRecord(e0, s0));
  printf("result: %s s0 busy at the ordering point = %s\n", name, yesno(s0_busy()));
  CHECK(cuCtxSetCurrent(ctx1));
  if (wait) CHECK(cuStreamWaitEvent(s1, e0, 0));
  CHECK(cuMemcpyHtoDAsync(b1, P, BYTES, s1));
  CHECK(cuStreamSynchronize(s1));
  CHECK(cuCtxSetCurrent(ctx0));
  CHECK(cuStreamSynchronize(s0));
  read_device(ctx1, b1);
  printf("result: %s device 1 got device 0's data = %s\n", name, yesno(holds(tmp, 0, 1)));
}

int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "";
  static const char *names[] = {"peer_event", "peer_sync", "peer_racing", "stage_event",
                                "stage_racing"};
  int which = -1;
  for (int i = 0; i < 5; i++)
    if (!strcmp(v, names[i])) which = i;
  if (which < 0) {
    fprintf(stderr, "usage: %s peer_event|peer_sync|peer_racing|stage_event|stage_racing\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK(cuInit(0));
  int n = 0;
  CHECK(cuDeviceGetCount(&n));
  if (n < 2) {
    printf("result: skipped: needs 2 devices (%d here)\n", n);
    return 0;
  }
  int peer_access;
  setup(&peer_access);
  printf("result: %s devices = %d, peer access = %s\n", v, n, yesno(peer_access));
  switch (which) {
  case 0: peer(v, 1); break;
  case 1: peer(v, 2); break;
  case 2: peer(v, 0); break;
  case 3: stage(v, 1); break;
  default: stage(v, 0); break;
  }
  CHECK(cuCtxSetCurrent(NULL));
  return 0;
}
