#!/usr/bin/env bash
# Cost of SEEDANCE_HOST_GUARD per copy size on the GPU (docs/performance.md, the host-write
# guard). One GPU is enough. Run from the repository root there:
#
#   scripts/bench/gpu-guard-cost.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/guard_cost.c (a pinned buffer copied to the device whole, then the
# stream synchronised, COPIES times) and runs it for each size in SIZES (bytes; default 4 KiB,
# 64 KiB, 1 MiB, 16 MiB, 256 MiB) in ROUNDS interleaved rounds (default 5) of: no shim, fix
# mode with the guard off, observe with the guard on (the digest), fix with the guard on
# (digest and snapshot). Prints per size and mode the median ns per copy, its range and the
# added ns per copy against the no-shim median. Benchmarks are not tests: exit status 0
# unless a run failed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-guard-cost "${1:-}"
rounds=${ROUNDS:-5}
sizes=${SIZES:-4096 65536 1048576 16777216 268435456}
record_gpu_environment "rounds: $rounds; sizes: $sizes"
nvcc -O2 -o "$work/guard_cost" "$here/gpu/guard_cost.c" -I"$cuda_home/include" \
    -L"$cuda_home/lib64/stubs" -lcuda || { echo "FAIL: build guard_cost.c"; exit 1; }
raw="$out/guard-raw.txt"
: >"$raw"
failed=0
for r in $(seq 1 "$rounds"); do
  for b in $sizes; do
    copies=$(( b >= 16777216 ? 40 : 2000 ))
    for m in plain fix observe-guard fix-guard; do
      case $m in
        plain) env_=() ;;
        fix) env_=(LD_PRELOAD="$shim" SEEDANCE_MODE=fix) ;;
        observe-guard) env_=(LD_PRELOAD="$shim" SEEDANCE_MODE=observe SEEDANCE_HOST_GUARD=on) ;;
        fix-guard) env_=(LD_PRELOAD="$shim" SEEDANCE_MODE=fix SEEDANCE_HOST_GUARD=on) ;;
      esac
      if line=$(env "${env_[@]}" "$work/guard_cost" "$b" "$copies" 2>"$work/err.txt"); then
        echo "$m $line" >>"$raw"
      else
        echo "run failed: $m $b: $(tail -n 1 "$work/err.txt")"
        failed=$((failed + 1))
      fi
    done
  done
done
python3 - "$raw" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, _, b, _, ns = line.split()
    rows[(int(b), m)].append(float(ns))
print("| copy bytes | no shim ns/copy | fix, guard off | observe + guard (digest) | fix + guard (digest + snapshot) |")
print("|---|---|---|---|---|")
for b in sorted({k[0] for k in rows}):
    base = statistics.median(rows[(b, "plain")])
    cells = [f"{base:.0f}"]
    for m in ["fix", "observe-guard", "fix-guard"]:
        xs = rows.get((b, m), [])
        if not xs:
            cells.append("-")
            continue
        med = statistics.median(xs)
        cells.append(f"{med:.0f} ({min(xs):.0f}-{max(xs):.0f}; {med - base:+.0f} ns, {med / base:.3f}x)")
    print(f"| {b} | " + " | ".join(cells) + " |")
PY
echo "runs failed: $failed"
exit $((failed > 0))
