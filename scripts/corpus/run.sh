#!/usr/bin/env bash
# The differential corpus: programs we did not write, each run without the shim, with it in
# observe mode and in fix mode, compared (exit code, stdout up to the normalisations that
# corpus.py lists, lines the shim wrote on stderr). One GPU. From the repository root on the GPU
# machine, after scripts/corpus/prepare-samples.sh has filled .corpus/cuda-samples:
#
#   bash scripts/corpus/run.sh path/to/libseedance_fix.so
#
# Groups (CORPUS_GROUPS, default samples,frameworks,rules):
#   samples     the cuda-samples of samples.txt, built with nvcc for sm_90 (JOBS at a time);
#   frameworks  scripts/corpus/frameworks/*.py: PyTorch, CuPy, JAX in their production settings;
#   rules       scripts/corpus/rules/*.cu, correct and faulty variants, checked against
#               rules/cases.txt.
# Environment: OUT (results, default /tmp/seedance-corpus), BUDGET_S (seconds after the start
# past which no new run or build starts; default 450; GRACE_S later, default 60, every run still
# going is stopped and listed as not run), JOBS (parallel builds, default 16),
# RUN_JOBS (samples and rules run at a time, default 4), FW_JOBS (framework programs at a time,
# default 2), SAMPLE_TIMEOUT (s, default 20; samples.txt may give a sample more), FW_TIMEOUT (s,
# default 150), SAMPLES (names: only these samples), CORPUS_DIR (default .corpus/cuda-samples),
# KEEP_WORK=1 (keep the scratch folder), DRY_RUN=1 (print the selection and the commands; build
# and run nothing; no GPU needed).
# Writes to $OUT: environment.txt, results.txt (every row), summary.txt (what is printed at the
# end), logs.tar.gz (build logs, each run's stdout, stderr and trace). Exit status: 0 when every
# expectation holds, 1 otherwise, 2 on a usage or set-up error.
set -u
here=$(cd "$(dirname "$0")" && pwd)

# --- one unit of work, run by xargs in a child of this script --------------------------------
if [ "${1:-}" = "--unit" ]; then
  shift
  # shellcheck source=scripts/corpus/lib.sh
  . "$here/lib.sh"
  unit_main "$@"
  exit 0
fi

# shellcheck source=scripts/corpus/lib.sh
. "$here/lib.sh"
shim_arg=${1:-}
if [ -z "$shim_arg" ]; then
  echo "usage: $0 path/to/libseedance_fix.so" >&2
  exit 2
fi
if [ -z "${DRY_RUN:-}" ] && [ ! -f "$shim_arg" ]; then
  echo "no shim at $shim_arg" >&2
  exit 2
fi
export CORPUS_SHIM CORPUS_WORK CORPUS_SRC CORPUS_DEADLINE CORPUS_HERE="$here"
CORPUS_SHIM=$(readlink -m "$shim_arg")
CORPUS_SRC=$(readlink -m "${CORPUS_DIR:-.corpus/cuda-samples}")
export CORPUS_GROUPS=${CORPUS_GROUPS:-samples,frameworks,rules}
export SAMPLE_TIMEOUT=${SAMPLE_TIMEOUT:-20} FW_TIMEOUT=${FW_TIMEOUT:-150}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
out=${OUT:-/tmp/seedance-corpus}
budget=${BUDGET_S:-450}
jobs=${JOBS:-16}
run_jobs=${RUN_JOBS:-4}
fw_jobs=${FW_JOBS:-2}
start=$(date +%s)
CORPUS_DEADLINE=$((start + budget))
group_on() { [[ ",$CORPUS_GROUPS," == *",$1,"* ]]; }

if group_on samples && [ -z "${DRY_RUN:-}" ] && [ ! -d "$CORPUS_SRC/Samples" ]; then
  echo "no cuda-samples at $CORPUS_SRC: run scripts/corpus/prepare-samples.sh on a machine with the mirror, then carry .corpus" >&2
  exit 2
fi
mkdir -p "$out"
CORPUS_WORK=$(mktemp -d /tmp/seedance-corpus-work.XXXXXX)
mkdir -p "$CORPUS_WORK/bin" "$CORPUS_WORK/build" "$CORPUS_WORK/runs"
cp "$here/samples.txt" "$CORPUS_WORK/samples.txt"
# shellcheck disable=SC2317 # run by the trap
cleanup() { [ -n "${KEEP_WORK:-}" ] || rm -rf "$CORPUS_WORK"; }
trap cleanup EXIT

# The selection: samples (name), framework programs, rules units (program.variant).
mapfile -t samples < <(selected_samples)
mapfile -t frameworks < <(framework_order)
mapfile -t rule_units < <(rule_units)
mapfile -t rule_programs < <(printf '%s\n' "${rule_units[@]}" | sed 's/\..*//' | sort -u)
group_on samples || samples=()
group_on frameworks || frameworks=()
group_on rules || { rule_units=(); rule_programs=(); }

