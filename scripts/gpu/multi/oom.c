/* Out of memory on device 0 while another process holds it (driver API; build: nvcc -o oom
 * oom.c -lcuda). Run by scripts/gpu/multi.sh (section 2):
 *
 *   oom hold LEAVE_MIB READY_FIFO RELEASE_FIFO
 *       The holder: device 0's primary context, then allocations (1 GiB each, then one
 *       remainder) until about LEAVE_MIB MiB are free on device 0 (cuMemGetInfo). Writes one
 *       line "ready pid=P free=F total=T held=H" (bytes) to READY_FIFO, then blocks reading
 *       RELEASE_FIFO until a line arrives (or end of file), frees everything and exits 0.
 *       If the allocations fail it still writes the line (with what it holds) and waits.
 *   oom alloc MIB
 *       The second process: device 0 (its default device), its primary context, then one
 *       cuMemAlloc of MIB MiB. Prints "result: cuMemAlloc(MIB MiB) on device 0: code=C" and
 *       exits 0 whatever the code (the caller compares it with the run without the shim).
 *
 * Exit 2 on bad usage or when a setup call fails ("setup: CALL -> CODE" on stderr).
 * Builds unchanged against the repository's fake driver (crates/fake-cuda) for local tests.
 */
#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

#define SETUP(call)                                                      \
  do {                                                                   \
    CUresult r_ = (call);                                                \
    if (r_ != CUDA_SUCCESS) {                                            \
      fprintf(stderr, "setup: %s -> %d\n", #call, (int)r_);              \
      exit(2);                                                           \
    }                                                                    \
  } while (0)

static CUcontext device0(void) {
  CUdevice d;
  CUcontext c;
  SETUP(cuInit(0));
  SETUP(cuDeviceGet(&d, 0));
  SETUP(cuDevicePrimaryCtxRetain(&c, d));
  SETUP(cuCtxSetCurrent(c));
  return c;
}

static int hold(size_t leave, const char *ready, const char *release) {
  static CUdeviceptr blocks[4096];
  int nblocks = 0;
  size_t held = 0, free_b = 0, total = 0;
  device0();
  SETUP(cuMemGetInfo(&free_b, &total));
  while (free_b > leave + GIB && nblocks < 4095) {
    if (cuMemAlloc(&blocks[nblocks], GIB) != CUDA_SUCCESS) break;
    nblocks++;
    held += GIB;
    SETUP(cuMemGetInfo(&free_b, &total));
  }
  if (free_b > leave + 2 * MIB) {
    size_t rest = (free_b - leave) & ~(2 * MIB - 1);
    if (cuMemAlloc(&blocks[nblocks], rest) == CUDA_SUCCESS) {
      nblocks++;
      held += rest;
    }
  }
  SETUP(cuMemGetInfo(&free_b, &total));
  FILE *f = fopen(ready, "w");
  if (!f) {
    fprintf(stderr, "open %s: %s\n", ready, strerror(errno));
    return 2;
  }
  fprintf(f, "ready pid=%d free=%zu total=%zu held=%zu\n", (int)getpid(), free_b, total, held);
  fclose(f);
  char line[64];
  FILE *g = fopen(release, "r");
  if (g) {
    if (!fgets(line, sizeof line, g)) line[0] = 0;
    fclose(g);
  }
  for (int i = 0; i < nblocks; i++) cuMemFree(blocks[i]);
  printf("released %zu bytes\n", held);
  return 0;
}

static int alloc(size_t mib) {
  CUdeviceptr p = 0;
  device0();
  CUresult r = cuMemAlloc(&p, mib * MIB);
  printf("result: cuMemAlloc(%zu MiB) on device 0: code=%d\n", mib, (int)r);
  if (r == CUDA_SUCCESS) cuMemFree(p);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 5 && !strcmp(argv[1], "hold"))
    return hold((size_t)strtoull(argv[2], NULL, 10) * MIB, argv[3], argv[4]);
  if (argc == 3 && !strcmp(argv[1], "alloc")) return alloc((size_t)strtoull(argv[2], NULL, 10));
  fprintf(stderr, "usage: %s hold LEAVE_MIB READY_FIFO RELEASE_FIFO | alloc MIB\n", argv[0]);
  return 2;
}
