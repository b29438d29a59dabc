# Shared by gpu/smoke.sh and gpu/matrix.sh (sourced, not run): environment record, the
# compiled test programs, and run_case, which runs one program without and with the shim.
#
# Expects: $here (scripts/), $shim (absolute path of libseedance_fix.so), $out (results).
# Sets: $work (scratch), $failed (number of failed cases).
. "$here/gpu/lib/common.sh"
gpu_scratch
failed=0
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1

record_environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
    echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
    python3 - <<'PY' 2>&1
import importlib
for m in ["torch", "triton", "jax", "jaxlib", "cupy"]:
    try:
        v = importlib.import_module(m).__version__
    except Exception as e:  # not installed or broken: say so
        v = f"unavailable ({type(e).__name__})"
    print(f"{m}: {v}")
import torch
print(f"torch cuda: {torch.version.cuda}, nccl: {'.'.join(map(str, torch.cuda.nccl.version()))}")
PY
    echo "shim: $shim ($(sha256sum "$shim" | cut -c1-16))"
  } | tee "$out/environment.txt"
}

build_programs() {
  set -e
  nvcc -cubin -arch=sm_90 -o "$work/fill.cubin" "$here/gpu/fill_kernel.cu"
  gcc -O2 -o "$work/smoke_driver" "$here/gpu/smoke_driver.c" -I"$cuda_home/include" \
      -L"$cuda_home/lib64/stubs" -lcuda
  nvcc -O2 -arch=sm_90 -o "$work/smoke_rt_static" "$here/gpu/smoke_runtime.cu"
  nvcc -O2 -arch=sm_90 --cudart shared -o "$work/smoke_rt_shared" "$here/gpu/smoke_runtime.cu"
  set +e
}

print_header() {
  printf '%-16s %4s %4s %-6s %9s %7s %8s %6s %s\n' program rc0 rc1 stdout launches allocs calls errors result | tee "$out/$1"
}

# run_case TABLE NAME COMMAND...: runs COMMAND without the shim, then with it in fix mode
# (each with its own fresh compiler caches), and checks: exit code 0 both times, the same
# stdout, no line from the shim on stderr, and an exit summary with launches and
# allocations in it. CASE_PRELOAD, when set, is preloaded in both runs (before the shim).
# Appends a row to $out/TABLE and the outputs to $out/TABLE.log.
run_case() {
  local table=$1 name=$2; shift 2
  local t="$work/trace-$name"; mkdir -p "$t"
  local c0="$work/cache0-$name" c1="$work/cache1-$name"
  TRITON_CACHE_DIR="$c0/triton" TORCHINDUCTOR_CACHE_DIR="$c0/inductor" \
    LD_PRELOAD="${CASE_PRELOAD:-}" timeout 300 "$@" >"$work/$name.out0" 2>"$work/$name.err0"; local rc0=$?
  TRITON_CACHE_DIR="$c1/triton" TORCHINDUCTOR_CACHE_DIR="$c1/inductor" \
    LD_PRELOAD="${CASE_PRELOAD:+$CASE_PRELOAD:}$shim" SEEDANCE_MODE=fix SEEDANCE_TRACE_DIR="$t" \
    timeout 300 "$@" >"$work/$name.out1" 2>"$work/$name.err1"; local rc1=$?
  local same=same; cmp -s "$work/$name.out0" "$work/$name.out1" || same=DIFF
  local counts; counts=$(python3 "$here/gpu/count_trace.py" "$t" "$t/functions.json" 2>>"$work/$name.unmatched")
  local launches allocs calls errors
  read -r launches allocs calls errors <<<"$counts"
  local shim_lines; shim_lines=$(grep -c '^seedance:' "$work/$name.err1")
  local verdict=PASS
  if [ "$rc0" != 0 ] || [ "$rc1" != "$rc0" ] || [ "$same" != same ] || [ "$shim_lines" != 0 ] \
     || [ "${launches:-none}" = none ] || [ "${launches:-0}" -eq 0 ] || [ "${allocs:-0}" -eq 0 ]; then
    verdict=FAIL; failed=$((failed + 1))
  fi
  printf '%-16s %4s %4s %-6s %9s %7s %8s %6s %s\n' "$name" "$rc0" "$rc1" "$same" "${launches:-0}" "${allocs:--}" "${calls:--}" "${errors:--}" "$verdict" | tee -a "$out/$table"
  { echo "== $name: stdout without / with shim"; cat "$work/$name.out0"; echo "--"; cat "$work/$name.out1";
    echo "== stderr without shim (tail)"; tail -n 5 "$work/$name.err0";
    echo "== stderr with shim (tail)"; tail -n 5 "$work/$name.err1"; echo "== unmatched"; cat "$work/$name.unmatched"; } >>"$out/$table.log"
}

# Every trace directory, with the per-function call counts of its exit summaries
# (trace-NAME/functions.json), in one file, so that a run leaves few files to copy back.
pack_traces() {
  tar -C "$work" -czf "$out/traces.tgz" $(cd "$work" && ls -d trace-*)
}
