#!/usr/bin/env bash
# Where the wrappers' cost goes, in hardware events (docs/performance.md, "Inside one
# process"): threads_bench.c's interleaved mode with PERF=1, which counts each thread's own
# user-space cycles, instructions, branch misses, L1 data and instruction misses,
# last-level misses and TLB misses around every block, through the shim's wrappers and
# through the driver's own definitions. One process per variant and round; prints, per
# operation, thread count, variant and event, the median over processes of what the
# wrappers add per operation (and the linked and direct counts). One GPU; from the
# repository root on the GPU machine:
#
#   scripts/bench/gpu-threads-perf.sh path/to/libseedance_fix.so
#
# Environment: ROUNDS (5), ROWS (lines "threads block alloc_every ops", default one thread
# with launch, pageable_copy and alloc_free, and 16 threads with alloc_free), MODES
# (plain off observe), PAIRS (16), OUT (/tmp/seedance-threads-perf), FAKE_DRIVER_DIR (build
# against a fake driver). Where the machine counts no event (perf_event_open refused, as in
# most containers) the table says so and the exit status is 0.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-threads-perf "${1:?usage: $0 path/to/libseedance_fix.so}"
trap 'rm -rf "$work"' EXIT
build_threads_bench "$work/tb" || exit 1
export PERF=1 PAIRS=${PAIRS:-16}
rows=${ROWS:-"1 1000 50 launch,pageable_copy,alloc_free
16 200 5 alloc_free"}
raw=$out/perf-raw.txt
: >"$raw"
failed=0
for r in $(seq 1 "${ROUNDS:-5}"); do
  while read -r t block every ops; do
    [ -n "$t" ] || continue
    for m in ${MODES:-plain off observe}; do
      pre=()
      [ "$m" = plain ] || pre=(LD_PRELOAD="$shim" SEEDANCE_MODE="$m")
      if ! lines=$(env "${pre[@]}" OPS="$ops" INTERLEAVE="$block" ALLOC_EVERY="$every" \
        "$work/tb" "$t" $((10 * block)) 2>"$work/err"); then
        echo "run failed: $m threads $t round $r: $(tail -n 1 "$work/err")"
        failed=$((failed + 1))
        continue
      fi
      [ "$r" = 1 ] && grep '^PERF' "$work/err" | sort -u
      echo "$lines" | awk -v r="$r" -v m="$m" '$1 == "perf" {print "round", r, "mode", m, $0}' >>"$raw"
    done
  done <<<"$rows"
done
python3 "$here/gpu/perf_table.py" "$raw" | tee "$out/perf-table.md"
echo "runs failed: $failed"
exit $((failed > 0))