# dry_run: the selection and the commands, nothing built or run.
dry_run() {
  local n
  echo "DRY_RUN: shim $CORPUS_SHIM, corpus $CORPUS_SRC, groups $CORPUS_GROUPS, budget ${budget}s"
  echo "samples selected: ${#samples[@]}"
  for n in "${samples[@]}"; do
    sample_fields "$n"
    echo "  $n (GPUs $s_gpus${s_opts:+; options $s_opts})"
    [ -n "${s_extra:-}" ] && echo "    kernel file (in Samples/$s_dir): $(sample_extra_cmd "$n")"
    [ -n "$(cg_headers_cmd "$n")" ] && echo "    headers (in Samples/$s_dir): $(cg_headers_cmd "$n")"
    sample_fields "$n"
    echo "    build (in Samples/$s_dir): $(sample_build_cmd "$n")"
    echo "    run   (in Samples/$s_dir): [plain|$([[ " $s_opts " == *" plain2 "* ]] && echo "plain2|")observe|fix] timeout ${s_timeout}s bin/$n $s_args"
  done
  echo "samples left out by samples.txt: $(grep -v '^#' "$CORPUS_HERE/samples.txt" | awk -F'|' '$3 == "SKIP"' | wc -l)"
  echo "framework programs: ${#frameworks[@]}"
  for n in "${frameworks[@]}"; do
    echo "  $n: [plain|observe|fix] timeout ${FW_TIMEOUT}s python3 scripts/corpus/frameworks/$n.py"
  done
  echo "rules units: ${#rule_units[@]}"
  for n in "${rule_programs[@]}"; do echo "  build: $(rule_build_cmd "$n")"; done
  for n in "${rule_units[@]}"; do
    echo "  $n: plain $(rule_modes "$n" | paste -sd' '): bin/rule_${n%%.*} ${n#*.}"
  done
  echo "modes: plain = no LD_PRELOAD; observe|fix = LD_PRELOAD=$CORPUS_SHIM SEEDANCE_MODE=<mode> SEEDANCE_TRACE_DIR=<run>/trace"
}
if [ -n "${DRY_RUN:-}" ]; then
  dry_run
  exit 0
fi

ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpus" -ge 1 ] || ngpus=1 # no nvidia-smi: the samples' own checks decide
export CORPUS_NGPUS=$ngpus

# 1. Builds (background) and the framework programs (they need no build) at the same time.
{
  printf 'build-rule %s\n' "${rule_programs[@]}"
  printf 'build-sample %s\n' "${samples[@]}"
} | grep -v ' $' | xargs -r -P "$jobs" -L 1 bash "$here/run.sh" --unit &
build_pid=$!
printf 'framework %s\n' "${frameworks[@]}" | grep -v ' $' | xargs -r -P "$fw_jobs" -L 1 bash "$here/run.sh" --unit &
fw_pid=$!
# What ran, recorded while the first builds go (the module imports take seconds).
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';') ($ngpus)"
  echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
  echo "shim: $CORPUS_SHIM ($(sha256sum "$CORPUS_SHIM" | cut -c1-16))"
  echo "cuda-samples: $(cat "$CORPUS_SRC/COMMIT" 2>/dev/null || echo absent)"
  echo "python: $(python3 -c 'import sys; print(sys.version.split()[0])' 2>&1)"
  for m in torch jax cupy numba numpy; do
    echo "$m: $(python3 -c "import $m; print($m.__version__)" 2>/dev/null || echo absent)"
  done
  echo "groups: $CORPUS_GROUPS; ${#samples[@]} samples, ${#frameworks[@]} framework programs, ${#rule_units[@]} rules units"
  echo "budget: ${budget}s; builds $jobs, runs $run_jobs + frameworks $fw_jobs at a time; timeouts ${SAMPLE_TIMEOUT}s / ${FW_TIMEOUT}s"
} | tee "$out/environment.txt"
wait "$build_pid"
echo "builds done after $(($(date +%s) - start)) s: $(grep -lx 0 "$CORPUS_WORK"/build/*.rc 2>/dev/null | wc -l) programs built (samples and rules)"

# 2. The rules cases, then the samples, RUN_JOBS at a time.
{
  printf 'rule %s\n' "${rule_units[@]}"
  printf 'sample %s\n' "${samples[@]}"
} | grep -v ' $' | xargs -r -P "$run_jobs" -L 1 bash "$here/run.sh" --unit
wait "$fw_pid"
echo "runs done after $(($(date +%s) - start)) s"

# 3. The judgement, and the logs.
python3 "$here/corpus.py" report "$CORPUS_WORK" "$out"
status=$?
pack_logs "$out/logs.tar.gz"
echo "total $(($(date +%s) - start)) s; full table in $out/results.txt, logs in $out/logs.tar.gz"
exit $status
