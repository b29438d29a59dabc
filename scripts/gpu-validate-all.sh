#!/usr/bin/env bash
# Every GPU validation in one run, for a 2-GPU machine: the
# compatibility matrix, device ordinals and fallback, launch faults, context lifetime and
# calls on handles of destroyed contexts.
# Then the analyzer summarizes every trace those runs wrote.
#
#   scripts/gpu-validate-all.sh [path/to/libseedance_fix.so] [path/to/seedance-analyze]
#
# Results in $OUT (or /tmp/seedance-validate): summary.txt (each script's table and exit
# status), analyze.txt (the analyzer's summary of all traces), and one NAME.tgz per script
# with everything it wrote. GPU_SCRIPTS="matrix devices" runs only those (split the five over
# two runs to keep each under about 10 minutes). GPU_SCRIPTS=multi runs scripts/gpu-multi.sh
# (2 GPUs; not yet run on a 2-GPU machine; 5-8 minutes and its own matrix run: run it on its
# own). docs/validation.md lists every script and its latest result. Exit status: the number of
# scripts that failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
analyzer=$(readlink -f "${2:-target/release/seedance-analyze}")
out=${OUT:-/tmp/seedance-validate}
mkdir -p "$out"
scratch=$(mktemp -d)
failed=0
for name in ${GPU_SCRIPTS:-matrix devices launch lifetime dead-handles}; do
  dir="$scratch/$name"
  mkdir -p "$dir"
  start=$(date +%s)
  OUT="$dir" bash "$here/gpu-$name.sh" "$shim" >"$dir/console.txt" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=$((failed + 1))
  { echo "== gpu-$name.sh: exit $rc, $(( $(date +%s) - start )) s"; tail -n 40 "$dir/console.txt"; echo; } >>"$out/summary.txt"
  tar -C "$scratch" -czf "$out/$name.tgz" "$name"
done
# The analyzer over every trace file the runs left (traces are packed inside the scripts'
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
echo "failed scripts: $failed" | tee -a "$out/summary.txt"
exit "$failed"
