"""Compatibility matrix: JAX jit on the GPU (XLA reaches the driver on its own, not through
PyTorch). Preallocation off so the run does not reserve 75% of the GPU."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
import jax.numpy as jnp


@jax.jit
def f(x):
    return jnp.tanh(x @ x.T).sum(axis=0)


x = jax.random.normal(jax.random.PRNGKey(0), (1024, 1024), dtype=jnp.float32)
y = f(x).block_until_ready()
print(f"backend={jax.default_backend()} devices={len(jax.devices())}")
print(f"jit_sum={float(y.sum()):.1f}")
