#!/usr/bin/env python3
"""A 2-rank torch.distributed NCCL job, the pytorch#126381 pattern (run by
scripts/gpu/multi.sh, section 1):

    python3 torch_nccl.py launch stray|sync0|correct     (starts both ranks, see ranks.py)

Every rank: init_process_group("nccl", init_method="env://") (no device_id), a 4 MiB tensor
on cuda:RANK (an explicit device), 5 all_reduce calls, torch.cuda.synchronize(cuda:RANK),
then barrier() and destroy_process_group().

  stray    no torch.cuda.set_device at all (the pattern: whatever PyTorch and NCCL make on
           the current device, cuda:0, in rank 1 is a context on a GPU it does nothing on)
  sync0    the same, plus torch.cuda.synchronize() with no device after the all_reduce
           calls (the current device: cuda:0 in every rank): rank 1 then certainly makes a
           context on GPU 0 after it worked on GPU 1, the case SEEDANCE_STRAY_CONTEXT=redirect
           is documented for
  correct  torch.cuda.set_device(RANK) first, then the same as sync0 (synchronize() is the
           rank's own device)

NCCL_NVLS_ENABLE=0 must come from the caller's environment (NVLink multicast off).
Each rank prints "result: rank R allreduce first=F sum=S expected=E match=M" (identical with
and without the shim), and, not as results: "pid: rank R = PID", "ctx0: rank R init=...
work=... sync0=... barrier=... destroy=..." (device 0's primary context active after each
step, cuDevicePrimaryCtxGetState; sync0 is "-" where the variant has no such step), "held:
rank R gpus=..." (where NVML sees the process's memory after destroy_process_group) and
"heldmib: ...". Exit 0 when the all-reduce gave the expected values.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402


def rank_main(variant):
    import torch
    import torch.distributed as dist

    r = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    print(f"pid: rank {r} = {os.getpid()}")
    steps = {}
    if variant == "correct":
        torch.cuda.set_device(r)
    dist.init_process_group("nccl", init_method="env://")
    steps["init"] = ranks.ctx0_active()
    dev = torch.device("cuda", r)
    t = torch.full((1 << 20,), float(r + 1), device=dev)
    for _ in range(5):
        dist.all_reduce(t)
    torch.cuda.synchronize(dev)
    first = t[0].item()
    total = t.double().sum().item()
    steps["work"] = ranks.ctx0_active()
    if variant in ("sync0", "correct"):
        torch.cuda.synchronize()  # the current device
        steps["sync0"] = ranks.ctx0_active()
    else:
        steps["sync0"] = "-"
    dist.barrier()
    steps["barrier"] = ranks.ctx0_active()
    dist.destroy_process_group()
    steps["destroy"] = ranks.ctx0_active()
    base = world * (world + 1) / 2  # the first all_reduce: 1 + 2 + ...
    want = base * world ** 4  # each later all_reduce multiplies by world
    ok = first == want and total == want * (1 << 20)
    print(f"result: rank {r} allreduce first={first:.0f} sum={total:.0f} expected={want:.0f} "
          f"match={ok}")
    print(f"ctx0: rank {r} " + " ".join(f"{k}={v}" for k, v in steps.items()))
    ranks.report_held(r)
    sys.stdout.flush()
    return 0 if ok else 1


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("launch", "rank") or \
            sys.argv[2] not in ("stray", "sync0", "correct"):
        print(__doc__, file=sys.stderr)
        return 64
    if sys.argv[1] == "launch":
        assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "keep NVLink multicast off"
        return ranks.launch(os.path.abspath(__file__), sys.argv[2])
    return rank_main(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
