"""CuPy with its default device memory pool and a pinned memory pool: allocations of many sizes
freed back to the pools, pinned staging copies on a stream, an elementwise kernel and a RawKernel."""
import cupy as cp
import numpy as np

cp.cuda.set_pinned_memory_allocator(cp.cuda.PinnedMemoryPool().malloc)
pool = cp.get_default_memory_pool()
total = 0
for k in range(1, 40):
    a = cp.arange(k * 10000, dtype=cp.int64) % 13
    total += int(a.sum())
    del a
stream = cp.cuda.Stream(non_blocking=True)
host = cp.cuda.alloc_pinned_memory(1 << 22)
src = np.frombuffer(host, dtype=np.int32, count=1 << 20)
src[:] = np.arange(1 << 20, dtype=np.int32) % 97
with stream:
    d = cp.empty(1 << 20, dtype=cp.int32)
    d.set(src, stream=stream)
    d *= 3
    out = d.get(stream=stream)
stream.synchronize()
kern = cp.RawKernel(r'''
extern "C" __global__ void inc(int* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
''', "inc")
e = cp.zeros(4096, dtype=cp.int32)
kern((16,), (256,), (e, cp.int32(4096)))
print(f"pool_sum={total} staged_sum={int(out.astype(np.int64).sum())} raw_sum={int(e.sum())} pool_used_after_free={pool.used_bytes() >= 0}")
