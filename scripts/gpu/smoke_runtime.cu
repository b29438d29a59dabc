// GPU smoke test, path (b): an nvcc program using the runtime API. Built twice: with the
// default static cudart and with --cudart shared. Prints a checksum.
#include <cstdio>
#include <cuda_runtime.h>

#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            printf("%s failed: %s\n", #call, cudaGetErrorName(e_));                \
            return 1;                                                              \
        }                                                                          \
    } while (0)

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    const int n = 1 << 20;
    float *hx, *hy, *x, *y;
    CK(cudaSetDevice(0));
    CK(cudaMallocHost(&hx, n * sizeof(float)));
    CK(cudaMallocHost(&hy, n * sizeof(float)));
    for (int i = 0; i < n; i++) { hx[i] = (float)(i % 100); hy[i] = 1.0f; }
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 10; rep++) saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0;
    for (int i = 0; i < n; i++) sum += hy[i];
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFreeHost(hx));
    CK(cudaFreeHost(hy));
    printf("sum=%.1f\n", sum);
    return 0;
}
