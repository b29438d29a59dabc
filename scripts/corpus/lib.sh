# Functions of scripts/corpus/run.sh (sourced, not run). The units of work run in children of
# run.sh through xargs (`run.sh --unit KIND NAME`); what they need comes in the environment:
# CORPUS_SHIM, CORPUS_WORK, CORPUS_SRC, CORPUS_HERE, CORPUS_DEADLINE, CORPUS_NGPUS,
# SAMPLE_TIMEOUT, FW_TIMEOUT.

# selected_samples: the names of the samples samples.txt selects (not SKIP), or of those in
# $SAMPLES among them; those with a timeout= option first (the longest runs start first).
selected_samples() {
  grep -v '^#' "$CORPUS_HERE/samples.txt" | awk -F'|' -v sel=" ${SAMPLES:-} " \
    'NF >= 4 && $3 != "SKIP" && (sel == "  " || index(sel, " " $1 " ")) {print ($8 ~ /(^| )timeout=/ ? 0 : 1), $1}' |
    sort -s -k1,1n | cut -d' ' -f2
}

# framework_order: the framework programs, the longest first (JAX while the GPU's memory is
# least shared: it takes 75% of it by default).
framework_order() {
  local first="jax_jit torch_compile ddp_nccl" f
  for f in $first; do [ -f "$CORPUS_HERE/frameworks/$f.py" ] && echo "$f"; done
  for f in "$CORPUS_HERE"/frameworks/[!_]*.py; do
    f=$(basename "$f" .py)
    [[ " $first " == *" $f "* ]] || echo "$f"
  done
}

# rule_units: program.variant of every case in rules/cases.txt, once each.
rule_units() {
  grep -v '^\s*#' "$CORPUS_HERE/rules/cases.txt" | awk -F'|' 'NF >= 4 {gsub(/ /, "", $1); gsub(/ /, "", $2); print $1 "." $2}' | awk '!seen[$0]++'
}

# rule_modes UNIT: the modes cases.txt checks for program.variant UNIT.
rule_modes() {
  grep -v '^\s*#' "$CORPUS_HERE/rules/cases.txt" |
    awk -F'|' -v u="$1" 'NF >= 4 {gsub(/ /, "", $1); gsub(/ /, "", $2); gsub(/ /, "", $3); if ($1 "." $2 == u) print $3}' | awk '!seen[$0]++'
}

# sample_fields NAME: s_dir, s_srcs, s_flags, s_args, s_gpus, s_extra, s_opts from samples.txt;
# s_timeout: the seconds each of its runs may take (timeout=S, when above SAMPLE_TIMEOUT).
sample_fields() {
  local line o
  line=$(grep -v '^#' "$CORPUS_HERE/samples.txt" | awk -F'|' -v n="$1" '$1 == n' | head -n 1)
  IFS='|' read -r _ s_dir s_srcs s_flags s_args s_gpus s_extra s_opts <<<"$line"
  [ "$s_flags" = "-" ] && s_flags=
  [ "$s_args" = "-" ] && s_args=
  [ "${s_extra:-}" = "-" ] && s_extra=
  s_gpus=${s_gpus:-1}
  s_timeout=${SAMPLE_TIMEOUT:-20}
  for o in ${s_opts:-}; do
    case "$o" in
      timeout=*) [ "${o#timeout=}" -gt "$s_timeout" ] 2>/dev/null && s_timeout=${o#timeout=} ;;
    esac
  done
}

# sample_has NAME OPTION: whether samples.txt gives sample NAME the option OPTION.
sample_has() {
  sample_fields "$1"
  [[ " ${s_opts:-} " == *" $2 "* ]]
}

# cg_headers_cmd NAME: the command that links the toolkit's cooperative-groups headers into the
# folder of sample NAME (its option cg-headers), or nothing.
cg_headers_cmd() {
  sample_has "$1" cg-headers || return 0
  local inc f links=
  inc=${CUDA_HOME:-$(cuda_home)}/include
  [ -d "$inc" ] || inc=${CUDA_HOME:-$(cuda_home)}/targets/x86_64-linux/include
  for f in cooperative_groups.h cooperative_groups cccl/nv cccl/cuda; do
    [ -e "$inc/$f" ] && links+=" $inc/$f"
  done
  [ -n "$links" ] && echo "ln -sfn$links ."
}

