#!/usr/bin/env bash
# GPU compatibility matrix. Run on a 2-GPU machine
# from the repository root:
#
#   scripts/gpu/matrix.sh [path/to/libseedance_fix.so]
#
# Each program runs without the shim and with it in fix mode (fresh Triton/Inductor caches
# for each run, so compilation happens under the shim too) and must give: exit code 0 both
# times, identical stdout, no line from the shim on stderr, and a trace with launches and
# allocations. Programs: a -lcuda driver program, nvcc static and shared cudart, PyTorch
# eager, torch.compile (Inductor/Triton), Triton directly, JAX jit, CuPy RawKernel, an NCCL
# all-reduce through torch.distributed on every GPU (NVLink multicast off), and import torch
# with OpenMP plus a preloaded dlsym(RTLD_NEXT) probe. Results in $OUT (or
# /tmp/seedance-matrix): matrix.txt, matrix.txt.log, and traces.tgz (each trace directory
# with functions.json, the per-function call counts of its exit summaries).
# Exit status: the number of failed programs.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
out=${OUT:-/tmp/seedance-matrix}
mkdir -p "$out"
. "$here/gpu/lib/cases.sh"

record_environment
build_programs
gcc -O2 -shared -fPIC -o "$work/librtld_next_probe.so" "$here/gpu/rtld_next_probe.c" -ldl
print_header matrix.txt
run_case matrix.txt driver_lcuda "$work/smoke_driver" "$work/fill.cubin"
run_case matrix.txt nvcc_static "$work/smoke_rt_static"
run_case matrix.txt nvcc_shared "$work/smoke_rt_shared"
run_case matrix.txt torch_eager python3 "$here/gpu/smoke_torch.py"
run_case matrix.txt torch_compile python3 "$here/gpu/matrix_torch_compile.py"
run_case matrix.txt triton python3 "$here/gpu/matrix_triton.py"
run_case matrix.txt jax_jit python3 "$here/gpu/matrix_jax.py"
run_case matrix.txt cupy_rawkernel python3 "$here/gpu/smoke_cupy.py"
run_case matrix.txt nccl_allreduce python3 "$here/gpu/matrix_nccl.py"
# The probe is preloaded in both runs (before the shim in the shimmed one).
export RTLD_NEXT_PROBE="$work/librtld_next_probe.so"
CASE_PRELOAD="$RTLD_NEXT_PROBE"
run_case matrix.txt torch_omp_next python3 "$here/gpu/matrix_omp.py"
pack_traces
echo "failed: $failed" | tee -a "$out/matrix.txt"
exit "$failed"
