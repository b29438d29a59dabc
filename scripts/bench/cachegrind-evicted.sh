#!/usr/bin/env bash
# Cache lines the shim misses per hooked call when the caches are cold (docs/performance.md,
# "Cache lines per call"): tests/programs/evict_loop.c against the null
# driver under cachegrind's cache simulation (a 2 MiB last-level cache; the loop touches
# 8 MiB between calls, as a real driver's own work evicts the shim's lines). Runs 200 and
# 400 calls and prints the difference per call, without the shim and with it, so start-up
# cancels. Deterministic, like scripts/ci/callgrind-hotpath.sh.
#
#   scripts/bench/cachegrind-evicted.sh [path/to/libseedance_fix.so]    (default: a release build)
#
# KINDS (launch copy pinned; also alloc and event_wait), MODE (fix). A benchmark, not a test: exit 0 unless a run failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "cachegrind-evicted: valgrind is not installed"; exit 1; }
. scripts/bench/host-common.sh
shim_or_release "${1:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_null_driver "$work"
cc -O2 -o "$work/evict_loop" tests/programs/evict_loop.c -L"$work" -lcuda
# totals PRELOAD KIND COUNT -> "D1mr DLmr D1mw DLmw" of the whole run
totals() {
  env LD_LIBRARY_PATH="$work" LD_PRELOAD="$1" SEEDANCE_MODE="${MODE:-fix}" \
    valgrind --tool=cachegrind --cache-sim=yes --LL=2097152,16,64 \
    --cachegrind-out-file="$work/out" "$work/evict_loop" "$2" "$3" >/dev/null 2>&1
  cg_annotate "$work/out" | grep "PROGRAM TOTALS" | tr -d ',' | awk '{print $9, $11, $15, $17}'
}
per_call() { # per_call PRELOAD KIND -> misses per call
  paste <(totals "$1" "$2" 200 | tr ' ' '\n') <(totals "$1" "$2" 400 | tr ' ' '\n') |
    awk '{printf "%.1f ", ($2 - $1) / 200}'
}
printf '%-8s %-6s %s\n' call run "D1 read, LL read, D1 write, LL write misses per call"
for kind in ${KINDS:-launch copy pinned}; do
  printf '%-8s %-6s %s\n' "$kind" plain "$(per_call "" "$kind")"
  printf '%-8s %-6s %s\n' "$kind" shim "$(per_call "$shim" "$kind")"
done
