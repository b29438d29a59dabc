#!/usr/bin/env bash
# Multi-GPU checks of libseedance_fix.so: stray contexts, the out-of-memory
# explanation with another process on the device, peer and cross-GPU copies under the race
# tracker, the compatibility matrix with NCCL, and device ordinals under CUDA_VISIBLE_DEVICES.
#
# NOT YET RUN ON A 2-GPU MACHINE. Its C programs and script flow run against the
# repository's fake driver; the first run on two GPUs is the real test of these programs and
# checks, and may need fixes to them.
#
# Needs 2 GPUs. Run from the repository root on the GPU machine:
#
#   [SEEDANCE_ANALYZE=path/to/seedance-analyze] scripts/gpu/multi.sh [path/to/libseedance_fix.so]
#
# The programs in scripts/gpu/multi/ were written from the user-facing documentation only
# (README.md, docs/configuration.md, docs/trace-schema.md, docs/analyzer.md,
# docs/reliability.md), without reading the shim's code. Each program and variant runs in its
# own processes: without the shim ("plain"), with SEEDANCE_MODE=observe, with
# SEEDANCE_MODE=fix, and where stray contexts are concerned with
# SEEDANCE_STRAY_CONTEXT=redirect in either mode ("observe-redirect", "fix-redirect"). Each
# run has its own SEEDANCE_TRACE_DIR (the ranks of one run share it, one trace per process);
# stdout, stderr and the exit code are kept: $OUT/<case>/<mode>.out, .err, .rc and
# $OUT/<case>/trace-<mode>/ (OUT default /tmp/seedance-multi). Every check is also appended
# to $OUT/checks.txt. NCCL_NVLS_ENABLE=0 (scripts/gpu/lib/common.sh) for every run.
#
# "Healthy" below: for each mode with the shim, exit code and "result: " lines equal to the
# run without the shim (which must exit 0 and print results), no "seedance: " line, no
# host_hazard, device_fault or stray_context record (ordinals: no device_fallback either).
# "As without the shim": the same exit code and "result: " lines as the plain run.
#
# Checks:
#   1 stray contexts (PyTorch; scripts/gpu/multi/torch_pair.py, torch_nccl.py; 2 ranks each,
#     rank r works on cuda:r; each rank also reports, outside its results, whether device 0's
#     primary context is active after each step (cuDevicePrimaryCtxGetState) and on which GPUs
#     NVML sees its memory at the end (nvidia-smi), the ground truth the checks compare with):
#     - pair stray (the pytorch#9871 pattern: a small tensor on the default device cuda:0
#       before set_device): without the shim rank 1 has device 0's context after the small
#       tensor (else the pattern did not happen: FAIL); observe and fix as without the shim;
#       rank 1 reported: exactly one
#       "seedance: stray context on device 0: ... works on device 1 ..." line, with NVML's
#       memory ("... of device 0's memory (NVML"); one stray_context record of device 0 in
#       rank 1's trace (decided exit or context_end, context_bytes > 0), its exit summary's
#       stray_contexts naming device 0 and device_use with device 0 idle, device 1 worked;
#       no stray_context record for rank 0; the fleet summary (seedance-analyze summary of
#       the run's trace directory, when SEEDANCE_ANALYZE is given) has a "stray contexts on
#       device 0" problem naming rank 1's pid; the GPUs NVML lists per rank as plain;
#     - pair stray, fix-redirect: the context on device 0 came before any work elsewhere, so
#       docs/configuration.md says redirect does not act: reported as in fix, no record
#       decided "redirected", no stray_context_redirect repair, GPUs per rank as plain;
#     - pair correct (set_device first): healthy in observe and fix, GPUs per rank as plain;
#     - nccl stray (the pytorch#126381 pattern: init_process_group, all_reduce on
#       cuda:RANK, barrier(), destroy_process_group(), no set_device): as without the shim;
#       per rank, from that run's own ground truth: a rank that ends with device 0's primary
#       context active and is not rank 0 is reported as above (or its exit summary says it
#       worked on device 0, which is then no stray context); a rank without one is not;
#       fix-redirect: as without the shim, and redirected (a stray_context record decided
#       "redirected", redirected_to the rank's device, repairs.stray_context_redirect, NVML
#       no longer lists the rank on GPU 0) exactly when the fix run's ground truth says the
#       context on device 0 appeared after the work on the rank's own device (at
#       synchronize, barrier or destroy); reported and not redirected when it appeared at
#       init_process_group, before any work; either when it appeared during the all_reduce;
#       the fleet summary as above for observe and fix when a stray context was recorded;
#     - nccl sync0 (the same plus torch.cuda.synchronize() with no device after the work:
#       device 0 in every rank): without the shim rank 1 ends with device 0's context (else
#       FAIL); as nccl stray, also with observe-redirect (observe ignores the setting:
#       reported, no record decided "redirected"), the fleet summary for observe and fix;
#     - nccl correct (set_device first): healthy in observe and fix, GPUs per rank as plain.
#   2 out of memory on device 0 held by another process (scripts/gpu/multi/oom.c hold: GPU 0
#     filled to about 2 GiB free, kept until released through a FIFO): the holder is ready
#     with 1 to 3 GiB free; then, one at a time, torch_oom.py (4 GiB on cuda:0) and oom.c
#     alloc (cuMemAlloc of 4 GiB on device 0): without the shim the allocation fails; in
#     observe and in fix (no repair of an allocation is documented) as without the shim;
#     the explanation names the holder: a "seedance: " out-of-memory line containing the
#     holder's pid and an alloc_fault record (check out_of_memory, device 0) whose
#     processes_on_device lists the holder as another process; and says GPU 1 has room: the
#     line has "device 1 (... free) has room" and other_devices_with_room lists ordinal 1.
#   3 peer and cross-GPU copies under the race tracker (scripts/gpu/multi/peer_copies.c,
#     driver API with cuMemcpyPeerAsync, built with nvcc -lcuda; torch_cross.py):
#     - peer_event, peer_sync, stage_event (correct orderings) and torch to_peer
#       (tensor.to("cuda:1", non_blocking=True)), to_peer_pinned, stage_d2h_h2d,
#       stage_h2d_d2h correct: healthy in observe and fix, the data intact in every mode
#       ("= yes" / match=True), and s0 still busy at the ordering point (so the racing
#       variants race);
#     - peer_racing, stage_racing, torch stage_d2h_h2d and stage_h2d_d2h racing (the pinned
#       staging buffer shared by both GPUs' streams, no ordering): observe reports it (a
#       "seedance: " line or a host_hazard record) with the exit code and data verdict of the
#       plain run; fix reports it and repairs it (exit 0, every verdict intact / match=True).
#   4 compatibility matrix: scripts/gpu/matrix.sh (it runs every program without and with
#     the shim in fix mode, its NCCL all-reduce on every GPU) exits 0, and its NCCL row ran
#     with world=2. The thread benchmark with one stream per GPU: SKIP (threads_bench.c puts
#     every thread on device 0's primary context; it would need a change).
#   5 ordinals under CUDA_VISIBLE_DEVICES=1 and =1,0 (scripts/gpu/multi/ordinals_visible.c,
#     torch_ordinals.py, scripts/gpu/rules/jax_missing_device.py visible|allowed1):
#     - healthy in observe and fix (no device_fallback record either): C count_then_each
#       under both; count_then_01, count_then_probe01, direct_one under =1,0; PyTorch visible
#       under both and cuda1 under =1,0; JAX visible under both and allowed1 under =1,0;
#     - C count_then_01 and direct_one under =1 (ordinal 1 used, only ordinal 0 exists):
#       observe explains it ("CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0" in a
#       "seedance: " line, a device_fault record naming cuDeviceGet) as without the shim; fix
#       repairs it (code=0, the same device as ordinal 0, the work done, exit 0), announces it
#       ("ordinal 1 -> ordinal 0") and records a device_fallback;
#     - C count_then_probe01 under =1 (cuDeviceGet(1) right after cuDeviceGet(0): a question
#       about an ordinal the variable renumbered): in observe and fix as without the shim
#       (the driver's 101 stands), exactly one "seedance: " line, with "not repaired: the
#       request continues an enumeration of the devices", no device_fallback record;
#     - PyTorch cuda1 under =1: without the shim it raises; observe as without the shim and
#       explained (a "seedance: " line); fix repaired (exit 0, the right sum) and announced;
#     - JAX allowed1 under =1 (jax_cuda_visible_devices="1"): observe as without the shim;
#       fix no worse (no signal or hang; a working run or a clean Python error, and the
#       plain run's results when it worked); whether the shim said anything is printed.
#
# MULTI_SECTIONS selects sections (default "1 2 3 5 4"); MULTI_PARALLEL=0 makes every run
# sequential (by default the modes of a healthy case run concurrently where the compute
# mode is Default; racing cases and section 2 always run alone). Expected time on 2 H200
# (estimated, not measured): about 5 to 8 minutes, of which the matrix takes about 2.5; if
# one 10-minute device call is too tight, MULTI_SECTIONS="1 2 3" then "5 4" in two calls.
# scripts/gpu/run.sh runs it as GPU_SCRIPTS=multi (not in its default list).
#
# FAKE_DRIVER_DIR=dir (libcuda.so and libcuda.so.1 of crates/fake-cuda, optionally its NVML
# as libnvidia-ml.so.1) and CUDA_INCLUDE=dir (a cuda.h): builds the C programs with cc -DMULTI_FAKE_DRIVER against
# the fake and runs only them (2 fake devices; PyTorch, JAX and the matrix are skipped), to
# try the script's flow without a GPU. The fake's memory is per process: in section 2 the
# second process gets the holder's figures through the fake's FAKE_CUDA_FREE_MEM and
# FAKE_NVML_PROCESSES.
#
# Prints PASS/FAIL per check (SKIP lines are not counted), then "N passed, M failed".
# Exit status: the number of failed checks (at most 255).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/gpu/lib/common.sh
. "$here/gpu/lib/common.sh"
multi="$here/gpu/multi"
fake=${FAKE_DRIVER_DIR:+$(readlink -f "$FAKE_DRIVER_DIR")}
analyze=${SEEDANCE_ANALYZE:-}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python=${PYTHON:-python3}
if [ -n "$fake" ]; then
  shim=$(readlink -f "${1:-target/release/libseedance_fix.so}")
  out=${OUT:-/tmp/seedance-multi}
  mkdir -p "$out"
  gpu_scratch
  export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export FAKE_CUDA_DEVICE_COUNT=${FAKE_CUDA_DEVICE_COUNT:-2}
  [ -e "$fake/libnvidia-ml.so.1" ] && export SEEDANCE_NVML_LIB="$fake/libnvidia-ml.so.1"
  ndev=$FAKE_CUDA_DEVICE_COUNT
  echo "fake driver: $fake; shim: $shim ($(sha256sum "$shim" | cut -c1-16)); devices: $ndev" | tee "$out/environment.txt"
