# JAX preallocates 75% of the GPU's memory at its first array; PyTorch then allocates 1 GiB
# blocks until the device is out of memory. Exits 0 after the OutOfMemoryError.
import jax.numpy as jnp
import torch

x = jnp.ones(16)
x.block_until_ready()
blocks = []
try:
    while True:
        blocks.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    print(f"torch out of memory after {len(blocks)} GiB")
