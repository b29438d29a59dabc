"""GPU smoke test: CuPy elementwise work and a RawKernel."""
import cupy as cp

x = cp.arange(1 << 20, dtype=cp.float32)
print(f"sum={float((x * 2).sum()):.1f}")
k = cp.RawKernel(r'''
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}''', "twice")
y = cp.empty_like(x)
k(((x.size + 255) // 256,), (256,), (x, y, cp.int32(x.size)))
print(f"raw={float(y.sum()):.1f}")
