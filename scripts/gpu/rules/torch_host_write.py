#!/usr/bin/env python3
"""Host writes into the source of a pending host-to-device copy (run by
scripts/gpu/rules.sh, with and without SEEDANCE_HOST_GUARD=on):

    python3 torch_host_write.py correct|racing|threads8|threads8_racing

A 256 MiB pinned tensor src (all 1.0); dst = src.to("cuda", non_blocking=True) queued
behind a ~50 ms torch.cuda._sleep on the same (current) stream; then the host writes src.
  correct          torch.cuda.current_stream().synchronize(), then src.fill_(7)
  racing           src.fill_(7) at once, while the copy is still pending
  threads8         after the synchronize, 8 Python threads each fill a slice of src, then
                   torch.set_num_threads(8) and a parallel src.fill_(9); a second copy
                   checks the host writes landed (correct)
  threads8_racing  the 8 threads write while the copy is pending (an extra stress case)

Prints "result: dst equals original = True|False" (and for threads8 the second copy's
check). Rule: with SEEDANCE_HOST_GUARD=on, observe reports the racing write and fix makes
the device copy equal the original bytes; neither changes the correct variants, which must
never crash (threads8 included).
"""
import sys
import threading

import torch

N = 64 * 1024 * 1024  # float32 elements: 256 MiB
SLEEP = 100_000_000  # cycles: about 50 ms on an H200
THREADS = 8


def threaded_fill(src, value):
    chunk = N // THREADS
    barrier = threading.Barrier(THREADS)

    def work(i):
        barrier.wait()
        src[i * chunk:(i + 1) * chunk].fill_(value)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    variants = ("correct", "racing", "threads8", "threads8_racing")
    if len(sys.argv) != 2 or sys.argv[1] not in variants:
        print("usage: torch_host_write.py " + "|".join(variants), file=sys.stderr)
        return 64
    v = sys.argv[1]
    src = torch.empty(N, dtype=torch.float32, pin_memory=True)
    src.fill_(1.0)
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()
    torch.cuda._sleep(SLEEP)
    dst = src.to("cuda", non_blocking=True)  # pending behind the sleep
    if v in ("correct", "threads8"):
        stream.synchronize()
    if v in ("correct", "racing"):
        src.fill_(7.0)
    else:
        threaded_fill(src, 7.0)
    torch.cuda.synchronize()
    intact = bool((dst == 1.0).all().item())
    print(f"result: dst equals original = {intact}")
    print(f"result: src holds the host write = {bool((src == 7.0).all().item())}")
    if v == "threads8":
        torch.set_num_threads(THREADS)
        torch.cuda._sleep(SLEEP // 4)
        dst2 = src.to("cuda", non_blocking=True)
        stream.synchronize()
        src.fill_(9.0)  # intra-op parallel fill after proper synchronisation
        torch.cuda.synchronize()
        print(f"result: second copy holds the threaded write = {bool((dst2 == 7.0).all().item())}")
        print(f"result: src holds the parallel fill = {bool((src == 9.0).all().item())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
