#!/usr/bin/env bash
# GPU checks for stray contexts on ONE GPU. Run from the repository root
# on the GPU machine:
#
#   scripts/gpu/contexts.sh [path/to/libseedance_fix.so]
#
# Measures what a context costs in device memory, as NVML sees it (device used memory and
# this process's used memory, nvmlDeviceGetComputeRunningProcesses_v3), at each stage of:
#   - scripts/gpu/contexts_driver.c: cuInit, cuDevicePrimaryCtxRetain + cuCtxSetCurrent,
#     one tiny launch (PTX), a 64 MiB allocation;
#   - scripts/gpu/contexts_runtime.cu: cudaFree(0), a tiny launch;
#   - scripts/gpu/contexts_torch.py (when PyTorch is importable): torch.cuda.init(), a
#     one-element tensor on cuda:0;
# shows NVML's process list as seen from inside this container (nvidia-smi
# --query-compute-apps) next to the process's own pid (a container with its own PID
# namespace sees host pids: then the shim says the context's memory is unknown), and the
# shim's out-of-memory explanation with NVML (alloc_fault.processes_on_device); and checks
# that healthy single-GPU programs (driver API, runtime, PyTorch) stay silent without the
# shim, with SEEDANCE_MODE=observe and in fix mode: the same stdout, no "seedance:" line, no
# stray_context record, and the exit summary's device_use naming device 0 as worked.
#
# Prints the figures (MiB) and PASS/FAIL per check, then the count. Logs and traces go to
# $OUT (default /tmp/seedance-contexts). Exit status: the number of failed checks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-contexts "${1:-}"
python=${PYTHON:-python3}
gpu_fields=name,driver_version,memory.total record_gpu_environment \
  "torch: $($python -c 'import torch; print(torch.__version__)' 2>/dev/null || echo absent)" \
  "pid namespace: $(readlink /proc/self/ns/pid)"

set -e
gcc -O2 -o "$work/contexts_driver" "$here/gpu/contexts_driver.c" \
    -I"$cuda_home/include" -L"$cuda_home/lib64/stubs" -lcuda -ldl
nvcc -O2 -arch=sm_90 -o "$work/contexts_runtime" "$here/gpu/contexts_runtime.cu" -ldl
set +e
have_torch=0
$python -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && have_torch=1

# Measurements, without the shim.
"$work/contexts_driver" measure >"$out/measure-driver.txt" 2>&1
"$work/contexts_runtime" measure >"$out/measure-runtime.txt" 2>&1
if [ $have_torch = 1 ]; then
  $python "$here/gpu/contexts_torch.py" measure >"$out/measure-torch.txt" 2>&1
fi
# The shim's out-of-memory explanation with NVML's process list.
mkdir -p "$out/trace-oom"
LD_PRELOAD="$shim" SEEDANCE_TRACE_DIR="$out/trace-oom" \
    "$work/contexts_driver" oom >"$out/oom.txt" 2>&1
# Healthy programs: without the shim, observe, fix.
progs="driver runtime"
[ $have_torch = 1 ] && progs="$progs torch"
for p in $progs; do
  case $p in
    driver) cmd=("$work/contexts_driver" healthy) ;;
    runtime) cmd=("$work/contexts_runtime" healthy) ;;
    torch) cmd=($python "$here/gpu/contexts_torch.py" healthy) ;;
  esac
  "${cmd[@]}" >"$out/healthy-$p-without.out" 2>"$out/healthy-$p-without.err"
  echo "exit $?" >>"$out/healthy-$p-without.out"
  for m in observe fix; do
    mkdir -p "$out/trace-$p-$m"
    LD_PRELOAD="$shim" SEEDANCE_MODE=$m SEEDANCE_TRACE_DIR="$out/trace-$p-$m" \
        "${cmd[@]}" >"$out/healthy-$p-$m.out" 2>"$out/healthy-$p-$m.err"
    echo "exit $?" >>"$out/healthy-$p-$m.out"
  done
done

PYTHONPATH="$here/gpu${PYTHONPATH:+:$PYTHONPATH}" \
  $python - "$out" "$have_torch" $progs <<'PY'
import json, pathlib, re, sys
from traces import records

out = pathlib.Path(sys.argv[1])
have_torch = sys.argv[2] == "1"
progs = sys.argv[3:]
failed = passed = 0
MIB = 1 << 20

