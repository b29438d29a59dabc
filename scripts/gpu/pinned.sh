#!/usr/bin/env bash
# GPU checks for races between asynchronous copies on pinned host memory. One GPU is enough
#. Run from the repository root on the GPU machine:
#
#   scripts/gpu/pinned.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/pinned.cu (a driver-API program: a ~200 ms spin kernel on stream A
# ahead of a 64 MiB cuMemcpyHtoDAsync from a pinned buffer, then the mistake) and runs each
# case in its own process without the shim, with SEEDANCE_MODE=observe and in fix mode (the
# default); the host_write case also with SEEDANCE_HOST_GUARD=on in both modes.
#
# Checks:
#   - recycle, recycle_thread (a D2H into the same buffer on stream B, from the same or a
#     second thread): observe explains it (a host_hazard record, one stderr line) and
#     changes nothing; fix explains it and the device copy is intact;
#   - host_write (a host memset into the last page of the source): with the guard on,
#     observe reports the write (thread and backtrace) and fix makes the data intact;
#   - event_ordered, pool_query, synchronized, same_stream: intact without the shim, and no
#     line from the shim and no host_hazard record in either mode;
#   - PyTorch: a DataLoader with pin_memory and non_blocking copies gives the same checksum
#     with the shim and says nothing;
#   - cost: the driver-API loop (10k 4 KiB copies, each with an event record) and the
#     PyTorch pin_memory + non_blocking loop (10k copies), 5 interleaved rounds without and
#     with the shim; the medians are printed and the PyTorch one must be within 1%.
# Logs, outputs and traces go to $OUT (default /tmp/seedance-pinned). Prints PASS/FAIL per
# check and a final count. Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-pinned "${1:-}"
python=${PYTHON:-python3}
record_gpu_environment "torch: $($python -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1)"

set -e
nvcc -cubin -arch=sm_90 -DPINNED_KERNELS -o "$work/pinned.cubin" "$here/gpu/pinned.cu"
nvcc -O2 -arch=sm_90 -o "$work/pinned" "$here/gpu/pinned.cu" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda -lpthread
set +e

failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

