# The prologue the GPU scripts (scripts/gpu-*.sh) share. Sourced, not run:
#
#   here=$(cd "$(dirname "$0")" && pwd)
#   . "$here/gpu/lib/common.sh"
#   gpu_prologue /tmp/seedance-TOPIC "${1:-}"   # sets $shim, $out, $work, $cuda_home
#   record_gpu_environment [LINE...]            # writes $out/environment.txt
#   median <FILE                                # the median of one number per line
#   build_threads_bench DEST                    # threads_bench.c (bench/gpu-threads.sh and kin)
#   raw_lines ROUND POS MODE <OUTPUT            # its output as threads_stats.py's raw lines
#
# Expects $here (scripts/). cases.sh (gpu/smoke.sh, gpu/matrix.sh) uses gpu_scratch.

# gpu_scratch: a scratch directory ($work), NVLink multicast off (device README: it can take
# shared GPUs out of service), and the CUDA toolkit's root ($cuda_home, from CUDA_HOME or
# the nvcc on PATH).
gpu_scratch() {
  work=$(mktemp -d)
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  find_cuda_home
}

# find_cuda_home: $cuda_home, the CUDA toolkit's root, from CUDA_HOME or the nvcc on PATH.
find_cuda_home() {
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

# build_threads_bench DEST: scripts/gpu/threads_bench.c built to DEST, with cc against the
# fake driver in $FAKE_DRIVER_DIR (that directory then put first on LD_LIBRARY_PATH), else
# with nvcc against the CUDA toolkit ($cuda_home, or find_cuda_home's). Says FAIL and
# returns 1 when the build fails.
build_threads_bench() {
  if [ -n "${FAKE_DRIVER_DIR:-}" ]; then
    local fake
    fake=$(readlink -f "$FAKE_DRIVER_DIR")
    export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cc -O2 -DBENCH_FAKE_DRIVER -o "$1" "$here/gpu/threads_bench.c" -L"$fake" -lcuda -lpthread -ldl
  else
    [ -n "${cuda_home:-}" ] || find_cuda_home
    nvcc -O2 -o "$1" "$here/gpu/threads_bench.c" -I"$cuda_home/include" \
      -L"$cuda_home/lib64/stubs" -lcuda -lpthread -ldl
  fi || { echo "FAIL: build threads_bench.c"; return 1; }
}

# raw_lines ROUND POS MODE: threads_bench.c's output on stdin, its op and pair lines as the
# raw lines scripts/gpu/threads_stats.py reads (round, position in the round, mode).
raw_lines() {
  awk -v r="$1" -v p="$2" -v m="$3" '
    $1 == "op" {print "round", r, "pos", p, "mode", m, "op", $2, "threads", $4, "wall", $6, "cpu", $8, "med", $10, "iterations", $12}
    $1 == "pair" {print "round", r, "pos", p, "mode", m, "pairop", $2, "threads", $4, "index", $6, "lw", $8, "dw", $10, "lc", $12, "dc", $14}'
}
