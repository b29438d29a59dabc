/* Shared by the driver-API rule programs (the .c files of scripts/gpu/rules/ and
 * scripts/gpu/multi/), which report on stdout in "result: " lines that their scripts compare
 * between runs without and with the shim (scripts/gpu/lib/checks.sh).
 *
 * CHECK(call): a driver call that must succeed; on failure prints "result: CALL failed: CODE"
 * (the CUresult) on stdout and exits 1. (scripts/gpu/cu_check.h is the benchmarks' form, on
 * stderr.)
 * create_ctx(ctx, dev): cuCtxCreate in the form of the cuda.h it is built against (CUDA 13
 * added the parameters argument, NULL here).
 * SPIN_PTX: PTX of spin(.u64 ns), one thread waiting `ns` nanoseconds of the GPU's global
 * timer (%globaltimer), for cuModuleLoadData; a launch of it keeps a stream busy so that what
 * follows is really pending. */
#ifndef SEEDANCE_RESULT_CHECK_H
#define SEEDANCE_RESULT_CHECK_H
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                    \
  do {                                                                 \
    CUresult r_ = (call);                                              \
    if (r_ != CUDA_SUCCESS) {                                          \
      printf("result: %s failed: %d\n", #call, (int)r_);               \
      fflush(stdout);                                                  \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static inline CUresult create_ctx(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
  return cuCtxCreate(ctx, NULL, 0, dev);
#else
  return cuCtxCreate(ctx, 0, dev);
#endif
}

#define SPIN_PTX                                                             \
  ".version 7.0\n.target sm_50\n.address_size 64\n"                          \
  ".visible .entry spin(.param .u64 ns) {\n"                                 \
  "  .reg .u64 %n; .reg .u64 %t0; .reg .u64 %t1; .reg .u64 %d; .reg .pred %p;\n" \
  "  ld.param.u64 %n, [ns];\n"                                               \
  "  mov.u64 %t0, %globaltimer;\n"                                           \
  "LOOP:\n"                                                                  \
  "  mov.u64 %t1, %globaltimer;\n"                                           \
  "  sub.u64 %d, %t1, %t0;\n"                                                \
  "  setp.lt.u64 %p, %d, %n;\n"                                              \
  "  @%p bra LOOP;\n"                                                        \
  "  ret;\n"                                                                 \
  "}\n"
#endif