def check(ok, what):
    global failed, passed
    print(("PASS " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1

def stages(name):
    s = {}
    for line in (out / name).read_text().splitlines():
        m = re.match(r"stage (\S+): device_used (-?\d+) this_process (-?\d+)", line)
        if m:
            s[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return s


def mib(b):
    return f"{b / MIB:.1f} MiB"

def report(name, first, pairs):
    s = stages(name)
    print(f"== {name}")
    for k, (used, mine) in s.items():
        print(f"  {k}: device used {mib(used) if used >= 0 else '?'}, "
              f"this process {mib(mine) if mine >= 0 else 'not listed'}")
    ok = first in s and all(k in s for k, _ in pairs)
    for k, label in pairs:
        if first in s and k in s and s[first][0] >= 0:
            print(f"  FIGURE {label}: device used +{mib(s[k][0] - s[first][0])}, "
                  f"this process {mib(s[k][1]) if s[k][1] >= 0 else 'not listed'}")
    check(ok, f"{name}: every stage measured")
    return s

d = report("measure-driver.txt", "start",
           [("primary_retain", "cuDevicePrimaryCtxRetain"),
            ("tiny_launch", "primary context + tiny launch"),
            ("alloc_64MiB", "... + 64 MiB allocation")])
report("measure-runtime.txt", "start",
       [("cudaFree0", "cudaFree(0)"), ("tiny_launch", "cudaFree(0) + tiny launch")])
if have_torch:
    report("measure-torch.txt", "start",
           [("torch_cuda_init", "torch.cuda.init()"),
            ("one_element_tensor", "torch.cuda.init() + one-element tensor")])
else:
    print("SKIP torch: PyTorch with CUDA not importable")

text = (out / "measure-driver.txt").read_text()
m = re.search(r"^pid (\d+)", text, re.M)
pid = int(m.group(1)) if m else -1
apps = text.split("while this process", 1)[-1].splitlines()[1:]
listed = [a.split(",")[0].strip() for a in apps if "," in a]
print(f"== NVML from inside: this process pid {pid}; nvidia-smi lists pids {listed}")
print("  " + ("this process is listed: the shim can name a context's memory"
              if str(pid) in listed else
              "this process is NOT listed (another PID namespace): the shim says the "
              "context's memory is unknown"))
check(bool(listed), "nvidia-smi --query-compute-apps lists the process holding the context")

oom = [r for r in records(out / "trace-oom") if r.get("event") == "alloc_fault"]
print("== out of memory under the shim")
for line in (out / "oom.txt").read_text().splitlines():
    print("  " + line)
check(len(oom) == 1 and oom[0].get("check") == "out_of_memory",
      "oom: one alloc_fault out_of_memory")
if oom:
    procs = oom[0].get("processes_on_device")
    print(f"  processes_on_device: {procs}")
    check(procs is not None, "oom: NVML's process list in the explanation's record")

for p in progs:
    base = (out / f"healthy-{p}-without.out").read_text()
    check("result ok" in base and base.rstrip().endswith("exit 0"),
          f"healthy {p}: runs correctly without the shim")
    for mode in ("observe", "fix"):
        o = (out / f"healthy-{p}-{mode}.out").read_text()
        e = (out / f"healthy-{p}-{mode}.err").read_text()
        recs = records(out / f"trace-{p}-{mode}")
        shim_lines = [l for l in e.splitlines() if l.startswith("seedance:")]
        strays = [r for r in recs if r.get("event") == "stray_context"]
        summ = [r for r in recs if r.get("event") == "exit_summary"]
        use = summ[0].get("device_use", []) if summ else []
        check(o == base, f"healthy {p} {mode}: same stdout and exit code as without the shim")
        check(not shim_lines, f"healthy {p} {mode}: no line from the shim {shim_lines[:2]}")
        check(not strays and summ and not summ[0].get("stray_contexts"),
              f"healthy {p} {mode}: no stray context in the trace")
        check(any(u.get("device") == 0 and u.get("worked") for u in use),
              f"healthy {p} {mode}: exit summary's device_use names device 0 as worked {use}")

print(f"{passed} passed, {failed} failed")
sys.exit(failed)
PY
status=$?
rm -rf "$work"
exit $status