else
  gpu_prologue /tmp/seedance-multi "${1:-}"
  # gpu/rules.sh's python (PYTHON, else python3); PyTorch lives in /opt/torch/.venv on the
  # lent machines, used when python3 cannot import torch.
  if ! $python -c 'import torch' >/dev/null 2>&1 && [ -x /opt/torch/.venv/bin/python ]; then
    python=/opt/torch/.venv/bin/python
  fi
  pyver() { $python -c "import $1; print($1.__version__)" 2>&1 | tail -n 1; }
  gpu_fields=name,driver_version,pci.bus_id,memory.total record_gpu_environment \
      "python: $python" "torch: $(pyver torch)" "jax: $(pyver jax)" \
      "nccl: $($python -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -n 1)" \
      "pid namespace: $(readlink /proc/self/ns/pid)" \
      "analyzer: ${analyze:-none, the fleet-summary checks are skipped}"
  nvidia-smi --query-gpu=index,name,pci.bus_id,uuid,compute_mode --format=csv,noheader >"$out/gpus.txt" 2>&1
  ndev=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
echo "devices: $ndev"

sections=" ${MULTI_SECTIONS:-1 2 3 5 4} "

# shellcheck source=scripts/gpu/lib/checks.sh
. "$here/gpu/lib/checks.sh"
healthy_events='host_hazard|device_fault|stray_context'
finish() {
  echo "time: ${SECONDS}s"
  echo "$passed passed, $failed failed"
  rm -rf "$work"
  [ "$failed" -gt 255 ] && failed=255
  exit "$failed"
}

if [ ! -f "$shim" ]; then
  fail "shim" "$shim not found"
  finish
fi
if [ "$ndev" -lt 2 ]; then
  fail "devices" "needs 2 GPUs, $ndev here; nothing was run"
  finish
fi

have_torch=0
have_jax=0
if [ -z "$fake" ]; then
  $python -c 'import torch; assert torch.cuda.device_count() >= 2' >/dev/null 2>&1 && have_torch=1
  $python -c 'import jax' >/dev/null 2>&1 && have_jax=1
  [ $have_torch = 1 ] || fail "torch" "$python cannot import torch or sees fewer than 2 GPUs: the PyTorch cases are skipped"
fi
# no_torch LABEL / no_jax LABEL: the SKIP line of a case that needs them.
no_torch() { skip "$1: ${fake:+fake driver: }no PyTorch with 2 GPUs here"; }
no_jax() { skip "$1: ${fake:+fake driver: }no JAX here"; }

