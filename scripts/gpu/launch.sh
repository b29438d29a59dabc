#!/usr/bin/env bash
# GPU checks for launch and allocation faults. One GPU is enough. Run from the repository root on the GPU machine:
#
#   scripts/gpu/launch.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/launch_faults.cu (a driver-API program that loads a cubin with an
# ordinary kernel, a register-heavy one and a __launch_bounds__(256) one) and runs it three
# times: without the shim, with it (SEEDANCE_VALIDATE=post, the default), and with
# SEEDANCE_VALIDATE=pre. Each case makes the call that breaks a limit, then the same call at
# the legal limit (which must succeed). Prints, per case, what the driver returned without
# the shim, with it, and with pre-validation, next to the shim's explanation; then checks:
#   - the program gets the same code with and without the shim (post and pre);
#   - every legal call succeeds in all three runs;
#   - every failing case got one explanation line from the shim (and no call_failed for it);
#   - pre-validation refused the configuration faults with the driver's own code.
# Logs, the three outputs and the traces go to $OUT (default /tmp/seedance-launch).
# Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-launch "${1:-}"
record_gpu_environment

set -e
nvcc -cubin -arch=sm_90 -maxrregcount=255 -DLAUNCH_FAULTS_KERNELS \
    -o "$work/faults.cubin" "$here/gpu/launch_faults.cu"
nvcc -O2 -arch=sm_90 -o "$work/launch_faults" "$here/gpu/launch_faults.cu" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda -lpthread
cuobjdump -res-usage "$work/faults.cubin" >"$out/res-usage.txt" 2>&1 || true
set +e

mkdir -p "$out/trace-post" "$out/trace-pre"
"$work/launch_faults" "$work/faults.cubin" >"$out/without.txt" 2>&1
rc0=$?
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace-post" \
    "$work/launch_faults" "$work/faults.cubin" >"$out/with.txt" 2>&1
rc1=$?
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace-pre" SEEDANCE_VALIDATE=pre \
    "$work/launch_faults" "$work/faults.cubin" >"$out/pre.txt" 2>&1
rc2=$?
echo "exit: without $rc0, with $rc1, pre $rc2 (the number of legal calls that failed)"

python3 - "$out" <<'PY'
import json, pathlib, re, sys

out = pathlib.Path(sys.argv[1])

def parse(name):
    """case -> list of (call, code, legal, explanations the shim printed during the call).
    The shim writes its line while the call runs, so before the program prints the result."""
    cases, case, pending = {}, None, []
    for line in (out / name).read_text().splitlines():
        m = re.match(r"case (\w+)", line)
        if m:
            case = m.group(1)
            cases[case] = []
            pending = []
            continue
        m = re.match(r"\s+(legal: )?(.*?)\s+-> (\d+) (\S+)$", line)
        if m and case:
            cases[case].append([m.group(2), int(m.group(3)), bool(m.group(1)), pending])
            pending = []
            continue
        if line.startswith("seedance: "):
            pending.append(line[len("seedance: "):])
    return cases

base, post, pre = parse("without.txt"), parse("with.txt"), parse("pre.txt")
failed = 0
for case, calls in base.items():
    print(f"== {case}")
    for i, (call, code, legal, _) in enumerate(calls):
        p = post.get(case, [])[i] if i < len(post.get(case, [])) else None
        q = pre.get(case, [])[i] if i < len(pre.get(case, [])) else None
        pc = p[1] if p else "?"
        qc = q[1] if q else "?"
        flag = "legal" if legal else "fault"
        print(f"  [{flag}] {call}: without {code}, with {pc}, pre {qc}")
        for e in (p[3] if p else []):
            print(f"      shim: {e}")
        for e in (q[3] if q else []):
            if "refused before reaching the driver" in e:
                print(f"      pre:  {e}")
        problems = []
        if p is None or p[1] != code:
            problems.append("code differs with the shim")
        if q is None or q[1] != code:
            problems.append("code differs with SEEDANCE_VALIDATE=pre")
        if legal and code != 0:
            problems.append("legal call failed")
        if not legal and code != 0 and p is not None and not p[3]:
            problems.append("no explanation from the shim")
        for msg in problems:
            print(f"      CHECK FAILED: {msg}")
        failed += len(problems)

events = {}
for d in ("trace-post", "trace-pre"):
    for f in (out / d).glob("*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            events.setdefault(d, []).append(r)
for d, recs in events.items():
    kinds = {}
    for r in recs:
        kinds[r["event"]] = kinds.get(r["event"], 0) + 1
    checks = sorted({(r["function"], r.get("check")) for r in recs if r["event"] in ("launch_fault", "alloc_fault")})
    failed_calls = sorted({r["function"] for r in recs if r["event"] == "call_failed"})
    print(f"{d}: {kinds}")
    print(f"  checks: {checks}")
    print(f"  still call_failed: {failed_calls}")
    with_msg = sum(1 for r in recs if r.get("driver_message"))
    print(f"  events with the driver's own message: {with_msg}")
print(f"failed checks: {failed}")
sys.exit(min(failed, 100))
PY
status=$?
echo "outputs, traces and res-usage in $out"
exit $status
