#!/usr/bin/env bash
# The corpus script's own check, with no GPU: run.sh against a fake nvcc (it "builds" shell
# scripts that play a sample or a rules program), a fake nvidia-smi and an empty preload
# library, then the verdicts it must reach. From the repository root:
#
#   bash scripts/corpus/selftest.sh
#
# Played: a healthy sample (deviceQuery), one the shim speaks to (asyncAPI), one whose stdout
# changes in fix (vectorAdd), one that asserts on purpose and exits 0 with the shim's
# CUDA_ERROR_ASSERT line (simpleAssert; simpleAssert_nvrtc also gets another shim line: must
# stay visible), one past the timeout (transpose), one that fails to build (matrixMul), one that
# needs 2 GPUs (simpleP2P), one whose result lines come from a time-seeded source
# (fp16ScalarProduct), one with a longer timeout of its own (binomialOptions), samples run twice
# without the shim (plain2) whose output changes from run to run: clock cycles (clock), device
# printf order (cdpSimplePrint), the JIT log only on the first compile (ptxjit), and one whose
# change the rules do not cover (graphMemoryFootprint: must be 'unstable'); one that needs the
# cooperative-groups headers in its folder (matrixMul_nvrtc); the rules cases, each as
# expected except ctx_exit alive in fix (a line: must fail). Then the budget: with BUDGET_S=0
# nothing runs and every sample is listed as not run. Also runs corpus.py's selftest.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # DESCRIPTION PATTERN FILE
  if grep -qE -- "$2" "$3"; then echo "PASS: $1"; else
    echo "FAIL: $1 (no line matching '$2' in $3)"
    fails=$((fails + 1))
  fi
}

mkdir -p "$tmp/bin" "$tmp/corpus/Common" "$tmp/include/cooperative_groups" "$tmp/include/cccl/nv"
touch "$tmp/include/cooperative_groups.h"
cat >"$tmp/bin/nvcc" <<'EOF'
#!/bin/bash
if [ "${1:-}" = --version ]; then echo "Cuda compilation tools, release 13.0 (fake)"; echo "fake"; exit 0; fi
out= prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
name=$(basename "$out")
[ "$name" = matrixMul ] && { echo "matrixMul.cu(12): error: identifier \"foo\" is undefined"; exit 1; }
cat >"$out" <<'PROG'
#!/bin/bash
n=$(basename "$0")
echo "[$n] starting. Time= $RANDOM.$RANDOM ms, Throughput = $RANDOM GB/s"
echo "GPU Device 0: \"Hopper\" with compute capability 9.0"
echo "ptr = 0x7f$RANDOM$RANDOM"
trace() { [ -n "${SEEDANCE_TRACE_DIR:-}" ] && echo "$1" >>"$SEEDANCE_TRACE_DIR/seedance-fake-$$.jsonl"; }
trace '{"v":5,"event":"session_start"}'
case "$n" in
  simpleAssert | simpleAssert_nvrtc)
    echo "Device assert failed as expected"
    echo "simpleAssert.cu:64: void testKernel(int): Assertion \`gtid < N\` failed." >&2
    [ -n "${SEEDANCE_MODE:-}" ] && echo "seedance: cuCtxSynchronize() returned CUDA_ERROR_ASSERT (710): A device-side assert() failed in a kernel" >&2
    [ "$n" = simpleAssert_nvrtc ] && [ "${SEEDANCE_MODE:-}" = fix ] && echo "seedance: at exit: 1 context still alive" >&2
    exit 0 ;;
  asyncAPI) [ -n "${SEEDANCE_MODE:-}" ] && echo "seedance: cuLaunchKernel: an explanation" >&2 ;;
  transpose) sleep 30 ;;
  binomialOptions) sleep 3 ;;
  clock) echo "Average clocks/block = $RANDOM.$RANDOM" ;;
  cdpSimplePrint)
    for t in 0 1; do echo "|  BLOCK $((RANDOM % 8)) launched by thread $t of block $((RANDOM % 2))"; done | sort -R ;;
  ptxjit)
    [ -e .jitcache ] || { echo "ptxas info    : Compile time = 2.496 ms"; touch .jitcache; }
    echo "info    : 0 bytes gmem" ;;
  graphMemoryFootprint) echo "Running unfreed streams example."; echo "00:     FOOTPRINT: $$ bytes" ;;
  matrixMul_nvrtc)
    [ -e cooperative_groups.h ] && [ -d cooperative_groups ] && [ -d nv ] ||
      { echo "error: header file cooperative_groups.h not found!" >&2; exit 1; } ;;
  vectorAdd) [ "${SEEDANCE_MODE:-}" = fix ] && { echo "sum=2"; exit 0; } ;;
  fp16ScalarProduct) echo "Result native operators	: $RANDOM.5" ;;
  rule_legacy_stream)
    if [ "$1" = nonblocking ] && [ -n "${SEEDANCE_MODE:-}" ]; then
      echo "seedance: cuMemcpyDtoHAsync_v2 on stream 0x2 writes host bytes that a copy still reads" >&2
      trace '{"v":5,"event":"host_hazard","kind":"pinned_copy_race"}'
    fi
    echo "variant=$1 device copy intact, pinned buffer as copied" ;;
  rule_free_pending) echo "variant=$1 device copy intact" ;;
  rule_fork_child | rule_fork_cupy.py | rule_fork_cuda_python.py)
    if [ "$1" = after_init ]; then
      echo "child init=3 child error=CUDARuntimeError child cuInit -> 3"
      # CuPy's runtime refuses in the child without a hooked driver call: nothing to explain.
      if [ -n "${SEEDANCE_MODE:-}" ] && [ "${0##*/}" != rule_fork_cupy.py ]; then
        echo "seedance: cuInit: CUDA_ERROR_NOT_INITIALIZED (3): this process (pid 12) was forked from pid $$" >&2
        trace '{"v":5,"event":"lifetime_fault","kind":"forked_after_init"}'
      fi
    else
      echo "child bytes differing: 0 child sum=1 child allocated"
    fi ;;
  rule_ctx_exit)
    echo "variant=$1 value=0x5eed"
    [ "$1" = alive ] && [ "${SEEDANCE_MODE:-}" = fix ] && echo "seedance: a context was left alive" >&2 ;;
