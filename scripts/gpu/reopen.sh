#!/usr/bin/env bash
# GPU check that a program which closes the real driver and opens it again runs as without
# the shim while the shim's session_start record's thread queries that driver (docs/reliability.md,
# "A program that closes the driver while the shim's own thread queries it keeps running").
# One GPU is enough. Run from the repository root on the GPU machine:
#
#   scripts/gpu/reopen.sh [path/to/libseedance_fix.so]
#
# Builds tests/programs/reopen.c (gcc, -ldl) and runs `reopen reopen LIBCUDA LIBCUDA` and
# `reopen dlmopen LIBCUDA LIBCUDA` (LIBCUDA: the driver's libcuda.so.1, as the loader finds
# it) ROUNDS times (default 5) without the shim and with it in SEEDANCE_MODE=off, observe
# and fix, traces written (SEEDANCE_TRACE_DIR: the session_start record's thread starts at the
# first cuInit) and REOPEN_PAUSE_MS=200 (the program waits right after its dlclose, while
# that thread runs). Checks, PASS or FAIL each: every run exits as the native run did and
# prints what it printed; the shim writes nothing on stderr when every call of the native
# run succeeded (a driver copy opened after a dlmopen'd one was closed fails cuInit with 304
# on the H200 without the shim too, and observe and fix explain that failure); each observe
# and fix trace has its session_start record. Logs go to $OUT (default /tmp/seedance-reopen). Exit status: failed
# checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-reopen "${1:-}"
rounds=${ROUNDS:-5}
root=$(cd "$here/.." && pwd)
# LIBCUDA overrides the driver library (a copy of the fake driver, to try this script without a GPU).
lib=${LIBCUDA:-$(ldconfig -p | awk '/libcuda\.so\.1/ {print $NF; exit}')}
record_gpu_environment "libcuda: $lib" "rounds: $rounds"
gcc -O1 -o "$work/reopen" "$root/tests/programs/reopen.c" -ldl || { echo "FAIL: build reopen.c"; exit 1; }

failed=0
check() { if [ "$2" -eq 0 ]; then echo "PASS: $1"; else echo "FAIL: $1"; failed=$((failed + 1)); fi; }
for how in reopen dlmopen; do
  REOPEN_PAUSE_MS=200 "$work/reopen" "$how" "$lib" "$lib" >"$out/$how-native.out" 2>&1
  native=$?
  echo "$how without the shim: exit $native: $(tr '\n' ';' <"$out/$how-native.out")"
  # Every call answered 0 without the shim: then the shim has nothing to say.
  quiet=1
  grep -Eq -- '-> [1-9]' "$out/$how-native.out" && quiet=0
  for mode in off observe fix; do
    bad=0 crashes=0 noisy=0 unrecorded=0
    for r in $(seq 1 "$rounds"); do
      t="$out/trace-$how-$mode-$r"
      rm -rf "$t"; mkdir -p "$t"
      LD_PRELOAD="$shim" SEEDANCE_MODE="$mode" SEEDANCE_TRACE_DIR="$t" REOPEN_PAUSE_MS=200 \
        "$work/reopen" "$how" "$lib" "$lib" >"$out/$how-$mode-$r.out" 2>"$out/$how-$mode-$r.err"
      rc=$?
      [ "$rc" -eq "$native" ] || { bad=$((bad + 1)); [ "$rc" -ge 128 ] && crashes=$((crashes + 1)); }
      cmp -s "$out/$how-$mode-$r.out" "$out/$how-native.out" || bad=$((bad + 1))
      [ "$quiet" = 1 ] && [ -s "$out/$how-$mode-$r.err" ] && noisy=$((noisy + 1))
      if [ "$mode" != off ] && ! grep -qs '"event":"session_start"' "$t"/*; then
        unrecorded=$((unrecorded + 1))
      fi
    done
    echo "$how $mode: $rounds runs, $bad differing, $crashes killed by a signal, $noisy with stderr, $unrecorded without a session_start record"
    check "$how $mode: every run as without the shim" "$bad"
    check "$how $mode: nothing on stderr$([ "$quiet" = 1 ] || echo ' (not asked: the native run had failures)')" "$noisy"
    check "$how $mode: session_start record written" "$unrecorded"
  done
done
echo "failed checks: $failed"
exit "$failed"
