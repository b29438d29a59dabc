// simpleStreams' ordering on a real GPU (CUDA runtime; build: nvcc -O2 -o legacy_streams
// legacy_streams.cu). Run by scripts/gpu/rules/legacy_streams.sh:
//
//   legacy_streams correct   two streams made with cudaStreamCreate (blocking, as
//                            simpleStreams): a 200 ms kernel then a 1 MiB copy into a
//                            pinned buffer on stream A, an event recorded on stream 0 and
//                            synchronised, then a copy into the buffer's first quarter on
//                            stream B. The event waits for A (CUDA programming guide,
//                            "Default Stream"), so B's bytes land last.
//   legacy_streams faulty    the same with cudaStreamNonBlocking streams: the event on
//                            stream 0 does not wait for A, B's copy runs first and A's
//                            bytes land over it.
//
// Output: "result: " lines: whether the event waited for stream A (host time >= 150 ms)
// and whether the buffer holds B's bytes in its first quarter and A's elsewhere ("as
// ordered"). Exit 0 when every call succeeded (whatever the verdict), 1 when one failed,
// 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      printf("result: %s failed: %d\n", #call, (int)e_);                         \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

static __device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(unsigned long long ns) {
  unsigned long long start = globaltimer();
  while (globaltimer() - start < ns) {
  }
}

int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "";
  bool faulty = !strcmp(v, "faulty");
  if (!faulty && strcmp(v, "correct")) {
    fprintf(stderr, "usage: %s correct|faulty\n", argv[0]);
    return 2;
  }
  const size_t n = 256 * 1024, part = n / 4;  // ints: 1 MiB, B's quarter 256 KiB
  cudaStream_t a, b;
  if (faulty) {
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  } else {
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreate(&b));
  }
  int *h = nullptr, *da = nullptr, *db = nullptr;
  CHECK(cudaHostAlloc((void **)&h, n * sizeof(int), 0));
  memset(h, 0x11, n * sizeof(int));
  CHECK(cudaMalloc((void **)&da, n * sizeof(int)));
  CHECK(cudaMalloc((void **)&db, n * sizeof(int)));
  CHECK(cudaMemset(da, 0x33, n * sizeof(int)));
  CHECK(cudaMemset(db, 0x22, n * sizeof(int)));
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t stop;
  CHECK(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));

  spin<<<1, 1, 0, a>>>(200ull * 1000 * 1000);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpyAsync(h, da, n * sizeof(int), cudaMemcpyDeviceToHost, a));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cudaEventRecord(stop, 0));  // stream 0: simpleStreams' "ensure that all previous
  CHECK(cudaEventSynchronize(stop));  // CUDA calls have completed"
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(cudaMemcpyAsync(h, db, part * sizeof(int), cudaMemcpyDeviceToHost, b));
  CHECK(cudaDeviceSynchronize());

  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += h[i] != (i < part ? 0x22222222 : 0x33333333);
  printf("result: event on stream 0 waited for stream A = %s\n", ms >= 150.0 ? "yes" : "no");
  if (bad == 0)
    printf("result: host buffer = as ordered\n");
  else
    printf("result: host buffer = out of order\n");
  fprintf(stderr, "event wait %.1f ms, %zu of %zu ints out of order\n", ms, bad, n);
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(a));
  CHECK(cudaStreamDestroy(b));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  return 0;
}
