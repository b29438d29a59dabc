#!/usr/bin/env python3
"""A pinned staging buffer reused across CuPy streams (run by scripts/gpu/rules.sh):

    python3 cupy_ordering.py correct|racing

Pinned memory from cupyx.empty_pinned; stream 1 (cupy.cuda.Stream) runs a spin kernel
(~25 ms) and then an H2D copy from the staging buffer and records an Event; the buffer is
then reused for a D2H on stream 2. correct: stream 2 waits for the event first
(Stream.wait_event); racing: no wait, so the D2H overwrites the staging buffer before the
H2D has read it.

Prints "result: cupy checksum=G expected=E match=True|False" (G from what reached the
device, E from the host). Rule: correct: match, silent, the same in every mode; racing:
observe explains it (host_hazard record / "seedance: " line), fix orders the D2H after the
pending H2D (match=True).
"""
import ctypes
import sys

import cupy
import cupyx
import numpy as np

N = 4 * 1024 * 1024  # float32 elements: 16 MiB
CYCLES = 50_000_000

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


def make_spin():
    """The spin kernel, compiled and run once; None when NVRTC is unavailable."""
    try:
        k = cupy.RawKernel(SPIN, "spin")
        k((1,), (1,), (np.int64(1000),))
        cupy.cuda.Device().synchronize()
        return k
    except Exception as e:
        print(f"spin kernel unavailable ({type(e).__name__}); using matmuls", file=sys.stderr)
        return None


def long_kernel(spin, stream):
    """Something long on the stream: the spin kernel, or cuBLAS matmuls without NVRTC."""
    with stream:
        if spin is not None:
            spin((1,), (1,), (np.int64(CYCLES),))
        else:
            a = cupy.ones((4096, 4096), dtype=cupy.float32)
            for _ in range(20):
                a = a @ a * (1.0 / 4096)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("correct", "racing"):
        print("usage: cupy_ordering.py correct|racing", file=sys.stderr)
        return 64
    race = sys.argv[1] == "racing"
    s1 = cupy.cuda.Stream(non_blocking=True)
    s2 = cupy.cuda.Stream(non_blocking=True)
    orig = ((np.arange(N, dtype=np.int64) * 7) % 251).astype(np.float32)
    expected = int(orig.astype(np.int64).sum())
    pin = cupyx.empty_pinned((N,), dtype=np.float32)
    pin[:] = orig
    ptr = pin.ctypes.data_as(ctypes.c_void_p)
    dev_a = cupy.empty(N, dtype=cupy.float32)
    dev_b = cupy.full(N, 3, dtype=cupy.float32)
    spin = make_spin()
    cupy.cuda.Device().synchronize()

    e1 = cupy.cuda.Event()
    long_kernel(spin, s1)
    dev_a.data.copy_from_host_async(ptr, pin.nbytes, stream=s1)  # H2D, pending
    e1.record(s1)
    if not race:
        s2.wait_event(e1)
    dev_b.data.copy_to_host_async(ptr, pin.nbytes, stream=s2)  # D2H into the same bytes
    s2.synchronize()
    s1.synchronize()
    got = int(dev_a.astype(cupy.int64).sum())
    print(f"result: cupy checksum={got} expected={expected} match={got == expected}")
    print(f"result: cupy staging holds the d2h = {bool((pin == 3).all())}")
    return 0 if got == expected or race else 1


if __name__ == "__main__":
    sys.exit(main())
