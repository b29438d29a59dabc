# The prologue the GPU scripts (scripts/gpu-*.sh) share. Sourced, not run:
#
#   here=$(cd "$(dirname "$0")" && pwd)
#   . "$here/gpu/common.sh"
#   gpu_prologue /tmp/seedance-TOPIC "${1:-}"   # sets $shim, $out, $work, $cuda_home
#   record_gpu_environment [LINE...]            # writes $out/environment.txt
#   median <FILE                                # the median of one number per line
#
# Expects $here (scripts/). cases.sh (gpu-smoke.sh, gpu-matrix.sh) uses gpu_scratch.

# gpu_scratch: a scratch directory ($work), NVLink multicast off (device README: it can take
# shared GPUs out of service), and the CUDA toolkit's root ($cuda_home, from CUDA_HOME or
# the nvcc on PATH).
gpu_scratch() {
  work=$(mktemp -d)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
}

# gpu_prologue DEFAULT_OUT [SHIM]: $shim, the absolute path of SHIM (default
# target/release/libseedance_fix.so); $out, $OUT or DEFAULT_OUT, created; then gpu_scratch.
gpu_prologue() {
  shim=$(readlink -f "${2:-target/release/libseedance_fix.so}")
  out=${OUT:-$1}
  mkdir -p "$out"
  gpu_scratch
}

# record_gpu_environment [LINE...]: the date, the GPUs ($gpu_fields of nvidia-smi, default
# name and driver version), nvcc's version and the shim with its hash, then each LINE; on
# stdout and in $out/environment.txt.
record_gpu_environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "gpu: $(nvidia-smi --query-gpu="${gpu_fields:-name,driver_version}" --format=csv,noheader | paste -sd';')"
    echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
    echo "shim: $shim ($(sha256sum "$shim" | cut -c1-16))"
    local line
    for line in "$@"; do echo "$line"; done
  } | tee "$out/environment.txt"
}

# median: the median of the numbers on stdin, one per line (the mean of the middle two for an
# even count).
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