# Concurrent runs only where the GPUs' compute mode allows several processes (always with
# the fake driver).
par=$(gpu_parallel "${MULTI_PARALLEL:-${fake:+1}}")

# facts NAME MODE: scripts/gpu/multi/facts.py over the run's trace directory (cached).
facts() {
  local f="$out/$1/facts-$2.txt"
  [ -f "$f" ] || $python "$multi/facts.py" "$out/$1/trace-$2" >"$f" 2>&1
  cat "$f"
}
# rank_pid NAME MODE R, held NAME MODE R, ctx0 NAME MODE R STEP: what rank R printed.
rank_pid() { sed -n "s/^pid: rank $3 = \\([0-9]*\\)\$/\\1/p" "$out/$1/$2.out" 2>/dev/null | head -n 1; }
held() { sed -n "s/^held: rank $3 gpus=//p" "$out/$1/$2.out" 2>/dev/null | head -n 1; }
ctx0() { sed -n "s/^ctx0: rank $3 .*\\b$4=\\([^ ]*\\).*/\\1/p" "$out/$1/$2.out" 2>/dev/null | head -n 1; }

# check_held NAME LABEL MODE...: the GPUs NVML lists per rank equal the plain run's.
check_held() {
  local n=$1 label=$2 m r bad=
  shift 2
  for m in "$@"; do
    for r in 0 1; do
      [ "$(held "$n" "$m" $r)" = "$(held "$n" plain $r)" ] || bad="$bad $m rank $r: $(held "$n" "$m" $r) (plain $(held "$n" plain $r))"
    done
  done
  if [ -z "$bad" ]; then
    pass "$label: GPUs holding each rank's memory (NVML) as without the shim (rank 0: $(held "$n" plain 0), rank 1: $(held "$n" plain 1))"
  else
    fail "$label" "GPUs per rank differ:$bad"
  fi
}
show_ranks() { # show_ranks NAME MODE: the rank lines that are not results, for the log
  info "$2: $(grep -E '^(ctx0|held|heldmib): ' "$out/$1/$2.out" 2>/dev/null | tr '\n' ';' | cut -c 1-400)"
}

# ---------------------------------------------------------------- build
mkdir -p "$out/build"
build() { # build NAME: scripts/gpu/multi/NAME.c -> $work/NAME
  local p=$1
  local brc
  if [ -n "$fake" ]; then
    cc -O2 -DMULTI_FAKE_DRIVER -o "$work/$p" "$multi/$p.c" -I"${CUDA_INCLUDE:-/usr/local/cuda/include}" \
        -L"$fake" -lcuda >"$out/build/$p.txt" 2>&1
    brc=$?
  else
    nvcc -O2 -o "$work/$p" "$multi/$p.c" -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" \
        -lcuda >"$out/build/$p.txt" 2>&1
    brc=$?
  fi
  if [ "$brc" = 0 ]; then pass "build $p"; else fail "build $p" "$(tail -n 3 "$out/build/$p.txt" | tr '\n' ' ')"; fi
}
for p in oom peer_copies ordinals_visible; do build $p; done

