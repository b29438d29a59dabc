#!/usr/bin/env bash
# GPU checks for expected failures as evidence and for the cost of a context's end. One GPU
# is enough. Run from the repository root on the GPU machine:
#
#   scripts/gpu/expected.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/expected.cu with the shared CUDA runtime (so libcudart is mapped) and
# runs it (200 cuCtxCreate + cuCtxDestroy pairs with 1000 cudaMalloc buffers live in the
# primary context) without the shim, with it (fix mode, trace on) and with
# SEEDANCE_LIFETIME=off (for reference), then checks:
#   - the program's output (versions, counts) is the same with and without the shim, exit 0;
#   - the shim writes nothing on stderr (the runtime's version probes are not reported);
#   - the trace has no call_failed record of cuGetProcAddress(_v2), and the exit summary
#     counts cuGetProcAddress_v2 with 0 errors;
#   - exit_summary.runtime_probes: look-ups made, max_cuda_version = cudaRuntimeGetVersion;
#   - exit_summary.cuda_libraries lists cudart (with its version) and the driver (cuda);
#   - the analyzer's report has no error or warning problem naming cuGetProcAddress, and a
#     runtime_newer_than_driver info problem exactly when the runtime is newer than the driver;
#   - a create+destroy pair with the shim costs at most 3x the pair without it plus 20 us
#     (before the context index it walked every live allocation on each destroy).
# Logs go to $OUT (default /tmp/seedance-expected). Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-expected "${1:-}"
analyze=${ANALYZE:-$(dirname "$shim")/seedance-analyze}
trap 'rm -rf "$work"' EXIT
record_gpu_environment

set -e
nvcc -O2 -arch=sm_90 -cudart shared -o "$work/expected" "$here/gpu/expected.cu" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda
set +e

rm -rf "$out/trace" && mkdir -p "$out/trace"
"$work/expected" 200 1000 >"$out/without.txt" 2>"$out/without.err"
echo "exit $?" >>"$out/without.txt"
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace" \
    "$work/expected" 200 1000 >"$out/fix.txt" 2>"$out/fix.err"
echo "exit $?" >>"$out/fix.txt"
LD_PRELOAD="$shim" SEEDANCE_LIFETIME=off \
    "$work/expected" 200 1000 >"$out/lifetime-off.txt" 2>"$out/lifetime-off.err"
echo "exit $?" >>"$out/lifetime-off.txt"
if [ -x "$analyze" ]; then
  "$analyze" summary --format json "$out/trace" >"$out/report.json" 2>"$out/report.err"
  "$analyze" summary "$out/trace" >"$out/report.txt" 2>&1
else
  echo "no analyzer at $analyze (build it with cargo build --release)" >"$out/report.err"
fi

python3 - "$out" <<'PY'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
fails = 0

def check(ok, what, detail=""):
    global fails
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    fails += 0 if ok else 1

def lines(name):
    return (out / name).read_text().splitlines()

def pair_us(name):
    for l in lines(name):
        if l.startswith("pair_us="):
            return float(l.split("=", 1)[1])
    return None

def stable(name):
    return [l for l in lines(name) if not l.startswith("pair_us=")]

check(stable("without.txt")[-1:] == ["exit 0"], "the program runs without the shim", stable("without.txt"))
check(stable("fix.txt") == stable("without.txt"), "same output with the shim", stable("fix.txt"))
err = (out / "fix.err").read_text()
check(err == "", "no stderr from the shim", err[:500])

records = []
for f in sorted((out / "trace").glob("*.jsonl")):
    records += [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
failed = [r for r in records if r.get("event") == "call_failed"
          and r.get("function", "").startswith("cuGetProcAddress")]
check(not failed, "no call_failed record of cuGetProcAddress", failed[:3])
ex = [r for r in records if r.get("event") == "exit_summary"]
check(len(ex) == 1, "one exit summary", len(ex))
ex = ex[0] if ex else {}
gpa = ex.get("functions", {}).get("cuGetProcAddress_v2", {})
check(gpa.get("calls", 0) > 0 and gpa.get("errors") == 0,
      "cuGetProcAddress_v2 counted with 0 errors", gpa)
versions = dict(p.split("=") for p in stable("without.txt")[0].split())
rt, drv = int(versions.get("runtime", 0)), int(versions.get("driver", 0))
probes = ex.get("runtime_probes") or {}
print(f"     runtime {rt}, driver {drv}, runtime_probes {json.dumps(probes)}")
check(probes.get("lookups", 0) > 0 and probes.get("max_cuda_version") == rt,
      "runtime_probes: look-ups counted, max_cuda_version = the runtime's version", probes)
libs = ex.get("cuda_libraries") or []
print("     cuda_libraries: " + ", ".join(f"{l['name']} {l.get('version')}" for l in libs))
check(any(l["name"] == "cudart" and l.get("version") for l in libs)
      and any(l["name"] == "cuda" for l in libs),
      "cuda_libraries lists cudart with its version and the driver", libs)

try:
    report = json.loads((out / "report.json").read_text())
    bad = [p["title"] for p in report["problems"] if p["severity"] in ("error", "warning")
           and any(f["name"].startswith("cuGetProcAddress") for f in p.get("functions", []))]
    check(not bad, "the analyzer ranks no version probe as a problem", bad)
    newer = [p for p in report["problems"] if p["kind"] == "runtime_newer_than_driver"]
    check(bool(newer) == (rt > drv), "runtime_newer_than_driver exactly when the runtime is newer",
          [p["title"] for p in newer])
    for p in newer:
        print("     analyzer: " + p["title"])
except Exception as e:
    check(False, "the analyzer's report", repr(e))

a, b, c = pair_us("without.txt"), pair_us("fix.txt"), pair_us("lifetime-off.txt")
print(f"     context create+destroy with 1000 live allocations: without {a} us, "
      f"shim {b} us, SEEDANCE_LIFETIME=off {c} us")
check(a is not None and b is not None and b <= 3 * a + 20,
      "a context's create+destroy costs at most 3x + 20 us with the shim", (a, b))
print(f"{fails} failed")
sys.exit(min(fails, 100))
PY
