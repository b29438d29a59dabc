#!/usr/bin/env python3
"""Cache lines one hooked call touches, from two valgrind lackey traces (scripts/bench/lines-touched.sh).

    bench/lines_touched.py SHIM N SHORT.trace SHORT.ld LONG.trace LONG.ld [PLAIN_SHORT.trace
                     PLAIN_SHORT.ld PLAIN_LONG.trace PLAIN_LONG.ld]
    bench/lines_touched.py --selftest

A trace is lackey's `--trace-mem=yes` log of tests/programs/ir_loop.c running N (SHORT) and
2N (LONG) iterations with SHIM (a path: its file name finds it among the loaded objects,
addr2line reads its symbols) preloaded, and the PLAIN traces the same without it; an `.ld` file is the same run's `LD_DEBUG=files` output (the base and
size of every loaded object). An address counts as touched on every call when its count in
the long run exceeds the short run's by at least N/2: start-up cancels, and a line read on
one call's branch and not the next still counts.

Prints, per call:

- `instructions`: instructions executed in the shim's image;
- `shim code lines`: distinct 64-byte lines of those instructions;
- `other code lines`: lines of other objects' code (the dynamic loader's TLS descriptor
  function, libc) executed per call with the shim and not without it (only with the plain
  traces, which give the without);
- `data lines`: distinct 64-byte data lines the shim's instructions read or write outside
  the stack, each with where it lies (an object's image, else "heap or TLS") and the
  functions that touch it (from `addr2line -f` on the shim);
- `stack lines`: the stack lines they touch (the top 8 MiB of the addresses seen: the main
  thread's stack, which the driver's own calls keep warm).
"""
import collections
import re
import subprocess
import sys

LINE = 64
# Code outside every object LD_DEBUG lists: the dynamic loader itself (its TLS descriptor
# functions) or the program; named by its absolute line address.
UNLISTED = "loader or program"
STACK_SPAN = 8 << 20


def objects(ld_path):
    """[(name, base, size)] from LD_DEBUG=files output ("file=NAME [0];  generating link
    map" followed by "dynamic: ... base: B size: S"). valgrind's launcher is itself a
    dynamically linked program that the preload reaches: where a name is loaded twice, the
    last one (the guest's) counts."""
    out, name = {}, None
    for line in open(ld_path, errors="replace"):
        m = re.search(r"file=(\S+) \[\d+\];\s+generating link map", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"base: (0x[0-9a-f]+)\s+size: (0x[0-9a-f]+)", line)
        if m and name:
            out[name] = (int(m.group(1), 16), int(m.group(2), 16))
            name = None
    return [(n, b, s) for n, (b, s) in out.items()]


def locate(objs, addr):
    for name, base, size in objs:
        if base <= addr < base + size:
            return name, addr - base
    return None, addr


