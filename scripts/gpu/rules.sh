#!/usr/bin/env bash
# GPU checks of libseedance_fix.so against rules written from its user-facing description
# only (the programs in scripts/gpu/rules/ were written without reading the shim's code).
# One GPU is enough. Run from the repository root on the GPU machine:
#
#   [SEEDANCE_ANALYZE=path/to/seedance-analyze] scripts/gpu/rules.sh [path/to/libseedance_fix.so]
#
# Builds scripts/gpu/rules/ordinals_rules.c and contexts_short.c with nvcc (-lcuda
# -lpthread; section H builds scripts/gpu/rules/ctx_events.c itself, -lcuda) and runs every
# program and variant in its own processes: without the shim
# ("plain"), with SEEDANCE_MODE=observe and with SEEDANCE_MODE=fix (host-write cases also
# with SEEDANCE_HOST_GUARD=on in both modes: "observe-guard", "fix-guard"). Each run has its
# own SEEDANCE_TRACE_DIR; stdout, stderr and the exit code are kept:
#   $OUT/<case>/<mode>.out, .err, .rc and $OUT/<case>/trace-<mode>/   (OUT default
#   /tmp/seedance-rules). Every check is also appended to $OUT/checks.txt.
#
# "Healthy" below means, for each mode with the shim: exit code and "result: " lines equal
# to the run without the shim (which must exit 0 and print results), no "seedance: " line
# (stdout or stderr), no host_hazard or device_fault record in the trace (ordinal
# questions: no device_fallback record either).
#
# Checks:
#   A (ordinals_rules, driver API)
#     - ascending_probe, descending_probe, from_one, second_gpu (questions) and
#       count_then_last, direct_zero (correct requests): healthy in observe and fix, and
#       the probe agrees with cuDeviceGetCount in every mode ("... = yes"; second_gpu says
#       "second gpu = no" on a 1-GPU host);
#     - count_then_rank (cuDeviceGet(count)), also under CUDA_VISIBLE_DEVICES=0, direct_one
#       and cvd_count_then_one (under CUDA_VISIBLE_DEVICES=0): observe explains it (a
#       "seedance: " line or a device_fault record naming cuDeviceGet) with the same
#       output and exit code as without the shim; fix repairs it (code=0, the same device
#       as ordinal 0, context + cuMemAlloc work, exit 0) and announces it (a line);
#     - same_answer_threads (CUDA_VISIBLE_DEVICES=0): in observe and in fix, the three
#       cuDeviceGet(1) answers (thread A before and after cuDeviceGetCount, thread B after
#       cuDeviceGet(0)) are identical (code and device), the primary-context retain of a
#       handle obtained succeeds, exit 0; observe prints what the plain run prints.
#   B (jax_missing_device.py): correct (jax_cuda_visible_devices=0) healthy; faulty
#     (jax_cuda_visible_devices=0,1) and faulty_env (CUDA_VISIBLE_DEVICES=0,1): observe
#     behaves as the plain run; fix no worse than plain: never a signal (SIGABRT) or hang,
#     a working run (exit 0 with results) or a clean Python error ("result: exception=",
#     exit 1), and when plain works fix gives the same results.
#   C (healthy_torch.py, healthy_jax.py, healthy_cupy.py): healthy, match=True in every
#     mode, a trace written, and (when SEEDANCE_ANALYZE is given) `seedance-analyze summary
#     TRACEDIR` has no [error]/[warning] line naming cuGetProcAddress.
#   D (torch_ordering.py IDIOM correct|racing): every idiom's correct variant healthy with
#     match=True in every mode (event_synchronize, pinned_ring also with the guard on);
#     wait_event, wait_stream racing (staging buffer reused by a D2H on another stream):
#     observe explains it (host_hazard record or line) with the same match value as plain,
#     fix explains it and match=True; event_synchronize, pinned_ring racing (host refill):
#     with the guard on, observe reports the write, fix reports it and match=True.
#   E (cupy_ordering.py): correct healthy with match=True; racing as wait_event racing.
#   F (torch_host_write.py): correct and threads8 healthy in observe, fix, observe-guard,
#     fix-guard, with their "= True" lines; racing: no crash with the guard off, observe-
#     guard reports the write (host_hazard record or a line about the write), fix-guard
#     reports it and dst equals the original; threads8_racing (extra): exit 0 in every
#     mode and dst equals the original in fix-guard.
#   G (contexts_short, driver API): created and primary healthy, "checksum matches = yes",
#     and no stderr line containing "stray" and no stray_context record in observe or fix;
#     stray (only with 2+ GPUs; otherwise SKIP): observe and fix report it ("stray").
#   H (ctx_events, driver API, built here with nvcc -lcuda; torch_green.py): context-wide
#     events and green contexts around a pending H2D from pinned memory and a D2H into the
#     same bytes on another stream ("unknown means silent"):
#     - ctx_record, ctx_wait, ctx_record_stream_wait, green_record, green_wait,
#       green_ctx_record, green_primary_record, green_primary_wait (correct; green_* SKIP
#       where the device or driver has no green contexts): healthy in observe and fix, the
#       H2D pending at the ordering call, "device copy intact = yes" and the D2H landed in
#       every mode;
#     - faulty, green_faulty (no ordering; the race): observe reports it (a "seedance: "
#       line naming the copy) with the exit code and intact line of the plain run; fix
#       announces something (a line) with the plain run's exit code;
#     - ctx_record_early (a context event recorded before the H2D: still a race the shim
#       may miss): observe and fix keep the plain run's exit code, observe its intact line,
#       fix changes nothing unannounced; whether it was reported is only printed;
#     - torch_green.py correct|racing (a torch.cuda.green_contexts stream; SKIP where torch
#       has none): correct healthy with match=True; racing as faulty.
# Prints PASS/FAIL per check (SKIP lines are not counted), then "N passed, M failed".
# Exit status: the number of failed checks (at most 255). Total time about 5-8 minutes;
# runs of healthy cases go concurrently (RULES_PARALLEL=0 makes everything sequential;
# racing cases always run alone).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/gpu/lib/common.sh
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-rules "${1:-}"
rules="$here/gpu/rules"
python=${PYTHON:-python3}
analyze=${SEEDANCE_ANALYZE:-}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
pyver() { $python -c "import $1; print($1.__version__)" 2>&1 | tail -n 1; }
record_gpu_environment "torch: $(pyver torch)" "jax: $(pyver jax)" "cupy: $(pyver cupy)" \
    "analyzer: ${analyze:-none, the C analyzer checks are skipped}"