# run NAME CASE [ENV...]: runs the program (the shim only when ENV names a mode), output
# in $out/NAME.txt, trace in $out/trace-NAME.
run() {
  local name=$1 c=$2
  shift 2
  mkdir -p "$out/trace-$name"
  if [ $# -eq 0 ]; then
    "$work/pinned" "$work/pinned.cubin" "$c" >"$out/$name.txt" 2>&1
  else
    env LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace-$name" "$@" \
        "$work/pinned" "$work/pinned.cubin" "$c" >"$out/$name.txt" 2>&1
  fi
  echo "exit $?" >>"$out/$name.txt"
}
hazards() { cat "$out/trace-$1"/*.jsonl 2>/dev/null | grep -c '"event":"host_hazard"'; }
said() { grep -c '^seedance: ' "$out/$1.txt"; }
intact() { grep -q '^device copy: intact' "$out/$1.txt"; }
corrupted() { grep -q '^device copy: corrupted' "$out/$1.txt"; }

for c in recycle recycle_thread; do
  run "without-$c" "$c"
  run "observe-$c" "$c" SEEDANCE_MODE=observe
  run "fix-$c" "$c" SEEDANCE_MODE=fix
  echo "== $c: without: $(grep '^device copy' "$out/without-$c.txt"); observe: $(grep '^device copy' "$out/observe-$c.txt"); fix: $(grep '^device copy' "$out/fix-$c.txt")"
  grep '^seedance: ' "$out/fix-$c.txt" | head -n 2
  if corrupted "without-$c"; then echo "  without the shim: corrupted (the race is real)"; else echo "  without the shim: intact (the race did not happen this run)"; fi
  if [ "$(hazards "observe-$c")" -ge 1 ] && [ "$(said "observe-$c")" -ge 1 ] \
      && [ "$(grep '^device copy' "$out/observe-$c.txt")" = "$(grep '^device copy' "$out/without-$c.txt")" ]; then
    pass "$c observe: explained, result unchanged"
  else
    fail "$c observe: $(hazards "observe-$c") host_hazard records, $(said "observe-$c") lines"
  fi
  if [ "$(hazards "fix-$c")" -ge 1 ] && intact "fix-$c"; then
    pass "$c fix: explained and intact"
  else
    fail "$c fix: $(hazards "fix-$c") host_hazard records; $(grep '^device copy' "$out/fix-$c.txt")"
  fi
done

c=host_write
run "without-$c" "$c"
run "observe-$c" "$c" SEEDANCE_MODE=observe SEEDANCE_HOST_GUARD=on
run "fix-$c" "$c" SEEDANCE_MODE=fix SEEDANCE_HOST_GUARD=on
echo "== $c: without: $(grep '^device copy' "$out/without-$c.txt"); observe+guard: $(grep '^device copy' "$out/observe-$c.txt"); fix+guard: $(grep '^device copy' "$out/fix-$c.txt")"
grep '^seedance: ' "$out/fix-$c.txt" | head -n 3
if grep -q 'host write' "$out/observe-$c.txt" && grep -q '^device copy' "$out/observe-$c.txt"; then
  pass "$c observe+guard: the write reported"
else
  fail "$c observe+guard: no report of the write"
fi
if grep -q 'host write' "$out/fix-$c.txt" && intact "fix-$c"; then
  pass "$c fix+guard: reported and intact"
else
  fail "$c fix+guard: $(grep '^device copy' "$out/fix-$c.txt")"
fi

for c in event_ordered pool_query synchronized same_stream; do
  run "without-$c" "$c"
  run "observe-$c" "$c" SEEDANCE_MODE=observe
  run "fix-$c" "$c" SEEDANCE_MODE=fix
  if intact "without-$c" && intact "observe-$c" && intact "fix-$c" \
      && [ "$(said "observe-$c")" -eq 0 ] && [ "$(said "fix-$c")" -eq 0 ] \
      && [ "$(hazards "observe-$c")" -eq 0 ] && [ "$(hazards "fix-$c")" -eq 0 ]; then
    pass "$c: intact and silent"
  else
    fail "$c: $(said "observe-$c")/$(said "fix-$c") lines, $(hazards "observe-$c")/$(hazards "fix-$c") hazards"
  fi
done

# PyTorch DataLoader with pin_memory.
$python "$here/gpu/torch_pinned.py" dataloader >"$out/torch-dl-without.txt" 2>&1
for mode in observe fix; do
  mkdir -p "$out/trace-torch-dl-$mode"
  LD_PRELOAD="$shim" SEEDANCE_MODE=$mode SEEDANCE_TRACE_DIR="$out/trace-torch-dl-$mode" \
      $python "$here/gpu/torch_pinned.py" dataloader >"$out/torch-dl-$mode.txt" 2>&1
  if [ "$(grep checksum "$out/torch-dl-$mode.txt")" = "$(grep checksum "$out/torch-dl-without.txt")" ] \
      && [ -n "$(grep checksum "$out/torch-dl-without.txt")" ] \
      && ! grep -q '^seedance: ' "$out/torch-dl-$mode.txt" \
      && [ "$(hazards "torch-dl-$mode")" -eq 0 ]; then
    pass "torch DataLoader pin_memory ($mode): same checksum, silent"
  else
    fail "torch DataLoader pin_memory ($mode): $(cat "$out/torch-dl-$mode.txt" | tail -n 3)"
  fi
done

# Cost: interleaved rounds, medians.
: >"$out/cost-driver-without.txt"; : >"$out/cost-driver-with.txt"
: >"$out/cost-torch-without.txt"; : >"$out/cost-torch-with.txt"
for round in 1 2 3 4 5; do
  "$work/pinned" "$work/pinned.cubin" cost 10000 | awk '/ns per copy/ {print $4}' >>"$out/cost-driver-without.txt"
  LD_PRELOAD="$shim" "$work/pinned" "$work/pinned.cubin" cost 10000 | awk '/ns per copy/ {print $4}' >>"$out/cost-driver-with.txt"
  $python "$here/gpu/torch_pinned.py" loop 10000 | awk '/copies per second/ {print $4}' >>"$out/cost-torch-without.txt"
  LD_PRELOAD="$shim" $python "$here/gpu/torch_pinned.py" loop 10000 | awk '/copies per second/ {print $4}' >>"$out/cost-torch-with.txt"
done
dw=$(median <"$out/cost-driver-without.txt"); ds=$(median <"$out/cost-driver-with.txt")
tw=$(median <"$out/cost-torch-without.txt"); ts=$(median <"$out/cost-torch-with.txt")
echo "driver loop: ns per copy (4 KiB + cuEventRecord), median of 5: without $dw, with $ds"
echo "torch loop: copies per second, median of 5: without $tw, with $ts"
if awk -v w="$tw" -v s="$ts" 'BEGIN {exit !(w > 0 && s >= 0.99 * w)}'; then
  pass "torch pin_memory + non_blocking loop within 1% ($ts vs $tw copies/s)"
else
  fail "torch pin_memory + non_blocking loop: $ts vs $tw copies/s (over 1% slower)"
fi

echo "failed: $failed"
rm -rf "$work"
exit "$failed"
