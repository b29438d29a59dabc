#!/usr/bin/env bash
# GPU smoke test for the interposition core (issue 2). Run on a GPU machine from the
# repository root, with the shim built elsewhere or here:
#
#   scripts/gpu-smoke.sh [path/to/libseedance_fix.so]
#
# For each program (a -lcuda driver-API program, an nvcc program with static cudart and one
# with --cudart shared, PyTorch with torch.cuda.set_device, CuPy with a RawKernel) it runs
# once without and once with the shim, and checks: same exit code, same stdout, exit code 0,
# no stderr line from the shim, and a trace whose exit summary shows cuLaunchKernel* and
# cuMemAlloc* calls. Prints one row per program; logs and traces go to $OUT (or
# /tmp/seedance-smoke). Exit status: the number of failed programs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
out=${OUT:-/tmp/seedance-smoke}
mkdir -p "$out"
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
  echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1)"
  echo "cupy: $(python3 -c 'import cupy; print(cupy.__version__)' 2>&1)"
  echo "shim: $shim ($(sha256sum "$shim" | cut -c1-16))"
} | tee "$out/environment.txt"

set -e
nvcc -cubin -arch=sm_90 -o "$work/fill.cubin" "$here/gpu/fill_kernel.cu"
gcc -O2 -o "$work/smoke_driver" "$here/gpu/smoke_driver.c" -I"$cuda_home/include" \
    -L"$cuda_home/lib64/stubs" -lcuda
nvcc -O2 -arch=sm_90 -o "$work/smoke_rt_static" "$here/gpu/smoke_runtime.cu"
nvcc -O2 -arch=sm_90 --cudart shared -o "$work/smoke_rt_shared" "$here/gpu/smoke_runtime.cu"
set +e

failed=0
printf '%-16s %4s %4s %-6s %9s %7s %8s %6s %s\n' program rc0 rc1 stdout launches allocs calls errors result | tee "$out/smoke.txt"
run_case() {
  local name=$1; shift
  local t="$work/trace-$name"; mkdir -p "$t"
  "$@" >"$work/$name.out0" 2>"$work/$name.err0"; local rc0=$?
  LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$t" "$@" >"$work/$name.out1" 2>"$work/$name.err1"; local rc1=$?
  local same=same; cmp -s "$work/$name.out0" "$work/$name.out1" || same=DIFF
  local counts; counts=$(python3 "$here/gpu/count_trace.py" "$t" "$out/$name-functions.json" 2>>"$work/$name.unmatched")
  read -r launches allocs calls errors <<<"$counts"
  local shim_lines; shim_lines=$(grep -c '^seedance:' "$work/$name.err1")
  local verdict=PASS
  if [ "$rc0" != 0 ] || [ "$rc1" != "$rc0" ] || [ "$same" != same ] || [ "$shim_lines" != 0 ] \
     || [ "${launches:-none}" = none ] || [ "${launches:-0}" -eq 0 ] || [ "${allocs:-0}" -eq 0 ]; then
    verdict=FAIL; failed=$((failed + 1))
  fi
  printf '%-16s %4s %4s %-6s %9s %7s %8s %6s %s\n' "$name" "$rc0" "$rc1" "$same" "${launches:-0}" "${allocs:--}" "${calls:--}" "${errors:--}" "$verdict" | tee -a "$out/smoke.txt"
  { echo "== $name: stdout without / with shim"; cat "$work/$name.out0"; echo "--"; cat "$work/$name.out1";
    echo "== stderr with shim"; cat "$work/$name.err1"; echo "== unmatched"; cat "$work/$name.unmatched"; } >>"$out/smoke.log"
}

run_case driver_lcuda "$work/smoke_driver" "$work/fill.cubin"
run_case nvcc_static "$work/smoke_rt_static"
run_case nvcc_shared "$work/smoke_rt_shared"
run_case torch python3 "$here/gpu/smoke_torch.py"
run_case cupy python3 "$here/gpu/smoke_cupy.py"

tar -C "$work" -czf "$out/traces.tgz" $(cd "$work" && ls -d trace-*)
echo "failed: $failed" | tee -a "$out/smoke.txt"
exit "$failed"
