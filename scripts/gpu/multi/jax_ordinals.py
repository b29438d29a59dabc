#!/usr/bin/env python3
"""JAX device ordinals under CUDA_VISIBLE_DEVICES (run by scripts/gpu-multi.sh, section 5,
with CUDA_VISIBLE_DEVICES=1 or =1,0):

    python3 jax_ordinals.py visible    every device jax.devices() lists: a small computation
                                       on each (correct)
    python3 jax_ordinals.py allowed1   jax_cuda_visible_devices="1" set before first use: with
                                       CUDA_VISIBLE_DEVICES=1 a device index that does not
                                       exist (only index 0 is visible); with =1,0 correct

jax_platforms is "cuda" so that a failed GPU initialisation is an error, not a silent CPU
fallback. Prints "result: devices=N platform=P", per device "result: device I sum=S
expected=E", or "result: exception=<class>" (exit 1) when JAX raises.
"""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

variant = sys.argv[1] if len(sys.argv) > 1 else ""
if variant not in ("visible", "allowed1"):
    print(__doc__, file=sys.stderr)
    sys.exit(64)

import jax  # noqa: E402

try:
    jax.config.update("jax_platforms", "cuda")
    if variant == "allowed1":
        jax.config.update("jax_cuda_visible_devices", "1")
except Exception as e:  # an option this JAX does not have
    print(f"result: config unsupported={type(e).__name__}")
    print(f"config: {e}", file=sys.stderr)
    sys.exit(3)

try:
    import numpy as np

    devs = jax.devices()
    print(f"result: devices={len(devs)} platform={devs[0].platform}")
    host = np.arange(1 << 16, dtype=np.int32) % 97
    for i, d in enumerate(devs):
        x = jax.device_put(host, d)
        s = int(jax.device_get((x * 3 + 1).sum()))
        print(f"result: device {i} sum={s} expected={int((host * 3 + 1).sum())}")
except Exception as e:
    print(f"result: exception={type(e).__name__}")
    print(f"exception: {e}"[:2000], file=sys.stderr)
    sys.exit(1)
