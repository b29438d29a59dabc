#!/usr/bin/env bash
# The GPU validation runner: every check listed in scripts/gpu/checks.txt that this machine
# can run, then the analyzer over every trace they wrote. Run from the repository root on
# the GPU machine:
#
#   scripts/gpu/run.sh [path/to/libseedance_fix.so] [path/to/seedance-analyze]
#
# GPU_CHECKS="fork pinned" runs only those. A check that needs more GPUs than the machine has
# is listed as "not run (needs N GPUs)"; one marked not-yet-run in checks.txt runs and says
# so. The wheel check takes the wheel in .whl/ (scripts/gpu/wheel.sh). Results in $OUT (default /tmp/seedance-validate): summary.txt (each check's exit
# status, time and last 40 lines), analyze.txt (the analyzer's summary of all traces), and
# NAME.tgz per check with everything it wrote. Exit status: the number of checks that failed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
analyzer=$(readlink -f "${2:-target/release/seedance-analyze}")
out=${OUT:-/tmp/seedance-validate}
mkdir -p "$out"
: >"$out/summary.txt"
scratch=$(mktemp -d)
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
failed=0
while read -r name need state input what; do
  case $name in '' | '#'*) continue ;; esac
  if [ -n "${GPU_CHECKS:-}" ] && ! [[ " $GPU_CHECKS " == *" $name "* ]]; then continue; fi
  if [ "$gpus" -lt "$need" ]; then
    echo "== $name: not run (needs $need GPUs, this machine has $gpus): $what" | tee -a "$out/summary.txt"
    continue
  fi
  dir="$scratch/$name"
  mkdir -p "$dir"
  start=$(date +%s)
  args=("$shim")
  [ "$input" = wheel ] && args=()
  OUT="$dir" bash "$here/gpu/$name.sh" "${args[@]}" >"$dir/console.txt" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=$((failed + 1))
  note=""
  [ "$state" = not-yet-run ] && note=" (its first run)"
  {
    echo "== $name: exit $rc, $(($(date +%s) - start)) s$note: $what"
    tail -n 40 "$dir/console.txt"
    echo
  } >>"$out/summary.txt"
  echo "== $name: exit $rc"
  tar -C "$scratch" -czf "$out/$name.tgz" "$name"
done <"$here/gpu/checks.txt"
# The analyzer over every trace file the runs left (traces are packed inside the checks'
# outputs; unpack them into one tree).
mkdir -p "$scratch/all-traces"
for t in $(find "$scratch" -name 'traces*.tgz'); do
  d="$scratch/all-traces/$(basename "$(dirname "$t")")"
  mkdir -p "$d" && tar -C "$d" -xzf "$t"
done
find "$scratch" -path "$scratch/all-traces" -prune -o -name 'seedance-*.jsonl' -print | while read -r f; do
  mkdir -p "$scratch/all-traces/loose" && cp "$f" "$scratch/all-traces/loose/"
done
if [ -x "$analyzer" ]; then
  "$analyzer" summary "$scratch/all-traces" >"$out/analyze.txt" 2>&1
  echo "analyzer exit $?" >>"$out/analyze.txt"
else
  echo "no analyzer at $analyzer" >"$out/analyze.txt"
fi
echo "failed checks: $failed" | tee -a "$out/summary.txt"
exit "$failed"
