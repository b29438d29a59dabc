#!/usr/bin/env python3
"""JAX asked for a device the host lacks (run by scripts/gpu/rules.sh, section B, and
scripts/gpu/multi.sh, section 5, under CUDA_VISIBLE_DEVICES=1 or =1,0).

    python3 jax_missing_device.py correct      jax_cuda_visible_devices = "0"
    python3 jax_missing_device.py faulty       jax_cuda_visible_devices = "0,1" (a missing
                                               second GPU on a 1-GPU host), set before first use
    python3 jax_missing_device.py faulty_env   nothing configured here; the runner sets
                                               CUDA_VISIBLE_DEVICES=0,1
    python3 jax_missing_device.py visible      nothing configured: every device the runner's
                                               CUDA_VISIBLE_DEVICES leaves (correct)
    python3 jax_missing_device.py allowed1     jax_cuda_visible_devices = "1": with
                                               CUDA_VISIBLE_DEVICES=1 an index that does not
                                               exist (only index 0 is visible); with =1,0 correct

jax_platforms is "cuda" so that a failed GPU initialisation is an error, not a silent CPU
fallback. Prints "result: devices=N platform=P" and one sum per device, or
"result: exception=<class>" (exit 1) when JAX raises.

Rule: with libseedance_fix.so in fix mode the program behaves no worse than without it: a
clean Python error or a working run, never SIGABRT (or any other signal). The correct
variant is healthy: same output, no "seedance: " line.
"""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

variant = sys.argv[1] if len(sys.argv) > 1 else "correct"
if variant not in ("correct", "faulty", "faulty_env", "visible", "allowed1"):
    print("usage: jax_missing_device.py correct|faulty|faulty_env|visible|allowed1", file=sys.stderr)
    sys.exit(64)

import jax  # noqa: E402

try:
    jax.config.update("jax_platforms", "cuda")
    if variant == "correct":
        jax.config.update("jax_cuda_visible_devices", "0")
    elif variant == "faulty":
        jax.config.update("jax_cuda_visible_devices", "0,1")
    elif variant == "allowed1":
        jax.config.update("jax_cuda_visible_devices", "1")
except Exception as e:  # an option this JAX does not have
    print(f"result: config unsupported={type(e).__name__}")
    print(f"config: {e}", file=sys.stderr)
    sys.exit(3)

try:
    import jax.numpy as jnp
    import numpy as np

    devs = jax.local_devices()
    print(f"result: devices={len(devs)} platform={devs[0].platform}")
    host = np.arange(4096, dtype=np.int32)
    for i, d in enumerate(devs):
        x = jax.device_put(host, d)
        s = int(jax.device_get((x * 3 + 1).sum()))
        print(f"result: device {i} sum={s} expected={int((host * 3 + 1).sum())}")
except Exception as e:
    print(f"result: exception={type(e).__name__}")
    print(f"exception: {e}"[:2000], file=sys.stderr)
    sys.exit(1)
