#!/usr/bin/env bash
# Cache lines one hooked call touches in the shim (docs/performance.md, "Cache lines
# per call"): tests/programs/ir_loop.c against the null
# driver under valgrind's lackey, N and 2N calls, so that start-up cancels. Counts the
# shim's instructions and code lines per call, other objects' code lines it adds (the
# loader's TLS descriptor function), and the data lines its instructions touch, each named
# by where it lies and which functions touch it.
# On a real GPU each of those lines can miss after the driver's own work (the GPU's
# thread-count rows, docs/performance.md), so this is the list to shorten. Deterministic.
#
#   scripts/bench/lines-touched.sh [path/to/libseedance_fix.so]    (default: a release build)
#
# KINDS (ir_loop's: launch alloc copy pinned_copy sync event_sync event_wait; default
# "launch alloc pinned_copy event_wait"), MODES ("off fix"), N (300). A benchmark, not a
# test: exit 0 unless a run failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "lines-touched: valgrind is not installed"; exit 1; }
. scripts/bench/host-common.sh
shim_or_release "${1:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_null_driver "$work"
cc -O2 -o "$work/ir_loop" tests/programs/ir_loop.c -L"$work" -lcuda
n=${N:-300}
# trace PRELOAD MODE KIND COUNT NAME: $work/NAME.trace (lackey) and $work/NAME.ld (LD_DEBUG)
trace() {
  env LD_LIBRARY_PATH="$work" ${1:+LD_PRELOAD="$1"} SEEDANCE_MODE="$2" LD_DEBUG=files \
    valgrind --tool=lackey --trace-mem=yes --log-file="$work/$5.trace" \
    "$work/ir_loop" "$3" "$4" >/dev/null 2>"$work/$5.ld"
}
for kind in ${KINDS:-launch alloc pinned_copy event_wait}; do
  trace "" fix "$kind" "$n" plain-s
  trace "" fix "$kind" $((2 * n)) plain-l
  for mode in ${MODES:-off fix}; do
    trace "$shim" "$mode" "$kind" "$n" s
    trace "$shim" "$mode" "$kind" $((2 * n)) l
    echo "## $kind, $mode"
    python3 scripts/bench/lines_touched.py "$shim" "$n" "$work/s.trace" "$work/s.ld" \
      "$work/l.trace" "$work/l.ld" "$work/plain-s.trace" "$work/plain-s.ld" \
      "$work/plain-l.trace" "$work/plain-l.ld"
  done
done