ndev=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
echo "devices: $ndev"

# RULES_SECTIONS: which sections to run (default all: "A G B C D E F H").
sections=" ${RULES_SECTIONS:-A G B C D E F H} "

# shellcheck source=scripts/gpu/lib/checks.sh
. "$here/gpu/lib/checks.sh"
healthy_events='host_hazard|device_fault'

if [ ! -f "$shim" ]; then
  fail "shim" "$shim not found"
  echo "$passed passed, $failed failed"
  exit 1
fi

# Concurrent runs only where the GPU's compute mode allows several processes.
par=$(gpu_parallel "${RULES_PARALLEL:-}")

# ---------------------------------------------------------------- build
mkdir -p "$out/build"
for p in ordinals_rules contexts_short; do
  if nvcc -O2 -o "$work/$p" "$rules/$p.c" -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" \
      -lcuda -lpthread >"$out/build/$p.txt" 2>&1; then
    pass "build $p"
  else
    fail "build $p" "$(tail -n 3 "$out/build/$p.txt" | tr '\n' ' ')"
  fi
done

# ---------------------------------------------------------------- A: device ordinals
if want A; then
ord="$work/ordinals_rules"
if [ -x "$ord" ]; then
  run_timeout=30
  for c in ascending_probe second_gpu count_then_last direct_zero; do
    run_case "ordinals/$c" "plain observe fix" "" -- "$ord" "$c"
    info "== A $c without the shim: $(res "ordinals/$c" plain | sed 's/^result: //' | tr '\n' ';')"
    bad_events='host_hazard|device_fault|device_fallback' check_healthy "ordinals/$c" "A ordinals $c (healthy)" observe fix
  done
  expect_line ordinals/ascending_probe "A ascending_probe finds the device count" 'probe equals count = yes' plain observe fix
  # Probes whose first look-up has the rank mistake's shape (docs/configuration.md,
  # SEEDANCE_FALLBACK): that look-up is explained once (observe) and repaired (fix), the
  # rest of the probe gets the driver's answers; so observe counts as without the shim and
  # fix counts one more, each with exactly one explanation.
  for c in descending_probe from_one; do
    run_case "ordinals/$c" "plain observe fix" "" -- "$ord" "$c"
    info "== A $c: without: $(res "ordinals/$c" plain | tr '\n' ';'); fix: $(res "ordinals/$c" fix | tr '\n' ';')"
  done
  expect_line ordinals/descending_probe "A descending_probe finds the device count" 'found equals count = yes' plain observe
  expect_line ordinals/from_one "A from_one stops at the last device" 'highest equals count - 1 = yes' plain observe
  for c in descending_probe from_one; do
    why=
    [ "$(res "ordinals/$c" observe)" = "$(res "ordinals/$c" plain)" ] || add "observe results differ"
    [ "$(records "ordinals/$c" observe device_fault cuDeviceGet)" -eq 1 ] || add "observe: $(records "ordinals/$c" observe device_fault cuDeviceGet) device_fault records, want 1"
    [ "$(records "ordinals/$c" fix device_fallback cuDeviceGet)" -eq 1 ] || add "fix: $(records "ordinals/$c" fix device_fallback cuDeviceGet) device_fallback records, want 1"
    [ "$(rc "ordinals/$c" fix)" = 0 ] || add "fix exit $(rc "ordinals/$c" fix)"
    if [ -z "$why" ]; then pass "A $c: first look-up explained once, repaired once in fix"; else fail "A $c" "$why"; fi
  done
  if [ "$ndev" -eq 1 ]; then
    expect_line ordinals/descending_probe "A descending_probe in fix: the repaired first look-up counts" 'found = 2' fix
    expect_line ordinals/from_one "A from_one in fix: the repaired ordinal 1 is found" 'highest = 1' fix
  fi
  expect_line ordinals/second_gpu "A second_gpu agrees with the count" 'answer agrees with count = yes' plain observe fix
  if [ "$ndev" -eq 1 ]; then
    expect_line ordinals/second_gpu "A second_gpu on 1 GPU" 'second gpu = no' plain observe fix
  fi
  expect_line ordinals/count_then_last "A count_then_last works" 'work = ok' plain observe fix
  expect_line ordinals/direct_zero "A direct_zero works" 'work = ok' plain observe fix

  # The mistakes: name, case, environment.
  faulty_ordinal() {
    local n=$1 label=$2 s h
    info "== A $label: without: $(summary_line "$n" plain request); observe: $(summary_line "$n" observe request); fix: $(summary_line "$n" fix request)"
    [ -z "$(first_said "$n" fix)" ] || info "   fix said: $(first_said "$n" fix)"
    why=
    s=$(said "$n" observe)
    h=$(records "$n" observe device_fault cuDeviceGet)
    [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line and no device_fault record naming cuDeviceGet"
    [ "$(res "$n" observe)" = "$(res "$n" plain)" ] || add "results differ from the plain run: $(summary_line "$n" observe request)"
    [ "$(rc "$n" observe)" = "$(rc "$n" plain)" ] || add "exit $(rc "$n" observe), plain $(rc "$n" plain)"
    if [ -z "$why" ]; then pass "A $label [observe]: explained ($s lines, $h records), behaviour unchanged"; else fail "A $label [observe]" "$why"; fi
    why=
    grep -qE 'request cuDeviceGet\([0-9]+\): code=0 ' "$out/$n/fix.out" || add "not repaired: $(summary_line "$n" fix request)"
    grep -q 'same device as ordinal 0 = yes' "$out/$n/fix.out" || add "not device 0"
    grep -q 'work = ok' "$out/$n/fix.out" || add "context/allocation: $(summary_line "$n" fix 'ctx|alloc|work')"
    [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix))"
    [ "$(said "$n" fix)" -ge 1 ] || add "the repair was not announced (no seedance line)"
    if [ -z "$why" ]; then pass "A $label [fix]: repaired to device 0, announced, context and allocation work"; else fail "A $label [fix]" "$why"; fi
  }
  run_case ordinals/count_then_rank "plain observe fix" "" -- "$ord" count_then_rank
  faulty_ordinal ordinals/count_then_rank "count_then_rank"
  run_case ordinals/count_then_rank-cvd0 "plain observe fix" "CUDA_VISIBLE_DEVICES=0" -- "$ord" count_then_rank
  faulty_ordinal ordinals/count_then_rank-cvd0 "count_then_rank (CUDA_VISIBLE_DEVICES=0)"
  run_case ordinals/direct_one-cvd0 "plain observe fix" "CUDA_VISIBLE_DEVICES=0" -- "$ord" direct_one
  faulty_ordinal ordinals/direct_one-cvd0 "direct_one (CUDA_VISIBLE_DEVICES=0)"
  run_case ordinals/cvd_count_then_one "plain observe fix" "CUDA_VISIBLE_DEVICES=0" -- "$ord" cvd_count_then_one
  faulty_ordinal ordinals/cvd_count_then_one "cvd_count_then_one (CUDA_VISIBLE_DEVICES=0)"

  n=ordinals/same_answer_threads
  run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=0" -- "$ord" same_answer_threads
  info "== A same_answer_threads without the shim: $(res "$n" plain | sed 's/^result: //' | tr '\n' ';')"
  for m in observe fix; do
    why=
    answers=$(res "$n" "$m" | grep 'cuDeviceGet(1):' | sed 's/.*cuDeviceGet(1): //')
    [ "$(echo "$answers" | grep -c .)" -eq 3 ] || add "$(echo "$answers" | grep -c .) answers to cuDeviceGet(1), want 3"
    [ "$(echo "$answers" | sort -u | grep -c .)" -eq 1 ] || add "different answers: $(echo "$answers" | tr '\n' '|')"
    if echo "$answers" | grep -q 'code=0 '; then
      grep -q 'Retain(handle): code=0$' "$out/$n/$m.out" || add "retain of the handle: $(summary_line "$n" "$m" Retain)"
    fi
    [ "$(rc "$n" "$m")" = 0 ] || add "exit $(rc "$n" "$m") ($(last_err "$n" "$m"))"
    if [ "$m" = observe ]; then
      [ "$(res "$n" observe)" = "$(res "$n" plain)" ] || add "observe changed the answers: $(res "$n" observe | sed 's/^result: //' | tr '\n' ';')"
    fi
    if [ -z "$why" ]; then
      pass "A same_answer_threads [$m]: ordinal 1 answered '$(echo "$answers" | head -n 1)' every time"
    else
      fail "A same_answer_threads [$m]" "$why"
    fi
  done
