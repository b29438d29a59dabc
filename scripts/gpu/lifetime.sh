#!/usr/bin/env bash
# GPU checks for context lifetime and asynchronous safety. One GPU is enough
#. Run from the repository root on the GPU machine:
#
#   scripts/gpu/lifetime.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/lifetime.cu (a driver-API program with a ~200 ms spin kernel, so the
# work after it is really still running when the program makes its mistake) and runs each
# case in its own process three times: without the shim, with it in fix mode (the default),
# and with SEEDANCE_MODE=observe. Cases: destroy_before_sync (cuCtxDestroy with a copy-back
# pending, then cuStreamSynchronize, cuMemFree and cuStreamDestroy on the dead handles),
# pinned_free and pinned_free_interior (cuMemFreeHost under a running copy),
# unregister_reuse (cuMemHostUnregister and overwrite under a running copy), clean (the same
# work done right). Every call prints its code and how long it took, so whether the real
# driver waits on its own (a free that blocks for ~200 ms) shows.
#
# Prints, per case and call, the code and time in the three runs next to the shim's lines,
# then checks:
#   - without the shim: reports what the driver did (an error, corrupted data, a crash, or
#     nothing because the driver waited on its own); no check fails on it;
#   - fix: every case ends with its data intact, the calls on dead handles get 0, and each
#     hazard case got an explanation from the shim (lifetime_fault in the trace);
#   - observe: the program's calls get the same codes as without the shim, and the hazard
#     is explained;
#   - clean: no line from the shim in any run, no lifetime_fault in the trace.
# Logs, outputs and traces go to $OUT (default /tmp/seedance-lifetime).
# Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-lifetime "${1:-}"
record_gpu_environment

set -e
nvcc -cubin -arch=sm_90 -DLIFETIME_KERNELS -o "$work/lifetime.cubin" "$here/gpu/lifetime.cu"
nvcc -O2 -arch=sm_90 -o "$work/lifetime" "$here/gpu/lifetime.cu" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda
set +e

cases="destroy_before_sync pinned_free pinned_free_interior unregister_reuse clean"
for c in $cases; do
  mkdir -p "$out/trace-fix-$c" "$out/trace-observe-$c"
  "$work/lifetime" "$work/lifetime.cubin" "$c" >"$out/without-$c.txt" 2>&1
  echo "exit $?" >>"$out/without-$c.txt"
  LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace-fix-$c" \
      "$work/lifetime" "$work/lifetime.cubin" "$c" >"$out/fix-$c.txt" 2>&1
  echo "exit $?" >>"$out/fix-$c.txt"
  LD_PRELOAD="$shim" SEEDANCE_MODE=observe SEEDANCE_TRACE_DIR="$out/trace-observe-$c" \
      "$work/lifetime" "$work/lifetime.cubin" "$c" >"$out/observe-$c.txt" 2>&1
  echo "exit $?" >>"$out/observe-$c.txt"
done

PYTHONPATH="$here/gpu${PYTHONPATH:+:$PYTHONPATH}" python3 - "$out" $cases <<'PY'
import json, pathlib, re, sys
from traces import records

out = pathlib.Path(sys.argv[1])
cases = sys.argv[2:]

def parse(name):
    """-> (calls: [(what, code, ms)], results: [text], shim lines, exit code)"""
    calls, results, shim, code = [], [], [], None
    for line in (out / name).read_text().splitlines():
        m = re.match(r"\s+(.*?)\s+-> (-?\d+) (\S+) \(([\d.]+) ms\)$", line)
        if m:
            calls.append((m.group(1), int(m.group(2)), float(m.group(4))))
            continue
        m = re.match(r"\s+result (.*)$", line)
        if m:
            results.append(m.group(1))
            continue
        if line.startswith("seedance: "):
            shim.append(line[len("seedance: "):])
            continue
        m = re.match(r"exit (\d+)$", line)
        if m:
            code = int(m.group(1))
    return calls, results, shim, code


# Calls on handles that died with their context: fix mode answers them with 0.
dead_calls = {"cuStreamSynchronize after the destroy", "cuMemFree after the destroy",
              "cuStreamDestroy after the destroy"}
failed = 0
for c in cases:
    base, fix, obs = (parse(f"{m}-{c}.txt") for m in ("without", "fix", "observe"))
    print(f"== {c}")
    for i, (what, code, ms) in enumerate(base[0]):
        f = fix[0][i] if i < len(fix[0]) else ("?", "?", 0.0)
        o = obs[0][i] if i < len(obs[0]) else ("?", "?", 0.0)
        print(f"  {what}: without {code} ({ms:.0f} ms), fix {f[1]} ({f[2]:.0f} ms), "
              f"observe {o[1]} ({o[2]:.0f} ms)")
    print(f"  data: without {base[1]}, fix {fix[1]}, observe {obs[1]}")
    for s in fix[2]:
        print(f"    fix:     {s}")
    for s in obs[2]:
        print(f"    observe: {s}")
    problems = []
    hazard = c != "clean"
    if hazard:
        bad = [w for w, code, _ in base[0] if code != 0] + [r for r in base[1] if "intact" not in r]
        print("  without the shim: " + ("; ".join(map(str, bad)) if bad
              else "no error and data intact (the driver ordered it on its own)"))
    print(f"  exit codes: without {base[3]}, fix {fix[3]}, observe {obs[3]}")
    if fix[3] != 0:
        problems.append(f"fix: exit code {fix[3]}")
    if not fix[1] or any("intact" not in r for r in fix[1]):
        problems.append("fix: data not intact")
    for what, code, _ in fix[0]:
        if code != 0 and (what in dead_calls or not hazard):
            problems.append(f"fix: {what} -> {code}")
    # Observe changes nothing: the same codes for the calls both runs got to (a run that
    # crashed stops early, with or without the shim).
    n = min(len(obs[0]), len(base[0]))
    obs_codes = [code for _, code, _ in obs[0][:n]]
    base_codes = [code for _, code, _ in base[0][:n]]
    if obs_codes != base_codes or (obs[3] == 0) != (base[3] == 0):
        problems.append(f"observe changed codes: {obs_codes} (exit {obs[3]}) vs {base_codes} (exit {base[3]})")
    fix_faults = [r for r in records(out / f"trace-fix-{c}") if r.get("event") == "lifetime_fault"]
    obs_faults = [r for r in records(out / f"trace-observe-{c}") if r.get("event") == "lifetime_fault"]
    if hazard:
        if not fix[2] or not fix_faults:
            problems.append("fix: no explanation")
        if not obs[2] or not obs_faults:
            problems.append("observe: no explanation")
        print(f"  trace (fix): {sorted({(r['function'], r['kind'], r['repaired']) for r in fix_faults})}")
        repairs = [r["kind"] for r in records(out / f"trace-fix-{c}") if r.get("event") == "lifetime_repair"]
        print(f"  repairs (fix): {repairs}")
    else:
        if fix[2] or obs[2] or fix_faults or obs_faults:
            problems.append("clean: the shim said something")
    for p in problems:
        print(f"  CHECK FAILED: {p}")
    failed += len(problems)
print(f"failed checks: {failed}")
sys.exit(min(failed, 100))
PY
status=$?
echo "outputs and traces in $out"
exit $status