# ---------------------------------------------------------------- 1: stray contexts
# stray_why NAME MODE R: empty when rank R's stray context on device 0 was reported as
# docs/configuration.md describes (line with NVML memory, record, exit summary); else why not.
stray_why() {
  local n=$1 m=$2 r=$3 pid st pr lines
  why=
  pid=$(rank_pid "$n" "$m" "$r")
  if [ -z "$pid" ]; then add "rank $r printed no pid"; echo "$why"; return; fi
  lines=$(said_re "$n" "$m" "stray context on device 0: .* works on device $r")
  [ "$(echo "$lines" | grep -c .)" -eq 1 ] || add "$(echo "$lines" | grep -c .) 'stray context on device 0 ... works on device $r' lines, want 1 ($(said "$n" "$m") seedance lines, first: $(first_said "$n" "$m"))"
  echo "$lines" | grep -qE "[0-9.]+ [KMG]iB of device 0.s memory \(NVML" ||
    add "the line gives no NVML memory: $(echo "$lines" | grep -oE '(it holds|its memory)[^;]*' | head -n 1)"
  st=$(facts "$n" "$m" | grep -E "^stray pid=$pid device=0 ")
  [ "$(echo "$st" | grep -c .)" -eq 1 ] || add "$(echo "$st" | grep -c .) stray_context records of device 0 for pid $pid, want 1"
  echo "$st" | grep -qE 'decided=(exit|context_end) ' || add "record: $(echo "$st" | grep -o 'decided=[^ ]*' | head -n 1), want exit or context_end"
  echo "$st" | grep -qE 'context_bytes=[1-9][0-9]*$' || add "record: $(echo "$st" | grep -o 'context_bytes=[^ ]*' | head -n 1) (no NVML memory)"
  pr=$(facts "$n" "$m" | grep -E "^proc pid=$pid ")
  echo "$pr" | grep -qE 'summary=yes' || add "no exit summary for pid $pid"
  echo "$pr" | grep -qE 'stray=([0-9]+,)*0(,|$| )' || add "exit summary stray_contexts: $(echo "$pr" | grep -o 'stray=[^ ]*')"
  echo "$pr" | grep -qE "use=(.*,)?0:idle" || add "exit summary device_use: $(echo "$pr" | grep -o 'use=[^ ]*') (want device 0 idle)"
  echo "$pr" | grep -qE "use=(.*,)?$r:worked" || add "exit summary device_use: $(echo "$pr" | grep -o 'use=[^ ]*') (want device $r worked)"
  echo "$why"
}
# no_stray_why NAME MODE R: empty when rank R has no stray_context record.
no_stray_why() {
  local pid
  why=
  pid=$(rank_pid "$1" "$2" "$3")
  if [ -z "$pid" ]; then add "rank $3 printed no pid"; echo "$why"; return; fi
  [ "$(facts "$1" "$2" | grep -cE "^stray pid=$pid ")" -eq 0 ] ||
    add "stray_context records for rank $3: $(facts "$1" "$2" | grep -E "^stray pid=$pid " | head -n 1)"
  echo "$why"
}
# redirected_why NAME MODE R: empty when rank R's retain of device 0 was redirected.
redirected_why() {
  local n=$1 m=$2 r=$3 pid st
  why=
  pid=$(rank_pid "$n" "$m" "$r")
  if [ -z "$pid" ]; then add "rank $r printed no pid"; echo "$why"; return; fi
  st=$(facts "$n" "$m" | grep -E "^stray pid=$pid device=0 ")
  echo "$st" | grep -q "decided=redirected redirected_to=$r " || add "stray_context record: $(echo "$st" | head -n 1 | cut -c 1-160) (want decided=redirected redirected_to=$r)"
  facts "$n" "$m" | grep -E "^proc pid=$pid " | grep -qE 'repairs=(.*,)?stray_context_redirect:[1-9]' ||
    add "exit summary repairs: $(facts "$n" "$m" | grep -E "^proc pid=$pid " | grep -o 'repairs=[^ ]*')"
  [ -n "$(said_re "$n" "$m" "stray context on device 0.*redirect")" ] || add "no 'stray context on device 0 ... redirect' line announcing it"
  # Where NVML lists the rank (unknown: not checked): no longer on GPU 0.
  case ,$(held "$n" "$m" "$r"), in
    *,0,*) add "NVML still lists rank $r on GPUs $(held "$n" "$m" "$r")" ;;
  esac
  echo "$why"
}
# analyzer_check NAME LABEL MODE R: the fleet summary names rank R's stray context.
analyzer_check() {
  local n=$1 label=$2 m=$3 r=$4 pid f
  if [ -z "$analyze" ]; then skip "$label [$m] fleet summary: SEEDANCE_ANALYZE not given"; return; fi
  pid=$(rank_pid "$n" "$m" "$r")
  f="$out/$n/analyze-$m.txt"
  "$analyze" summary "$out/$n/trace-$m" >"$f" 2>&1
  why=
  grep -qE '\[(warning|error)\] stray contexts on device 0' "$f" || add "no '[warning|error] stray contexts on device 0' problem"
  # DEVICE CONTEXTS: "device 0 of HOST, stray contexts: EXECUTABLE pid PID (works on R, ...)"
  # (the text may wrap: read with the lines joined)
  [ -n "$pid" ] && { tr -s ' \n' ' ' <"$f" | grep -qE "stray contexts: .*pid $pid \(works on $r\b" ||
    add "DEVICE CONTEXTS does not name pid $pid as a stray context working on $r"; }
  if [ -z "$why" ]; then pass "$label [$m] fleet summary: stray contexts on device 0, pid $pid named"; else fail "$label [$m] fleet summary" "$why"; fi
}
# ranks_stray NAME LABEL MODE: per rank, from the run's own ground truth (ctx0 destroy / end).
ranks_stray() {
  local n=$1 label=$2 m=$3 r end pid w
  for r in 0 1; do
    end=$(ctx0 "$n" "$m" $r destroy)
    [ -n "$end" ] || end=$(ctx0 "$n" "$m" $r end)
    pid=$(rank_pid "$n" "$m" $r)
    if [ "$r" != 0 ] && [ "$end" = yes ]; then
      if facts "$n" "$m" | grep -E "^proc pid=$pid " | grep -qE 'use=(.*,)?0:worked'; then
        pass "$label [$m] rank $r: device 0 context, but the exit summary says rank $r worked on device 0 (no stray context by the docs' definition); not reported"
        [ "$(facts "$n" "$m" | grep -cE "^stray pid=$pid ")" -eq 0 ] ||
          fail "$label [$m] rank $r" "worked on device 0 yet a stray_context record: $(facts "$n" "$m" | grep -E "^stray pid=$pid " | head -n 1)"
        continue
      fi
      w=$(stray_why "$n" "$m" $r)
      if [ -z "$w" ]; then pass "$label [$m] rank $r: stray context on device 0 reported (line with NVML memory, record, exit summary)"; else fail "$label [$m] rank $r" "$w"; fi
    else
      w=$(no_stray_why "$n" "$m" $r)
      if [ -z "$w" ]; then pass "$label [$m] rank $r: no stray context (device 0 context at the end: ${end:-?}), none reported"; else fail "$label [$m] rank $r" "$w"; fi
    fi
  done
}
# redirect_expected NAME R: from the fix run's ground truth for rank R, whether
# SEEDANCE_STRAY_CONTEXT=redirect must act: none (no context on device 0), before (made at
# init_process_group, before any work: reported, not redirected), after (made after the work
# on the rank's own device: redirected), during (made during the all_reduce: either).
redirect_expected() {
  local n=$1 r=$2
  if [ "$(ctx0 "$n" fix "$r" destroy)" != yes ]; then echo none
  elif [ "$(ctx0 "$n" fix "$r" init)" = yes ]; then echo before
  elif [ "$(ctx0 "$n" fix "$r" work)" = yes ]; then echo during
  else echo after
  fi
}
# check_redirect NAME LABEL MODE: fix-redirect of an NCCL case, rank 1 (rank 0 never stray).
check_redirect() {
  local n=$1 label=$2 m=$3 e w
  e=$(redirect_expected "$n" 1)
  info "== $label [$m]: the fix run's rank 1 made its device 0 context: $e ($(grep '^ctx0: rank 1' "$out/$n/fix.out" 2>/dev/null))"
  w=$(as_plain_why "$n" "$m")
  if [ -z "$w" ]; then pass "$label [$m]: exit and results as without the shim"; else fail "$label [$m]" "$w"; fi
  w=$(no_stray_why "$n" "$m" 0)
  if [ -z "$w" ]; then pass "$label [$m] rank 0: no stray context reported"; else fail "$label [$m] rank 0" "$w"; fi
  case $e in
    none)
      w=$(no_stray_why "$n" "$m" 1)
      if [ -z "$w" ]; then pass "$label [$m] rank 1: no context on device 0, nothing to redirect, none reported"; else fail "$label [$m] rank 1" "$w"; fi ;;
    after)
      w=$(redirected_why "$n" "$m" 1)
      if [ -z "$w" ]; then pass "$label [$m] rank 1: the retain of device 0 after the work on device 1 was redirected (record, repair, line; NVML: GPUs $(held "$n" "$m" 1))"; else fail "$label [$m] rank 1" "$w"; fi ;;
    before)
      w=$(stray_why "$n" "$m" 1)
      facts "$n" "$m" | grep -q 'decided=redirected' && w="${w:+$w; }a record decided=redirected"
      if [ -z "$w" ]; then pass "$label [$m] rank 1: device 0's context came before any work: reported, not redirected"; else fail "$label [$m] rank 1" "$w"; fi ;;
    during)
      if [ -z "$(redirected_why "$n" "$m" 1)" ]; then
        pass "$label [$m] rank 1: device 0's context came during the all_reduce: redirected"
      elif [ -z "$(stray_why "$n" "$m" 1)" ]; then
        pass "$label [$m] rank 1: device 0's context came during the all_reduce: reported, not redirected"
      else
        fail "$label [$m] rank 1" "neither redirected ($(redirected_why "$n" "$m" 1)) nor reported ($(stray_why "$n" "$m" 1))"
      fi ;;
  esac
}

