#!/usr/bin/env bash
# Thread-scaling benchmark of the tracked driver paths (docs/performance.md, "cost in
# threads"). One GPU is enough (kind nvidia-h200). Run from the repository root on the GPU
# machine:
#
#   scripts/gpu-threads.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/threads_bench.c (T host threads, each with its own non-blocking stream
# and 4 KiB buffers: pinned and pageable async H2D copies, empty launches, alloc+free, event
# record+wait; see the file) and, when carry/hami-core holds HAMi-core's source (copied there
# from its public repository before the run: the GPU machine has no network), HAMi-core's
# libvgpu.so with its own CMake build. Then ROUNDS interleaved rounds (default 5): in each
# round, for each thread count in THREADS (default "1 8 16 64"), one process per mode in
# turn: plain (no preload), off, observe, fix (SEEDANCE_MODE), hami (LD_PRELOAD=libvgpu.so,
# no limits set). Prints per (operation, threads, mode) the median ns per operation per
# thread, the interquartile range and the ratio of the medians to plain, as a table, and
# writes the raw numbers to $OUT/threads-raw.txt. Benchmarks are not tests: the exit status
# is 0 unless a run failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu/common.sh"
gpu_prologue /tmp/seedance-threads "${1:-}"
rounds=${ROUNDS:-5}
threads=${THREADS:-1 8 16 64}
iterations=${ITERATIONS:-10000}
record_gpu_environment "rounds: $rounds; threads: $threads; iterations per thread: $iterations"

nvcc -O2 -o "$work/threads_bench" "$here/gpu/threads_bench.c" -I"$cuda_home/include" \
    -L"$cuda_home/lib64/stubs" -lcuda -lpthread || { echo "FAIL: build threads_bench.c"; exit 1; }

modes="plain off observe fix"
hami=
root=$(cd "$here/.." && pwd)
if [ -d "$root/carry/hami-core" ]; then
  hb="$work/hami-build"
  mkdir -p "$hb"
  if (cd "$hb" && cmake "$root/carry/hami-core" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POLICY_VERSION_MINIMUM=3.5 >"$out/hami-cmake.txt" 2>&1 &&
      make -j8 >"$out/hami-make.txt" 2>&1); then
    hami=$(find "$hb" -name 'libvgpu.so' | head -n 1)
  fi
  if [ -n "$hami" ]; then
    modes="$modes hami"
    mkdir -p /tmp/vgpulock
    echo "hami-core: $hami (commit $(cat "$root/carry/hami-core/COMMIT" 2>/dev/null || echo unknown))"
  else
    echo "hami-core: build failed; left out. Its log's end:"
    tail -n 15 "$out/hami-cmake.txt" "$out/hami-make.txt" 2>/dev/null
  fi
else
  echo "hami-core: carry/hami-core absent; left out"
fi

raw="$out/threads-raw.txt"
: >"$raw"
failed=0
for r in $(seq 1 "$rounds"); do
  for t in $threads; do
    for m in $modes; do
      case $m in
        plain) env_=() ;;
        hami) env_=(LD_PRELOAD="$hami") ;;
        *) env_=(LD_PRELOAD="$shim" SEEDANCE_MODE="$m") ;;
      esac
      if ! lines=$(env "${env_[@]}" "$work/threads_bench" "$t" "$iterations" 2>"$work/err.txt"); then
        echo "run failed: mode $m threads $t round $r: $(tail -n 1 "$work/err.txt")"
        failed=$((failed + 1))
        continue
      fi
      echo "$lines" | awk -v m="$m" -v r="$r" '{print r, m, $2, $4, $6}' >>"$raw"
    done
  done
done

# Table: op threads mode median q1 q3 ratio.
python3 - "$raw" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, mode, op, t, ns = line.split()
    rows[(op, int(t), mode)].append(float(ns))
def q(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
modes = ["plain", "off", "observe", "fix", "hami"]
ops = sorted({k[0] for k in rows})
print("| operation | threads | plain ns (IQR) | off | observe | fix | HAMi-core |")
print("|---|---|---|---|---|---|---|")
for op in ops:
    for t in sorted({k[1] for k in rows if k[0] == op}):
        base = rows.get((op, t, "plain"))
        if not base:
            continue
        b = statistics.median(base)
        cells = [f"{b:.0f} ({q(base, .25):.0f}-{q(base, .75):.0f})"]
        for m in modes[1:]:
            xs = rows.get((op, t, m))
            if not xs:
                cells.append("-")
                continue
            med = statistics.median(xs)
            cells.append(f"{med / b:.3f}x ({q(xs, .25):.0f}-{q(xs, .75):.0f})")
        print(f"| {op} | {t} | " + " | ".join(cells) + " |")
PY
echo "raw numbers: $raw"
echo "runs failed: $failed"
exit $((failed > 0))
