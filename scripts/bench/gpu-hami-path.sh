#!/usr/bin/env bash
# Which path reaches HAMi-core's wrappers (docs/performance.md, "Inside one process"): builds it
# (through scripts/bench/gpu-threads.sh, which keeps the build in $HAMI_BUILD), says which driver
# symbols libvgpu.so exports, and which library threads_bench.c's "linked" calls reach with
# it preloaded (and the shim), through the linked symbols and through dlsym (LINKED=dlsym).
# Then the interleaved comparison through dlsym (scripts/bench/gpu-threads-interleaved.sh with
# LINKED=dlsym): the path a runtime that looks the driver up takes. One GPU; from the
# repository root on the GPU machine:
#
#   scripts/bench/gpu-hami-path.sh path/to/libseedance_fix.so
#
# Environment: ROWS (default one thread and 16 threads), MODES (aa observe hami), BUDGET_S
# (200), OUT (/tmp/seedance-hami-path).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-hami-path "${1:?usage: $0 path/to/libseedance_fix.so}"
trap 'rm -rf "$work"' EXIT
hb=${HAMI_BUILD:-/tmp/seedance-hami-buildsh}
ROUNDS=1 THREADS=1 ITERATIONS=100 OPS=launch MODES=hami OUT="$out/build" \
  bash "$here/bench/gpu-threads.sh" "$shim" >"$out/build.log" 2>&1
hami=$(find "$hb" -name libvgpu.so 2>/dev/null | head -n 1)
[ -n "$hami" ] || { echo "FAIL: no HAMi-core build (log: $out/build.log)"; exit 1; }
echo "driver symbols libvgpu.so exports (of cuMemAlloc_v2 cuMemFree_v2 cuLaunchKernel cuMemcpyHtoDAsync_v2 dlsym cuGetProcAddress):"
nm -D --defined-only "$hami" | awk '{print $NF}' | sed 's/@.*//' |
  grep -xE 'cuMemAlloc_v2|cuMemFree_v2|cuLaunchKernel|cuMemcpyHtoDAsync_v2|dlsym|cuGetProcAddress(_v2)?' |
  sort | tr '\n' ' '
echo
build_threads_bench "$work/tb" || exit 1
for linked in "" dlsym; do
  for pre in "$hami" "$shim"; do
    line=$(env LD_PRELOAD="$pre" CUDA_REDIRECT="$hami" LINKED="$linked" INTERLEAVE=10 PAIRS=1 \
      OPS=launch "$work/tb" 1 100 2>&1 >/dev/null | grep '^interleave:')
    echo "preload $(basename "$pre"), LINKED=${linked:-unset}: $line"
  done
done
rows=${ROWS:-"1 1000 50 40
16 200 5 60"}
LINKED=dlsym ROWS="$rows" MODES=${MODES:-aa observe hami} BUDGET_S=${BUDGET_S:-200} \
  OUT="$out/i" bash "$here/bench/gpu-threads-interleaved.sh" "$shim"
