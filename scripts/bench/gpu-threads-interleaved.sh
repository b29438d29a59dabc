#!/usr/bin/env bash
# The thread-scaling benchmark's in-process comparison (docs/performance.md, "Inside one
# process"): scripts/bench/gpu-threads.sh with threads_bench.c's interleaved mode at 1, 8, 16 and
# 64 threads, a block length per thread count that gives blocks of a few milliseconds on the
# H200, and one table of all four (scripts/gpu/threads_stats.py). One GPU;
# run from the repository root on the GPU machine:
#
#   scripts/bench/gpu-threads-interleaved.sh [path/to/libseedance_fix.so]
#
# Environment: MODES (aa observe fix hami; hami is left out where bench/gpu-threads.sh has no
# HAMi-core build), PAIRS (16), ROUNDS (12 at most per thread count), BUDGET_S (470: split
# over the thread counts, roughly as their rounds' lengths), OUT (default
# /tmp/seedance-threads-interleaved), FAKE_DRIVER_DIR as bench/gpu-threads.sh, and ROWS (the
# rows "threads block alloc_every share%" to run, one per line, default the four above);
# OPS and PLAIN_BETWEEN pass through to bench/gpu-threads.sh (PLAIN_BETWEEN=no: one plain
# process per round and thread count instead of one beside every mode's). Writes
# $OUT/tT/ (bench/gpu-threads.sh's files), $OUT/tT.log, $OUT/table.md and $OUT/raw.txt (every
# thread count's raw lines in one file, which threads_stats.py reads as it reads the
# several: one file to keep where only a few files come back from a run, and to pool with
# other calls' raw.txt). Exit status: the first failing bench/gpu-threads.sh call's.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/seedance-threads-interleaved}
budget=${BUDGET_S:-470}
export PAIRS=${PAIRS:-16}
export MODES=${MODES:-aa observe fix hami}
shim=${1:-}
mkdir -p "$out"
status=0
raws=()
# threads, iterations per block, iterations per alloc_free pair, share of the budget (%)
rows=${ROWS:-"1 1000 50 17
8 400 10 25
16 200 5 28
64 50 5 30"}
while read -r t block every share; do
  [ -n "$t" ] || continue
  OUT=$out/t$t THREADS=$t INTERLEAVE=$block ALLOC_EVERY=$every ITERATIONS=$((10 * block)) \
    ROUNDS=${ROUNDS:-12} BUDGET_S=$((budget * share / 100)) bash "$here/bench/gpu-threads.sh" $shim \
    >"$out/t$t.log" 2>&1
  rc=$?
  [ $status -eq 0 ] && status=$rc
  grep -E '^(rounds|run failed|FAIL|hami-core|warning)' "$out/t$t.log"
  raws+=("$out/t$t/threads-raw.txt")
done <<<"$rows"
cat "${raws[@]}" >"$out/raw.txt"
python3 "$here/gpu/threads_stats.py" "$out/raw.txt" | tee "$out/table.md"
exit $status
