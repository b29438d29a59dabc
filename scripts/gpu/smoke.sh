#!/usr/bin/env bash
# GPU smoke test for the interposition core. Run on a GPU machine from the
# repository root, with the shim built elsewhere or here:
#
#   scripts/gpu/smoke.sh [path/to/libseedance_fix.so]
#
# For each program (a -lcuda driver-API program, an nvcc program with static cudart and one
# with --cudart shared, PyTorch with torch.cuda.set_device, CuPy with a RawKernel) it runs
# once without and once with the shim, and checks: same exit code, same stdout, exit code 0,
# no stderr line from the shim, and a trace whose exit summary shows cuLaunchKernel* and
# cuMemAlloc* calls. Prints one row per program; logs and traces go to $OUT (or
# /tmp/seedance-smoke). Exit status: the number of failed programs. The wider compatibility
# matrix (torch.compile, JAX, Triton, NCCL) is scripts/gpu/matrix.sh.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
out=${OUT:-/tmp/seedance-smoke}
mkdir -p "$out"
. "$here/gpu/lib/cases.sh"

record_environment
build_programs
print_header smoke.txt
run_case smoke.txt driver_lcuda "$work/smoke_driver" "$work/fill.cubin"
run_case smoke.txt nvcc_static "$work/smoke_rt_static"
run_case smoke.txt nvcc_shared "$work/smoke_rt_shared"
run_case smoke.txt torch python3 "$here/gpu/smoke_torch.py"
run_case smoke.txt cupy python3 "$here/gpu/smoke_cupy.py"
pack_traces
echo "failed: $failed" | tee -a "$out/smoke.txt"
exit "$failed"