fi

fi

# ---------------------------------------------------------------- G: short-lived contexts
if want G; then
ctxp="$work/contexts_short"
if [ -x "$ctxp" ]; then
  run_timeout=30
  for v in created primary; do
    n=contexts/$v
    run_case "$n" "plain observe fix" "" -- "$ctxp" "$v"
    check_healthy "$n" "G contexts $v (healthy)" observe fix
    expect_line "$n" "G contexts $v work" 'checksum matches = yes' plain observe fix
    for m in observe fix; do
      s=$(cat "$out/$n/$m.err" 2>/dev/null | grep -ci stray)
      r=$(records "$n" "$m" 'stray_context')
      if [ "$s" -eq 0 ] && [ "$r" -eq 0 ]; then
        pass "G contexts $v [$m]: no stray context reported"
      else
        fail "G contexts $v [$m]" "$s stderr lines with 'stray', $r stray_context records: $(grep -i -m 1 stray "$out/$n/$m.err" | cut -c 1-240)"
      fi
    done
  done
  if [ "$ndev" -ge 2 ]; then
    n=contexts/stray
    run_case "$n" "plain observe fix" "" -- "$ctxp" stray
    for m in observe fix; do
      if grep -qi 'stray' "$out/$n/$m.err" && [ "$(rc "$n" "$m")" = "$(rc "$n" plain)" ]; then
        pass "G contexts stray [$m]: reported"
      else
        fail "G contexts stray [$m]" "no stray line (exit $(rc "$n" "$m"))"
      fi
    done
  else
    skip "G contexts stray: needs 2 GPUs ($ndev here)"
  fi
