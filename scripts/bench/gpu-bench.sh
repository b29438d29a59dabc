#!/usr/bin/env bash
# Performance of the shim on a real GPU. Run from the repository root on the GPU
# machine:  scripts/bench/gpu-bench.sh [path/to/libseedance_fix.so] [rounds]
# Interleaves runs without and with the shim (default mode fix, no trace unless stated),
# ROUNDS times each, and prints medians and ratios:
#  - launch rate: 200k empty launches through the runtime;
#  - PyTorch training loop: small transformer, 300 AdamW steps;
#  - cuInit time: without the shim, with it, and with it plus a trace (topology, NVML);
#  - peak RSS of the launch-rate program without and with the shim.
# BENCH_ONLY=init measures only the cuInit rows (cheap: use more rounds).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-bench "${1:-}"
rounds=${2:-5}
export PYTHONUNBUFFERED=1
nvcc -O2 -arch=sm_90 -o "$work/launch_rate" "$here/gpu/launch_rate.cu" || exit 1
gcc -O2 -o "$work/init_time" "$here/gpu/init_time.c" -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda || exit 1
mkdir -p "$work/traces"

declare -A vals
for r in $(seq "$rounds"); do
  vals[init_base]+="$("$work/init_time") "
  vals[init_shim]+="$(LD_PRELOAD="$shim" "$work/init_time") "
  vals[init_trace]+="$(LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$work/traces" "$work/init_time") "
  [ "${BENCH_ONLY:-}" = init ] && continue
  vals[launch_base]+="$("$work/launch_rate" 200000) "
  vals[launch_shim]+="$(LD_PRELOAD="$shim" "$work/launch_rate" 200000) "
  vals[torch_base]+="$(python3 "$here/gpu/torch_bench.py" 300) "
  vals[torch_shim]+="$(LD_PRELOAD="$shim" python3 "$here/gpu/torch_bench.py" 300) "
  vals[rss_base]+="$(python3 "$here/gpu/rss.py" "$work/launch_rate" 20000) "
  vals[rss_shim]+="$(LD_PRELOAD="$shim" python3 "$here/gpu/rss.py" "$work/launch_rate" 20000) "
done
for k in "${!vals[@]}"; do echo "$k ${vals[$k]}"; done | sort > "$out/bench-raw.txt"
python3 - "$out/bench-raw.txt" <<'PY' | tee "$out/bench.txt"
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    k, *xs = line.split()
    v[k] = statistics.median(float(x) for x in xs)
print(f"{'measure':<34} {'without':>12} {'with':>12} {'ratio/added':>12}")
if "launch_base" in v:
  print(f"{'launches/s (200k empty)':<34} {v['launch_base']:>12.0f} {v['launch_shim']:>12.0f} {v['launch_shim'] / v['launch_base']:>12.4f}")
  print(f"{'PyTorch steps/s (300 steps)':<34} {v['torch_base']:>12.2f} {v['torch_shim']:>12.2f} {v['torch_shim'] / v['torch_base']:>12.4f}")
print(f"{'cuInit us (shim, no trace)':<34} {v['init_base']:>12.1f} {v['init_shim']:>12.1f} {v['init_shim'] - v['init_base']:>+12.1f}")
print(f"{'cuInit us (shim + trace + NVML)':<34} {v['init_base']:>12.1f} {v['init_trace']:>12.1f} {v['init_trace'] - v['init_base']:>+12.1f}")
if "rss_base" in v:
  print(f"{'peak RSS KiB (launch_rate 20k)':<34} {v['rss_base']:>12.0f} {v['rss_shim']:>12.0f} {v['rss_shim'] - v['rss_base']:>+12.0f}")
PY
