#!/usr/bin/env bash
# Installs the seedance-fix wheel into a fresh virtualenv, as a new user would
# (`pip install seedance-fix`), and runs the demo program and a Python program through the
# installed `seedance-fix run` against the fake driver it ships (--fake-driver). CI runs it
# after scripts/release/wheel.sh; no GPU, no network (the wheel has no dependencies).
#
#   bash scripts/release/check-wheel.sh target/wheels/seedance_fix-*.whl
#   bash scripts/release/check-wheel.sh --max-glibc 2.17 target/wheels/seedance_fix-*manylinux2014*.whl
#   bash scripts/release/check-wheel.sh --source .
#
# --source DIR: `pip install DIR` from a source checkout instead (the build backend,
# packaging/seedance_build.py, builds everything; needs cargo, and PyPI or a pip cache for
# maturin), then the same checks on what it installed. Without a wheel file there is no
# `pip install --target` check.
#
# Every ELF file's newest GLIBC_2.N symbol version is checked against the wheel's manylinux
# tag (manylinux_2_N, manylinux2014 = 2.17, manylinux2010 = 2.12, manylinux1 = 2.5; a wheel
# with several platform tags, `manylinux_2_17_x86_64.manylinux2014_x86_64`, claims the oldest),
# and every undefined symbol must carry a version or be weak (an unversioned one is a function
# the build's C library did not have: it binds to whatever the running glibc has, or fails to
# load). --max-glibc 2.M also requires the tag and every file at 2.M or older (CI: 2.17, the
# manylinux2014 wheels of scripts/release/wheel.sh --zig).
#
# A wheel for another architecture (the aarch64 one of `scripts/release/wheel.sh --target
# aarch64-unknown-linux-gnu`, on an x86-64 machine) cannot be pip-installed here: it is
# unpacked into the layout `pip install --target DIR` gives (DIR/bin, DIR/seedance_fix) and
# its launcher, analyzer, shim and fake driver run under qemu-aarch64-static with the cross
# sysroot, as the end-to-end suite runs there (tests/harness/target.rs): the demo program,
# a healthy program and an exit status, through the wheel's own `seedance-fix run`. Needs
# qemu-user-static, gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (Debian). No Python
# program there (no aarch64 Python in the sysroot).
#
# Object storage: with `moto_server` (PyPI moto[server]) on PATH, the wheel's analyzer also
# reads the demo's trace from a bucket on a moto server started on 127.0.0.1 (`summary` and
# `export` of s3://wheel-check/run/ against the same of the directory), under qemu too for the
# aarch64 wheel. Without moto_server that check is skipped with a SKIP line, or fails when
# SEEDANCE_REQUIRE_MOTO=1 (CI).
#
# The example program is compiled against the fake driver at the directory the wheel's own
# `seedance-fix fake-driver --print-path` prints, as README tells a pip user.
#
# Prints PASS/FAIL per check; exit status = failures.
set -u
usage='usage: scripts/release/check-wheel.sh [--max-glibc 2.M] WHEEL | --source DIR'
max_glibc= source=
while (($#)); do
  case $1 in
    --max-glibc) max_glibc=${2:?--max-glibc needs a version (2.17)}; shift 2 ;;
    --source) source=$(readlink -f "${2:?--source needs a directory}"); shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    -*) echo "check-wheel.sh: unknown option $1; $usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [[ -n $max_glibc && ! $max_glibc =~ ^2\.[0-9]+$ ]]; then
  echo "check-wheel.sh: --max-glibc $max_glibc is not a glibc version 2.M (2.17)" >&2; exit 2
