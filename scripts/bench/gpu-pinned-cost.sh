#!/usr/bin/env bash
# What the shim adds to asynchronous copies from pinned host memory, on the GPU, as a
# benchmark (no pass or fail). One GPU is enough. From the repository root:
#
#   ROUNDS=15 scripts/bench/gpu-pinned-cost.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/pinned.cu and runs its `cost 10000` loop (10k cuMemcpyHtoDAsync of 4 KiB
# from one pinned block on one stream, each with a cuEventRecord) and, where PyTorch is
# installed, scripts/gpu/torch_pinned.py's `loop 10000` (pin_memory + non_blocking copies),
# ROUNDS times each (default 15), without and with the shim (fix mode, the default)
# interleaved in one run, so drift in clocks or the machine falls on both alike. Prints, per
# loop, the median, the lower and upper quartile and min/max of each side, and the ratio of
# the medians (with / without). Raw figures go to $OUT (default /tmp/seedance-pinned-cost).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-pinned-cost "${1:-}"
python=${PYTHON:-python3}
rounds=${ROUNDS:-15}
case $rounds in '' | *[!0-9]*) echo "ROUNDS must be a positive number; using 15"; rounds=15 ;; esac
has_torch=0
$python -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && has_torch=1
record_gpu_environment "rounds: $rounds" "torch: $([ $has_torch = 1 ] && $python -c 'import torch; print(torch.__version__)' || echo 'not installed')"

set -e
nvcc -cubin -arch=sm_90 -DPINNED_KERNELS -o "$work/pinned.cubin" "$here/gpu/pinned.cu"
nvcc -O2 -arch=sm_90 -o "$work/pinned" "$here/gpu/pinned.cu" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda -lpthread
set +e

for f in driver-without driver-with torch-without torch-with; do : >"$out/$f.txt"; done
for round in $(seq "$rounds"); do
  "$work/pinned" "$work/pinned.cubin" cost 10000 | awk '/ns per copy/ {print $4}' >>"$out/driver-without.txt"
  LD_PRELOAD="$shim" "$work/pinned" "$work/pinned.cubin" cost 10000 | awk '/ns per copy/ {print $4}' >>"$out/driver-with.txt"
  if [ $has_torch = 1 ]; then
    $python "$here/gpu/torch_pinned.py" loop 10000 | awk '/copies per second/ {print $4}' >>"$out/torch-without.txt"
    LD_PRELOAD="$shim" $python "$here/gpu/torch_pinned.py" loop 10000 | awk '/copies per second/ {print $4}' >>"$out/torch-with.txt"
  fi
done

# stats FILE: "median M, quartiles Q1-Q3, range MIN-MAX (n=N)" of the numbers in FILE, one
# per line (median from scripts/gpu/lib/common.sh).
stats() {
  [ -s "$1" ] || { echo none; return; }
  sort -n "$1" | awk -v m="$(median <"$1")" '{a[NR] = $1} END {
    q1 = a[int((NR + 3) / 4)]; q3 = a[int((3 * NR + 3) / 4)]
    printf "median %s, quartiles %s-%s, range %s-%s (n=%d)\n", m, q1, q3, a[1], a[NR], NR }'
}
report() {
  local name=$1 unit=$2
  [ -s "$out/$name-without.txt" ] || return 0
  echo "$name loop, $unit:"
  echo "  without the shim: $(stats "$out/$name-without.txt")"
  echo "  with the shim:    $(stats "$out/$name-with.txt")"
  awk -v w="$(median <"$out/$name-without.txt")" -v s="$(median <"$out/$name-with.txt")" \
    'BEGIN { if (w > 0) printf "  ratio of medians (with / without): %.4f\n", s / w }'
}
report driver "ns per copy (4 KiB + cuEventRecord)" | tee "$out/summary.txt"
report torch "copies per second" | tee -a "$out/summary.txt"
rm -rf "$work"
