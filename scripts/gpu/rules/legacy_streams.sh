#!/usr/bin/env bash
# The legacy default stream's implicit synchronisation on a real GPU (one GPU, nvcc on the
# path). Run from the repository root:
#
#   scripts/gpu/rules/legacy_streams.sh path/to/libseedance_fix.so
#
# Builds legacy_streams.cu and runs both variants without the shim, with
# SEEDANCE_MODE=observe and with SEEDANCE_MODE=fix. Expected (one PASS line each, exit 0):
#   correct  every mode: "event on stream 0 waited for stream A = yes", "host buffer = as
#            ordered", no "seedance: " line on stderr (simpleStreams' pattern is silent);
#   faulty   plain and observe: "waited ... = no", "host buffer = out of order" (the race is
#            real); observe: one "seedance: " line naming the race; fix: "host buffer = as
#            ordered" and a "seedance: " line ending in the repair ("fix mode: ...").
set -uo pipefail
shim=${1:?usage: $0 path/to/libseedance_fix.so}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvcc -O2 -o "$work/legacy_streams" "$here/legacy_streams.cu" || { echo "FAIL build"; exit 1; }
status=0
check() { # check NAME CONDITION...
  if eval "${*:2}"; then echo "PASS $1"; else echo "FAIL $1"; status=1; fi
}
for v in correct faulty; do
  "$work/legacy_streams" "$v" >"$work/$v.plain.out" 2>"$work/$v.plain.err"
  for m in observe fix; do
    env LD_PRELOAD="$shim" SEEDANCE_MODE=$m SEEDANCE_TRACE_DIR="$work/trace-$v-$m" \
      "$work/legacy_streams" "$v" >"$work/$v.$m.out" 2>"$work/$v.$m.err"
  done
  for m in plain observe fix; do
    echo "--- $v $m"; cat "$work/$v.$m.out"; cat "$work/$v.$m.err"
  done
done
for m in plain observe fix; do
  check "correct $m" "grep -q 'waited for stream A = yes' $work/correct.$m.out &&
    grep -q 'as ordered' $work/correct.$m.out && ! grep -q 'seedance: ' $work/correct.$m.err"
done
check "faulty plain" "grep -q 'out of order' $work/faulty.plain.out"
check "faulty observe" "grep -q 'out of order' $work/faulty.observe.out &&
  [ \$(grep -c 'seedance: ' $work/faulty.observe.err) = 1 ]"
check "faulty fix" "grep -q 'as ordered' $work/faulty.fix.out && grep -q 'seedance: .*fix mode:' $work/faulty.fix.err"
exit $status
