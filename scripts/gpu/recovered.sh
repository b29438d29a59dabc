#!/usr/bin/env bash
# GPU checks for failures a program recovers from and for what it leaves to the driver at
# exit. One GPU is enough. Run from the repository root on the GPU machine:
#
#   scripts/gpu/recovered.sh [path/to/libseedance_fix.so]
#
# Runs scripts/gpu/smoke_torch.py (a matmul and 20 training steps: backward runs on the
# autograd thread) with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync and with
# expandable_segments:True, without the shim and with it in observe and fix (trace on), and
# scripts/gpu/leave_context.c (a context and 1 MiB never released), then checks:
#   - the same stdout and exit status with and without the shim;
#   - nothing from the shim on stderr;
#   - for each PyTorch run: every call_failed record of cuMemAllocAsync(_ptsz)
#     (CUDA_ERROR_INVALID_CONTEXT) or cuMemCreate (CUDA_ERROR_NOT_PERMITTED) is counted in the
#     exit summary's recovered_by_result (printed: how many the run had);
#   - seedance-analyze summary --fail-on warning exits 0 on each trace;
#   - leave_context: the exit summary lists the context (live_contexts) and the analyzer's
#     process_health has it.
# Logs go to $OUT (default /tmp/seedance-recovered). Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-recovered "${1:-}"
analyze=${ANALYZE:-$(dirname "$shim")/seedance-analyze}
trap 'rm -rf "$work"' EXIT
record_gpu_environment "torch: $(python3 -c 'import torch; print(torch.__version__)' 2>&1)"

nvcc -O2 -o "$work/leave_context" "$here/gpu/leave_context.c" -I"$cuda_home/include" \
    -L"$cuda_home/lib64/stubs" -lcuda || { echo "FAIL: build leave_context.c"; exit 1; }

# run NAME CONF COMMAND...: without the shim, then observe and fix with a trace each.
run() {
  local name=$1 conf=$2
  shift 2
  PYTORCH_CUDA_ALLOC_CONF=$conf "$@" >"$out/$name.plain.txt" 2>"$out/$name.plain.err"
  echo "exit $?" >>"$out/$name.plain.txt"
  local mode
  for mode in observe fix; do
    rm -rf "$out/$name.$mode.trace" && mkdir -p "$out/$name.$mode.trace"
    PYTORCH_CUDA_ALLOC_CONF=$conf LD_PRELOAD="$shim" SEEDANCE_MODE=$mode \
      SEEDANCE_TRACE_DIR="$out/$name.$mode.trace" "$@" >"$out/$name.$mode.txt" 2>"$out/$name.$mode.err"
    echo "exit $?" >>"$out/$name.$mode.txt"
    "$analyze" summary --fail-on warning --format json "$out/$name.$mode.trace" \
      >"$out/$name.$mode.report.json" 2>"$out/$name.$mode.report.err"
    echo "$?" >"$out/$name.$mode.gate"
  done
}
run async backend:cudaMallocAsync python3 "$here/gpu/smoke_torch.py"
run expandable expandable_segments:True python3 "$here/gpu/smoke_torch.py"
run leave "" "$work/leave_context"

python3 - "$out" <<'PY'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
fails = 0

def check(ok, what, detail=""):
    global fails
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    fails += 0 if ok else 1

def records(name, mode):
    recs = []
    for f in sorted((out / f"{name}.{mode}.trace").glob("*.jsonl")):
        recs += [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
    return recs

for name, watched in [("async", {"cuMemAllocAsync", "cuMemAllocAsync_ptsz"}),
                      ("expandable", {"cuMemCreate"}), ("leave", set())]:
    plain = (out / f"{name}.plain.txt").read_text()
    check(plain.endswith("exit 0\n"), f"{name}: runs without the shim", plain[-300:])
    for mode in ["observe", "fix"]:
        got = (out / f"{name}.{mode}.txt").read_text()
        check(got == plain, f"{name} {mode}: same stdout and exit status", got[-300:])
        err = (out / f"{name}.{mode}.err").read_text()
        check(err == "", f"{name} {mode}: nothing on stderr", err[:600])
        gate = (out / f"{name}.{mode}.gate").read_text().strip()
        check(gate == "0", f"{name} {mode}: summary --fail-on warning exits 0",
              gate + " " + (out / f"{name}.{mode}.report.err").read_text()[:300])
        recs = records(name, mode)
        summary = [r for r in recs if r.get("event") == "exit_summary"]
        check(len(summary) == 1, f"{name} {mode}: one exit summary", len(summary))
        if not summary:
            continue
        fns = summary[0].get("functions", {})
        failed = {}
        for r in recs:
            if r.get("event") == "call_failed" and r.get("function") in watched:
                key = (r["function"], r.get("result_name") or str(r["result"]))
                failed[key] = failed.get(key, 0) + 1
        recovered = {(f, k): n for f in watched for k, n in
                     fns.get(f, {}).get("recovered_by_result", {}).items()}
        print(f"  {name} {mode}: call_failed {failed}, recovered {recovered}")
        check(all(recovered.get(k, 0) >= n for k, n in failed.items()),
              f"{name} {mode}: every watched failure recovered", (failed, recovered))
        if name == "leave":
            live = summary[0].get("live_contexts", [])
            check(len(live) == 1 and not live[0].get("primary"),
                  f"leave {mode}: the context in live_contexts", live)
            report = json.loads((out / f"leave.{mode}.report.json").read_text() or "{}")
            health = report.get("process_health", [])
            check(len(health) == 1 and health[0].get("live_contexts") == 1,
                  f"leave {mode}: process_health lists it", health)
sys.exit(fails)
PY
