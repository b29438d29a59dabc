#!/usr/bin/env python3
"""PyTorch device ordinals under CUDA_VISIBLE_DEVICES (run by scripts/gpu/multi.sh,
section 5, with CUDA_VISIBLE_DEVICES=1 or =1,0):

    python3 torch_ordinals.py visible    torch.cuda.device_count(), then a small computation
                                         on every visible device cuda:0 .. cuda:N-1 (correct)
    python3 torch_ordinals.py cuda1      torch.ones(..., device="cuda:1"): correct with two
                                         devices visible; with CUDA_VISIBLE_DEVICES=1 the
                                         mistake (only cuda:0 exists)

Prints "result: count=N", per device "result: cuda:I sum=S expected=E" and its PCI bus id
("result: cuda:I bus=..."), or "result: cuda1 sum=S expected=E" and, not as a result, the
device PyTorch reports for the tensor ("device: ..."); or "result: exception=<class>" (exit
1, the message on stderr) when PyTorch raises.
"""
import sys

import torch

variant = sys.argv[1] if len(sys.argv) > 1 else ""
if variant not in ("visible", "cuda1"):
    print(__doc__, file=sys.stderr)
    sys.exit(64)

N = 1 << 21
try:
    if variant == "visible":
        n = torch.cuda.device_count()
        print(f"result: count={n}")
        for i in range(n):
            x = torch.arange(N, device=f"cuda:{i}", dtype=torch.int64) % 97
            print(f"result: cuda:{i} sum={int(x.sum().item())} "
                  f"expected={int((torch.arange(N, dtype=torch.int64) % 97).sum())}")
            p = torch.cuda.get_device_properties(i)
            bus = getattr(p, "pci_bus_id", None)
            print(f"result: cuda:{i} bus={bus if bus is not None else '?'} "
                  f"uuid={getattr(p, 'uuid', '?')}")
    else:
        x = torch.ones(N, device="cuda:1")
        s = int((x * 2).sum().item())
        torch.cuda.synchronize()
        print(f"result: cuda1 sum={s} expected={2 * N}")
        print(f"device: {x.device}")
except Exception as e:
    print(f"result: exception={type(e).__name__}")
    print(f"exception: {e}"[:2000], file=sys.stderr)
    sys.exit(1)
