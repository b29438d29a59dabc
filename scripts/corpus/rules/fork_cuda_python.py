#!/usr/bin/env python3
"""Rule: CUDA used in a child fork()ed after the parent initialised it, with cuda-python
(`from cuda.bindings import driver`, cuda-python 13; docs/design.md, fact 15).

  fork_cuda_python.py after_init   faulty: the parent initialises the driver (cuInit, its
                                   primary context, an allocation), then os.fork()s; the
                                   child calls cuInit, cuDeviceGet, cuMemAlloc,
                                   cuDeviceGetCount, cuDriverGetVersion and cuGetErrorName and
                                   prints each result (3, CUDA_ERROR_NOT_INITIALIZED, on driver
                                   580 for the first four). With the shim: one line naming the
                                   first call, both pids, the cause and the fix ("forked from
                                   pid"), once, and a trace of the child's own.
  fork_cuda_python.py before_init  correct: the program forks before any driver call; the
                                   child initialises the driver itself and allocates; silent.

Exit 0 unless one of the parent's calls, or a correct child's, fails.
"""
import os
import sys

from cuda.bindings import driver


def name(err):
    return getattr(err, "name", str(err))


def check(result):
    err = result[0]
    if int(err) != 0:
        raise SystemExit(f"driver call failed: {name(err)} ({int(err)})")
    return result[1:]


def use_driver(tag):
    check(driver.cuInit(0))
    (dev,) = check(driver.cuDeviceGet(0))
    (ctx,) = check(driver.cuDevicePrimaryCtxRetain(dev))
    check(driver.cuCtxSetCurrent(ctx))
    (ptr,) = check(driver.cuMemAlloc(1 << 20))
    check(driver.cuMemsetD8(ptr, 0x5E, 1 << 20))
    check(driver.cuMemFree(ptr))
    print(f"{tag} allocated, set and freed 1 MiB: yes", flush=True)


def failing_child():
    results = [
        ("cuInit", driver.cuInit(0)),
        ("cuDeviceGet", driver.cuDeviceGet(0)),
        ("cuMemAlloc", driver.cuMemAlloc(4096)),
        ("cuDeviceGetCount", driver.cuDeviceGetCount()),
        ("cuDriverGetVersion", driver.cuDriverGetVersion()),
        ("cuGetErrorName", driver.cuGetErrorName(driver.CUresult.CUDA_ERROR_INVALID_VALUE)),
    ]
    for call, r in results:
        print(f"child {call} -> {int(r[0])} {name(r[0])}", flush=True)


def main():
    variant = sys.argv[1] if len(sys.argv) > 1 else "after_init"
    if variant not in ("after_init", "before_init"):
        print("usage: fork_cuda_python.py after_init|before_init", file=sys.stderr)
        return 2
    if variant == "after_init":
        use_driver("parent")
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if variant == "after_init":
                failing_child()
            else:
                use_driver("child")
        except SystemExit as e:
            print(f"child {e}", flush=True)
            code = 1
        sys.stdout.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(f"child exit {os.waitstatus_to_exitcode(status)}")
    if variant == "after_init":
        (ptr,) = check(driver.cuMemAlloc(4096))
        check(driver.cuMemFree(ptr))
        print("parent allocates again: yes")
    else:
        use_driver("parent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