esac
echo "sum=1"
echo "Result = PASS"
PROG
chmod +x "$out"
EOF
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/bash
case "$*" in -L) echo "GPU 0: Fake GPU (UUID: GPU-0)" ;; *) echo "Fake GPU, 580.0" ;; esac
EOF
# The Python rules programs (run.sh's CORPUS_PYTHON): played by a program the fake nvcc
# "builds" under the Python file's name.
cat >"$tmp/bin/fakepy" <<'EOF'
#!/bin/bash
play="$(dirname "$0")/../play/$(basename "$1")"
shift
mkdir -p "$(dirname "$play")"
# Built under another name and moved into place: runs of the same program in parallel never
# exec a file another one is still writing (ETXTBSY, exit 126).
[ -x "$play" ] || { nvcc -o "$play.$$" >/dev/null && mv -f "$play.$$" "$play"; }
exec "$play" "$@"
EOF
chmod +x "$tmp/bin/nvcc" "$tmp/bin/nvidia-smi" "$tmp/bin/fakepy"
echo 'void corpus_selftest(void) {}' >"$tmp/empty.c"
cc -shared -fPIC -o "$tmp/libempty.so" "$tmp/empty.c" || exit 1
samples="deviceQuery asyncAPI vectorAdd simpleAssert simpleAssert_nvrtc clock transpose matrixMul simpleP2P
  fp16ScalarProduct binomialOptions cdpSimplePrint ptxjit graphMemoryFootprint matrixMul_nvrtc"
for s in $samples; do
  mkdir -p "$tmp/corpus/Samples/$(grep -v '^#' "$here/samples.txt" | awk -F'|' -v n="$s" '$1 == n {print $2}')"
done

PATH="$tmp/bin:$PATH" OUT="$tmp/out" CORPUS_DIR="$tmp/corpus" SAMPLES="${samples//$'\n'/ }" CORPUS_GROUPS=samples,rules \
  CORPUS_PYTHON="$tmp/bin/fakepy" \
  SAMPLE_TIMEOUT=2 CUDA_HOME="$tmp" bash "$here/run.sh" "$tmp/libempty.so" >"$tmp/run.txt" 2>&1
