#!/usr/bin/env bash
# GPU checks for device ordinals. Needs 2 GPUs. Run from the
# repository root on the GPU machine:
#
#   scripts/gpu/devices.sh [path/to/libseedance_fix.so]
#
# Each case runs without and with the shim (default mode fix). Without the shim the program
# must fail with an invalid-device error; with it, it must complete, on the device the
# fallback policy names, and the shim's stderr must explain it. Prints a table; logs in $OUT.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
. "$here/gpu/lib/common.sh"
gpu_prologue /tmp/seedance-devices "${1:-}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,pci.bus_id,uuid --format=csv,noheader | tee "$out/gpus.txt"

set -e
gcc -O2 -o "$work/ordinals" -I"$root/tests/programs" "$root/tests/programs/ordinals.c" \
    -L"$cuda_home/lib64/stubs" -lcuda
nvcc -O2 -arch=sm_90 -o "$work/set_device_static" "$here/gpu/set_device.cu"
nvcc -O2 -arch=sm_90 --cudart shared -o "$work/set_device_shared" "$here/gpu/set_device.cu"
set +e

printf '%-34s %4s %4s  %s\n' case rc0 rc1 "stdout with shim" | tee "$out/devices.txt"
case_run() {
  local name=$1 env=$2; shift 2
  env $env "$@" >"$work/$name.out0" 2>&1; local rc0=$?
  env $env LD_PRELOAD="$shim" "$@" >"$work/$name.out1" 2>"$work/$name.err1"; local rc1=$?
  printf '%-34s %4s %4s  %s\n' "$name" "$rc0" "$rc1" "$(tr '\n' ' ' <"$work/$name.out1")" | tee -a "$out/devices.txt"
  { echo "== $name ($env $*)"; echo "-- without:"; cat "$work/$name.out0"; echo "-- with (stdout):";
    cat "$work/$name.out1"; echo "-- with (stderr):"; cat "$work/$name.err1"; } >>"$out/devices.log"
}

case_run driver_ordinal5 "" "$work/ordinals" 5
case_run driver_cvd1_ordinal1 "CUDA_VISIBLE_DEVICES=1" "$work/ordinals" 1
case_run driver_cvd1_ordinal1_observe "CUDA_VISIBLE_DEVICES=1 SEEDANCE_MODE=observe" "$work/ordinals" 1
case_run runtime_static_set3 "" "$work/set_device_static" 3
case_run runtime_shared_set3 "" "$work/set_device_shared" 3
case_run runtime_shared_cvd1_set1 "CUDA_VISIBLE_DEVICES=1" "$work/set_device_shared" 1
case_run torch_cvd1_cuda1 "CUDA_VISIBLE_DEVICES=1" python3 "$here/gpu/torch_device.py" cuda:1
case_run torch_cuda5 "" python3 "$here/gpu/torch_device.py" cuda:5
case_run torch_mlp_cvd1_cuda1 "CUDA_VISIBLE_DEVICES=1" python3 "$here/gpu/torch_mlp_device.py" cuda:1
case_run torch_mlp_cvd1_cuda0_reference "CUDA_VISIBLE_DEVICES=1" python3 "$here/gpu/torch_mlp_device.py" cuda:0
