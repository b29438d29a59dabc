#!/usr/bin/env python3
"""Cross-GPU copies in PyTorch on 2 GPUs, under the shim's pinned-copy race tracker (run by
scripts/gpu/multi.sh, section 3). A long kernel (torch.cuda._sleep) on the first stream
ahead of its copy makes a missing ordering really corrupt data:

    python3 torch_cross.py IDIOM correct|racing

Idioms (s0: a side stream of cuda:0, s1: a side stream of cuda:1; P: a pinned buffer):
  to_peer          x on cuda:0 (made behind the sleep on s0, then the current stream waits
                   for s0), y = x.to("cuda:1", non_blocking=True)               (correct only)
  to_peer_pinned   one pinned buffer copied to cuda:0 on s0 and to cuda:1 on s1, both
                   non_blocking (two readers, no writer: never a race); P refilled only
                   after both streams were synchronised                          (correct only)
  stage_d2h_h2d    cuda:0 -> P -> cuda:1: s0: P.copy_(x0, non_blocking=True) behind the
                   sleep, event e0 recorded; s1: y1.copy_(P, non_blocking=True).
                   correct: s1.wait_event(e0) first; racing: no wait (y1 gets P's old bytes)
  stage_h2d_d2h    P shared by both GPUs' streams: s0: a0.copy_(P, non_blocking=True) behind
                   the sleep; s1: P.copy_(b1, non_blocking=True) (the staging buffer reused).
                   correct: s1.wait_stream(s0) first; racing: no wait (a0 gets b1's bytes)

Prints "result: IDIOM checksum=G expected=E match=True|False" (G from what reached the
device, E on the host), plus, for stage_h2d_d2h, whether P holds b1's bytes. Exit 0 when it
ran through (a racing variant that lost its data too: that is the race, not a crash); 1
when a correct variant's data is wrong; 2 with fewer than 2 GPUs.
"""
import sys

import torch

SLEEP = 50_000_000  # cycles for torch.cuda._sleep: about 25 ms on an H200
N = 4 * 1024 * 1024  # float32 elements: 16 MiB

IDIOMS = ("to_peer", "to_peer_pinned", "stage_d2h_h2d", "stage_h2d_d2h")
RACY = ("stage_d2h_h2d", "stage_h2d_d2h")


def pattern(n, k=0):
    return ((torch.arange(n, dtype=torch.int64) * 7 + k) % 251).to(torch.float32)


def isum(t):
    return int(t.to(torch.int64).sum().item())


def report(name, got, expected):
    print(f"result: {name} checksum={got} expected={expected} match={got == expected}")
    return got == expected


def to_peer():
    s0 = torch.cuda.Stream(device=0)
    host = pattern(N, 3)
    expected = isum(host)
    with torch.cuda.stream(s0):
        torch.cuda._sleep(SLEEP)
        x = host.to("cuda:0", non_blocking=False) + 0  # computed on s0, behind the sleep
    torch.cuda.current_stream(0).wait_stream(s0)
    x.record_stream(torch.cuda.current_stream(0))
    with torch.cuda.device(0):
        y = x.to("cuda:1", non_blocking=True)
    torch.cuda.synchronize(1)
    torch.cuda.synchronize(0)
    print(f"result: to_peer y on {y.device}")
    return report("to_peer", isum(y), expected)


def to_peer_pinned():
    s0, s1 = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)
    total = expected = 0
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    for k in range(3):
        p = pattern(N, k)
        pin.copy_(p)  # both copies of the previous round were synchronised
        with torch.cuda.stream(s0):
            torch.cuda._sleep(SLEEP // 5)
            a = pin.to("cuda:0", non_blocking=True)
        with torch.cuda.stream(s1):
            torch.cuda._sleep(SLEEP // 5)
            b = pin.to("cuda:1", non_blocking=True)
        s0.synchronize()
        s1.synchronize()
        total += (k + 1) * (isum(a) + 2 * isum(b))
        expected += (k + 1) * 3 * isum(p)
    return report("to_peer_pinned", total, expected)


def stage_d2h_h2d(race):
    s0, s1 = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)
    orig = pattern(N, 5)
    expected = isum(orig)
    x0 = orig.to("cuda:0")
    y1 = torch.zeros(N, dtype=torch.float32, device="cuda:1")
    pin = torch.full((N,), 9.0, dtype=torch.float32, pin_memory=True)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    e0 = torch.cuda.Event()
    with torch.cuda.stream(s0):
        torch.cuda._sleep(SLEEP)
        pin.copy_(x0, non_blocking=True)  # D2H into the staging buffer, pending
        e0.record(s0)
    if not race:
        s1.wait_event(e0)
    with torch.cuda.stream(s1):
        y1.copy_(pin, non_blocking=True)  # H2D from the staging buffer to the other GPU
    s1.synchronize()
    s0.synchronize()
    return report("stage_d2h_h2d", isum(y1), expected)


def stage_h2d_d2h(race):
    s0, s1 = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)
    orig = pattern(N)
    expected = isum(orig)
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    pin.copy_(orig)
    a0 = torch.empty(N, dtype=torch.float32, device="cuda:0")
    b1 = torch.full((N,), 3.0, dtype=torch.float32, device="cuda:1")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    with torch.cuda.stream(s0):
        torch.cuda._sleep(SLEEP)
        a0.copy_(pin, non_blocking=True)  # H2D, pending behind the sleep
    if not race:
        s1.wait_stream(s0)
    with torch.cuda.stream(s1):
        pin.copy_(b1, non_blocking=True)  # D2H from the other GPU into the same bytes
    s1.synchronize()
    s0.synchronize()
    ok = report("stage_h2d_d2h", isum(a0), expected)
    print(f"result: stage_h2d_d2h staging holds the d2h = {isum(pin) == 3 * N}")
    return ok


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in IDIOMS or sys.argv[2] not in ("correct", "racing"):
        print(__doc__, file=sys.stderr)
        return 64
    idiom, race = sys.argv[1], sys.argv[2] == "racing"
    if race and idiom not in RACY:
        print(f"{idiom} has no racing variant", file=sys.stderr)
        return 64
    if torch.cuda.device_count() < 2:
        print(f"result: skipped: needs 2 GPUs ({torch.cuda.device_count()} here)")
        return 2
    if idiom == "to_peer":
        ok = to_peer()
    elif idiom == "to_peer_pinned":
        ok = to_peer_pinned()
    elif idiom == "stage_d2h_h2d":
        ok = stage_d2h_h2d(race)
    else:
        ok = stage_h2d_d2h(race)
    return 0 if ok or race else 1


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
