#!/usr/bin/env bash
# Instructions the shim adds per hooked call, counted by valgrind's callgrind (deterministic,
# unlike wall time on a noisy machine). Runs tests/programs/ir_loop.c against the null
# driver with N and 2N calls, without and with the release shim, in each mode; the
# difference between the two lengths cancels start-up, and the difference between with and
# without is the shim's cost. Kinds: launch (cuLaunchKernel), alloc (cuMemAlloc_v2 +
# cuMemFree_v2), ctx (cuCtxCreate_v2 + cuCtxDestroy_v2 with 1000 allocations live in another
# context: a destroy costs what its context owned), copy and pinned_copy (cuMemcpyHtoDAsync_v2
# from pageable and from pinned memory), sync (a launch on a created stream +
# cuStreamSynchronize), event_sync (a launch, cuEventRecord + cuEventSynchronize), event_wait
# (a copy from pinned memory, cuEventRecord + cuStreamWaitEvent on its own stream, a
# cuStreamSynchronize every 64: threads_bench.c's event_wait).
#
#   scripts/ci/callgrind-hotpath.sh           print instructions per call
#   scripts/ci/callgrind-hotpath.sh --check   also fail if fix mode exceeds the bounds in
#                                          scripts/ci/hotpath-bounds.txt (CI runs this)
#
# KINDS="sync event_sync" measures only those; SHIM=path/to/libseedance_fix.so measures that
# build instead of building the tree's (to compare a commit before and after a change).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "callgrind-hotpath: valgrind is not installed"; exit 1; }
. scripts/bench/host-common.sh
shim_or_release "${SHIM:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_null_driver "$work"
cc -O2 -o "$work/ir_loop" tests/programs/ir_loop.c -L"$work" -lcuda
n=10000
ir() { # ir PRELOAD MODE KIND COUNT -> total instructions
  env LD_LIBRARY_PATH="$work" LD_PRELOAD="$1" SEEDANCE_MODE="$2" \
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$work/ir_loop" "$3" "$4" 2>&1 |
    awk '/Collected/ {print $4}'
}
per_call() { # per_call PRELOAD MODE KIND -> instructions per iteration
  local a b
  a=$(ir "$1" "$2" "$3" "$n"); b=$(ir "$1" "$2" "$3" $((2 * n)))
  echo $(((b - a) / n))
}
status=0
printf '%-12s %-8s %10s %10s %10s\n' call mode baseline shim added
for kind in ${KINDS:-launch alloc ctx copy pinned_copy sync event_sync event_wait}; do
  base=$(per_call "" fix "$kind")
  for mode in off observe fix; do
    with=$(per_call "$shim" "$mode" "$kind")
    added=$((with - base))
    label=$kind; [ "$kind" = alloc ] && label=alloc+free; [ "$kind" = ctx ] && label=ctx+destroy
    printf '%-12s %-8s %10s %10s %10s\n' "$label" "$mode" "$base" "$with" "$added"
    if [ "${1:-}" = --check ] && [ "$mode" = fix ]; then
      bound=$(awk -v k="$kind" '$1 == k {print $2}' scripts/ci/hotpath-bounds.txt)
      if [ -z "$bound" ]; then
        echo "callgrind-hotpath: no bound for $kind in scripts/ci/hotpath-bounds.txt"
        status=1
      elif [ "$added" -gt "$bound" ]; then
        echo "callgrind-hotpath: $kind adds $added instructions per call in fix mode, over the bound $bound (scripts/ci/hotpath-bounds.txt)"
        status=1
      fi
    fi
  done
done
exit $status
