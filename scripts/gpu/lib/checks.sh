# shellcheck shell=bash
# shellcheck disable=SC2154 # $out, $shim, $sections and $par are the sourcing script's
# The check harness of the rule scripts (gpu/rules.sh, gpu/multi.sh). Sourced, not run:
#
#   passed=0 failed=0 are set and $out/checks.txt emptied when this is sourced;
#   healthy_events=REGEX           trace events a healthy run must not have (healthy_why)
#   par=$(gpu_parallel "$SETTING") 1: a case's runs go concurrently (see gpu_parallel)
#   sections=" KEY ... "           the sections want KEY... answers for
#
# Expects $out (results) and $shim (libseedance_fix.so). Every check is a PASS, FAIL or SKIP
# line on stdout and in $out/checks.txt; run NAME MODE keeps its stdout, stderr, exit code
# and trace directory under $out/NAME/ (MODE.out, MODE.err, MODE.rc, trace-MODE/).

passed=0
failed=0
: >"$out/checks.txt"
pass() { echo "PASS $1" | tee -a "$out/checks.txt"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2" | tee -a "$out/checks.txt"; failed=$((failed + 1)); }
skip() { echo "SKIP $1" | tee -a "$out/checks.txt"; }
info() { echo "   $*"; }
# want KEY...: whether $sections (" A B ... ", the script's sections to run) names a KEY.
want() { local k; for k in "$@"; do case $sections in *" $k "*) return 0 ;; esac; done; return 1; }

# gpu_parallel SETTING: SETTING when it is set; else 0 where a GPU's compute mode does not
# allow several processes (nvidia-smi says other than Default), 1 otherwise.
gpu_parallel() {
  if [ -n "$1" ]; then
    echo "$1"
  elif nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | grep -qv '^Default$'; then
    echo 0
  else
    echo 1
  fi
}

# launch NAME MODE [VAR=VALUE...] -- COMMAND...: one run of COMMAND in MODE (plain: no shim;
# observe, fix; observe-guard, fix-guard: SEEDANCE_HOST_GUARD=on; observe-redirect,
# fix-redirect: SEEDANCE_STRAY_CONTEXT=redirect), with the VARs set and none of the shim's
# settings inherited.
launch() {
  local name=$1 mode=$2 d="$out/$1"
  shift 2
  local vars=() shimvars=() limit=${run_timeout:-300}
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  case $mode in
    plain) ;;
    observe | fix)
      shimvars=(LD_PRELOAD="$shim" SEEDANCE_MODE="$mode" SEEDANCE_TRACE_DIR="$d/trace-$mode") ;;
    observe-guard | fix-guard)
      shimvars=(LD_PRELOAD="$shim" SEEDANCE_MODE="${mode%-guard}" SEEDANCE_HOST_GUARD=on
                SEEDANCE_TRACE_DIR="$d/trace-$mode") ;;
    observe-redirect | fix-redirect)
      shimvars=(LD_PRELOAD="$shim" SEEDANCE_MODE="${mode%-redirect}" SEEDANCE_STRAY_CONTEXT=redirect
                SEEDANCE_TRACE_DIR="$d/trace-$mode") ;;
    *) echo "launch: unknown mode $mode" >&2; return 1 ;;
  esac
  mkdir -p "$d"
  [ "$mode" = plain ] || mkdir -p "$d/trace-$mode"
  # ulimit -f: no file over 256 MiB (a program that loops printing is killed by SIGXFSZ
  # instead of filling the disk; the trace's own limit is 64 MiB).
  # The outer 2>/dev/null only drops bash's own "Aborted ..." notice; the exit code says it.
  {
    (
      ulimit -f 262144
      exec timeout -k 10 "$limit" env -u LD_PRELOAD -u SEEDANCE_MODE -u SEEDANCE_HOST_GUARD \
          -u SEEDANCE_STRAY_CONTEXT -u SEEDANCE_TRACE_DIR ${vars[@]+"${vars[@]}"} \
          ${shimvars[@]+"${shimvars[@]}"} "$@"
    ) >"$d/$mode.out" 2>"$d/$mode.err"
    echo $? >"$d/$mode.rc"
  } 2>/dev/null
}

