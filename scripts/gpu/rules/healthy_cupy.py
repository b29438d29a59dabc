#!/usr/bin/env python3
"""A small, correct CuPy workload (run by scripts/gpu/rules.sh): a cuBLAS matmul, copies
(pageable and pinned host-to-device on a stream, device-to-device, device-to-host) and a
reduction on small integer-valued data. Prints "result: checksum=... expected=...
match=...".

Rule: healthy: same output and exit code with libseedance_fix.so (observe, fix) as without,
no "seedance: " line, no host_hazard/device_fault record, and no [error]/[warning] line
about cuGetProcAddress in seedance-analyze summary of its traces.
"""
import ctypes
import sys

import cupy
import cupyx
import numpy as np

n = 256
i = np.arange(n, dtype=np.int64)
a_np = (i[:, None] * 7 + i[None, :] * 3) % 7
b_np = (i[:, None] * 5 + i[None, :] * 11 + 1) % 5
c_np = a_np @ b_np
v_np = np.arange(1 << 19, dtype=np.int64) % 1009
expected = int(c_np.sum()) + 3 * int(v_np.sum())

a = cupy.asarray(a_np.astype(np.float32))  # pageable H2D
b = cupy.asarray(b_np.astype(np.float32))
c = a @ b
s = cupy.cuda.Stream(non_blocking=True)
pin = cupyx.empty_pinned(v_np.shape, dtype=np.float32)
pin[:] = v_np
v = cupy.empty(v_np.shape, dtype=cupy.float32)
v.data.copy_from_host_async(pin.ctypes.data_as(ctypes.c_void_p), pin.nbytes, stream=s)
s.synchronize()
w = v.copy()  # D2D
w *= 3
back = cupyx.empty_pinned(v_np.shape, dtype=np.float32)
cupy.cuda.get_current_stream().synchronize()  # w was made on the current stream; s does not wait for it
w.data.copy_to_host_async(back.ctypes.data_as(ctypes.c_void_p), back.nbytes, stream=s)
s.synchronize()
got = int(c.astype(cupy.int64).sum()) + int(back.astype(np.int64).sum())
print(f"result: devices={cupy.cuda.runtime.getDeviceCount()}")
print(f"result: checksum={got} expected={expected} match={got == expected}")
sys.exit(0 if got == expected else 1)
