#!/usr/bin/env python3
"""Two processes, each working on its own GPU (rank r on cuda:r), the pytorch#9871 pattern
(run by scripts/gpu/multi.sh, section 1):

    python3 torch_pair.py launch stray|correct     (starts both ranks, see ranks.py)

  stray    each rank first makes a small tensor on the default device (torch.empty(256,
           device="cuda"): cuda:0, a context and one 2 MiB segment of the small-block pool,
           no kernel), keeps it, then torch.cuda.set_device(rank) and works there. Rank 1
           leaves a context on GPU 0 it does nothing on: a stray context (rank 0's GPU is 0).
  correct  torch.cuda.set_device(rank) first, then the same (the small tensor lands on the
           rank's own GPU).

Work: integer-valued matmuls on cuda:rank (exact in float32) with a checksum.
Each rank prints "result: rank R ..." lines (identical with and without the shim), and, not as
results: "pid: rank R = PID", "ctx0: rank R early=... end=..." (device 0's primary context
active after the small tensor and at the end, cuDevicePrimaryCtxGetState), "held: rank R
gpus=..." (where NVML sees this process's memory at the end) and "heldmib: ...".
Exit 0 when the checksum matches.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402


def rank_main(variant):
    import torch

    torch.set_float32_matmul_precision("highest")  # exact integer sums (no TF32)
    r = int(os.environ["RANK"])
    print(f"pid: rank {r} = {os.getpid()}")
    if variant == "correct":
        torch.cuda.set_device(r)
    small = torch.empty(256, device="cuda")  # the default device: cuda:0 unless set above
    early = ranks.ctx0_active()
    if variant == "stray":
        torch.cuda.set_device(r)
    dev = torch.device("cuda", r)
    n = 512
    i = torch.arange(n, device=dev, dtype=torch.int64)
    a = ((i[:, None] * 7 + i[None, :] * 3) % 7).to(torch.float32)
    b = ((i[:, None] * 5 + i[None, :] * 11 + 1) % 5).to(torch.float32)
    big = torch.ones(16 << 20, device=dev)  # 64 MiB: clearly worked on
    c = (a @ b) % 1009
    for _ in range(3):
        c = (c @ b) % 1009
    got = int(c.to(torch.int64).sum().item()) + int(big.sum().item())
    ca, cb = a.cpu().to(torch.int64), b.cpu().to(torch.int64)
    cc = (ca @ cb) % 1009
    for _ in range(3):
        cc = (cc @ cb) % 1009
    expected = int(cc.sum()) + (16 << 20)
    torch.cuda.synchronize(dev)
    print(f"result: rank {r} small tensor on {small.device}")
    print(f"result: rank {r} checksum={got} expected={expected} match={got == expected}")
    print(f"ctx0: rank {r} early={early} end={ranks.ctx0_active()}")
    ranks.report_held(r)
    sys.stdout.flush()
    return 0 if got == expected else 1


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("launch", "rank") or \
            sys.argv[2] not in ("stray", "correct"):
        print(__doc__, file=sys.stderr)
        return 64
    if sys.argv[1] == "launch":
        return ranks.launch(os.path.abspath(__file__), sys.argv[2])
    return rank_main(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
