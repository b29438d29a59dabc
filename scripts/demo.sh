#!/usr/bin/env bash
# The main job, on any Linux machine, no GPU needed: build the shim, the fake driver and the
# analyzer; run a program that asks for a GPU it cannot have, first without and then with the
# shim; then summarize the trace the shim wrote; then the same through the launcher,
# seedance-fix run.
#
#   bash scripts/demo.sh
#
# The fake driver (crates/fake-cuda) plays a 2-GPU host; CUDA_VISIBLE_DEVICES=1 leaves one
# GPU visible, so the program's cuDeviceGet(1) fails with CUDA_ERROR_INVALID_DEVICE. The
# fake NVML (crates/fake-nvml) describes the same host, as libnvidia-ml would on a GPU
# machine. Builds go to $CARGO_TARGET_DIR when it is set (target/ otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building the shim, the launcher, the analyzer and the fake driver and NVML"
echo "   (cargo build --release; a few minutes the first time, seconds after that)"
cargo build --release --quiet -p seedance-shim -p fake-cuda -p fake-nvml -p seedance-analyze \
  -p seedance-launch
tgt=${CARGO_TARGET_DIR:-target}
mkdir -p "$tgt"
tgt=$(cd "$tgt" && pwd)
rel=$tgt/release
demo=$tgt/demo
rm -rf "$demo" && mkdir -p "$demo/driver" "$demo/nvml" "$demo/traces"
cp "$rel/libcuda.so" "$demo/driver/libcuda.so.1"
cp "$rel/libcuda.so" "$demo/driver/libcuda.so"
cp "$rel/libnvidia_ml.so" "$demo/nvml/libnvidia-ml.so.1"
echo "== compiling examples/wrong_ordinal.c against the fake driver"
cc -O1 -o "$demo/wrong_ordinal" examples/wrong_ordinal.c -L"$demo/driver" -lcuda
echo
export LD_LIBRARY_PATH="$demo/driver:$demo/nvml" FAKE_CUDA_DEVICE_COUNT=2 CUDA_VISIBLE_DEVICES=1

echo "== 1. without the shim"
"$demo/wrong_ordinal" || echo "(exit status $?)"
echo
echo "== 2. with the shim: LD_PRELOAD=$rel/libseedance_fix.so (mode fix)"
LD_PRELOAD="$rel/libseedance_fix.so" SEEDANCE_TRACE_DIR="$demo/traces" \
  "$demo/wrong_ordinal" || echo "(exit status $?)"
echo
echo "== 3. seedance-analyze summary $demo/traces"
"$rel/seedance-analyze" summary "$demo/traces"
echo
echo "== 4. the same in one command: seedance-fix run -- ./wrong_ordinal"
echo "   (the launcher preloads the shim, traces to a private directory, summarizes the run)"
"$rel/seedance-fix" run -- "$demo/wrong_ordinal" || echo "(exit status $?)"
