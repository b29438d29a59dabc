#!/usr/bin/env bash
# Installs the seedance-fix wheel into a fresh virtualenv, as a new user would
# (`pip install seedance-fix`), and runs the demo program and a Python program through the
# installed `seedance-fix run` against the fake driver it ships (--fake-driver). CI runs it
# after scripts/wheel.sh; no GPU, no network (the wheel has no dependencies).
#
#   bash scripts/check-wheel.sh target/wheels/seedance_fix-*.whl
#
# Prints PASS/FAIL per check; exit status = failures.
set -u
wheel=$(readlink -f "${1:?usage: check-wheel.sh WHEEL}")
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

echo "== fresh virtualenv, pip install $(basename "$wheel")"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index "$wheel" || { echo "FAIL pip install"; exit 1; }
# Only the venv's bin on PATH, as after `source venv/bin/activate`.
export PATH="$work/venv/bin:/usr/bin:/bin"
unset LD_PRELOAD LD_LIBRARY_PATH SEEDANCE_TRACE_DIR SEEDANCE_MODE
check "seedance-fix and seedance-analyze on PATH" \
  '[ "$(command -v seedance-fix)" = "$work/venv/bin/seedance-fix" ] && seedance-analyze --version >/dev/null'
seedance-fix --version | tee "$work/version.txt"
check "--version finds the installed shim" \
  'grep -q "^shim .*: $work/venv/lib/python3[.0-9]*/site-packages/seedance_fix/libseedance_fix.so$" "$work/version.txt"'

# The layout the GPU machines get (pip install --target, scripts/gpu-wheel.sh).
"$work/venv/bin/pip" install -q --no-index --no-deps --target "$work/site" "$wheel"
check "pip install --target: the launcher finds the shim" \
  '"$work/site/bin/seedance-fix" --version | grep -q "^shim .*: $work/site/seedance_fix/libseedance_fix.so$"'

fake=$(echo "$work"/venv/lib/python3*/site-packages/seedance_fix/fake-cuda)
cc -O1 -o "$work/wrong_ordinal" examples/wrong_ordinal.c -L"$fake" -l:libcuda.so.1
echo "== seedance-fix run --fake-driver -- ./wrong_ordinal   (CUDA_VISIBLE_DEVICES=1)"
CUDA_VISIBLE_DEVICES=1 seedance-fix run --fake-driver --trace-dir "$work/traces" \
  -- "$work/wrong_ordinal" >"$work/out.txt" 2>"$work/err.txt"
cat "$work/out.txt" "$work/err.txt"
check "the demo program's fault is repaired" 'grep -q "work done on ordinal 0" "$work/out.txt"'
check "the run is summarized" 'grep -q "^seedance-fix: what the shim saw in this run" "$work/err.txt"'
check "the summary names the repair" 'grep -q "device_fallback" "$work/err.txt"'
check "one trace written" '[ "$(ls "$work/traces" | wc -l)" = 1 ]'
check "the installed analyzer reads it" \
  'seedance-analyze summary --fail-on error "$work/traces" >/dev/null'

echo "== seedance-fix run --fake-driver -- python -c ...   (a healthy program)"
py='import ctypes; c = ctypes.CDLL("libcuda.so.1"); n = ctypes.c_int(); print(c.cuInit(0), c.cuDeviceGetCount(ctypes.byref(n)), n.value)'
seedance-fix run --fake-driver -- python -c "$py" >"$work/py.txt" 2>"$work/py-err.txt"
echo "python: $(cat "$work/py.txt") / stderr: $(wc -c <"$work/py-err.txt") bytes"
check "python runs through the launcher, unchanged" '[ "$(cat "$work/py.txt")" = "0 0 2" ]'
check "nothing to say for a healthy program" '[ ! -s "$work/py-err.txt" ]'
seedance-fix run -- python -c 'import sys; sys.exit(3)'
check "the exit status is the command's" '[ $? = 3 ]'

echo "$fails failed"
exit "$fails"
