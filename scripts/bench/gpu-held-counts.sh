#!/usr/bin/env bash
# The exit summary's counts of cuMemAlloc_v2 and cuMemFree_v2, compared between two builds
# of the shim on the same programs (docs/validation.md, "Cost checks"): since the shim counts
# their successful calls on each thread's held-allocation line instead of in the call
# counters (seedance_hotpath::held), the summary must give the same calls and errors as a
# build that counts them the old way. Programs: threads_bench.c's alloc_free at 4 threads
# (cuMemAlloc_v2 linked, from threads that exit) and, where PyTorch is installed, a loop of
# tensors with the caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor is
# a cudaMalloc and a cudaFree, which CUDA 13's runtime reaches through cuGetProcAddress).
# From the repository root on the GPU machine:
#
#   BEFORE=path/to/earlier-build.so scripts/bench/gpu-held-counts.sh path/to/libseedance_fix.so
#
# threads_bench.c's counts must also be exactly what it calls: 4 threads x (1 buffer + 10
# warm-up pairs + 500 pairs), no errors. Environment: BEFORE (the earlier build; without
# it, only that exact check), OUT (/tmp/seedance-held-counts), FAKE_DRIVER_DIR (build
# threads_bench.c against a fake driver with cc instead of nvcc; PyTorch is then left out).
# Prints one line per program and build; exit status 1 when a count is not the expected one,
# differs between the builds, or a run failed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-held-counts "${1:?usage: [BEFORE=EARLIER_SHIM] $0 SHIM}"
builds=("$shim")
[ -n "${BEFORE:-}" ] && builds+=("$(readlink -f "$BEFORE")")
trap 'rm -rf "$work"' EXIT
build_threads_bench "$work/tb" || exit 1

# counts TRACE_DIR: "allocs calls/errors frees calls/errors" of the one trace's exit summary.
counts() {
  python3 - "$1" <<'EOF'
import json, pathlib, sys
files = sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl"))
summary = None
for f in files:
    for line in f.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("event") == "exit_summary":
            summary = r
if summary is None:
    print("no-exit-summary")
    sys.exit(0)
fns = summary.get("functions", {})
out = []
for name in ("cuMemAlloc_v2", "cuMemFree_v2"):
    f = fns.get(name, {})
    out.append(f"{name} {f.get('calls', 0)}/{f.get('errors', 0)}")
print(" ".join(out))
EOF
}

failed=0
# check LABEL EXPECTED COMMAND...: runs COMMAND under each build, prints the counts and
# compares them with each other and with EXPECTED (unless it is "-").
check() {
  local label=$1 want=$2 got=() i=0
  shift 2
  for so in "${builds[@]}"; do
    local dir=$work/trace-$label-$i
    mkdir -p "$dir"
    if ! env LD_PRELOAD="$so" SEEDANCE_MODE=fix SEEDANCE_TRACE_DIR="$dir" "$@" \
      >"$out/$label-$i.out" 2>"$out/$label-$i.err"; then
      echo "$label: run failed with $(basename "$so"): $(tail -n 1 "$out/$label-$i.err")"
      failed=1
    fi
    got+=("$(counts "$dir")")
    echo "$label $(basename "$so"): ${got[$i]}"
    i=$((i + 1))
  done
  if [ "${got[0]}" != "${got[-1]}" ] || [ "${got[0]}" = no-exit-summary ]; then
    echo "$label: DIFFERENT"
    failed=1
  fi
  if [ "$want" != - ] && [ "${got[0]}" != "$want" ]; then
    echo "$label: expected $want"
    failed=1
  fi
}

n=$((4 * (1 + 10 + 500)))
check threads_bench "cuMemAlloc_v2 $n/0 cuMemFree_v2 $n/0" env OPS=alloc_free ALLOC_EVERY=1 WARMUP=10 "$work/tb" 4 500
if [ -z "${FAKE_DRIVER_DIR:-}" ] && python3 -c 'import torch' 2>/dev/null; then
  check torch - env PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 -c '
import torch
x = torch.ones(1, device="cuda")
for i in range(300):
    y = torch.empty(1 << 20, device="cuda")
    del y
torch.cuda.synchronize()
print(float(x.sum()))'
else
  echo "torch: left out (a fake driver, or no PyTorch)"
fi
echo "failed: $failed"
exit $failed
