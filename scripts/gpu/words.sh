#!/usr/bin/env bash
# The shim's words on a GPU (one GPU is enough; CUDA_VISIBLE_DEVICES=0 makes one of many):
#
#   scripts/gpu/words.sh [path/to/libseedance_fix.so]
#
# Programs: scripts/gpu/words_*.py.
#
# 1. JAX then PyTorch out of memory: the explanation names JAX's share of the device
#    ("JAX (<file>) holds ...") and the exit summary's memory_holders has it.
# 2. cupy.cuda.Device(1) and 3. cuda-python's cudaSetDevice(1) on one GPU: the static runtime
#    refuses the ordinal; `seedance-fix run` says that a device selection may have been refused
#    above the driver, with the count.
# 4. .item() inside torch.cuda.graph: the shim's stderr explanation of
#    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the analyzer's problem say the same words.
# Each check prints PASS or FAIL with the line it judged. Needs Python with torch, jax, cupy
# and cuda-python, and target/release/{seedance-fix,seedance-analyze} (cargo build --release).
# Environment: OUT (/tmp/seedance-words), PYTHON (python3).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$(dirname "$here")"
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-words "${1:-}"
trap 'rm -rf "$work"' EXIT
py=${PYTHON:-python3}
launcher=$(readlink -f target/release/seedance-fix)
analyzer=$(readlink -f target/release/seedance-analyze)
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
fails=0
judge() { # judge NAME OK LINE
  if [ "$2" = 1 ]; then echo "PASS $1: $3"; else echo "FAIL $1: ${3:-<no line>}"; fails=$((fails + 1)); fi
}

# 1. JAX then PyTorch.
t="$out/oom"; rm -rf "$t"; mkdir -p "$t"
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$t" "$py" "$here/gpu/words_jax_torch_oom.py" \
  >"$out/oom.out" 2>"$out/oom.err"
line=$(grep -m1 'CUDA_ERROR_OUT_OF_MEMORY (2): ' "$out/oom.err")
ok=0; [[ "$line" == *"JAX ("*") holds "*"XLA_PYTHON_CLIENT_PREALLOCATE=false"* ]] && ok=1
judge jax_share_in_explanation "$ok" "$line"
holders=$("$py" - "$t" <<'PY'
import json, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob("seedance-*.jsonl"):
    for l in f.read_text().splitlines():
        r = json.loads(l)
        if r.get("event") == "exit_summary":
            print(json.dumps(r.get("memory_holders", [])))
PY
)
ok=0; [[ "$holders" == *'"library"'* ]] && ok=1
judge exit_summary_memory_holders "$ok" "$holders"

# 2 and 3. A device refused above the driver.
for prog in cupy_device1 cuda_python_device1; do
  "$launcher" run -- "$py" "$here/gpu/words_$prog.py" >"$out/$prog.out" 2>"$out/$prog.err"
  rc=$?
  line=$(grep -m1 'a device selection may have been refused above the driver' "$out/$prog.err")
  ok=0; [ "$rc" -ne 0 ] && [[ "$line" == *"(1 device, ordinal 0)"* ]] && ok=1
  judge "$prog" "$ok" "exit $rc: $line"
done

# 4. The capture failure: stderr and the report.
t="$out/capture"; rm -rf "$t"; mkdir -p "$t"
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$t" "$py" "$here/gpu/words_capture_item.py" \
  >"$out/capture.out" 2>"$out/capture.err"
line=$(grep -m1 'returned CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): ' "$out/capture.err")
judge capture_explained "$([ -n "$line" ] && echo 1 || echo 0)" "$line"
"$analyzer" summary --format json "$t" >"$out/capture.json" 2>"$out/capture-analyze.err"
said=${line#*returned CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): }
report=$("$py" - "$out/capture.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["problems"]:
    if p["key"] == "cuda_error/CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED":
        print(p["remediation"][0])
PY
)
ok=0; [ -n "$line" ] && [ "$report" = "$said" ] && ok=1
judge capture_report_says_the_same "$ok" "report: $report"

echo "words: $fails failed (outputs in $out)"
exit "$fails"