fi
if [[ -n $source ]]; then
  (($# == 0)) || { echo "check-wheel.sh: --source takes no wheel; $usage" >&2; exit 2; }
  wheel=
else
  wheel=$(readlink -f "${1:?$usage}")
fi
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
moto_pid=
trap 'rm -rf "$work"; [[ -z $moto_pid ]] || kill "$moto_pid" 2>/dev/null' EXIT
fails=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
# tag_glibc TAGS: the glibc minor version a wheel's platform tags claim (the oldest of
# them, `.`-separated: pip takes the wheel where any one of them fits), empty if none is
# manylinux.
tag_glibc() {
  local t n= m
  for t in ${1//./ }; do
    case $t in
      manylinux_2_*) m=${t#manylinux_2_}; m=${m%%_*} ;;
      manylinux2014_*) m=17 ;;
      manylinux2010_*) m=12 ;;
      manylinux1_*) m=5 ;;
      *) continue ;;
    esac
    [[ -n $n && $n -le $m ]] || n=$m
  done
  echo "$n"
}
# glibc_tag_check TAGS FILE...: the wheel's manylinux tag covers the newest GLIBC_2.M symbol
# version any FILE needs (M <= N), so pip on an older system refuses the wheel instead of its
# programs failing at run time (a wheel without a manylinux tag makes no such claim); no FILE
# has an undefined symbol that is neither versioned nor weak; with --max-glibc, tag and files
# are at that version or older.
glibc_tag_check() {
  local tags=$1 need tag f v
  shift
  # check evaluates its command in its own scope, where "$@" is its own arguments.
  local files=("$@")
  need=$(for f in "$@"; do readelf --version-info --wide "$f"; done |
         grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n1)
  tag=$(tag_glibc "$tags")
  echo "newest glibc symbol needed: 2.$need; wheel tag: $tags"
  for f in "$@"; do
    v=$(readelf --version-info --wide "$f" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n1)
    echo "  $(basename "$f"): ${v:+GLIBC_2.}${v:-no GLIBC symbol versions}"
  done
  check "the manylinux tag covers every file's glibc needs" '[ -z "$tag" ] || [ "$need" -le "$tag" ]'
  # nm -D: undefined symbols are "U name@VERSION" (strong) or "w name" (weak).
  check "every undefined symbol is versioned or weak" \
    '(for f in "${files[@]}"; do nm -D --undefined-only "$f" | awk -v f="$f" '"'"'$1 == "U" && $2 !~ /@/ { print "  unversioned: " $2 " in " f; bad = 1 } END { exit bad }'"'"' || exit 1; done)'
  if [[ -n $max_glibc ]]; then
    check "the wheel is tagged manylinux for glibc $max_glibc or older" '[ -n "$tag" ] && [ "$tag" -le "${max_glibc#2.}" ]'
    check "every file needs glibc $max_glibc or older" '[ "$need" -le "${max_glibc#2.}" ]'
  fi
}
# s3_check ANALYZER... : puts the trace files of $work/traces into a bucket on a moto server
# (unsigned PUTs, which moto takes) and checks that ANALYZER reads the bucket as it reads the
# directory. moto_server is looked up on the PATH this script started with.
moto=$(command -v moto_server || true)
s3_check() {
  if [[ -z $moto ]]; then
    if [[ ${SEEDANCE_REQUIRE_MOTO:-} == 1 ]]; then
      echo "FAIL moto_server not on PATH and SEEDANCE_REQUIRE_MOTO=1 (pip install 'moto[server]')"; fails=$((fails + 1))
    else
      echo "SKIP the analyzer reads a bucket: moto_server not on PATH (pip install 'moto[server]')"
    fi
    return
  fi
  local port endpoint tries
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  endpoint=http://127.0.0.1:$port
  "$moto" -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
  moto_pid=$!
  python3 - "$endpoint" "$work/traces" <<'PY' || { echo "FAIL moto_server did not take the trace"; fails=$((fails + 1)); cat "$work/moto.log"; kill "$moto_pid"; return; }
import os, sys, time, urllib.request
endpoint, traces = sys.argv[1], sys.argv[2]
def put(url, data=b""):
    # A body without a type is form-encoded to urllib, and moto keeps no bytes of such a PUT.
    req = urllib.request.Request(url, data=data, method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req, timeout=10).read()
for attempt in range(200):  # until it listens: at most 200 tries, 0.1 s apart
    try:
        put(f"{endpoint}/wheel-check")
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(1)
for name in sorted(os.listdir(traces)):
    with open(os.path.join(traces, name), "rb") as f:
        put(f"{endpoint}/wheel-check/run/{name}", f.read())
PY
  local url=s3://wheel-check/run/
  # ANALYZER may be a shell function (q, the qemu wrapper): the variables go through export.
  (export AWS_ENDPOINT="$endpoint" AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=test \
     AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
   "$@" summary "$url" >"$work/s3-summary.txt" 2>&1 && echo ok >"$work/s3-ok"
   "$@" export "$url" >"$work/s3-export.jsonl" 2>&1)
  cat "$work/s3-summary.txt"
  check "the analyzer reads the trace from a bucket (summary $url on moto)" \
    '[ -e "$work/s3-ok" ] && grep -q "1 process on 1 host" "$work/s3-summary.txt"'
  "$@" export "$work/traces" >"$work/dir-export.jsonl" 2>&1
  check "export of the bucket is the export of the directory" \
    '[ -s "$work/dir-export.jsonl" ] && cmp -s "$work/s3-export.jsonl" "$work/dir-export.jsonl"'
  kill "$moto_pid"; wait "$moto_pid" 2>/dev/null; moto_pid=
}
# The platform tags of a wheel file's name: seedance_fix-0.1.0-py3-none-TAGS.whl.
wheel_tags() { basename "$1" .whl | sed 's/^.*-none-//'; }

