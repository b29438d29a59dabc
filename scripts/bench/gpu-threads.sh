#!/usr/bin/env bash
# Thread-scaling benchmark of the tracked driver paths (docs/performance.md, "Cost in
# threads"). One GPU is enough. Run from the repository root on the GPU
# machine:
#
#   scripts/bench/gpu-threads.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/threads_bench.c (T host threads, each with its own non-blocking stream
# and 4 KiB buffers: pinned and pageable async H2D copies, empty launches, alloc+free, event
# record+wait; wall and CPU time per operation; see the file) and, when carry/hami-core holds
# HAMi-core's source (copied there from its public repository before the run: the GPU
# machine has no network), HAMi-core's libvgpu.so with its own CMake build (kept in
# $HAMI_BUILD, default /tmp/seedance-hami-buildsh, for the next call on the same machine).
#
# Design (paired; docs/performance.md, "How to reproduce"): ROUNDS rounds; in each, for each thread
# count, the modes in an order shuffled per round (seeded by SEED) with a plain run (no
# preload) before the first and after every one: plain, M1, plain, M2, ..., plain. Modes:
# aa (a plain run in a mode's place: the A/A control), off, observe, fix (SEEDANCE_MODE),
# hami (LD_PRELOAD=libvgpu.so and CUDA_REDIRECT to it, no limits set; built with the
# options of its own build.sh: a Release build exports none of its wrappers, so its column
# would be the driver itself: scripts/bench/gpu-hami-path.sh says what a build exports). Each mode's run is compared
# with the plain runs beside it (scripts/gpu/threads_stats.py: the median of the paired ratios over the rounds,
# a 95 % interval of it, and a verdict at 1.02x), for wall time and for CPU time.
#
# Environment (defaults): ROUNDS (6), THREADS ("1 8 16 64"), ITERATIONS per thread and
# operation (10000), WARMUP untimed iterations (ITERATIONS / 10, at most 1000), SCHED
# (blocking: see threads_bench.c), MODES ("aa off observe fix", and hami when built), SEED
# (1), INTERVAL (order, or bootstrap: threads_stats.py --ci; not named CI, which CI services
# set to "true"), BUDGET_S (540: no round starts that the last one's length says would end
# past it, so one call stays inside a 10-minute command; a run that ROUNDS ends
# with over half of it left says so on its `rounds:` line), FAKE_DRIVER_DIR (a directory
# holding the fake driver's libcuda.so, crates/fake-cuda: builds with cc against it instead
# of nvcc and the GPU, no HAMi-core, for testing the script without a GPU), OPS (the
# operations to run, default all) and ALLOC_EVERY (iterations per alloc_free pair, 50):
# threads_bench.c's, CPUS (unset: a cpu list for `taskset -c`, the same for every run of
# every mode, plain included: which cores a one-thread run lands on is a noise of its own;
# a list taskset refuses is warned about and ignored), INTERLEAVE and PAIRS (unset: each
# process also compares, inside itself, blocks of INTERLEAVE iterations through the shim's
# wrappers with blocks through the driver's own definitions, PAIRS pairs per operation:
# threads_bench.c's interleaved mode, the table threads_stats.py prints first; ITERATIONS
# then only sets the warm-up), PLAIN_BETWEEN (yes: the plain runs between the modes; no,
# with INTERLEAVE only: one plain run per round and thread count, then the modes one after
# another. Each process's in-process ratio needs no plain neighbour, so this gives about
# twice the processes of each mode in the same time; the process-level table then pairs
# every mode with the round's one plain run. Another value is warned about and taken as
# yes).
#
# Writes $OUT/threads-raw.txt (one line per run and operation, the format threads_stats.py
# reads; the raw files of several calls, such as one per thread count, can be given to it
# together) and $OUT/threads-table.md. Benchmarks are not tests: the exit status is 0
# unless a run failed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
. "$here/gpu/lib/common.sh"
rounds=${ROUNDS:-6}
threads=${THREADS:-1 8 16 64}
iterations=${ITERATIONS:-10000}
budget=${BUDGET_S:-540}
seed=${SEED:-1}
export SCHED=${SCHED:-blocking}
[ -n "${WARMUP:-}" ] && export WARMUP
[ -n "${OPS:-}" ] && export OPS
[ -n "${ALLOC_EVERY:-}" ] && export ALLOC_EVERY
[ -n "${INTERLEAVE:-}" ] && export INTERLEAVE
[ -n "${PAIRS:-}" ] && export PAIRS
between=${PLAIN_BETWEEN:-yes}
case $between in
  yes) ;;
  no)
    if [ -z "${INTERLEAVE:-}" ]; then
      echo "warning: PLAIN_BETWEEN=no needs INTERLEAVE (the paired schedule compares processes); plain runs stay between the modes"
      between=yes
    fi
    ;;
  *)
    echo "warning: PLAIN_BETWEEN=$between: not yes or no; plain runs stay between the modes"
    between=yes
    ;;
esac
pin=()
if [ -n "${CPUS:-}" ]; then
  if taskset -c "$CPUS" true 2>/dev/null; then
    pin=(taskset -c "$CPUS")
  else
    echo "warning: CPUS=$CPUS: taskset -c refused it (or taskset is missing); runs are not pinned"
  fi
fi
settings="rounds: $rounds; threads: $threads; iterations per thread: $iterations; warm-up: ${WARMUP:-default}; sched: $SCHED; seed: $seed; budget: ${budget} s; ops: ${OPS:-all}; alloc every: ${ALLOC_EVERY:-50}; interleave: ${INTERLEAVE:-no}${INTERLEAVE:+ x ${PAIRS:-20} pairs}; plain between modes: $between; cpus: ${pin[*]:-all}"