if want 1; then
if [ $have_torch = 1 ]; then
  run_timeout=300
  # The pytorch#9871 pattern.
  n=pair/stray
  run_case "$n" "plain observe fix fix-redirect" "" -- "$python" "$multi/torch_pair.py" launch stray
  for m in plain observe fix fix-redirect; do show_ranks "$n" $m; done
  if [ "$(ctx0 "$n" plain 1 early)" != yes ]; then
    fail "1 pair stray: ground truth" "without the shim rank 1's small tensor made no context on device 0 (ctx0 early=$(ctx0 "$n" plain 1 early)); the pattern did not happen"
  fi
  check_as_plain "$n" "1 pair stray" observe fix fix-redirect
  check_held "$n" "1 pair stray" observe fix fix-redirect
  for m in observe fix; do
    w=$(stray_why "$n" $m 1)
    if [ -z "$w" ]; then pass "1 pair stray [$m] rank 1: stray context on device 0 reported (line with NVML memory, record, exit summary)"; else fail "1 pair stray [$m] rank 1" "$w"; fi
    w=$(no_stray_why "$n" $m 0)
    if [ -z "$w" ]; then pass "1 pair stray [$m] rank 0: none reported (it works on device 0)"; else fail "1 pair stray [$m] rank 0" "$w"; fi
    analyzer_check "$n" "1 pair stray" $m 1
  done
  w=$(stray_why "$n" fix-redirect 1)
  facts "$n" fix-redirect | grep -q 'decided=redirected' && w="${w:+$w; }a record decided=redirected"
  facts "$n" fix-redirect | grep -q 'stray_context_redirect' && w="${w:+$w; }a stray_context_redirect repair"
  if [ -z "$w" ]; then pass "1 pair stray [fix-redirect] rank 1: context on device 0 made before the work: reported, not redirected"; else fail "1 pair stray [fix-redirect] rank 1" "$w"; fi

  n=pair/correct
  run_case "$n" "plain observe fix" "" -- "$python" "$multi/torch_pair.py" launch correct
  check_healthy "$n" "1 pair correct (healthy)" observe fix
  check_held "$n" "1 pair correct" observe fix
  expect_line "$n" "1 pair correct: both ranks' checksums" '^result: ranks exit = 0,0$' plain observe fix

  # The pytorch#126381 pattern, and synchronize() on the current device after the work.
  run_timeout=300
  n=nccl/stray
  run_case "$n" "plain observe fix fix-redirect" "" -- "$python" "$multi/torch_nccl.py" launch stray
  for m in plain observe fix fix-redirect; do show_ranks "$n" $m; done
  expect_line "$n" "1 nccl stray: all_reduce results" '^result: rank 1 allreduce .* match=True$' plain observe fix fix-redirect
  check_as_plain "$n" "1 nccl stray" observe fix
  check_held "$n" "1 nccl stray" observe fix
  for m in observe fix; do
    ranks_stray "$n" "1 nccl stray" $m
    facts "$n" $m | grep -q '^stray ' && analyzer_check "$n" "1 nccl stray" $m 1
  done
  check_redirect "$n" "1 nccl stray" fix-redirect

  n=nccl/sync0
  run_case "$n" "plain observe fix observe-redirect fix-redirect" "" -- "$python" "$multi/torch_nccl.py" launch sync0
  for m in plain observe fix observe-redirect fix-redirect; do show_ranks "$n" $m; done
  if [ "$(ctx0 "$n" plain 1 destroy)" != yes ]; then
    fail "1 nccl sync0: ground truth" "without the shim rank 1 had no context on device 0 at the end (ctx0: $(grep '^ctx0: rank 1' "$out/$n/plain.out" 2>/dev/null))"
  fi
  expect_line "$n" "1 nccl sync0: all_reduce results" '^result: rank 1 allreduce .* match=True$' plain observe fix observe-redirect fix-redirect
  check_as_plain "$n" "1 nccl sync0" observe fix observe-redirect
  check_held "$n" "1 nccl sync0" observe fix observe-redirect
  for m in observe fix observe-redirect; do
    ranks_stray "$n" "1 nccl sync0" $m
  done
  facts "$n" observe-redirect | grep -q 'decided=redirected' && fail "1 nccl sync0 [observe-redirect]" "a record decided=redirected in observe mode"
  for m in observe fix; do analyzer_check "$n" "1 nccl sync0" $m 1; done
  check_redirect "$n" "1 nccl sync0" fix-redirect

  n=nccl/correct
  run_case "$n" "plain observe fix" "" -- "$python" "$multi/torch_nccl.py" launch correct
  show_ranks "$n" plain
  check_healthy "$n" "1 nccl correct (healthy)" observe fix
  check_held "$n" "1 nccl correct" observe fix
  expect_line "$n" "1 nccl correct: all_reduce results" '^result: ranks exit = 0,0$' plain observe fix
else
  no_torch "1 stray contexts (torch_pair.py, torch_nccl.py)"
fi
echo "time after section 1: ${SECONDS}s"
fi

# ---------------------------------------------------------------- 2: out of memory on a held device
if want 2; then
leave_mib=${MULTI_OOM_LEAVE_MIB:-2048}
ask_mib=4096
d="$out/oom"
rm -rf "$d"
mkdir -p "$d"
mkfifo "$d/ready" "$d/release"
# Both FIFOs opened read-write here: neither open blocks, and the holder's opens find a peer.
exec 7<>"$d/ready" 8<>"$d/release"
timeout -k 10 500 "$work/oom" hold "$leave_mib" "$d/ready" "$d/release" >"$d/holder.out" 2>&1 7>&- 8>&- &
holder=$!
line=
read -r -t 240 -u 7 line || line=
hpid=$(echo "$line" | sed -n 's/.* pid=\([0-9]*\).*/\1/p')
hfree=$(echo "$line" | sed -n 's/.* free=\([0-9]*\).*/\1/p')
info "== 2 holder: ${line:-no ready line ($(tail -n 2 "$d/holder.out" | tr '\n' ' '))}"
[ -z "$fake" ] && nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv >"$d/nvidia-smi-apps.txt" 2>&1
[ -z "$fake" ] && nvidia-smi --query-gpu=index,pci.bus_id,memory.used,memory.free --format=csv >"$d/nvidia-smi-gpus.txt" 2>&1
[ -f "$d/nvidia-smi-apps.txt" ] && info "   nvidia-smi: $(tr '\n' ';' <"$d/nvidia-smi-apps.txt" | cut -c 1-300)"
if [ -n "$hpid" ] && [ -n "$hfree" ] && [ "$hfree" -ge $((1 << 30)) ] && [ "$hfree" -le $((3 << 30)) ]; then
  pass "2 holder (pid $hpid) leaves $((hfree >> 20)) MiB free on GPU 0"
else
  fail "2 holder" "not ready with 1 to 3 GiB free: ${line:-no line}"
