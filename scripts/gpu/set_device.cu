// cudaSetDevice(N) for N on the command line, then real work on that device. Prints the
// runtime's answer and the PCI bus id of the device that did the work. Built with static and
// with shared cudart by scripts/gpu/devices.sh.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void inc(int *p) { atomicAdd(p, 1); }

int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 0;
    cudaError_t e = cudaSetDevice(want);
    printf("cudaSetDevice(%d) -> %s\n", want, cudaGetErrorName(e));
    if (e != cudaSuccess) return 1;
    int *d, h = 0, dev = -1;
    char bus[32] = "?";
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    cudaMemset(d, 0, sizeof(int));
    inc<<<4, 64>>>(d);
    cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaGetDevice(&dev);
    cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
    printf("work=%d runtime device=%d bus=%s\n", h, dev, bus);
    return h == 256 ? 0 : 1;
}
