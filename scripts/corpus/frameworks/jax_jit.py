"""JAX with its defaults (XLA_PYTHON_CLIENT_PREALLOCATE unset: 75% of the GPU's memory taken at
start): a jit'd function on integer-valued floats (exact sums whatever the reduction order: every partial sum
stays below 2**24)."""
import jax
import jax.numpy as jnp


@jax.jit
def step(x, w):
    y = x @ w
    return jnp.where(y > 100, y, 2 * y).sum()


x = (jnp.arange(64 * 128, dtype=jnp.float32) % 5).reshape(64, 128)
w = (jnp.arange(128 * 32, dtype=jnp.float32) % 3).reshape(128, 32)
vals = [int(step(x + k, w)) for k in range(3)]
print(f"backend={jax.default_backend()} devices={len(jax.devices())} sums={vals}")
