#!/usr/bin/env bash
# Which part of the shim the alloc + free loop's cost in threads comes from (docs/performance.md,
# "Inside one process"): threads_bench.c's alloc_free in its interleaved mode (blocks through
# the shim's wrappers against blocks through the driver's own definitions, one process per
# variant), with the shim's switches that leave out one part each. One GPU; from the
# repository root on the GPU machine:
#
#   scripts/bench/gpu-alloc-parts.sh path/to/libseedance_fix.so
#
# Variants: plain (no preload: the in-process A/A), observe, fix, off, and observe with
# SEEDANCE_LIFETIME=off (no per-thread ring of allocations) or SEEDANCE_VALIDATE=off (no
# allocation checks, no log callback). Environment: ROUNDS (10), THREADS ("16 64"), PAIRS (16),
# INTERLEAVE (200), ALLOC_EVERY (5), OUT (/tmp/seedance-alloc-parts), FAKE_DRIVER_DIR (build
# against a fake driver with cc instead of nvcc); BEFORE (another build of the shim, an
# earlier commit's: adds the variants "observe,before" and "fix,before" with it preloaded);
# VARIANTS (the labels to run, separated by spaces; default all); BLOCKS ("T:B ...": a block
# of B iterations at T threads instead of INTERLEAVE, as for a thread count whose pairs are
# much shorter or longer); GAPS ("K ..."): adds a variant "plain,gap=K" per K, no preload,
# whose linked blocks spin K empty-loop iterations after each driver call (threads_bench.c's
# GAP_SPIN): what a given CPU time between a thread's calls costs in wall time, with no shim.
# Prints threads_stats.py's in-process table.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-alloc-parts "${1:?usage: $0 path/to/libseedance_fix.so}"
trap 'rm -rf "$work"' EXIT
build_threads_bench "$work/tb" || exit 1
export OPS=alloc_free INTERLEAVE=${INTERLEAVE:-200} ALLOC_EVERY=${ALLOC_EVERY:-5} PAIRS=${PAIRS:-16}
all=("plain|" "observe|SEEDANCE_MODE=observe" "fix|SEEDANCE_MODE=fix" "off|SEEDANCE_MODE=off"
  "observe,lifetime=off|SEEDANCE_MODE=observe SEEDANCE_LIFETIME=off"
  "observe,validate=off|SEEDANCE_MODE=observe SEEDANCE_VALIDATE=off")
if [ -n "${BEFORE:-}" ]; then
  before=$(readlink -f "$BEFORE")
  all+=("observe,before|SEEDANCE_MODE=observe" "fix,before|SEEDANCE_MODE=fix")
fi
for g in ${GAPS:-}; do all+=("plain,gap=$g|GAP_SPIN=$g"); done
variants=()
for v in "${all[@]}"; do
  if [ -z "${VARIANTS:-}" ] || [[ " $VARIANTS " == *" ${v%%|*} "* ]]; then variants+=("$v"); fi
done
raw=$out/raw.txt
: >"$raw"
failed=0
for r in $(seq 1 "${ROUNDS:-10}"); do
  for t in ${THREADS:-16 64}; do
    pos=0
    for v in "${variants[@]}"; do
      label=${v%%|*}
      settings=${v#*|}
      pre=()
      [[ "$label" == plain* ]] || pre=(LD_PRELOAD="$shim")
      [[ "$label" == *,before ]] && pre=(LD_PRELOAD="$before")
      block=$INTERLEAVE
      for tb in ${BLOCKS:-}; do [ "${tb%%:*}" = "$t" ] && block=${tb#*:}; done
      # shellcheck disable=SC2086
      if ! lines=$(env "${pre[@]}" INTERLEAVE=$block $settings "$work/tb" "$t" $((10 * block)) 2>"$work/err"); then
        echo "run failed: $label threads $t round $r: $(tail -n 1 "$work/err")"
        failed=$((failed + 1))
        continue
      fi
      echo "$lines" | raw_lines "$r" "$pos" "$label" >>"$raw"
      pos=$((pos + 1))
    done
  done
done
python3 "$here/gpu/threads_stats.py" "$raw" | tee "$out/table.md"
echo "runs failed: $failed"
exit $((failed > 0))