# run_case NAME "MODES" "VAR=VALUE ..." -- COMMAND...: the runs of one case, concurrently
# unless $par is 0 or the caller set serial=1 (racing cases: timing matters). Waits for its
# own runs only (a caller's background process, such as a memory holder, runs on).
run_case() {
  local name=$1 modes=$2 envlist=$3 m pids=()
  shift 3
  [ "${1:-}" = -- ] && shift
  rm -rf "${out:?}/$name"
  for m in $modes; do
    # shellcheck disable=SC2086 # envlist is a word list on purpose
    if [ "$par" = 1 ] && [ "${serial:-0}" != 1 ]; then
      launch "$name" "$m" $envlist -- "$@" &
      pids+=($!)
    else
      launch "$name" "$m" $envlist -- "$@"
    fi
  done
  [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"
}

rc() { cat "$out/$1/$2.rc" 2>/dev/null || echo none; }
res() { grep '^result: ' "$out/$1/$2.out" 2>/dev/null; }
said() { cat "$out/$1/$2.out" "$out/$1/$2.err" 2>/dev/null | grep -c '^seedance: '; }
said_re() { cat "$out/$1/$2.out" "$out/$1/$2.err" 2>/dev/null | grep -E -- "^seedance: .*($3)"; }
first_said() { cat "$out/$1/$2.out" "$out/$1/$2.err" 2>/dev/null | grep -m 1 '^seedance: ' | cut -c 1-240; }
last_err() { grep -v '^seedance: ' "$out/$1/$2.err" 2>/dev/null | tail -n 1 | cut -c 1-200; }
# records NAME MODE REGEX [WORD]: trace records whose event matches REGEX (and naming WORD)
records() {
  cat "$out/$1/trace-$2"/*.jsonl 2>/dev/null | grep -E "\"event\" *: *\"($3)\"" | grep -c -- "${4:-}"
}
traces() { ls "$out/$1/trace-$2"/*.jsonl 2>/dev/null | wc -l; }
# crashed NAME MODE: killed by a signal, timed out, or never ran
crashed() { local r; r=$(rc "$1" "$2"); [ "$r" = none ] || [ "$r" -ge 124 ]; }
add() { why="${why:+$why; }$*"; }
summary_line() { # summary_line NAME MODE REGEX: the first result line matching REGEX, or the exit code
  local l
  l=$(res "$1" "$2" | grep -m 1 -E -- "$3" | sed 's/^result: //')
  echo "${l:-exit $(rc "$1" "$2")}"
}

# as_plain_why NAME MODE: empty when MODE's exit code and results equal the plain run's.
as_plain_why() {
  why=
  [ "$(rc "$1" "$2")" = "$(rc "$1" plain)" ] || add "exit $(rc "$1" "$2") ($(last_err "$1" "$2")), without the shim $(rc "$1" plain)"
  [ "$(res "$1" "$2")" = "$(res "$1" plain)" ] ||
    add "results differ: $(diff <(res "$1" plain) <(res "$1" "$2") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
  echo "$why"
}

# healthy_why NAME MODE: empty when MODE's run is healthy, else why not: the plain run
# exited 0 with results, MODE's exit code and results equal its, no "seedance: " line and
# no trace record of the events ${bad_events:-$healthy_events}.
healthy_why() {
  local n=$1 m=$2 h s
  why=
  [ "$(rc "$n" plain)" = 0 ] || add "without the shim it exited $(rc "$n" plain) ($(last_err "$n" plain))"
  [ -n "$(res "$n" plain)" ] || add "no result line without the shim"
  [ "$(rc "$n" "$m")" = "$(rc "$n" plain)" ] || add "exit $(rc "$n" "$m") ($(last_err "$n" "$m")), without the shim $(rc "$n" plain)"
  [ "$(res "$n" "$m")" = "$(res "$n" plain)" ] ||
    add "results differ: $(diff <(res "$n" plain) <(res "$n" "$m") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
  s=$(said "$n" "$m")
  [ "$s" -eq 0 ] || add "$s seedance lines, first: $(first_said "$n" "$m")"
  h=$(records "$n" "$m" "${bad_events:-$healthy_events}")
  [ "$h" -eq 0 ] || add "$h ${bad_events:-$healthy_events} records"
  echo "$why"
}

# check_each WHY_FUNCTION PASS_TEXT NAME LABEL MODE...: one check per mode, passed when
# WHY_FUNCTION NAME MODE says nothing.
check_each() {
  local f=$1 ok=$2 n=$3 label=$4 m w
  shift 4
  for m in "$@"; do
    w=$("$f" "$n" "$m")
    if [ -z "$w" ]; then pass "$label [$m]: $ok"; else fail "$label [$m]" "$w"; fi
  done
}
# check_healthy NAME LABEL MODE... (healthy_why), check_as_plain NAME LABEL MODE...
# (as_plain_why).
check_healthy() { check_each healthy_why "as without the shim, silent" "$@"; }
check_as_plain() { check_each as_plain_why "exit and results as without the shim" "$@"; }

# expect_line NAME LABEL REGEX MODE...: every MODE's stdout has a line matching REGEX.
expect_line() {
  local n=$1 label=$2 re=$3 m bad=
  shift 3
  for m in "$@"; do
    grep -qE -- "$re" "$out/$n/$m.out" 2>/dev/null || bad="$bad $m($(res "$n" "$m" | tail -n 1 | cut -c 1-120))"
  done
  if [ -z "$bad" ]; then pass "$label: '$re' in every mode"; else fail "$label" "no '$re' in:$bad"; fi
}

# no_worse NAME LABEL: a JAX program with a device it may not have (plain, observe, fix):
# observe as without the shim and never a signal or hang; fix no worse: a working run where
# the plain run worked (the same results), else a working run ("result: device 0 sum=") or
# a clean Python exception ("result: exception=", exit 1).
no_worse() {
  local n=$1 label=$2 p
  p=$(rc "$n" plain)
  info "== $label: without: exit $p, $(res "$n" plain | sed 's/^result: //' | tr '\n' ';'); observe: exit $(rc "$n" observe), $(said "$n" observe) lines; fix: exit $(rc "$n" fix), $(res "$n" fix | sed 's/^result: //' | tr '\n' ';')"
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  [ -z "$(first_said "$n" fix)" ] || info "   fix said: $(first_said "$n" fix)"
  why=
  if crashed "$n" observe; then add "exit $(rc "$n" observe) (signal or hang; $(last_err "$n" observe))"; fi
  [ -z "$(as_plain_why "$n" observe)" ] || add "$(as_plain_why "$n" observe)"
  if [ -z "$why" ]; then pass "$label [observe]: as without the shim"; else fail "$label [observe]" "$why"; fi
  why=
  [ -n "$(res "$n" plain)" ] || add "without the shim it printed no result (exit $p: $(last_err "$n" plain))"
  if crashed "$n" fix; then
    add "exit $(rc "$n" fix): killed by a signal or hung ($(last_err "$n" fix))"
  elif [ "$p" = 0 ]; then
    [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) where the plain run worked ($(last_err "$n" fix))"
    [ "$(res "$n" fix)" = "$(res "$n" plain)" ] || add "results differ from the working plain run"
  else
    case $(rc "$n" fix) in
      0) grep -q '^result: device 0 sum=' "$out/$n/fix.out" || add "exit 0 without a result" ;;
      1) grep -q '^result: exception=' "$out/$n/fix.out" || add "exit 1 without a clean Python exception" ;;
      *) add "exit $(rc "$n" fix): neither a working run nor a clean Python error" ;;
    esac
  fi
  if [ -z "$why" ]; then pass "$label [fix]: no worse than without the shim (exit $(rc "$n" fix))"; else fail "$label [fix]" "$why"; fi
}
