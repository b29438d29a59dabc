#!/usr/bin/env bash
# GPU check that a fork soon after cuInit leaves the child the driver it would have without
# the shim (docs/reliability.md, the fork gate: the shim's own driver queries started by the
# first cuInit are finished before fork). One GPU is enough. Run from the
# repository root on the GPU machine:
#
#   scripts/gpu/fork.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/fork_soon.c against the real driver and runs it 10 times at each delay
# between cuInit and fork (0, 100, 1000, 5000 and 20000 us) without the shim, then with it in
# observe and fix. Checks, PASS or FAIL each: every run's line (the child's codes, the
# parent's, the child's exit status) is the one the same delay gives without the shim; no
# child is ended by the 20 s alarm; the shim's only stderr line is the child's fork
# explanation, once per run (the child's calls get CUDA_ERROR_NOT_INITIALIZED: fact 15).
# Logs to $OUT (default /tmp/seedance-fork). Exit status: failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-fork "${1:-}"
trap 'rm -rf "$work"' EXIT
record_gpu_environment
gcc -O2 -I"$root/tests/programs" -o "$work/fork_soon" "$here/gpu/fork_soon.c" \
    -L"$cuda_home/lib64/stubs" -lcuda || { echo "FAIL: cannot build fork_soon.c"; exit 1; }
failed=0
check() { if [ "$1" = 0 ]; then echo "PASS: $2"; else echo "FAIL: $2"; failed=$((failed + 1)); fi; }
for delay in 0 100 1000 5000 20000; do
  for mode in none observe fix; do
    : >"$out/$mode-$delay.txt"; : >"$out/$mode-$delay.err"
    for i in 1 2 3 4 5 6 7 8 9 10; do
      if [ "$mode" = none ]; then
        timeout 60 "$work/fork_soon" "$delay" >>"$out/$mode-$delay.txt" 2>>"$out/$mode-$delay.err"
      else
        SEEDANCE_MODE=$mode SEEDANCE_TRACE_DIR="$work/traces" LD_PRELOAD="$shim" \
          timeout 60 "$work/fork_soon" "$delay" >>"$out/$mode-$delay.txt" 2>>"$out/$mode-$delay.err"
      fi
      echo "rc=$?" >>"$out/$mode-$delay.txt"
    done
  done
  echo "delay $delay us, without the shim: $(sort "$out/none-$delay.txt" | uniq -c | tr '\n' ';')"
  for mode in observe fix; do
    cmp -s <(sort "$out/none-$delay.txt") <(sort "$out/$mode-$delay.txt")
    check $? "delay $delay us, $mode: the same lines as without the shim"
    ! grep -q "exit=142" "$out/$mode-$delay.txt"
    check $? "delay $delay us, $mode: no child ended by the alarm"
    # The child, forked after cuInit, gets 3 and hears why at its first call, once: one line
    # per run and nothing else (docs/design.md, fact 15).
    n=$(grep -c '^seedance: cuDeviceGetCount: CUDA_ERROR_NOT_INITIALIZED (3): this process (pid [0-9]*) was forked from pid [0-9]* after pid [0-9]* initialised CUDA; ' "$out/$mode-$delay.err")
    [ "$n" = 10 ] && [ "$(wc -l <"$out/$mode-$delay.err")" = 10 ]
    check $? "delay $delay us, $mode: one fork explanation per run (cuDeviceGetCount), nothing else on stderr"
  done
  n=$(grep -l '"forked_after_init"' "$work/traces"/*.jsonl 2>/dev/null | wc -l)
  [ "$n" = 20 ]
  check $? "delay $delay us: a trace of its own for each child (20 with forked_after_init, found $n)"
  rm -rf "$work/traces"
done
echo "failed checks: $failed"
exit "$failed"