fi

fi

# ---------------------------------------------------------------- B: JAX, a missing device
if want B; then
run_timeout=180
n=jax/correct
run_case "$n" "plain observe fix" "" -- "$python" "$rules/jax_missing_device.py" correct
check_healthy "$n" "B jax_missing_device correct (healthy)" observe fix
serial=1 run_case jax/faulty "plain observe fix" "" -- "$python" "$rules/jax_missing_device.py" faulty
no_worse jax/faulty "B jax_missing_device faulty (jax_cuda_visible_devices=0,1)"
serial=1 run_case jax/faulty_env "plain observe fix" "CUDA_VISIBLE_DEVICES=0,1" -- "$python" "$rules/jax_missing_device.py" faulty_env
no_worse jax/faulty_env "B jax_missing_device faulty_env (CUDA_VISIBLE_DEVICES=0,1)"

fi

# ---------------------------------------------------------------- C: healthy frameworks, version look-ups
if want C; then
for p in torch jax cupy; do
  n=healthy/$p
  run_case "$n" "plain observe fix" "" -- "$python" "$rules/healthy_$p.py"
  check_healthy "$n" "C healthy_$p (healthy)" observe fix
  expect_line "$n" "C healthy_$p checksum" 'match=True' plain observe fix
  for m in observe fix; do
    if [ "$(traces "$n" "$m")" -eq 0 ]; then
      fail "C healthy_$p [$m] cuGetProcAddress" "no trace written in $out/$n/trace-$m"
      continue
    fi
    if [ -z "$analyze" ]; then
      skip "C healthy_$p [$m] cuGetProcAddress: SEEDANCE_ANALYZE not given"
      continue
    fi
    "$analyze" summary "$out/$n/trace-$m" >"$out/$n/analyze-$m.txt" 2>&1
    arc=$?
    bad=$(grep -E '\[(error|warning)\]' "$out/$n/analyze-$m.txt" | grep -c cuGetProcAddress)
    if [ ! -s "$out/$n/analyze-$m.txt" ]; then
      fail "C healthy_$p [$m] cuGetProcAddress" "seedance-analyze summary printed nothing (exit $arc)"
    elif [ "$bad" -eq 0 ]; then
      pass "C healthy_$p [$m]: no cuGetProcAddress problem above info in seedance-analyze summary"
    else
      fail "C healthy_$p [$m] cuGetProcAddress" "$bad lines: $(grep -E '\[(error|warning)\]' "$out/$n/analyze-$m.txt" | grep -m 1 cuGetProcAddress | cut -c 1-240)"
    fi
  done