case $(basename "${wheel:-source}") in
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
  glibc_tag_check "$(wheel_tags "$wheel")" "${elves[@]}"
  export PATH=/usr/bin:/bin QEMU_LD_PREFIX=$sysroot
  unset LD_PRELOAD LD_LIBRARY_PATH SEEDANCE_TRACE_DIR SEEDANCE_MODE
  q() { "$qemu" -L "$sysroot" "$@"; }
  q "$site/bin/seedance-fix" --version | tee "$work/version.txt"
  check "--version (under qemu) finds the wheel's shim" \
    'grep -q "^shim .*: $site/seedance_fix/libseedance_fix.so$" "$work/version.txt"'
  check "the analyzer runs (under qemu)" 'q "$site/bin/seedance-analyze" --version >/dev/null'
  q "$site/bin/seedance-fix" fake-driver --print-path >"$work/fake-path.txt"
  check "fake-driver --print-path (under qemu) prints the wheel's fake driver directory" \
    '[ "$(cat "$work/fake-path.txt")" = "$(readlink -f "$fake")" ]'
  aarch64-linux-gnu-gcc -O1 -o "$work/wrong_ordinal" examples/wrong_ordinal.c \
    -L"$(cat "$work/fake-path.txt")" -l:libcuda.so.1
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
  s3_check q "$site/bin/seedance-analyze"
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

python3 -m venv "$work/venv"
if [[ -n $source ]]; then
  echo "== fresh virtualenv, pip install $source   (a source checkout)"
  started=$SECONDS
  "$work/venv/bin/pip" install -q "$source" || { echo "FAIL pip install $source"; exit 1; }
  echo "pip install $source: $((SECONDS - started)) s"
else
  echo "== fresh virtualenv, pip install $(basename "$wheel")"
  "$work/venv/bin/pip" install -q --no-index "$wheel" || { echo "FAIL pip install"; exit 1; }
fi
# Only the venv's bin on PATH, as after `source venv/bin/activate`.
export PATH="$work/venv/bin:/usr/bin:/bin"
unset LD_PRELOAD LD_LIBRARY_PATH SEEDANCE_TRACE_DIR SEEDANCE_MODE
check "seedance-fix and seedance-analyze on PATH" \
  '[ "$(command -v seedance-fix)" = "$work/venv/bin/seedance-fix" ] && seedance-analyze --version >/dev/null'
seedance-fix --version | tee "$work/version.txt"
check "--version finds the installed shim" \
  'grep -q "^shim .*: $work/venv/lib/python3[.0-9]*/site-packages/seedance_fix/libseedance_fix.so$" "$work/version.txt"'

# The layout of `pip install --target` (a shared directory, no virtualenv).
if [[ -n $wheel ]]; then
  "$work/venv/bin/pip" install -q --no-index --no-deps --target "$work/site" "$wheel"
  check "pip install --target: the launcher finds the shim" \
    '"$work/site/bin/seedance-fix" --version | grep -q "^shim .*: $work/site/seedance_fix/libseedance_fix.so$"'
fi

fake=$(echo "$work"/venv/lib/python3*/site-packages/seedance_fix/fake-cuda)
if [[ -n $wheel ]]; then
  tags=$(wheel_tags "$wheel")
else
  # The tags of the wheel pip built and installed, from its record.
  tags=$(sed -n 's/^Tag: py3-none-//p' "$work"/venv/lib/python3*/site-packages/seedance_fix-*.dist-info/WHEEL | paste -sd.)
fi
check "the fake driver and fake NVML are installed" '[ -f "$fake/libcuda.so.1" ] && [ -f "$fake/libnvidia-ml.so.1" ]'
glibc_tag_check "$tags" "$work/venv/bin/seedance-fix" "$work/venv/bin/seedance-analyze" \
  "$fake/../libseedance_fix.so" "$fake/libcuda.so.1" "$fake/libnvidia-ml.so.1"
fake_path=$(seedance-fix fake-driver --print-path)
check "fake-driver --print-path prints the installed fake driver directory" \
  '[ "$fake_path" = "$(readlink -f "$fake")" ]'
# As README tells a pip user: the example linked against the directory the launcher prints.
cc -O1 -o "$work/wrong_ordinal" examples/wrong_ordinal.c -L"$fake_path" -l:libcuda.so.1
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
s3_check seedance-analyze

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