fi
hheld=$(echo "$line" | sed -n 's/.* held=\([0-9]*\).*/\1/p')
# The fake's memory is per process: there the second process is told the holder's figures.
oom_env=
[ -n "$fake" ] && oom_env="FAKE_CUDA_FREE_MEM=${hfree:-0}, FAKE_NVML_PROCESSES=0:${hpid:-1}:${hheld:-0}"
oom_progs="driver"
if [ $have_torch = 1 ]; then oom_progs="torch driver"; else no_torch "2 torch_oom.py"; fi
run_timeout=180
for p in $oom_progs; do
  n=oom/$p
  case $p in
    torch) serial=1 run_case "$n" "plain observe fix" "$oom_env" -- "$python" "$multi/torch_oom.py" $((ask_mib / 1024)) ;;
    driver) serial=1 run_case "$n" "plain observe fix" "$oom_env" -- "$work/oom" alloc "$ask_mib" ;;
  esac
done
echo go >&8
wait "$holder"
info "   holder exit $?: $(tail -n 1 "$d/holder.out")"
exec 7>&- 8>&-
for p in $oom_progs; do
  n=oom/$p
  info "== 2 $p: without: $(summary_line "$n" plain .); observe: $(summary_line "$n" observe .); fix: $(summary_line "$n" fix .)"
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  if ! res "$n" plain | grep -qE 'exception=OutOfMemoryError|code=2$'; then
    fail "2 $p: the allocation without the shim" "did not fail for lack of memory: $(summary_line "$n" plain .) ($(last_err "$n" plain))"
  fi
  check_as_plain "$n" "2 $p" observe fix
  for m in observe fix; do
    lines=$(said_re "$n" "$m" "CUDA_ERROR_OUT_OF_MEMORY|out of memory")
    af=$(facts "$n" "$m" | grep -E '^alloc_fault .*check=out_of_memory device=0 ')
    why=
    [ -n "$lines" ] || add "no out-of-memory 'seedance: ' line ($(said "$n" "$m") lines, first: $(first_said "$n" "$m"))"
    [ -n "$af" ] || add "no alloc_fault record (check out_of_memory, device 0): $(facts "$n" "$m" | grep -m 1 '^alloc_fault' | cut -c 1-160)"
    if [ -n "$hpid" ]; then
      echo "$lines" | grep -qE "(^|[^0-9])$hpid([^0-9]|$)" || add "the line does not name the holder's pid $hpid"
      echo "$af" | grep -qE "holders=(.*,)?$hpid:[0-9]+:other" || add "processes_on_device: $(echo "$af" | grep -o 'holders=[^ ]*' | head -n 1) (want $hpid as another process)"
    else
      add "the holder's pid is unknown"
    fi
    if [ -z "$why" ]; then pass "2 $p [$m]: the explanation names the holder of GPU 0 (pid $hpid, line and processes_on_device)"; else fail "2 $p [$m] holder named" "$why"; fi
    why=
    echo "$lines" | grep -qE 'device 1 \([^)]* free\) has room' || add "the line does not say 'device 1 (... free) has room': $(echo "$lines" | head -n 1 | cut -c 1-300)"
    echo "$af" | grep -qE 'room=(.*,)?1:[0-9]+' || add "other_devices_with_room: $(echo "$af" | grep -o 'room=[^ ]*' | head -n 1) (want ordinal 1)"
    if [ -z "$why" ]; then pass "2 $p [$m]: the explanation says GPU 1 has room (line and other_devices_with_room)"; else fail "2 $p [$m] GPU 1 has room" "$why"; fi
  done
done
echo "time after section 2: ${SECONDS}s"
fi

# ---------------------------------------------------------------- 3: peer and cross-GPU copies
# race_check NAME LABEL VERDICT_RE: a racing variant (gpu/rules.sh section D's stream_race):
# observe reports it with the plain run's exit code and verdict lines; fix reports it and
# every verdict line is good (no "= no", "= False", "match=False"), exit 0.
race_check() {
  local n=$1 label=$2 re=$3 s h
  info "== $label: without: $(res "$n" plain | grep -E -- "$re" | sed 's/^result: //' | tr '\n' ';'); fix: $(res "$n" fix | grep -E -- "$re" | sed 's/^result: //' | tr '\n' ';')"
  if res "$n" plain | grep -E -- "$re" | grep -qE '= no$|= False$|match=False'; then info "   without the shim the data were corrupted (the race is real)"; else info "   without the shim the race did not corrupt the data this run"; fi
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  info "   host_hazard records: observe $(facts "$n" observe | grep -c '^host_hazard'), fix $(facts "$n" fix | grep -c '^host_hazard') ($(facts "$n" fix | grep -m 1 '^host_hazard' | cut -c 1-120))"
  why=
  res "$n" plain | grep -qE -- "$re" || add "no verdict line without the shim (exit $(rc "$n" plain): $(last_err "$n" plain))"
  s=$(said "$n" observe)
  h=$(records "$n" observe host_hazard)
  [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line and no host_hazard record"
  [ "$(rc "$n" observe)" = "$(rc "$n" plain)" ] || add "exit $(rc "$n" observe) ($(last_err "$n" observe)), without the shim $(rc "$n" plain)"
  [ "$(res "$n" observe | grep -E -- "$re")" = "$(res "$n" plain | grep -E -- "$re")" ] ||
    add "verdict changed: $(res "$n" observe | grep -E -- "$re" | tr '\n' ';')"
  if [ -z "$why" ]; then pass "$label [observe]: reported ($s lines, $h host_hazard records), exit and verdict unchanged"; else fail "$label [observe]" "$why"; fi
  why=
  s=$(said "$n" fix)
  h=$(records "$n" fix host_hazard)
  [ "$s" -ge 1 ] || [ "$h" -ge 1 ] || add "no seedance line and no host_hazard record"
  [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix))"
  res "$n" fix | grep -qE -- "$re" || add "no verdict line"
  if res "$n" fix | grep -E -- "$re" | grep -qE '= no$|= False$|match=False'; then
    add "not repaired: $(res "$n" fix | grep -E -- "$re" | grep -E '= no$|= False$|match=False' | sed 's/^result: //' | tr '\n' ';')"
  fi
  if [ -z "$why" ]; then pass "$label [fix]: reported and repaired (the data intact)"; else fail "$label [fix]" "$why"; fi
}