def scan(trace, objs, shim):
    """(instructions by shim offset, code lines {(object, line)}: count, data accesses by
    line address {line: Counter(shim offset of the accessing instruction)}). `shim` None:
    a run without the shim (only the code lines mean something)."""
    shim_obj = next(((b, s) for n, b, s in objs if shim and n.endswith(shim)), None)
    if shim_obj is None and shim is not None:
        sys.exit(f"lines_touched: {shim} is not among the loaded objects")
    # Without the shim (`shim` None: a plain run) every instruction is another object's.
    lo, hi = (shim_obj[0], shim_obj[0] + shim_obj[1]) if shim_obj else (0, 0)
    instr = collections.Counter()
    code = collections.Counter()
    data = collections.defaultdict(collections.Counter)
    cur = None
    for line in open(trace, errors="replace"):
        if line.startswith("I"):
            addr = int(line[3:].split(",")[0], 16)
            if lo <= addr < hi:
                cur = addr - lo
                instr[cur] += 1
                code[(shim, cur // LINE)] += 1
            else:
                cur = None
                name, off = locate(objs, addr)
                code[(name or UNLISTED, off // LINE)] += 1
        elif cur is not None and line[:1] == " " and line[1:2] in "LSM":
            addr = int(line[3:].split(",")[0], 16)
            data[addr // LINE][cur] += 1
    return instr, code, data


def per_call(short, long_, n):
    """Keys whose count grew by at least n/2 from the short run to the long one."""
    return {k for k, v in long_.items() if v - short.get(k, 0) >= n / 2}


def symbols(shim_path, offsets):
    if not offsets:
        return {}
    offs = sorted(offsets)
    try:
        o = subprocess.run(["addr2line", "-f", "-C", "-e", shim_path] + [hex(x) for x in offs],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {off: o[2 * i] for i, off in enumerate(offs) if 2 * i < len(o)}


def report(shim_path, n, runs, plain=None):
    shim = shim_path.rsplit("/", 1)[-1]
    (s_tr, s_ld), (l_tr, l_ld) = runs
    s_objs, l_objs = objects(s_ld), objects(l_ld)
    si, sc, sd = scan(s_tr, s_objs, shim)
    li, lc, ld = scan(l_tr, l_objs, shim)
    instructions = (sum(li.values()) - sum(si.values())) / n
    code = per_call(sc, lc, n)
    shim_code = {k for k in code if k[0] == shim}
    # Per line, the instructions that touch it on every call.
    lines = {}
    for line, c in ld.items():
        if sum(c.values()) - sum(sd.get(line, {}).values()) >= n / 2:
            short = sd.get(line, {})
            lines[line] = {o for o, v in c.items() if v - short.get(o, 0) >= n / 2} or set(c)
    top = max(ld) if ld else 0
    stack = {line for line in lines if line * LINE >= top * LINE - STACK_SPAN}
    print(f"instructions {instructions:.1f}")
    print(f"shim code lines {len(shim_code)}")
    if plain:
        (ps_tr, ps_ld), (pl_tr, pl_ld) = plain
        # Without the shim there is no shim image: every code line counts.
        p_code = per_call(scan(ps_tr, objects(ps_ld), None)[1],
                          scan(pl_tr, objects(pl_ld), None)[1], n)
        other = sorted(k for k in code if k[0] != shim and k not in p_code)
        print(f"other code lines {len(other)}" +
              "".join(f"\n  {name.rsplit('/', 1)[-1]} +{line * LINE:#x}" for name, line in other))
    off_syms = symbols(shim_path, {off for line in lines if line not in stack for off in lines[line]})
    rest = sorted(set(lines) - stack)
    print(f"data lines {len(rest)}")
    for line in rest:
        name, off = locate(l_objs, line * LINE)
        where = f"{name.rsplit('/', 1)[-1]} +{off:#x}" if name else "heap or TLS"
        funcs = sorted({off_syms.get(o, hex(o)) for o in lines[line]})
        print(f"  {where}: {'; '.join(f[:80] for f in funcs[:3])}")
    print(f"stack lines {len(stack)}")


def selftest():
    import os
    import tempfile
    d = tempfile.mkdtemp()

    def write(name, text):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    ld = write("ld", "  1:\tfile=/x/libshim.so [0];  generating link map\n"
                     "  1:\t  dynamic: 0x0000000000001e00  base: 0x0000000000001000   size: 0x0000000000001000\n")
    assert objects(ld) == [("/x/libshim.so", 0x1000, 0x1000)]

    def trace(name, calls):
        # start-up: one instruction in the shim; each call: two instructions on two lines,
        # a load of a data line, a store to the stack.
        body = "I  00001000,3\n"
        for _ in range(calls):
            body += "I  00001040,3\n L 00009000,8\nI  00001080,3\n S 1ffeff0000,8\n"
        return write(name, body)

    si, sc, sd = scan(trace("s", 10), objects(ld), "libshim.so")
    li, lc, ldd = scan(trace("l", 20), objects(ld), "libshim.so")
    assert (sum(li.values()) - sum(si.values())) / 10 == 2
    assert per_call(sc, lc, 10) == {("libshim.so", 1), ("libshim.so", 2)}
    assert set(ldd) == {0x9000 // LINE, 0x1ffeff0000 // LINE}
    print("selftest ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        sys.exit(0)
    if len(sys.argv) not in (7, 11):
        sys.exit(__doc__)
    shim_path, n = sys.argv[1], int(sys.argv[2])
    a = sys.argv[3:]
    runs = ((a[0], a[1]), (a[2], a[3]))
    plain = ((a[4], a[5]), (a[6], a[7])) if len(a) == 8 else None
    report(shim_path, n, runs, plain)
