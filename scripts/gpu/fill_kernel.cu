// Kernel for smoke_driver.c, compiled to a cubin on the GPU machine.
extern "C" __global__ void fill(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * i + 1;
}