if want 3; then
pc="$work/peer_copies"
c_verdict='intact = |reached device 1 = |holds the d2h = |got device 0.s data = '
if [ -x "$pc" ]; then
  run_timeout=60
  for v in peer_event peer_sync stage_event; do
    n=peer/$v
    run_case "$n" "plain observe fix" "" -- "$pc" "$v"
    info "== 3 $v without the shim: $(res "$n" plain | sed 's/^result: //' | tr '\n' ';' | cut -c 1-300)"
    check_healthy "$n" "3 peer_copies $v (healthy)" observe fix
    expect_line "$n" "3 peer_copies $v: s0 still busy at the ordering point" "^result: $v s0 busy at the ordering point = yes" plain observe fix
    case $v in
      peer_*)
        expect_line "$n" "3 peer_copies $v: device 0 got the staging bytes" "^result: $v device 0 copy intact = yes" plain observe fix
        expect_line "$n" "3 peer_copies $v: the peer copy reached device 1" "^result: $v peer copy reached device 1 = yes" plain observe fix
        expect_line "$n" "3 peer_copies $v: the staging buffer got device 1's bytes" "^result: $v pinned holds the d2h = yes" plain observe fix ;;
      *)
        expect_line "$n" "3 peer_copies $v: device 1 got device 0's data" "^result: $v device 1 got device 0's data = yes" plain observe fix ;;
    esac
  done
  for v in peer_racing stage_racing; do
    n=peer/$v
    serial=1 run_case "$n" "plain observe fix" "" -- "$pc" "$v"
    race_check "$n" "3 peer_copies $v" "$c_verdict"
  done
fi
if [ $have_torch = 1 ]; then
  run_timeout=180
  for idiom in to_peer to_peer_pinned stage_d2h_h2d stage_h2d_d2h; do
    n=cross/$idiom-correct
    run_case "$n" "plain observe fix" "" -- "$python" "$multi/torch_cross.py" "$idiom" correct
    check_healthy "$n" "3 torch_cross $idiom correct (healthy)" observe fix
    expect_line "$n" "3 torch_cross $idiom correct reaches the device intact" 'match=True' plain observe fix
  done
  for idiom in stage_d2h_h2d stage_h2d_d2h; do
    n=cross/$idiom-racing
    serial=1 run_case "$n" "plain observe fix" "" -- "$python" "$multi/torch_cross.py" "$idiom" racing
    race_check "$n" "3 torch_cross $idiom racing" 'match=|staging holds the d2h = '
  done
else
  no_torch "3 torch_cross.py"
fi
echo "time after section 3: ${SECONDS}s"
fi

# ---------------------------------------------------------------- 5: ordinals under CUDA_VISIBLE_DEVICES
if want 5; then
ov="$work/ordinals_visible"
ord_healthy() { # ord_healthy NAME LABEL
  bad_events='host_hazard|device_fault|device_fallback|stray_context' check_healthy "$1" "$2 (healthy)" observe fix
}
if [ -x "$ov" ]; then
  run_timeout=30
  for cvd in 1 1,0; do
    tag=cvd${cvd/,/}
    cases="count_then_each"
    [ "$cvd" = 1,0 ] && cases="$cases count_then_01 count_then_probe01 direct_one"
    for c in $cases; do
      n=ordinals/$tag/$c
      run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=$cvd" -- "$ov" "$c"
      info "== 5 $c (CUDA_VISIBLE_DEVICES=$cvd) without the shim: $(res "$n" plain | sed 's/^result: //' | tr '\n' ';' | cut -c 1-300)"
      ord_healthy "$n" "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=$cvd)"
      if res "$n" plain | grep -q 'work = failed'; then
        fail "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=$cvd)" "work failed without the shim: $(res "$n" plain | grep -m 1 'work = failed')"
      fi
    done
  done
  if [ -f "$out/gpus.txt" ]; then
    info "   CUDA_VISIBLE_DEVICES=1,0: ordinal 0 is $(res ordinals/cvd10/count_then_each plain | grep -m 1 'cuDeviceGet(0)' | sed 's/.*bus=//'); nvidia-smi: $(tr '\n' ';' <"$out/gpus.txt" | cut -c 1-300)"
  fi
  # The mistakes under CUDA_VISIBLE_DEVICES=1.
  for c in count_then_01 direct_one; do
    n=ordinals/cvd1/$c
    run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=1" -- "$ov" "$c"
    info "== 5 $c (CUDA_VISIBLE_DEVICES=1): without: $(summary_line "$n" plain 'cuDeviceGet\(1\)'); observe: $(summary_line "$n" observe 'cuDeviceGet\(1\)'); fix: $(summary_line "$n" fix 'cuDeviceGet\(1\)')"
    [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
    why=
    grep -q 'request cuDeviceGet(1): code=101 ' "$out/$n/plain.out" || add "without the shim ordinal 1 was not refused with 101: $(summary_line "$n" plain 'cuDeviceGet\(1\)')"
    [ -n "$(said_re "$n" observe 'CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0')" ] ||
      add "no line saying 'CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0' ($(said "$n" observe) lines, first: $(first_said "$n" observe))"
    [ "$(records "$n" observe device_fault cuDeviceGet)" -ge 1 ] || add "no device_fault record naming cuDeviceGet"
    [ -z "$(as_plain_why "$n" observe)" ] || add "$(as_plain_why "$n" observe)"
    if [ -z "$why" ]; then pass "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=1) [observe]: explained, as without the shim"; else fail "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=1) [observe]" "$why"; fi
    why=
    grep -qE 'request cuDeviceGet\(1\): code=0 ' "$out/$n/fix.out" || add "not repaired: $(summary_line "$n" fix 'cuDeviceGet\(1\)')"
    grep -q 'ordinal 1 same device as ordinal 0 = yes' "$out/$n/fix.out" || add "not the device of ordinal 0"
    grep -q 'ordinal 1 work = ok' "$out/$n/fix.out" || add "work: $(summary_line "$n" fix 'ordinal 1 work')"
    [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix))"
    [ -n "$(said_re "$n" fix 'ordinal 1 -> ordinal 0')" ] || add "no 'ordinal 1 -> ordinal 0' announcement ($(said "$n" fix) lines, first: $(first_said "$n" fix))"
    [ "$(records "$n" fix device_fallback cuDeviceGet)" -ge 1 ] || add "no device_fallback record naming cuDeviceGet"
    if [ -z "$why" ]; then pass "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=1) [fix]: repaired to ordinal 0 (physical GPU 1), announced, work done"; else fail "5 ordinals_visible $c (CUDA_VISIBLE_DEVICES=1) [fix]" "$why"; fi
  done
  # The question about an ordinal CUDA_VISIBLE_DEVICES renumbered.
  n=ordinals/cvd1/count_then_probe01
  run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=1" -- "$ov" count_then_probe01
  info "== 5 count_then_probe01 (CUDA_VISIBLE_DEVICES=1): without: $(summary_line "$n" plain 'probe cuDeviceGet\(1\)'); fix: $(summary_line "$n" fix 'probe cuDeviceGet\(1\)')"
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  for m in observe fix; do
    why=
    [ -z "$(as_plain_why "$n" $m)" ] || add "$(as_plain_why "$n" $m)"
    [ "$(said "$n" $m)" -eq 1 ] || add "$(said "$n" $m) seedance lines, want 1 (first: $(first_said "$n" $m))"
    [ -n "$(said_re "$n" $m 'not repaired: the request continues an enumeration of the devices')" ] ||
      add "no line with 'not repaired: the request continues an enumeration of the devices'"
    [ "$(records "$n" $m device_fallback)" -eq 0 ] || add "$(records "$n" $m device_fallback) device_fallback records"
    if [ -z "$why" ]; then pass "5 ordinals_visible count_then_probe01 (CUDA_VISIBLE_DEVICES=1) [$m]: the driver's answer stands, one line explains it"; else fail "5 ordinals_visible count_then_probe01 (CUDA_VISIBLE_DEVICES=1) [$m]" "$why"; fi
  done
