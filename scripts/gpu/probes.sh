#!/usr/bin/env bash
# GPU check that the shim leaves device questions to the driver (docs/reliability.md, "fix
# never answers a question as if it were a mistake"). One GPU is enough.
# Run from the repository root on the GPU machine:
#
#   scripts/gpu/probes.sh [path/to/libseedance_fix.so]
#
# Builds tests/programs/probes.c against the real driver (gcc, the toolkit's stub libcuda to
# link, the driver's libcuda.so.1 at run time) and runs each scenario without the shim, then
# with it in SEEDANCE_MODE=off, observe and fix (the default):
#   questions:  loop (while cuDeviceGet(&d, n) == CUDA_SUCCESS n++), scan (ordinals 0..63),
#               minus1, intmin, retain (cuDevicePrimaryCtxRetain(-1)), create
#               (cuCtxCreate_v2 on 12345), second (cuDeviceGet(0), then "is there a second
#               GPU?" with cuDeviceGet(1), on a 1-GPU host)
#   mistakes:   get:N with N = the device count (one device the process cannot have), and
#               rank (cuDeviceGetCount, then cuDeviceGet(count) with a context and an
#               allocation: a rank used after the count was checked)
# Checks, printing PASS or FAIL for each:
#   - every question scenario prints exactly what it prints without the shim, in every mode,
#     and the shim writes no line on stderr;
#   - the fix-mode trace counts the questions in exit_summary.device_questions and has no
#     device_fault or device_fallback record;
#   - the mistake is still explained (observe: the driver's code kept) and in fix repaired
#     (cuDeviceGet -> 0, device 0).
# Logs and traces go to $OUT (default /tmp/seedance-probes). Exit status: failed checks.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
out=${OUT:-/tmp/seedance-probes}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
  echo "shim: $shim ($(sha256sum "$shim" | cut -c1-16))"
} | tee "$out/environment.txt"

gcc -O2 -I"$root/tests/programs" -o "$work/probes" "$root/tests/programs/probes.c" \
    -L"$cuda_home/lib64/stubs" -lcuda -lpthread || { echo "FAIL: cannot build probes.c"; exit 1; }
# The driver's own count (CUDA_VISIBLE_DEVICES applied), from the program's count scenario.
count=$("$work/probes" count | sed -n 's/^cuDeviceGetCount -> 0, \([0-9]*\);.*/\1/p')
[ -n "$count" ] || { echo "FAIL: cuDeviceGetCount failed without the shim"; exit 1; }
echo "visible devices (cuDeviceGetCount): $count"

failed=0
check() { # check NAME CONDITION-STATUS
  if [ "$2" -eq 0 ]; then echo "PASS: $1"; else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
run() { # run NAME MODE ARGS... -> $out/NAME-MODE.{out,err}, trace in $out/trace-NAME-MODE
  local name=$1 mode=$2; shift 2
  local t="$out/trace-$name-$mode"
  rm -rf "$t"; mkdir -p "$t"
  if [ "$mode" = native ]; then
    "$work/probes" "$@" >"$out/$name-$mode.out" 2>"$out/$name-$mode.err"
  else
    LD_PRELOAD="$shim" SEEDANCE_MODE="$mode" SEEDANCE_TRACE_DIR="$t" \
        "$work/probes" "$@" >"$out/$name-$mode.out" 2>"$out/$name-$mode.err"
  fi
  echo "exit $?" >>"$out/$name-$mode.out"
}
questions() { # questions TRACE-DIR -> prints device_questions, status 0 if non-empty and no fault
  python3 - "$1" <<'PY'
import json, pathlib, sys
recs = [json.loads(l) for f in pathlib.Path(sys.argv[1]).glob("*.jsonl")
        for l in f.read_text().splitlines() if l.strip()]
kinds = [r["event"] for r in recs]
q = [r.get("device_questions") for r in recs if r["event"] == "exit_summary"]
print(f"  device_questions: {q}")
sys.exit(0 if q and q[0] and "device_fault" not in kinds and "device_fallback" not in kinds else 1)
PY
}

questions_list=(loop scan "minus1 intmin retain create")
[ "$count" -eq 1 ] && questions_list+=(second)
for scenario in "${questions_list[@]}"; do
  name=${scenario%% *}
  # shellcheck disable=SC2086
  for mode in native off observe fix; do run "$name" "$mode" $scenario; done
  echo "== $scenario"; sed 's/^/  native: /' "$out/$name-native.out"
  for mode in off observe fix; do
    cmp -s "$out/$name-native.out" "$out/$name-$mode.out"
    check "$scenario, $mode: same output as without the shim" $?
    ! grep -q '^seedance:' "$out/$name-$mode.err"
    check "$scenario, $mode: no line from the shim" $?
  done
  questions "$out/trace-$name-fix"
  check "$scenario, fix: counted as questions, no device fault or fallback record" $?
done

echo "== get:$count (a mistake)"
for mode in native observe fix; do run mistake "$mode" "get:$count"; done
sed 's/^/  native: /' "$out/mistake-native.out"; sed 's/^/  fix: /' "$out/mistake-fix.out"
grep -q "cuDeviceGet($count) -> 101" "$out/mistake-native.out"
check "get:$count natively: CUDA_ERROR_INVALID_DEVICE" $?
cmp -s "$out/mistake-native.out" "$out/mistake-observe.out" &&
    grep -q "ordinal $count requested" "$out/mistake-observe.err"
check "get:$count, observe: explained, the driver's code kept" $?
grep -q "cuDeviceGet($count) -> 0, device 0" "$out/mistake-fix.out" &&
    grep -q "fix: ordinal $count -> ordinal 0" "$out/mistake-fix.err"
check "get:$count, fix: repaired to ordinal 0 and announced" $?

echo "== rank (cuDeviceGetCount, then cuDeviceGet(count): a mistake)"
for mode in native observe fix; do run rank "$mode" rank; done
sed 's/^/  native: /' "$out/rank-native.out"; sed 's/^/  fix: /' "$out/rank-fix.out"
cmp -s "$out/rank-native.out" "$out/rank-observe.out" &&
    grep -q "ordinal $count requested" "$out/rank-observe.err"
check "rank, observe: explained, the driver's code kept" $?
grep -q "rank $count of $count: cuDeviceGet -> 0, device 0, work -> 0" "$out/rank-fix.out" &&
    grep -q "fix: ordinal $count -> ordinal 0" "$out/rank-fix.err"
check "rank, fix: repaired to ordinal 0, announced, context and allocation work" $?

echo "failed checks: $failed"
echo "outputs and traces in $out"
exit $failed
