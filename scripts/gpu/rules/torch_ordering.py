#!/usr/bin/env python3
"""Ordering idioms for pinned host memory and non_blocking copies in PyTorch, each on side
streams, with a long-running kernel (torch.cuda._sleep) on the copy stream ahead of the
copy so that a missing ordering really corrupts data (run by scripts/gpu/rules.sh):

    python3 torch_ordering.py IDIOM correct|racing

Idioms (racing variants exist where a race is expressible):
  wait_event         H2D from a pinned staging buffer on stream 1, then the buffer reused
                     for a D2H on stream 2; correct: stream 2 waits for stream 1's event;
                     racing: no wait (the D2H overwrites the buffer before the H2D read it).
  wait_stream        the same with stream2.wait_stream(stream1).
  event_synchronize  H2D from a pinned buffer, then the buffer refilled on the host; correct:
                     event.synchronize() before the refill; racing: refilled at once.
  pinned_ring        a ring of 4 pinned buffers refilled on the host for 16 batches;
                     correct: each buffer's event.synchronize() before its refill; racing: none.
  record_stream      a device tensor made on the default stream, filled from pinned memory
                     and reduced on a side stream, freed under record_stream (correct only).
  dataloader_prefetch DataLoader(pin_memory=True, num_workers=2) with a side-stream
                     prefetcher (wait_stream + record_stream) (correct only).
  cuda_graph         a CUDA graph captured around pinned copies (in and out) and replayed,
                     the host buffers refilled/read after each replay's synchronize
                     (correct only).
  compile_reduce_overhead  torch.compile(mode="reduce-overhead") of a small function fed
                     with pinned non_blocking inputs copied on a side stream (correct only).

Prints "result: IDIOM checksum=G expected=E match=True|False" where G is computed from what
reached the device and E on the host. Rule: correct variants match, in every mode, with no
"seedance: " line and no host_hazard record; racing variants are explained by
libseedance_fix.so in observe (stream races: always; host refills: with
SEEDANCE_HOST_GUARD=on) and repaired in fix (match=True).
"""
import os
import sys

import torch

SLEEP = 50_000_000  # cycles for torch.cuda._sleep: about 25 ms on an H200
N = 4 * 1024 * 1024  # float32 elements in a staging buffer: 16 MiB

RACY = ("wait_event", "wait_stream", "event_synchronize", "pinned_ring")


def pattern(n, k=0):
    return ((torch.arange(n, dtype=torch.int64) * 7 + k) % 251).to(torch.float32)


def isum(t):
    return int(t.to(torch.int64).sum().item())


def report(name, got, expected):
    print(f"result: {name} checksum={got} expected={expected} match={got == expected}")
    return got == expected


def staging_reuse(idiom, race):
    """wait_event / wait_stream: pinned staging buffer reused for a D2H on stream 2."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    orig = pattern(N)
    expected = isum(orig)
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    pin.copy_(orig)
    dev_a = torch.empty(N, dtype=torch.float32, device="cuda")
    dev_b = torch.full((N,), 3.0, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    e1 = torch.cuda.Event()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(SLEEP)
        dev_a.copy_(pin, non_blocking=True)  # H2D, pending behind the sleep
        e1.record(s1)
    if not race:
        if idiom == "wait_event":
            s2.wait_event(e1)
        else:
            s2.wait_stream(s1)
    with torch.cuda.stream(s2):
        pin.copy_(dev_b, non_blocking=True)  # D2H into the same pinned bytes
    torch.cuda.synchronize()
    ok = report(idiom, isum(dev_a), expected)
    print(f"result: {idiom} staging holds the d2h = {isum(pin) == 3 * N}")
    return ok


def event_synchronize(race):
    s1 = torch.cuda.Stream()
    first, second = pattern(N, 0), torch.full((N,), 5.0, dtype=torch.float32)
    expected = isum(first) + 2 * isum(second)
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    pin.copy_(first)
    dev_a = torch.empty(N, dtype=torch.float32, device="cuda")
    dev_b = torch.empty(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    e1 = torch.cuda.Event()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(SLEEP)
        dev_a.copy_(pin, non_blocking=True)
        e1.record(s1)
    if not race:
        e1.synchronize()
    pin.copy_(second)  # host refill for the next batch
    with torch.cuda.stream(s1):
        dev_b.copy_(pin, non_blocking=True)
    s1.synchronize()
    return report("event_synchronize", isum(dev_a) + 2 * isum(dev_b), expected)


def pinned_ring(race):
    ring_size, batches, n = 4, 16, 1024 * 1024
    s1 = torch.cuda.Stream()
    data = [pattern(n) + 256 * k for k in range(batches)]  # rows far apart: a swap shows
    expected = sum((k + 1) * isum(d) for k, d in enumerate(data))
    ring = [torch.empty(n, dtype=torch.float32, pin_memory=True) for _ in range(ring_size)]
    events = [torch.cuda.Event() for _ in range(ring_size)]
    used = [False] * ring_size
    out = torch.empty((batches, n), dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    for k in range(batches):
        j = k % ring_size
        if used[j] and not race:
            events[j].synchronize()
        ring[j].copy_(data[k])  # host refill
        with torch.cuda.stream(s1):
            torch.cuda._sleep(SLEEP // 5)
            out[k].copy_(ring[j], non_blocking=True)
            events[j].record(s1)
        used[j] = True
    s1.synchronize()
    weights = torch.arange(1, batches + 1, dtype=torch.int64, device="cuda")
    got = int((out.to(torch.int64).sum(dim=1) * weights).sum().item())
    return report("pinned_ring", got, expected)


def record_stream():
    s = torch.cuda.Stream()
    cur = torch.cuda.current_stream()
    orig = pattern(N, 5)
    expected = isum(orig)
    pin = torch.empty(N, dtype=torch.float32, pin_memory=True)
    pin.copy_(orig)
    dev = torch.empty(N, dtype=torch.float32, device="cuda")  # allocated on the default stream
    s.wait_stream(cur)
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP)
        dev.copy_(pin, non_blocking=True)
        acc = dev.to(torch.int64).sum()
        dev.record_stream(s)  # the allocator must not reuse dev's block before s is done
    del dev
    junk = torch.full((N,), 9.0, dtype=torch.float32, device="cuda")  # may take the freed block
    cur.wait_stream(s)
    got = int(acc.item())
    del junk
    return report("record_stream", got, expected)


class Items(torch.utils.data.Dataset):
    """64 items of 64K floats, item i = (arange + i) % 97."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return ((torch.arange(65536, dtype=torch.int64) + i) % 97).to(torch.float32)


