#!/usr/bin/env bash
# GPU check of the pip package: installs the seedance-fix wheel into a fresh virtualenv, as a
# user would (`python3 -m venv --system-site-packages`, so the machine's PyTorch stays
# visible; `pip install --no-index`, no network), and runs a small PyTorch script
# (scripts/gpu/wheel_torch.py) with the virtualenv's python, without and with the installed
# `seedance-fix run`. One GPU is enough. Run from the repository root on
# the GPU machine:
#
#   scripts/gpu/wheel.sh [path/to/seedance_fix-*.whl]     # default: .whl/seedance_fix-*.whl
#
# Build the wheel first, here: bash scripts/release/wheel.sh --zig && cp target/wheels/seedance_fix-*manylinux2014_x86_64*.whl .whl/
# (.whl/ is ignored by git and carried to the GPU machine; the --zig wheel is tagged
# manylinux2014, glibc 2.17 or newer there; a wheel of scripts/release/wheel.sh without --zig needs
# this machine's glibc there: `ldd --version`).
#
# Checks: pip installs the wheel into the virtualenv and torch imports there; the installed
# seedance-fix finds the installed shim (--version); the script's stdout is identical without
# the launcher and with it in fix and observe mode; a healthy run prints nothing of the
# launcher's; --report writes the HTML report and the trace holds the process's session_start
# record and exit summary; the exit status is the command's.
# Logs go to $OUT (default /tmp/seedance-wheel). Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
wheel=${1:-$(ls .whl/seedance_fix-*.whl 2>/dev/null | head -n 1)}
[ -f "$wheel" ] || { echo "FAIL no wheel (give its path, or put it in .whl/)"; exit 1; }
wheel=$(readlink -f "$wheel")
out=${OUT:-/tmp/seedance-wheel}
mkdir -p "$out"
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fails=0
checks=0
check() {
  checks=$((checks + 1))
  if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
  echo "glibc: $(ldd --version | head -n 1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__)' 2>&1)"
  echo "wheel: $wheel ($(sha256sum "$wheel" | cut -c1-16))"
} | tee "$out/environment.txt"

# A virtualenv that sees the system's site-packages (torch) but installs into its own. Where
# python3 -m venv cannot bootstrap pip (Debian without python3-venv's ensurepip), the venv
# is made without pip and the system pip installs into it (pip --python).
venv=$work/venv
if python3 -m venv --system-site-packages "$venv" >"$out/venv.txt" 2>&1; then
  pip=("$venv/bin/python" -m pip)
else
  rm -rf "$venv"
  python3 -m venv --system-site-packages --without-pip "$venv" >>"$out/venv.txt" 2>&1
  pip=(python3 -m pip --python "$venv/bin/python")
fi
"${pip[@]}" install -q --no-index --no-deps --no-compile --no-cache-dir "$wheel" >"$out/pip.txt" 2>&1
check "pip install into a fresh virtualenv" '[ -x "$venv/bin/seedance-fix" ] && [ -x "$venv/bin/seedance-analyze" ]'
py=$venv/bin/python
# PyTorch installed where a virtualenv's system site does not reach (a user site, a
# PYTHONPATH directory, another prefix): the venv gets a .pth line naming the directory the
# machine's python3 imports torch from, as a user would add it.
if ! "$py" -c "import torch" 2>/dev/null; then
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>>"$out/venv.txt")
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ -n "$torch_dir" ] && [ -d "$site" ]; then
    echo "$torch_dir" >"$site/machine-torch.pth"
    echo "torch: not in the venv's system site; $site/machine-torch.pth names $torch_dir"
  fi
fi
check "torch imports in the virtualenv" '"$py" -c "import torch" 2>>"$out/venv.txt"'
launcher=$venv/bin/seedance-fix
"$launcher" --version >"$out/version.txt" 2>&1
cat "$out/version.txt"
check "the launcher finds the installed shim" \
  'grep -q "^shim .*: $venv/lib/python3[.0-9]*/site-packages/seedance_fix/libseedance_fix.so$" "$out/version.txt"'

script=$here/gpu/wheel_torch.py
"$py" "$script" >"$out/without.txt" 2>"$out/without-err.txt"
echo "exit $?" >>"$out/without.txt"
"$launcher" run --trace-dir "$out/traces-fix" --report "$out/report.html" -- "$py" "$script" \
  >"$out/fix.txt" 2>"$out/fix-err.txt"
echo "exit $?" >>"$out/fix.txt"
"$launcher" run --mode observe --trace-dir "$out/traces-observe" -- "$py" "$script" \
  >"$out/observe.txt" 2>"$out/observe-err.txt"
echo "exit $?" >>"$out/observe.txt"
cat "$out/without.txt"

check "the script ran without the launcher" 'grep -q "^exit 0$" "$out/without.txt"'
check "fix: identical stdout and exit status" 'cmp -s "$out/without.txt" "$out/fix.txt"'
check "observe: identical stdout and exit status" 'cmp -s "$out/without.txt" "$out/observe.txt"'
check "fix: nothing from the launcher for a healthy run but the report's path" \
  '[ "$(grep -v "^seedance-fix: \(report\|traces\): " "$out/fix-err.txt" | grep -c "seedance")" = 0 ]'
check "observe: no line from the shim or the launcher" '! grep -q seedance "$out/observe-err.txt"'
check "--report wrote the HTML report" 'grep -q "<title>seedance-analyze report</title>" "$out/report.html"'
check "the trace has a session_start record and an exit summary" \
  'cat "$out"/traces-fix/*.jsonl | grep -q "\"event\":\"session_start\"" && cat "$out"/traces-fix/*.jsonl | grep -q "\"event\":\"exit_summary\""'
check "the installed analyzer finds no problem" \
  '"$venv/bin/seedance-analyze" summary --fail-on warning "$out/traces-fix" >"$out/summary.txt" 2>&1'
"$launcher" run -- "$py" -c 'import sys; sys.exit(5)' 2>/dev/null
status=$?
check "the exit status is the command's" '[ "$status" = 5 ]'

rm -rf "$work"
echo "$((checks - fails)) of $checks passed"
exit "$fails"
