"""numba-cuda: a @cuda.jit kernel on device arrays, copies both ways, a pinned host buffer."""
import numpy as np
from numba import cuda


@cuda.jit
def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


n = 1 << 16
x = np.arange(n, dtype=np.int64) % 9
y = np.arange(n, dtype=np.int64) % 4
dx, dy = cuda.to_device(x), cuda.to_device(y)
dout = cuda.device_array(n, dtype=np.int64)
axpy[(n + 255) // 256, 256](dout, 3, dx, dy)
pinned = cuda.pinned_array(n, dtype=np.int64)
dout.copy_to_host(pinned)
cuda.synchronize()
print(f"axpy_sum={int(pinned.sum())}")