class Prefetcher:
    """The usual side-stream prefetcher: the next batch's copy runs on its own stream."""

    def __init__(self, loader):
        self.it = iter(loader)
        self.stream = torch.cuda.Stream()
        self.next_gpu = None
        self.preload()

    def preload(self):
        try:
            batch = next(self.it)
        except StopIteration:
            self.next_gpu = None
            return
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(SLEEP // 5)
            self.next_gpu = batch.cuda(non_blocking=True)

    def next(self):
        cur = torch.cuda.current_stream()
        cur.wait_stream(self.stream)
        batch = self.next_gpu
        if batch is not None:
            batch.record_stream(cur)
        self.preload()
        return batch


def dataloader_prefetch():
    ds = Items()
    bs = 8
    expected = 0
    for b in range(len(ds) // bs):
        expected += (b + 1) * sum(isum(ds[i]) for i in range(b * bs, (b + 1) * bs))
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, shuffle=False, num_workers=2,
                                         pin_memory=True)
    pf = Prefetcher(loader)
    total = torch.zeros((), dtype=torch.int64, device="cuda")
    b = 0
    batch = pf.next()
    while batch is not None:
        total += (b + 1) * batch.to(torch.int64).sum()
        b += 1
        batch = pf.next()
    return report("dataloader_prefetch", int(total.item()), expected)


def cuda_graph():
    n = 1024 * 1024
    pin_in = torch.empty(n, dtype=torch.float32, pin_memory=True)
    pin_out = torch.empty(n, dtype=torch.float32, pin_memory=True)
    dev_in = torch.empty(n, dtype=torch.float32, device="cuda")
    dev_out = torch.empty(n, dtype=torch.float32, device="cuda")

    def step():
        torch.cuda._sleep(SLEEP // 10)
        dev_in.copy_(pin_in, non_blocking=True)
        torch.mul(dev_in, 2, out=dev_out)
        dev_out.add_(1)
        pin_out.copy_(dev_out, non_blocking=True)

    pin_in.copy_(pattern(n, 0))
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):  # warm-up off the capture, as the docs ask
        step()
    cur.wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            step()
    except Exception as e:
        print(f"result: cuda_graph capture failed: {type(e).__name__}")
        print(f"capture: {e}"[:2000], file=sys.stderr)
        return True
    total = expected = 0
    for k in range(8):
        p = pattern(n, k)
        pin_in.copy_(p)  # host refill after the previous replay was synchronised
        g.replay()
        torch.cuda.current_stream().synchronize()
        total += (k + 1) * isum(pin_out)
        expected += (k + 1) * isum(p * 2 + 1)
    return report("cuda_graph", total, expected)


def compile_reduce_overhead():
    n = 16384

    @torch.compile(mode="reduce-overhead")
    def f(x, y):
        return x * 2 + y

    cur = torch.cuda.current_stream()
    cs = torch.cuda.Stream()
    pin_x = torch.empty(n, dtype=torch.float32, pin_memory=True)
    pin_y = torch.empty(n, dtype=torch.float32, pin_memory=True)
    total = expected = 0
    for k in range(6):
        px, py = pattern(n, k), pattern(n, k + 1)
        pin_x.copy_(px)  # the previous copies finished: .item() below synchronised
        pin_y.copy_(py)
        cs.wait_stream(cur)
        with torch.cuda.stream(cs):
            torch.cuda._sleep(SLEEP // 10)
            x = pin_x.to("cuda", non_blocking=True)
            y = pin_y.to("cuda", non_blocking=True)
        cur.wait_stream(cs)
        x.record_stream(cur)
        y.record_stream(cur)
        torch.compiler.cudagraph_mark_step_begin()
        out = f(x, y)
        total += (k + 1) * isum(out)
        expected += (k + 1) * isum(px * 2 + py)
    return report("compile_reduce_overhead", total, expected)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("correct", "racing"):
        print(__doc__, file=sys.stderr)
        return 64
    idiom, variant = sys.argv[1], sys.argv[2]
    race = variant == "racing"
    if race and idiom not in RACY:
        print(f"{idiom} has no racing variant", file=sys.stderr)
        return 64
    torch.cuda.init()
    if idiom in ("wait_event", "wait_stream"):
        ok = staging_reuse(idiom, race)
    elif idiom == "event_synchronize":
        ok = event_synchronize(race)
    elif idiom == "pinned_ring":
        ok = pinned_ring(race)
    elif idiom == "record_stream":
        ok = record_stream()
    elif idiom == "dataloader_prefetch":
        ok = dataloader_prefetch()
    elif idiom == "cuda_graph":
        ok = cuda_graph()
    elif idiom == "compile_reduce_overhead":
        ok = compile_reduce_overhead()
    else:
        print(f"unknown idiom {idiom}", file=sys.stderr)
        return 64
    # A racing variant that lost its data is what the race does, not a crash: exit 0.
    return 0 if ok or race else 1


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main())