if [ -n "${FAKE_DRIVER_DIR:-}" ]; then
  shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
  out=${OUT:-/tmp/seedance-threads}
  mkdir -p "$out"
  work=$(mktemp -d)
  echo "fake driver: $(readlink -f "$FAKE_DRIVER_DIR"); shim: $shim; $settings" | tee "$out/environment.txt"
else
  gpu_prologue /tmp/seedance-threads "${1:-}"
  record_gpu_environment "$settings"
fi
build_threads_bench "$work/threads_bench" || exit 1

modes=${MODES:-aa off observe fix}
hami=
if [ -z "${FAKE_DRIVER_DIR:-}" ] && [ -d "$root/carry/hami-core" ]; then
  hb=${HAMI_BUILD:-/tmp/seedance-hami-buildsh}
  hami=$(find "$hb" -name 'libvgpu.so' 2>/dev/null | head -n 1)
  if [ -z "$hami" ]; then
    mkdir -p "$hb"
    # The options of HAMi-core's own build.sh (its Release type compiles with
    # -fvisibility=hidden and exports none of its wrappers, so nothing reaches them:
    # scripts/bench/gpu-hami-path.sh checks what a build exports).
    if (cd "$hb" && cmake "$root/carry/hami-core" -DDLSYM_HOOK_ENABLE=1 -DMULTIPROCESS_LIMIT_ENABLE=1 \
        -DHOOK_MEMINFO_ENABLE=1 -DHOOK_NVML_ENABLE=1 -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_POLICY_VERSION_MINIMUM=3.5 >"$out/hami-cmake.txt" 2>&1 &&
        make -j8 >"$out/hami-make.txt" 2>&1); then
      hami=$(find "$hb" -name 'libvgpu.so' | head -n 1)
    fi
  fi
  if [ -n "$hami" ]; then
    [ -z "${MODES:-}" ] && modes="$modes hami"
    mkdir -p /tmp/vgpulock
    echo "hami-core: $hami (commit $(cat "$root/carry/hami-core/COMMIT" 2>/dev/null || echo unknown))"
  else
    echo "hami-core: build failed; left out. Its log's end:"
    tail -n 15 "$out/hami-cmake.txt" "$out/hami-make.txt" 2>/dev/null
  fi
else
  echo "hami-core: carry/hami-core absent (or a fake driver); left out"
fi

if [ -z "$hami" ] && [[ " $modes " == *" hami "* ]]; then
  modes=$(echo " $modes " | sed 's/ hami / /; s/^ *//; s/ *$//')
  echo "MODES: hami left out (no HAMi-core build); modes: $modes"
fi

raw="$out/threads-raw.txt"
: >"$raw"
failed=0
# run ROUND POS MODE THREADS: one process, its lines appended to the raw file.
run() {
  local env_=()
  case $3 in
    plain | aa) ;;
    # HAMi-core's dlsym looks its hooks up in the library CUDA_REDIRECT names (default
    # /usr/local/vgpu/libvgpu.so); without it a dlsym answers the driver's own symbol.
    hami) env_=(LD_PRELOAD="$hami" CUDA_REDIRECT="$hami") ;;
    *) env_=(LD_PRELOAD="$shim" SEEDANCE_MODE="$3") ;;
  esac
  local lines
  if ! lines=$("${pin[@]}" env "${env_[@]}" "$work/threads_bench" "$4" "$iterations" 2>"$work/err.txt"); then
    echo "run failed: mode $3 threads $4 round $1: $(tail -n 1 "$work/err.txt")"
    failed=$((failed + 1))
    return
  fi
  echo "$lines" | raw_lines "$1" "$2" "$3" >>"$raw"
}

start=$SECONDS
last=0
done_rounds=0
for r in $(seq 1 "$rounds"); do
  if [ "$r" -gt 1 ] && [ $((SECONDS - start + last)) -gt "$budget" ]; then
    echo "stopping after $done_rounds rounds: another (${last} s) would end past BUDGET_S=$budget"
    break
  fi
  t0=$SECONDS
  for t in $threads; do
    order=$(python3 -c 'import random, sys; m = sys.argv[2:]; random.Random(sys.argv[1]).shuffle(m); print(*m)' "$seed-$r-$t" $modes)
    pos=0
    run "$r" $pos plain "$t"
    for m in $order; do
      if [ "$between" = yes ]; then
        run "$r" $((pos + 1)) "$m" "$t"
        run "$r" $((pos + 2)) plain "$t"
        pos=$((pos + 2))
      else
        pos=$((pos + 1))
        run "$r" $pos "$m" "$t"
      fi
    done
  done
  last=$((SECONDS - t0))
  done_rounds=$r
  echo "round $r: ${last} s (order of the last thread count: $order)"
done
used=$((SECONDS - start))
if [ "$done_rounds" -eq "$rounds" ] && [ $((2 * used)) -lt "$budget" ]; then
  # ROUNDS, not the budget, ended the run: said, since a run meant to fill its budget
  # (more processes per cell) would otherwise end early without a word.
  echo "rounds: $done_rounds of $rounds in $used s; ROUNDS=$rounds ended the run with $((budget - used)) s of BUDGET_S=$budget unused (set ROUNDS higher to use it)"
else
  echo "rounds: $done_rounds of $rounds in $used s"
fi

python3 "$here/gpu/threads_stats.py" --ci "${INTERVAL:-order}" "$raw" > "$out/threads-table.md" \
  || { echo "FAIL: threads_stats.py (INTERVAL=${INTERVAL:-order})"; exit 1; }
cat "$out/threads-table.md"
echo "raw numbers: $raw"
echo "runs failed: $failed"
exit $((failed > 0))
