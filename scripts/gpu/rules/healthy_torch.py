#!/usr/bin/env python3
"""A small, correct PyTorch workload (run by scripts/gpu/rules.sh): a matmul, copies
(pageable and pinned host-to-device, device-to-device, device-to-host) and a reduction, on
small integer-valued data so that every result is exact. Prints "result: checksum=...
expected=... match=..." (expected computed on the host with integers).

Rule: healthy: same output and exit code with libseedance_fix.so (observe, fix) as without,
no "seedance: " line, no host_hazard/device_fault record, and the traces show no problem
about cuGetProcAddress above info level (seedance-analyze summary has no [error] or
[warning] line naming cuGetProcAddress).
"""
import sys

import numpy as np
import torch

n = 256
i = np.arange(n, dtype=np.int64)
a_np = (i[:, None] * 7 + i[None, :] * 3) % 7
b_np = (i[:, None] * 5 + i[None, :] * 11 + 1) % 5
c_np = a_np @ b_np
v_np = np.arange(1 << 19, dtype=np.int64) % 1009
expected = int(c_np.sum()) + 3 * int(v_np.sum())

dev = torch.device("cuda")
a = torch.from_numpy(a_np.astype(np.float32)).to(dev)  # pageable H2D
b = torch.from_numpy(b_np.astype(np.float32)).pin_memory().to(dev, non_blocking=True)
c = a @ b
pin = torch.from_numpy(v_np.astype(np.float32)).pin_memory()
v = pin.to(dev, non_blocking=True)
w = v.clone()  # D2D
w.mul_(3)
back = torch.empty_like(w, device="cpu").pin_memory()
back.copy_(w, non_blocking=True)  # D2H into pinned memory
torch.cuda.synchronize()
got = int(c.to(torch.int64).sum().item()) + int(back.to(torch.int64).sum().item())
print(f"result: devices={torch.cuda.device_count()}")
print(f"result: checksum={got} expected={expected} match={got == expected}")
sys.exit(0 if got == expected else 1)
