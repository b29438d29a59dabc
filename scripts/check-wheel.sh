#!/usr/bin/env bash
# Installs the seedance-fix wheel into a fresh virtualenv, as a new user would
# (`pip install seedance-fix`), and runs the demo program and a Python program through the
# installed `seedance-fix run` against the fake driver it ships (--fake-driver). CI runs it
# after scripts/wheel.sh; no GPU, no network (the wheel has no dependencies).
#
#   bash scripts/check-wheel.sh target/wheels/seedance_fix-*.whl
#
# A wheel for another architecture (the aarch64 one of `scripts/wheel.sh --target
# aarch64-unknown-linux-gnu`, on an x86-64 machine) cannot be pip-installed here: it is
# unpacked into the layout `pip install --target DIR` gives (DIR/bin, DIR/seedance_fix) and
# its launcher, analyzer, shim and fake driver run under qemu-aarch64-static with the cross
# sysroot, as the end-to-end suite runs there (tests/harness/target.rs): the demo program,
# a healthy program and an exit status, through the wheel's own `seedance-fix run`. Needs
# qemu-user-static, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (Debian). No Python
# program there (no aarch64 Python in the sysroot).
#
# Prints PASS/FAIL per check; exit status = failures.
set -u
wheel=$(readlink -f "${1:?usage: check-wheel.sh WHEEL}")
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
# glibc_tag_check FILE...: the wheel's manylinux_2_N tag covers the newest GLIBC_2.M symbol
# version any FILE needs (M <= N), so pip on an older system refuses the wheel instead of its
# programs failing at run time. A wheel without a manylinux tag makes no such claim.
glibc_tag_check() {
  local need tag
  need=$(for f in "$@"; do readelf --version-info --wide "$f"; done |
         grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n1)
  tag=$(basename "$wheel" | sed -n 's/.*-manylinux_2_\([0-9]*\)_[a-z0-9_]*\.whl$/\1/p')
  echo "newest glibc symbol needed: 2.$need; wheel tag: $(basename "$wheel" | sed 's/.*-none-//; s/\.whl$//')"
  check "the manylinux tag covers every file's glibc needs" '[ -z "$tag" ] || [ "$need" -le "$tag" ]'
}

case $(basename "$wheel") in
  *_aarch64.whl) [[ $(uname -m) == aarch64 ]] || { check_foreign=aarch64; } ;;
