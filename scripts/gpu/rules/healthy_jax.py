#!/usr/bin/env python3
"""A small, correct JAX workload (run by scripts/gpu/rules.sh): a matmul, host-to-device
and device-to-host copies, a device-to-device copy and a reduction on small integer-valued
data (exact even with TF32). Prints "result: checksum=... expected=... match=...".

Rule: healthy: same output and exit code with libseedance_fix.so (observe, fix) as without,
no "seedance: " line, no host_hazard/device_fault record, and no [error]/[warning] line
about cuGetProcAddress in seedance-analyze summary of its traces.
"""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_platforms", "cuda")
import jax.numpy as jnp  # noqa: E402

n = 256
i = np.arange(n, dtype=np.int64)
a_np = (i[:, None] * 7 + i[None, :] * 3) % 7
b_np = (i[:, None] * 5 + i[None, :] * 11 + 1) % 5
c_np = a_np @ b_np
v_np = np.arange(1 << 19, dtype=np.int64) % 1009
expected = int(c_np.sum()) + 3 * int(v_np.sum())

d = jax.devices()[0]
a = jax.device_put(a_np.astype(np.float32), d)
b = jax.device_put(b_np.astype(np.float32), d)
c = jnp.dot(a, b)
csum = int(np.asarray(c).astype(np.int64).sum())
v = jax.device_put(v_np.astype(np.int32), d)
w = jnp.array(v, copy=True) * 3
wsum = int(jax.device_get(w.sum()))
got = csum + wsum
print(f"result: devices={len(jax.devices())} platform={d.platform}")
print(f"result: checksum={got} expected={expected} match={got == expected}")
sys.exit(0 if got == expected else 1)