done

fi

# ---------------------------------------------------------------- D, E: ordering idioms
if want D E; then
run_timeout=300
# stream_race NAME LABEL: a D2H into pinned bytes a pending H2D still reads (observe, fix).
stream_race() {
  local n=$1 label=$2 s h
  info "== $label: without: $(summary_line "$n" plain match=); observe: $(summary_line "$n" observe match=); fix: $(summary_line "$n" fix match=)"
  if grep -q 'match=False' "$out/$n/plain.out"; then info "   without the shim the data were corrupted (the race is real)"; else info "   without the shim the race did not corrupt the data this run"; fi
  [ -z "$(first_said "$n" fix)" ] || info "   fix said: $(first_said "$n" fix)"
  why=
  s=$(said "$n" observe)
  h=$(records "$n" observe host_hazard)
  [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line and no host_hazard record"
  [ "$(rc "$n" observe)" = 0 ] || add "exit $(rc "$n" observe) ($(last_err "$n" observe))"
  [ "$(res "$n" observe | grep -o 'match=[A-Za-z]*')" = "$(res "$n" plain | grep -o 'match=[A-Za-z]*')" ] ||
    add "result changed: $(summary_line "$n" observe match=) (plain: $(summary_line "$n" plain match=))"
  if [ -z "$why" ]; then pass "$label [observe]: explained ($s lines, $h host_hazard records), result unchanged"; else fail "$label [observe]" "$why"; fi
  why=
  s=$(said "$n" fix)
  h=$(records "$n" fix host_hazard)
  [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line and no host_hazard record"
  [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix))"
  grep -q 'match=True' "$out/$n/fix.out" || add "not repaired: $(summary_line "$n" fix match=)"
  if [ -z "$why" ]; then pass "$label [fix]: explained and repaired (match=True)"; else fail "$label [fix]" "$why"; fi
}
# host_race NAME LABEL OKREGEX: a host write into a pending H2D's source (guard on).
host_race() {
  local n=$1 label=$2 ok=$3 s h m
  info "== $label: without: $(summary_line "$n" plain "$ok|match=|dst"); observe-guard: $(summary_line "$n" observe-guard "$ok|match=|dst"); fix-guard: $(summary_line "$n" fix-guard "$ok|match=|dst")"
  [ -z "$(first_said "$n" observe-guard)" ] || info "   observe-guard said: $(first_said "$n" observe-guard)"
  for m in observe-guard fix-guard; do
    why=
    s=$(cat "$out/$n/$m.out" "$out/$n/$m.err" 2>/dev/null | grep -ciE '^seedance: .*write')
    h=$(records "$n" "$m" host_hazard)
    [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line about the write and no host_hazard record ($(said "$n" "$m") seedance lines)"
    [ "$(rc "$n" "$m")" = 0 ] || add "exit $(rc "$n" "$m") ($(last_err "$n" "$m"))"
    if [ "$m" = fix-guard ]; then
      grep -qE -- "$ok" "$out/$n/$m.out" || add "data not intact: $(summary_line "$n" "$m" "match=|dst")"
    fi
    if [ -z "$why" ]; then pass "$label [$m]: the write reported ($s lines, $h host_hazard records)$([ "$m" = fix-guard ] && echo ', data intact')"; else fail "$label [$m]" "$why"; fi
  done
}

for idiom in wait_event wait_stream event_synchronize pinned_ring record_stream dataloader_prefetch cuda_graph compile_reduce_overhead; do
  n=torch/$idiom-correct
  modes="plain observe fix"
  case $idiom in event_synchronize | pinned_ring | dataloader_prefetch | cuda_graph | compile_reduce_overhead) modes="$modes observe-guard fix-guard" ;; esac
  run_case "$n" "$modes" "" -- "$python" "$rules/torch_ordering.py" "$idiom" correct
  # shellcheck disable=SC2086
  check_healthy "$n" "D torch $idiom correct (healthy)" ${modes#plain }
  # shellcheck disable=SC2086
  expect_line "$n" "D torch $idiom correct reaches the device intact" 'match=True|capture failed' $modes
  if grep -q 'capture failed' "$out/$n/plain.out" 2>/dev/null; then
    info "   $idiom: torch could not capture the pinned copies even without the shim ($(last_err "$n" plain)); only 'no worse' was checked"
  fi
done
for idiom in wait_event wait_stream; do
  n=torch/$idiom-racing
  serial=1 run_case "$n" "plain observe fix" "" -- "$python" "$rules/torch_ordering.py" "$idiom" racing
  stream_race "$n" "D torch $idiom racing"
done
for idiom in event_synchronize pinned_ring; do
  n=torch/$idiom-racing
  serial=1 run_case "$n" "plain observe-guard fix-guard" "" -- "$python" "$rules/torch_ordering.py" "$idiom" racing
  host_race "$n" "D torch $idiom racing (host refill, guard on)" 'match=True'
done

n=cupy/correct
run_case "$n" "plain observe fix" "" -- "$python" "$rules/cupy_ordering.py" correct
check_healthy "$n" "E cupy_ordering correct (healthy)" observe fix
expect_line "$n" "E cupy_ordering correct reaches the device intact" 'match=True' plain observe fix
n=cupy/racing
serial=1 run_case "$n" "plain observe fix" "" -- "$python" "$rules/cupy_ordering.py" racing
stream_race "$n" "E cupy_ordering racing"

fi

# ---------------------------------------------------------------- F: host writes into a pending copy
if want F; then
all5="plain observe fix observe-guard fix-guard"
for v in correct threads8; do
  n=hostwrite/$v
  run_case "$n" "$all5" "" -- "$python" "$rules/torch_host_write.py" "$v"
  check_healthy "$n" "F torch_host_write $v (healthy)" observe fix observe-guard fix-guard
  # shellcheck disable=SC2086
  expect_line "$n" "F torch_host_write $v dst intact" 'dst equals original = True' $all5
done
# shellcheck disable=SC2086
expect_line hostwrite/threads8 "F torch_host_write threads8 writes landed" 'second copy holds the threaded write = True' $all5
# shellcheck disable=SC2086
expect_line hostwrite/threads8 "F torch_host_write threads8 parallel fill landed" 'src holds the parallel fill = True' $all5

n=hostwrite/racing
serial=1 run_case "$n" "$all5" "" -- "$python" "$rules/torch_host_write.py" racing
if grep -q 'dst equals original = False' "$out/$n/plain.out"; then info "   F racing without the shim: the device copy got the host write (the race is real)"; fi
for m in observe fix; do
  if crashed "$n" "$m" || [ "$(rc "$n" "$m")" != 0 ]; then
    fail "F torch_host_write racing [$m] (guard off)" "exit $(rc "$n" "$m") ($(last_err "$n" "$m"))"
  else
    pass "F torch_host_write racing [$m] (guard off): runs ($(summary_line "$n" "$m" dst))"
  fi
done
host_race "$n" "F torch_host_write racing" 'dst equals original = True'

n=hostwrite/threads8_racing
run_case "$n" "$all5" "" -- "$python" "$rules/torch_host_write.py" threads8_racing  # a crash test: runs may overlap
bad=
for m in $all5; do [ "$(rc "$n" "$m")" = 0 ] || bad="$bad $m(exit $(rc "$n" "$m"): $(last_err "$n" "$m"))"; done
if [ -z "$bad" ]; then pass "F torch_host_write threads8_racing: no crash in any mode"; else fail "F torch_host_write threads8_racing" "$bad"; fi
if grep -q 'dst equals original = True' "$out/$n/fix-guard.out"; then
  pass "F torch_host_write threads8_racing [fix-guard]: data intact"
else
  fail "F torch_host_write threads8_racing [fix-guard]" "$(summary_line "$n" fix-guard dst)"
fi

fi

# ---------------------------------------------------------------- H: context-wide events, green contexts
if want H; then
ce="$work/ctx_events"
if nvcc -O2 -o "$ce" "$rules/ctx_events.c" -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" \
    -lcuda >"$out/build/ctx_events.txt" 2>&1; then
  pass "build ctx_events"
else
  fail "build ctx_events" "$(tail -n 3 "$out/build/ctx_events.txt" | tr '\n' ' ')"
fi
# skipped NAME: the plain run's "result: skipped: " reason (empty when it ran).
skipped() { grep -m 1 '^result: skipped: ' "$out/$1/plain.out" 2>/dev/null | sed 's/^result: skipped: //'; }
# skip_same NAME LABEL: a scenario the plain run skipped; the shim's runs must skip alike.
skip_same() {
  local n=$1 label=$2 m why=
  for m in observe fix; do
    [ "$(res "$n" "$m")" = "$(res "$n" plain)" ] && [ "$(rc "$n" "$m")" = "$(rc "$n" plain)" ] ||
      why="${why:+$why; }$m: exit $(rc "$n" "$m"), $(res "$n" "$m" | tail -n 1 | cut -c 1-120)"
  done
  if [ -z "$why" ]; then skip "$label: $(skipped "$n")"; else fail "$label" "skipped without the shim ($(skipped "$n")), but $why"; fi
}
# key NAME MODE REGEX: the result lines matching REGEX (the data verdict).
key() { res "$1" "$2" | grep -E -- "$3"; }
copy_re='^seedance: .*([Mm]emcpy|[Cc]opy|HtoD|DtoH|H2D|D2H)'
# ctx_race NAME LABEL REGEX: a D2H into pinned bytes a pending H2D still reads, unordered;
# REGEX picks the verdict lines (intact / match=).
ctx_race() {
  local n=$1 label=$2 re=$3 l h s
  info "== $label: without: $(summary_line "$n" plain "$re"); observe: $(summary_line "$n" observe "$re"); fix: $(summary_line "$n" fix "$re")"
  if key "$n" plain "$re" | grep -qE 'intact = no|match=False'; then
    info "   without the shim the H2D carried the D2H's bytes (the race is real)"
  else
    info "   without the shim the race did not corrupt the data this run"
  fi
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  [ -z "$(first_said "$n" fix)" ] || info "   fix said: $(first_said "$n" fix)"
  why=
  [ "$(rc "$n" plain)" = 0 ] || add "without the shim it exited $(rc "$n" plain) ($(last_err "$n" plain))"
  [ -n "$(key "$n" plain "$re")" ] || add "no verdict line without the shim"
  l=$(cat "$out/$n/observe.out" "$out/$n/observe.err" 2>/dev/null | grep -cE -- "$copy_re")
  h=$(records "$n" observe host_hazard)
  [ "$l" -ge 1 ] || add "no seedance line naming the copy ($(said "$n" observe) seedance lines, $h host_hazard records)"
  [ "$(rc "$n" observe)" = "$(rc "$n" plain)" ] || add "exit $(rc "$n" observe) ($(last_err "$n" observe)), without the shim $(rc "$n" plain)"
  [ "$(key "$n" observe "$re")" = "$(key "$n" plain "$re")" ] ||
    add "result changed: $(summary_line "$n" observe "$re") (plain: $(summary_line "$n" plain "$re"))"
  if [ -z "$why" ]; then pass "$label [observe]: reported ($l lines naming the copy, $h host_hazard records), exit and result unchanged"; else fail "$label [observe]" "$why"; fi
  why=
  s=$(said "$n" fix)
  [ "$(rc "$n" fix)" = "$(rc "$n" plain)" ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix)), without the shim $(rc "$n" plain)"
  [ "$s" -ge 1 ] || add "nothing announced (no seedance line)"
  if [ -z "$why" ]; then pass "$label [fix]: announced ($s lines), exit unchanged ($(summary_line "$n" fix "$re"))"; else fail "$label [fix]" "$why"; fi
}

run_timeout=60
for v in ctx_record ctx_wait ctx_record_stream_wait green_record green_wait green_ctx_record \
    green_primary_record green_primary_wait; do
  n=ctxevents/$v
  [ -x "$ce" ] || break
  run_case "$n" "plain observe fix" "" -- "$ce" "$v"
  if [ -n "$(skipped "$n")" ]; then skip_same "$n" "H ctx_events $v"; continue; fi
  info "== H $v without the shim: $(res "$n" plain | sed 's/^result: //' | tr '\n' ';' | cut -c 1-300)"
  check_healthy "$n" "H ctx_events $v (healthy)" observe fix
  expect_line "$n" "H ctx_events $v: the H2D was pending at the ordering call" "^result: $v h2d pending at the ordering call = yes" plain observe fix
  expect_line "$n" "H ctx_events $v: the H2D carried the original bytes" "^result: $v device copy intact = yes" plain observe fix
  expect_line "$n" "H ctx_events $v: the D2H landed" "^result: $v pinned holds the d2h = yes" plain observe fix
done
for v in faulty green_faulty; do
  n=ctxevents/$v
  [ -x "$ce" ] || break
  serial=1 run_case "$n" "plain observe fix" "" -- "$ce" "$v"
  if [ -n "$(skipped "$n")" ]; then skip_same "$n" "H ctx_events $v"; continue; fi
  ctx_race "$n" "H ctx_events $v" 'device copy intact = '
done
n=ctxevents/ctx_record_early
if [ -x "$ce" ]; then
  serial=1 run_case "$n" "plain observe fix" "" -- "$ce" ctx_record_early
  if [ -n "$(skipped "$n")" ]; then
    skip_same "$n" "H ctx_events ctx_record_early"
  else
    re='device copy intact = '
    info "== H ctx_record_early (a race the shim may miss): without: $(summary_line "$n" plain "$re"); observe: $(summary_line "$n" observe "$re"), $(cat "$out/$n/observe.out" "$out/$n/observe.err" 2>/dev/null | grep -cE -- "$copy_re") lines naming the copy; fix: $(summary_line "$n" fix "$re"), $(said "$n" fix) lines"
    why=
    [ "$(rc "$n" plain)" = 0 ] || add "without the shim it exited $(rc "$n" plain) ($(last_err "$n" plain))"
    [ "$(rc "$n" observe)" = "$(rc "$n" plain)" ] || add "observe exit $(rc "$n" observe) ($(last_err "$n" observe))"
    [ "$(key "$n" observe "$re")" = "$(key "$n" plain "$re")" ] || add "observe changed the result: $(summary_line "$n" observe "$re")"
    [ "$(rc "$n" fix)" = "$(rc "$n" plain)" ] || add "fix exit $(rc "$n" fix) ($(last_err "$n" fix))"
    if [ "$(key "$n" fix "$re")" != "$(key "$n" plain "$re")" ] && [ "$(said "$n" fix)" -eq 0 ]; then
      add "fix changed the result unannounced: $(summary_line "$n" fix "$re")"
    fi
    if [ -z "$why" ]; then pass "H ctx_events ctx_record_early: exit unchanged, observe changed nothing, fix nothing unannounced"; else fail "H ctx_events ctx_record_early" "$why"; fi
  fi
fi

run_timeout=180
n=torchgreen/correct
run_case "$n" "plain observe fix" "" -- "$python" "$rules/torch_green.py" correct
if [ -n "$(skipped "$n")" ]; then
  skip_same "$n" "H torch_green correct"
else
  check_healthy "$n" "H torch_green correct (healthy)" observe fix
  expect_line "$n" "H torch_green correct reaches the device intact" 'match=True' plain observe fix
fi
n=torchgreen/racing
serial=1 run_case "$n" "plain observe fix" "" -- "$python" "$rules/torch_green.py" racing
if [ -n "$(skipped "$n")" ]; then
  skip_same "$n" "H torch_green racing"
else
  ctx_race "$n" "H torch_green racing" 'match='
fi

fi

echo "time: ${SECONDS}s"
echo "$passed passed, $failed failed"
rm -rf "$work"
[ "$failed" -gt 255 ] && failed=255
exit "$failed"
