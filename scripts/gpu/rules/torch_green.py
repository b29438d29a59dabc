#!/usr/bin/env python3
"""Pinned non_blocking copies on a PyTorch green-context stream (run by scripts/gpu/rules.sh,
section H):

    python3 torch_green.py correct|racing

A 16 MiB pinned staging buffer is copied up (H2D) on a stream of a green context
(torch.cuda.green_contexts.GreenContext(...).Stream()) behind torch.cuda._sleep, so that the
copy is really pending; then a D2H from a device tensor of 3.0 lands in the same pinned
buffer on an ordinary side stream. correct: the side stream waits for an event recorded on
the green stream after the H2D; racing: no wait (the D2H overwrites the buffer before the
H2D read it).

Prints "result: green_torch checksum=G expected=E match=True|False" (G from what reached
the device, E on the host) and "result: green_torch staging holds the d2h = True|False".
Where this torch has no green contexts (no torch.cuda.green_contexts, no GreenContext.Stream)
or the device refuses one, prints "result: skipped: ..." and exits 0.

Rule: correct prints what it prints without the shim, with no "seedance: " line, in observe
and fix; racing is reported in observe ("seedance: " line naming the copy) with the same
exit status and match value as without the shim. Written from the shim's description only.
"""
import sys

import torch

SLEEP = 100_000_000  # cycles for torch.cuda._sleep: about 50 ms on an H200
N = 4 * 1024 * 1024  # float32 elements: 16 MiB


def pattern(n):
    return ((torch.arange(n, dtype=torch.int64) * 7) % 251).to(torch.float32)


def isum(t):
    return int(t.to(torch.int64).sum().item())


def green_stream():
    gcmod = getattr(torch.cuda, "green_contexts", None)
    if gcmod is None or not hasattr(gcmod, "GreenContext"):
        return None, f"torch {torch.__version__} has no torch.cuda.green_contexts"
    cls = gcmod.GreenContext
    try:
        ctx = cls.create(num_sms=16, device_id=0)
    except Exception as e:  # unsupported driver/build/device
        return None, f"GreenContext.create: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    if not hasattr(ctx, "Stream"):
        return None, f"torch {torch.__version__}: GreenContext has no Stream()"
    return (ctx, ctx.Stream()), None


def main():
    variant = sys.argv[1] if len(sys.argv) > 1 else ""
    if variant not in ("correct", "racing"):
        print("usage: torch_green.py correct|racing", file=sys.stderr)
        return 2
    torch.cuda.init()
    got, why = green_stream()
    if got is None:
        print(f"result: skipped: {why}")
        return 0
    ctx, gs = got
    side = torch.cuda.Stream()
    orig = pattern(N)
    expected = isum(orig)
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    pin.copy_(orig)
    dev_a = torch.empty(N, dtype=torch.float32, device="cuda")
    dev_b = torch.full((N,), 3.0, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    e1 = torch.cuda.Event()
    with torch.cuda.stream(gs):
        torch.cuda._sleep(SLEEP)
        dev_a.copy_(pin, non_blocking=True)  # H2D, pending behind the sleep
        e1.record(gs)
    if variant == "correct":
        side.wait_event(e1)
    with torch.cuda.stream(side):
        pin.copy_(dev_b, non_blocking=True)  # D2H into the same pinned bytes
    side.synchronize()
    gs.synchronize()
    torch.cuda.synchronize()
    g = isum(dev_a)
    print(f"result: green_torch checksum={g} expected={expected} match={g == expected}")
    print(f"result: green_torch staging holds the d2h = {isum(pin) == 3 * N}")
    # The pinned block was used on the green stream: freeing it makes PyTorch's host
    # allocator record an event there, so the tensors go (and the host cache is emptied)
    # while the green context lives; then the green context goes, while the driver is
    # still up (not in interpreter teardown). In the other order the record fails with
    # CUDA_ERROR_CONTEXT_IS_DESTROYED and PyTorch aborts, with or without the shim.
    del pin, dev_a, dev_b
    torch.cuda.synchronize()
    empty_host_cache = getattr(torch._C, "_host_emptyCache", None)
    if empty_host_cache is not None:
        empty_host_cache()
    torch.cuda.synchronize()
    del e1, gs, ctx
    return 0


if __name__ == "__main__":
    sys.exit(main())