esac
if [[ ${check_foreign:-} == aarch64 ]]; then
  qemu=$(command -v qemu-aarch64-static) || { echo "FAIL qemu-aarch64-static not found (Debian: qemu-user-static)"; exit 1; }
  sysroot=/usr/aarch64-linux-gnu
  [[ -e $sysroot/lib/ld-linux-aarch64.so.1 ]] || { echo "FAIL no $sysroot (Debian: libc6-dev-arm64-cross)"; exit 1; }
  command -v aarch64-linux-gnu-gcc >/dev/null || { echo "FAIL aarch64-linux-gnu-gcc not found (Debian: gcc-aarch64-linux-gnu)"; exit 1; }
  echo "== $(basename "$wheel"): unpacked as pip install --target lays it out, run under $qemu"
  python3 -m zipfile -e "$wheel" "$work/unpacked" || { echo "FAIL unpack"; exit 1; }
  site=$work/site
  mkdir -p "$site/bin"
  data=$(echo "$work"/unpacked/seedance_fix-*.data)
  cp -R "$data/platlib/." "$site/"
  cp "$data"/scripts/* "$site/bin/"
  chmod 0755 "$site"/bin/* "$site/seedance_fix/libseedance_fix.so" "$site/seedance_fix/fake-cuda/libcuda.so.1" \
    "$site/seedance_fix/fake-cuda/libnvidia-ml.so.1"
  fake=$site/seedance_fix/fake-cuda
  elves=("$site/bin/seedance-fix" "$site/bin/seedance-analyze" "$site/seedance_fix/libseedance_fix.so" "$fake/libcuda.so.1" "$fake/libnvidia-ml.so.1")
  check "launcher, analyzer, shim, fake driver and fake NVML are all aarch64 ELF files" \
    '(for f in "${elves[@]}"; do readelf -h "$f" | grep -q "Machine: *AArch64" || { echo "  not aarch64: $f"; exit 1; }; done)'
  glibc_tag_check "${elves[@]}"
  export PATH=/usr/bin:/bin QEMU_LD_PREFIX=$sysroot
  unset LD_PRELOAD LD_LIBRARY_PATH SEEDANCE_TRACE_DIR SEEDANCE_MODE
  q() { "$qemu" -L "$sysroot" "$@"; }
  q "$site/bin/seedance-fix" --version | tee "$work/version.txt"
  check "--version (under qemu) finds the wheel's shim" \
    'grep -q "^shim .*: $site/seedance_fix/libseedance_fix.so$" "$work/version.txt"'
  check "the analyzer runs (under qemu)" 'q "$site/bin/seedance-analyze" --version >/dev/null'
  aarch64-linux-gnu-gcc -O1 -o "$work/wrong_ordinal" examples/wrong_ordinal.c -L"$fake" -l:libcuda.so.1
  # The launcher (aarch64, under qemu) starts the program through the static qemu: no
  # binfmt_misc handler here, and the static qemu ignores the LD_PRELOAD it passes on.
  echo "== qemu seedance-fix run --fake-driver -- qemu ./wrong_ordinal   (CUDA_VISIBLE_DEVICES=1)"
  CUDA_VISIBLE_DEVICES=1 q "$site/bin/seedance-fix" run --fake-driver --trace-dir "$work/traces" \
    -- "$qemu" "$work/wrong_ordinal" >"$work/out.txt" 2>"$work/err.txt"
  cat "$work/out.txt" "$work/err.txt"
  check "the demo program's fault is repaired" 'grep -q "work done on ordinal 0" "$work/out.txt"'
  check "the run is summarized" 'grep -q "^seedance-fix: what the shim saw in this run" "$work/err.txt"'
  check "the summary names the repair" 'grep -q "device_fallback" "$work/err.txt"'
  check "one trace written" '[ "$(ls "$work/traces" | wc -l)" = 1 ]'
  check "the fake NVML was loaded (no NVML note)" '! grep -q "NVML could not be loaded" "$work"/traces/*'
  check "the wheel's analyzer reads it (under qemu)" \
    'q "$site/bin/seedance-analyze" summary --fail-on error "$work/traces" >/dev/null'
  cat >"$work/healthy.c" <<'C'
#include <stdio.h>
int cuInit(unsigned int);
int cuDeviceGetCount(int *);
int main(void) { int n = 0; int a = cuInit(0); int b = cuDeviceGetCount(&n); printf("%d %d %d\n", a, b, n); return 0; }
C
  printf 'int main(void) { return 3; }\n' >"$work/exit3.c"
  aarch64-linux-gnu-gcc -O1 -o "$work/healthy" "$work/healthy.c" -L"$fake" -l:libcuda.so.1
  aarch64-linux-gnu-gcc -O1 -o "$work/exit3" "$work/exit3.c"
  echo "== qemu seedance-fix run --fake-driver -- qemu ./healthy   (a healthy program)"
  q "$site/bin/seedance-fix" run --fake-driver -- "$qemu" "$work/healthy" >"$work/h.txt" 2>"$work/h-err.txt"
  echo "healthy: $(cat "$work/h.txt") / stderr: $(wc -c <"$work/h-err.txt") bytes"
  check "a healthy program runs through the launcher, unchanged" '[ "$(cat "$work/h.txt")" = "0 0 2" ]'
  check "nothing to say for a healthy program" '[ ! -s "$work/h-err.txt" ]'
  q "$site/bin/seedance-fix" run -- "$qemu" "$work/exit3"
  check "the exit status is the command's" '[ $? = 3 ]'
  echo "$fails failed"
  exit "$fails"
fi

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
glibc_tag_check "$work/venv/bin/seedance-fix" "$work/venv/bin/seedance-analyze" \
  "$fake/../libseedance_fix.so" "$fake/libcuda.so.1" "$fake/libnvidia-ml.so.1"
cc -O1 -o "$work/wrong_ordinal" examples/wrong_ordinal.c -L"$fake" -l:libcuda.so.1
echo "== seedance-fix run --fake-driver -- ./wrong_ordinal   (CUDA_VISIBLE_DEVICES=1)"
CUDA_VISIBLE_DEVICES=1 seedance-fix run --fake-driver --trace-dir "$work/traces" \
  -- "$work/wrong_ordinal" >"$work/out.txt" 2>"$work/err.txt"
cat "$work/out.txt" "$work/err.txt"
check "the demo program's fault is repaired" 'grep -q "work done on ordinal 0" "$work/out.txt"'
check "the run is summarized" 'grep -q "^seedance-fix: what the shim saw in this run" "$work/err.txt"'
check "the summary names the repair" 'grep -q "device_fallback" "$work/err.txt"'
check "one trace written" '[ "$(ls "$work/traces" | wc -l)" = 1 ]'
check "the fake NVML was loaded (no NVML note)" '! grep -q "NVML could not be loaded" "$work"/traces/*'
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