cuda_home() { dirname "$(dirname "$(readlink -m "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")"; }

# sample_build_cmd NAME: the nvcc command line that builds sample NAME (run in its folder).
sample_build_cmd() {
  local name=$1 cuda flags
  sample_fields "$name"
  cuda=${CUDA_HOME:-$(cuda_home)}
  flags=${s_flags//NVVM/-I$cuda/nvvm/include -L$cuda/nvvm/lib64 -lnvvm -Xlinker -rpath -Xlinker $cuda/nvvm/lib64 -lcuda -DLIBNVVM_HOME=$cuda/nvvm -DLIBDEVICE_MAJOR_VERSION=1 -DLIBDEVICE_MINOR_VERSION=0}
  # The toolkit's libraries (cuBLAS, cuFFT, NPP, ...) found at run time through an rpath, whatever
  # the loader's path holds.
  echo "nvcc -arch=sm_90 -O2 -std=c++17 --extended-lambda -rdc=true -Wno-deprecated-gpu-targets" \
    "-I$CORPUS_SRC/Common -I. $s_srcs $flags -lcudadevrt -Xlinker -rpath -Xlinker $cuda/lib64" \
    "-o $CORPUS_WORK/bin/$name"
}

# sample_extra_cmd NAME: the nvcc command line that builds the kernel file sample NAME loads at
# run time (samples.txt's seventh field), or nothing.
sample_extra_cmd() {
  sample_fields "$1"
  [ -n "${s_extra:-}" ] || return 0
  local kind=${s_extra%%:*} rest=${s_extra#*:}
  echo "nvcc -arch=sm_90 -O2 -Wno-deprecated-gpu-targets -I$CORPUS_SRC/Common -I. -$kind -o ${rest#*:} ${rest%%:*}"
}

rule_build_cmd() {
  if [ -f "$CORPUS_HERE/rules/$1.py" ]; then
    # A Python rules program is not built: copied beside the built ones, run with python3.
    echo "cp $CORPUS_HERE/rules/$1.py $CORPUS_WORK/bin/rule_$1.py"
    return
  fi
  echo "nvcc -arch=sm_90 -O2 -o $CORPUS_WORK/bin/rule_$1 $CORPUS_HERE/rules/$1.cu -lcuda"
}

# rule_cmd PROGRAM: the command that runs rules program PROGRAM (its variant follows).
rule_cmd() {
  if [ -f "$CORPUS_WORK/bin/rule_$1.py" ]; then
    echo "${CORPUS_PYTHON:-python3} $CORPUS_WORK/bin/rule_$1.py"
  else
    echo "$CORPUS_WORK/bin/rule_$1"
  fi
}

budget_left() { [ "$(date +%s)" -lt "$CORPUS_DEADLINE" ]; }

# build_limit: seconds a build may take: 300, or less so as to end by the budget's end + GRACE_S.
build_limit() {
  local left=$((CORPUS_DEADLINE + ${GRACE_S:-60} - $(date +%s)))
  [ "$left" -lt 300 ] && echo "$((left > 1 ? left : 1))" || echo 300
}

# run_mode GROUP NAME MODE CWD TIMEOUT CMD...: one run, its rc, stdout, stderr, wall time and
# trace under $CORPUS_WORK/runs/GROUP/NAME/MODE; or a file 'skipped' saying why not.
run_mode() {
  local group=$1 name=$2 mode=$3 cwd=$4 limit=$5
  shift 5
  local dir=$CORPUS_WORK/runs/$group/$name/$mode t0 rc
  mkdir -p "$dir"
  if ! budget_left; then
    echo "budget: BUDGET_S was reached before this run started" >"$dir/skipped"
    return
  fi
  # No run outlives the budget's end by more than GRACE_S: its timeout is cut to fit, and a run
  # stopped by that cut is recorded as not run rather than as timed out.
  local left=$((CORPUS_DEADLINE + ${GRACE_S:-60} - $(date +%s))) cut=
  if [ "$left" -lt "$limit" ]; then
    limit=$left
    cut=1
  fi
  local -a envs=(env -u LD_PRELOAD -u SEEDANCE_MODE -u SEEDANCE_TRACE_DIR)
  if [ "$mode" != plain ] && [ "$mode" != plain2 ]; then
    mkdir -p "$dir/trace"
    envs+=(LD_PRELOAD="$CORPUS_SHIM" SEEDANCE_MODE="$mode" SEEDANCE_TRACE_DIR="$dir/trace")
  fi
  t0=$(date +%s.%N)
  (cd "$cwd" && CORPUS_RUN_DIR="$dir" timeout -k 5 "$limit" "${envs[@]}" "$@" </dev/null >"$dir/stdout" 2>"$dir/stderr")
  rc=$?
  if [ -n "$cut" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
    echo "budget: stopped at BUDGET_S + GRACE_S, before it finished" >"$dir/skipped"
    return
  fi
  echo "$rc" >"$dir/rc"
  echo "$(date +%s.%N) $t0" | awk '{printf "%.2f\n", $1 - $2}' >"$dir/wall"
}

skip_modes() { # GROUP NAME REASON MODE...
  local group=$1 name=$2 why=$3 mode
  shift 3
  for mode in "$@"; do
    mkdir -p "$CORPUS_WORK/runs/$group/$name/$mode"
    echo "$why" >"$CORPUS_WORK/runs/$group/$name/$mode/skipped"
  done
}

unit_main() {
  local kind=$1 name=$2 mode cmd
  case "$kind" in
    build-sample)
      if ! budget_left; then
        echo "not started: BUDGET_S was reached" >"$CORPUS_WORK/build/$name.log"
        return
      fi
      sample_fields "$name"
      cmd=$(sample_build_cmd "$name")
      local extra headers
      extra=$(sample_extra_cmd "$name")
      headers=$(cg_headers_cmd "$name")
      # shellcheck disable=SC2086 # the command lines are split into words on purpose
      (cd "$CORPUS_SRC/Samples/$s_dir" && { [ -z "$extra" ] || timeout -k 5 "$(build_limit)" $extra; } &&
        { [ -z "$headers" ] || $headers; } &&
        timeout -k 5 "$(build_limit)" $cmd) >"$CORPUS_WORK/build/$name.log" 2>&1
      echo $? >"$CORPUS_WORK/build/$name.rc"
      ;;
    build-rule)
      cmd=$(rule_build_cmd "$name")
      # shellcheck disable=SC2086
      timeout -k 5 "$(build_limit)" $cmd >"$CORPUS_WORK/build/rule_$name.log" 2>&1
      echo $? >"$CORPUS_WORK/build/rule_$name.rc"
      ;;
    sample)
      sample_fields "$name"
      if [ "$(cat "$CORPUS_WORK/build/$name.rc" 2>/dev/null)" != 0 ]; then
        skip_modes samples "$name" "not built" plain observe fix
        return
      fi
      if [ "$s_gpus" -gt "${CORPUS_NGPUS:-1}" ]; then
        skip_modes samples "$name" "needs $s_gpus GPUs, ${CORPUS_NGPUS:-1} present" plain observe fix
        return
      fi
      # shellcheck disable=SC2086 # the arguments are split into words on purpose
      run_mode samples "$name" plain "$CORPUS_SRC/Samples/$s_dir" "$s_timeout" "$CORPUS_WORK/bin/$name" $s_args
      case "$(cat "$CORPUS_WORK/runs/samples/$name/plain/rc" 2>/dev/null)" in
        124 | 137)
          skip_modes samples "$name" "without the shim it ran past ${s_timeout}s" observe fix
          return
          ;;
      esac
      # A second run without the shim (option plain2): what changes between two runs of the
      # program alone is its own.
      if [[ " ${s_opts:-} " == *" plain2 "* ]]; then
        # shellcheck disable=SC2086
        run_mode samples "$name" plain2 "$CORPUS_SRC/Samples/$s_dir" "$s_timeout" "$CORPUS_WORK/bin/$name" $s_args
      fi
      for mode in observe fix; do
        # shellcheck disable=SC2086
        run_mode samples "$name" "$mode" "$CORPUS_SRC/Samples/$s_dir" "$s_timeout" "$CORPUS_WORK/bin/$name" $s_args
      done
      ;;
    framework)
      for mode in plain observe fix; do
        mkdir -p "$CORPUS_WORK/runs/frameworks/$name/$mode"
        run_mode frameworks "$name" "$mode" "$CORPUS_WORK/runs/frameworks/$name/$mode" "$FW_TIMEOUT" \
          python3 "$CORPUS_HERE/frameworks/$name.py"
      done
      ;;
    rule)
      local program=${name%%.*} variant=${name#*.}
      if [ "$(cat "$CORPUS_WORK/build/rule_$program.rc" 2>/dev/null)" != 0 ]; then
        skip_modes rules "$name" "not built: $(head -c 300 "$CORPUS_WORK/build/rule_$program.log" 2>/dev/null)" plain observe fix
        return
      fi
      for mode in plain $(rule_modes "$name"); do
        mkdir -p "$CORPUS_WORK/runs/rules/$name/$mode"
        # shellcheck disable=SC2046 # the command is split into words on purpose
        run_mode rules "$name" "$mode" "$CORPUS_WORK/runs/rules/$name/$mode" "$SAMPLE_TIMEOUT" \
          $(rule_cmd "$program") "$variant"
      done
      ;;
    *)
      echo "unknown unit $kind" >&2
      ;;
  esac
}

# pack_logs DEST: build logs and every run's files, without the traces when that is over 15 MiB.
pack_logs() {
  tar czf "$1" -C "$CORPUS_WORK" build runs 2>/dev/null
  if [ "$(stat -c %s "$1")" -gt $((15 * 1024 * 1024)) ]; then
    tar czf "$1" -C "$CORPUS_WORK" --exclude=trace build runs 2>/dev/null
    echo "logs.tar.gz: traces left out (over 15 MiB with them)"
  fi
}
