#!/usr/bin/env python3
"""Rule: CUDA used in a child fork()ed after the parent initialised it, with CuPy
(docs/design.md, fact 15).

  fork_cupy.py after_init   faulty: the parent computes on the GPU with CuPy, then starts a
                            worker with multiprocessing's "fork" method (the Linux default
                            before Python 3.14); the worker computes with CuPy too and gets
                            cudaErrorInitializationError (the driver answers 3 there). With
                            the shim: one line naming the call, both pids, the cause and the
                            fix ("forked from pid"), once, and a trace of the child's own.
  fork_cupy.py before_init  correct: the worker is forked before the parent touches the GPU,
                            initialises CUDA itself and computes; silent.

Prints what the worker got and the parent's result. Exit 0 unless the parent's work fails.
"""
import multiprocessing as mp
import sys

import cupy


def work(tag):
    x = cupy.arange(1 << 16, dtype=cupy.int64)
    return f"{tag} sum={int((x * 3).sum())}"


def child(q):
    try:
        q.put(work("child"))
    except Exception as e:  # what the program would see: its type and first line
        q.put(f"child error={type(e).__name__}: {str(e).splitlines()[0][:160]}")
    for what, call in (("malloc", lambda: cupy.cuda.runtime.malloc(256)),
                       ("synchronize", cupy.cuda.runtime.deviceSynchronize)):
        try:
            call()
            q.put(f"child {what}: ok")
        except Exception as e:
            q.put(f"child {what}: {type(e).__name__}")


def main():
    variant = sys.argv[1] if len(sys.argv) > 1 else "after_init"
    if variant not in ("after_init", "before_init"):
        print("usage: fork_cupy.py after_init|before_init", file=sys.stderr)
        return 2
    if variant == "after_init":
        print(work("parent"))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    lines = [q.get(timeout=60) for _ in range(3)]
    p.join(60)
    for line in lines:
        print(line)
    print(f"child exit {p.exitcode}")
    print(work("parent"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
