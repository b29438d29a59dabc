#!/usr/bin/env python3
"""The second process of the out-of-memory case (run by scripts/gpu/multi.sh, section 2,
while `oom hold` fills GPU 0 to about 2 GiB free):

    python3 torch_oom.py GIB

One tensor of GIB GiB on the default device (cuda:0). Prints "result: allocated GIB GiB on
cuda:0" (exit 0) or "result: exception=<class>" (exit 1; the message on stderr, which holds
figures that change run to run).
"""
import sys

import torch

gib = int(sys.argv[1]) if len(sys.argv) > 1 else 4
try:
    x = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    print(f"result: allocated {gib} GiB on {x.device}")
    sys.exit(0)
except Exception as e:  # torch.OutOfMemoryError (a RuntimeError) expected
    print(f"result: exception={type(e).__name__}")
    print(f"exception: {e}"[:2000], file=sys.stderr)
    sys.exit(1)