fi


if [ $have_torch = 1 ]; then
  run_timeout=180
  for cvd in 1 1,0; do
    tag=cvd${cvd/,/}
    vs="visible"
    [ "$cvd" = 1,0 ] && vs="visible cuda1"
    for v in $vs; do
      n=torchord/$tag/$v
      run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=$cvd" -- "$python" "$multi/torch_ordinals.py" "$v"
      bad_events='host_hazard|device_fault|device_fallback|stray_context' check_healthy "$n" "5 torch_ordinals $v (CUDA_VISIBLE_DEVICES=$cvd) (healthy)" observe fix
    done
  done
  n=torchord/cvd1/cuda1
  run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=1" -- "$python" "$multi/torch_ordinals.py" cuda1
  info "== 5 torch cuda1 (CUDA_VISIBLE_DEVICES=1): without: $(summary_line "$n" plain .); observe: $(summary_line "$n" observe .); fix: $(summary_line "$n" fix .) ($(grep -m 1 '^device: ' "$out/$n/fix.out" 2>/dev/null))"
  [ -z "$(first_said "$n" observe)" ] || info "   observe said: $(first_said "$n" observe)"
  [ -z "$(first_said "$n" fix)" ] || info "   fix said: $(first_said "$n" fix)"
  why=
  grep -q '^result: exception=' "$out/$n/plain.out" || add "without the shim cuda:1 did not raise: $(summary_line "$n" plain .)"
  [ -z "$(as_plain_why "$n" observe)" ] || add "$(as_plain_why "$n" observe)"
  [ -n "$(said_re "$n" observe 'ordinal 1|cuda:1|CUDA_VISIBLE_DEVICES=1')" ] || add "no line naming ordinal 1 or CUDA_VISIBLE_DEVICES=1 ($(said "$n" observe) lines)"
  if [ -z "$why" ]; then pass "5 torch_ordinals cuda1 (CUDA_VISIBLE_DEVICES=1) [observe]: explained, as without the shim"; else fail "5 torch_ordinals cuda1 (CUDA_VISIBLE_DEVICES=1) [observe]" "$why"; fi
  why=
  [ "$(rc "$n" fix)" = 0 ] || add "exit $(rc "$n" fix) ($(last_err "$n" fix))"
  grep -qE '^result: cuda1 sum=([0-9]+) expected=\1$' "$out/$n/fix.out" || add "result: $(summary_line "$n" fix .)"
  [ "$(said "$n" fix)" -ge 1 ] || add "not announced (no seedance line)"
  if [ -z "$why" ]; then pass "5 torch_ordinals cuda1 (CUDA_VISIBLE_DEVICES=1) [fix]: repaired, announced, the right sum"; else fail "5 torch_ordinals cuda1 (CUDA_VISIBLE_DEVICES=1) [fix]" "$why"; fi
else
  no_torch "5 torch_ordinals.py"
fi
if [ $have_jax = 1 ]; then
  run_timeout=180
  for cvd in 1 1,0; do
    tag=cvd${cvd/,/}
    vs="visible"
    [ "$cvd" = 1,0 ] && vs="visible allowed1"
    for v in $vs; do
      n=jaxord/$tag/$v
      run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=$cvd" -- "$python" "$here/gpu/rules/jax_missing_device.py" "$v"
      bad_events='host_hazard|device_fault|device_fallback|stray_context' check_healthy "$n" "5 jax ordinals $v (CUDA_VISIBLE_DEVICES=$cvd) (healthy)" observe fix
    done
  done
  n=jaxord/cvd1/allowed1
  serial=1 run_case "$n" "plain observe fix" "CUDA_VISIBLE_DEVICES=1" -- "$python" "$here/gpu/rules/jax_missing_device.py" allowed1
  no_worse "$n" "5 jax ordinals allowed1 (CUDA_VISIBLE_DEVICES=1)"
else
  no_jax "5 jax_missing_device.py"
fi
echo "time after section 5: ${SECONDS}s"
fi

# ---------------------------------------------------------------- 4: compatibility matrix, threads
if want 4; then
if [ -n "$fake" ]; then
  skip "4 gpu/matrix.sh: fake driver (needs a GPU)"
else
  # gpu/matrix.sh: "Run on a 2-GPU machine", its NCCL all-reduce on every GPU; it calls
  # python3, so the python chosen above comes first on PATH.
  mkdir -p "$out/matrix"
  pydir=$(dirname "$(command -v "$python")")
  PATH="$pydir:$PATH" OUT="$out/matrix" timeout -k 10 540 bash "$here/gpu/matrix.sh" "$shim" >"$out/matrix/console.txt" 2>&1
  mrc=$?
  info "== 4 gpu/matrix.sh exit $mrc: $(grep -E '^(program|[a-z_]+ +[0-9])' "$out/matrix/matrix.txt" 2>/dev/null | awk '{print $1 "=" $NF}' | tr '\n' ' ')"
  if [ "$mrc" = 0 ]; then pass "4 gpu/matrix.sh: every program as without the shim (exit 0)"; else fail "4 gpu/matrix.sh" "exit $mrc ($(grep -c 'FAIL$' "$out/matrix/matrix.txt" 2>/dev/null) FAIL rows; $out/matrix/matrix.txt)"; fi
  if grep -q '^world=2$' "$out/matrix/matrix.txt.log" 2>/dev/null && grep -qE '^nccl_allreduce .* PASS$' "$out/matrix/matrix.txt" 2>/dev/null; then
    pass "4 gpu/matrix.sh nccl_allreduce: across 2 GPUs (world=2), PASS"
  else
    fail "4 gpu/matrix.sh nccl_allreduce" "not PASS with world=2: $(grep -E '^nccl_allreduce' "$out/matrix/matrix.txt" 2>/dev/null) $(grep -m 1 '^world=' "$out/matrix/matrix.txt.log" 2>/dev/null)"
  fi
fi
skip "4 thread benchmark with one stream per GPU: scripts/gpu/threads_bench.c puts every thread's stream on device 0's primary context (cuDeviceGet(&dev, 0)) and takes no device argument; it cannot do this without a change, which this script does not make"
fi

finish