rc=$?
s=$tmp/out/results.txt
if [ "$rc" = 1 ]; then echo "PASS: exit status 1 (expectations not met)"; else
  echo "FAIL: exit status $rc, expected 1"
  fails=$((fails + 1))
fi
check "counts" "^cuda-samples: 15 selected, 14 built, 12 run in all three modes, 8 same outcome, 4 not the same, 2 not run, 1 build failed" "$s"
check "healthy sample same in all modes" "^deviceQuery +0 +0 +0 +same +0/0" "$s"
check "time-seeded result lines compared up to numbers" "^fp16ScalarProduct +0 +0 +0 +same" "$s"
check "assert on purpose: exit 0, the CUDA_ERROR_ASSERT line expected" "^simpleAssert +0 +0 +0 +same +1/1" "$s"
check "assert on purpose: another shim line stays visible" "simpleAssert_nvrtc \[shim lines\]: fix: seedance: at exit" "$s"
check "shim lines listed" "asyncAPI \[shim lines\]: observe: seedance: cuLaunchKernel" "$s"
check "changed stdout shown" "vectorAdd \[differs\]: stdout DIFF: plain 'sum=1' vs 'sum=2'" "$s"
check "build failure with its first error" "matrixMul: matrixMul.cu\(12\): error" "$s"
check "timeout listed" "transpose: without the shim it ran past its timeout" "$s"
check "a sample's own longer timeout" "^binomialOptions +0 +0 +0 +same" "$s"
check "clock cycles are measurements" "^clock +0 +0 +0 +same" "$s"
check "device printf order: a multiset, block numbers masked" "^cdpSimplePrint +0 +0 +0 +(same|order) " "$s"
check "JIT log on the first compile only: two plain runs show it" "ptxjit \[same\]: two runs without the shim differ before the per-sample rules.*ptxas" "$s"
check "a change between plain runs the rules do not cover" "graphMemoryFootprint \[unstable\]: .*two runs without the shim differ where the rules do not mask" "$s"
check "cooperative-groups headers linked into the folder" "^matrixMul_nvrtc +0 +0 +0 +same" "$s"
check "GPU count" "simpleP2P: needs 2 GPUs, 1 present" "$s"
check "rules race reported" "legacy_stream.nonblocking observe +0 +0 +1 .*PASS" "$s"
check "rules silent" "ctx_exit.alive observe +0 +0 +0 .*PASS" "$s"
check "rules line where silence is expected" "ctx_exit.alive fix +0 +0 +1 .*FAIL" "$s"
check "rules fork explained (C)" "fork_child.after_init observe +0 +0 +1 .*PASS" "$s"
check "rules fork explained (Python)" "fork_cuda_python.after_init fix +0 +0 +1 .*PASS" "$s"
check "rules fork before init silent (Python)" "fork_cupy.before_init observe +0 +0 +0 .*PASS" "$s"
check "result line" "^RESULT: FAIL \(5 expectations not met\)" "$s"
check "logs packed" "." <(tar tzf "$tmp/out/logs.tar.gz" | grep -x 'runs/samples/asyncAPI/observe/stderr')
n=$(find "$tmp/out" -type f | wc -l)
if [ "$n" -le 8 ]; then echo "PASS: $n files in OUT"; else
  echo "FAIL: $n files in OUT"
  fails=$((fails + 1))
fi

PATH="$tmp/bin:$PATH" OUT="$tmp/out0" CORPUS_DIR="$tmp/corpus" SAMPLES="deviceQuery asyncAPI" CORPUS_GROUPS=samples \
  BUDGET_S=0 bash "$here/run.sh" "$tmp/libempty.so" >"$tmp/run0.txt" 2>&1
check "budget: nothing started" "^cuda-samples: 2 selected, 0 built, 0 run in all three modes, 0 same outcome, 0 not the same, 2 not run, 0 build failed" "$tmp/out0/results.txt"
check "budget: listed" "deviceQuery: not built: BUDGET_S was reached before its build started" "$tmp/out0/results.txt"

python3 "$here/corpus.py" selftest >"$tmp/py.txt" || fails=$((fails + 1))
tail -n 1 "$tmp/py.txt"
[ "$fails" = 0 ] || { echo "--- run.sh output:"; cat "$tmp/run.txt"; }
echo "corpus selftest: $fails failed"
exit "$fails"
