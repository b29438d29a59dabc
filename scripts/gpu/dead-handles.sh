#!/usr/bin/env bash
# GPU check: calls on streams and events whose context was destroyed. One GPU is enough
#. Run from the repository root on the GPU machine:
#
#   scripts/gpu/dead-handles.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/dead_handles.c (driver API, -lcuda) and runs each case in its own
# process: without the shim (4 times: the driver crashed in cuStreamSynchronize and
# cuStreamDestroy of such a stream in 4 of 4 runs on driver 580.159), with
# SEEDANCE_MODE=observe and in fix mode (the default), 2 times each. Cases: stream_sync,
# stream_destroy, event_sync, event_destroy (context created, stream and event made and
# synchronised, context destroyed, then the one call), and live (the same calls before
# the destroy).
#
# Checks:
#   - without the shim: reported (code, or the signal that ended the process); no check;
#   - observe: the process finishes ("done"), the call gets 709
#     (CUDA_ERROR_CONTEXT_IS_DESTROYED), and the shim says it did not call the driver;
#   - fix: the process finishes, the call gets 0 (the handle died with its context);
#   - live: every call 0 in every run, no line from the shim.
# Logs go to $OUT (default /tmp/seedance-dead-handles). Prints PASS/FAIL per check and a
# final count; exit status: the number of failed checks. About 10 s.
set -u
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
out=${OUT:-/tmp/seedance-dead-handles}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | paste -sd';')"
  echo "shim: $shim ($(sha256sum "$shim" | cut -c1-16))"
} | tee "$out/environment.txt"

if command -v nvcc >/dev/null; then
  cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
  nvcc -O2 -o "$work/dead_handles" "$here/gpu/dead_handles.c" \
      -L"$cuda_home/lib64/stubs" -lcuda || exit 1
else
  # No toolkit: any C compiler, linked against the libcuda on the library path.
  ${CC:-cc} -O2 -o "$work/dead_handles" "$here/gpu/dead_handles.c" ${LDFLAGS:-} -lcuda || exit 1
fi

fails=0
passes=0
check() { # check NAME CONDITION-STATUS
  if [ "$2" = 0 ]; then
    echo "PASS $1"; passes=$((passes + 1))
  else
    echo "FAIL $1"; fails=$((fails + 1))
  fi
}

# run MODE CASE N: one process; its stdout+stderr in $out/MODE-CASE-N.txt with the exit.
run() {
  local mode=$1 c=$2 n=$3 log="$out/$1-$2-$3.txt"
  case $mode in
    without) "$work/dead_handles" "$c" >"$log" 2>&1 ;;
    observe) LD_PRELOAD="$shim" SEEDANCE_MODE=observe "$work/dead_handles" "$c" >"$log" 2>&1 ;;
    fix) LD_PRELOAD="$shim" SEEDANCE_MODE=fix "$work/dead_handles" "$c" >"$log" 2>&1 ;;
  esac
  local rc=$?
  if [ $rc -gt 128 ]; then
    echo "exit signal $((rc - 128))" >>"$log"
  else
    echo "exit $rc" >>"$log"
  fi
}

dead="stream_sync stream_destroy event_sync event_destroy"
for c in $dead live; do
  for n in 1 2 3 4; do run without "$c" "$n"; done
  for n in 1 2; do run observe "$c" "$n"; run fix "$c" "$n"; done
done

echo
echo "without the shim (4 runs each):"
for c in $dead live; do
  printf '  %-15s' "$c"
  for n in 1 2 3 4; do
    f="$out/without-$c-$n.txt"
    if grep -q '^done$' "$f"; then
      printf ' %s' "$(grep -- ' -> ' "$f" | sed 's/.* -> //' | paste -sd/)"
    else
      printf ' [%s]' "$(tail -n 1 "$f")"
    fi
  done
  echo
done
echo

for c in $dead; do
  for n in 1 2; do
    f="$out/observe-$c-$n.txt"
    grep -q '^done$' "$f" && grep -q '^exit 0$' "$f"
    check "observe $c run $n finishes" $?
    grep -Eq '^cu[A-Za-z]+ -> 709$' "$f"
    check "observe $c run $n gets 709" $?
    grep -q 'without calling the driver' "$f"
    check "observe $c run $n: the shim says it did not call the driver" $?
    f="$out/fix-$c-$n.txt"
    grep -q '^done$' "$f" && grep -q '^exit 0$' "$f"
    check "fix $c run $n finishes" $?
    grep -Eq '^cu[A-Za-z]+ -> 0$' "$f"
    check "fix $c run $n gets 0" $?
  done
done
for mode in without observe fix; do
  for n in 1 2; do
    f="$out/$mode-live-$n.txt"
    [ "$(grep -c -- ' -> 0$' "$f")" = 4 ] && grep -q '^exit 0$' "$f" && ! grep -q '^seedance:' "$f"
    check "$mode live run $n: every call 0, no line from the shim" $?
  done
done

echo
echo "$passes passed, $fails failed (logs in $out)"
rm -rf "$work"
exit "$fails"
