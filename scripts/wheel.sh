#!/usr/bin/env bash
# Builds the pip wheel of seedance-fix into target/wheels/: the launcher (maturin, bin
# bindings, pyproject.toml), plus the analyzer, the shim and the fake driver staged as the
# wheel's data (pyproject.toml says where each lands). Needs maturin (`pip install maturin`)
# on PATH or in $MATURIN.
#
#   bash scripts/wheel.sh            # then: pip install target/wheels/seedance_fix-*.whl
#
# The wheel is tagged linux_x86_64 (--compatibility linux): it runs on machines with this
# machine's glibc or newer. A wheel for PyPI is built the same way inside a manylinux
# container (quay.io/pypa/manylinux_2_28_x86_64) with --compatibility manylinux_2_28.
set -euo pipefail
cd "$(dirname "$0")/.."
maturin=${MATURIN:-maturin}
compat=${WHEEL_COMPATIBILITY:-linux}
echo "== building the shim, the analyzer and the fake driver (cargo build --release)" >&2
cargo build --release --quiet -p seedance-fix -p seedance-analyze -p fake-cuda
rel=${CARGO_TARGET_DIR:-target}/release
stage=target/wheel-data
rm -rf "$stage"
mkdir -p "$stage/scripts" "$stage/data/lib/seedance-fix/fake-cuda"
install -m 0755 "$rel/seedance-analyze" "$stage/scripts/seedance-analyze"
install -m 0755 "$rel/libseedance_fix.so" "$stage/data/lib/seedance-fix/libseedance_fix.so"
install -m 0755 "$rel/libcuda.so" "$stage/data/lib/seedance-fix/fake-cuda/libcuda.so.1"
rm -f target/wheels/seedance_fix-*.whl
echo "== building the wheel (maturin build --release, launcher seedance-fix)" >&2
"$maturin" build --release --quiet --compatibility "$compat" --out target/wheels >&2
ls -1 target/wheels/seedance_fix-*.whl
