#!/usr/bin/env bash
# The shim's own host cost in threads, without a GPU (docs/performance.md, "The shim's own
# cost in threads"): scripts/gpu/threads_bench.c against the null driver
# (tests/programs/null_driver.c, every call returns at once), with the paired schedule of
# scripts/bench/gpu-threads.sh, and the table of nanoseconds added per operation
# (scripts/gpu/threads_stats.py --added): wall and CPU time, and the CPU ns added at each
# thread count over that at one thread (1.00 is flat in threads). What the GPU benchmark
# cannot separate from the driver's and the GPU's own contention, this shows alone. Needs as
# many cores as the largest thread count to say anything about contention (the GPU machine
# has 16); runs anywhere with a C compiler.
#
#   scripts/bench/host-threads.sh [path/to/libseedance_fix.so]
#
# Environment: as scripts/bench/gpu-threads.sh (ROUNDS, THREADS, MODES, SEED, WARMUP, BUDGET_S,
# INTERVAL, OUT); ITERATIONS defaults to 200000 here (the null driver's calls cost a few ns).
# Writes $OUT/threads-raw.txt and $OUT/host-table.md (default OUT /tmp/seedance-host-threads).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
export OUT=${OUT:-/tmp/seedance-host-threads}
export ITERATIONS=${ITERATIONS:-200000}
mkdir -p "$OUT"
drv=$(mktemp -d)
trap 'rm -rf "$drv"' EXIT
. "$here/bench/host-common.sh"
build_null_driver "$drv" || { echo "FAIL: build the null driver"; exit 1; }
FAKE_DRIVER_DIR=$drv bash "$here/bench/gpu-threads.sh" "${1:-$root/target/release/libseedance_fix.so}" >"$OUT/gpu-threads-log.txt" 2>&1
rc=$?
grep -E '^(round|rounds|run failed|FAIL)' "$OUT/gpu-threads-log.txt"
[ $rc -eq 0 ] || { echo "FAIL: scripts/bench/gpu-threads.sh (exit $rc; log $OUT/gpu-threads-log.txt)"; exit $rc; }
echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')" | tee "$OUT/host-table.md"
python3 "$here/gpu/threads_stats.py" --added --ci "${INTERVAL:-order}" "$OUT/threads-raw.txt" >>"$OUT/host-table.md" \
  || { echo "FAIL: threads_stats.py --added"; exit 1; }
cat "$OUT/host-table.md"
