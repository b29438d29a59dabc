// Launch throughput: N empty-kernel launches through the runtime (cudaLaunchKernel ->
// cuLaunchKernel via the runtime's cuGetProcAddress table), then one synchronize. Prints
// launches per second. Usage: launch_rate [N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty() {}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    for (int i = 0; i < 1000; i++) empty<<<1, 32>>>();  // warm-up
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++) empty<<<1, 32>>>();
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("%.0f\n", n / s);
    return 0;
}
