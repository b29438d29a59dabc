"""numba-cuda: a @cuda.jit kernel on device arrays, copies both ways, a pinned host buffer."""
import numpy as np

# numba-cuda registers an overload of np.row_stack when it first compiles a kernel
# (numba/cuda/np/arrayobj.py: `if numpy_version >= (2, 0): overload(np.row_stack)(...)`), and
# NumPy 2.5 removed that alias of np.vstack (deprecated since 2.0): every compile then fails with
# "AttributeError: module 'numpy' has no attribute 'row_stack'" (numba 0.68, numba-cuda 0.30,
# the GPU host's image), with or without the shim. The alias is put back before numba loads; the
# kernel never stacks arrays.
if not hasattr(np, "row_stack"):

    def row_stack(tup, *, dtype=None, casting="same_kind"):
        return np.vstack(tup, dtype=dtype, casting=casting)

    np.row_stack = row_stack

from numba import cuda  # noqa: E402 (after the alias above)


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
