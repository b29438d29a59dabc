#!/usr/bin/env bash
# Builds the pip wheel of seedance-fix into target/wheels/: the launcher (maturin, bin
# bindings, pyproject.toml), plus the analyzer, the shim and the fake driver staged as the
# wheel's data (pyproject.toml says where each lands): the shim and the fake driver as
# platform-library data (site-packages/seedance_fix/; `pip install --target` keeps that,
# while it drops plain data files), the analyzer as a script. Needs maturin (`pip install maturin`)
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
mkdir -p "$stage/scripts" "$stage/platlib/seedance_fix/fake-cuda"
install -m 0755 "$rel/seedance-analyze" "$stage/scripts/seedance-analyze"
install -m 0755 "$rel/libseedance_fix.so" "$stage/platlib/seedance_fix/libseedance_fix.so"
install -m 0755 "$rel/libcuda.so" "$stage/platlib/seedance_fix/fake-cuda/libcuda.so.1"
# The release profile keeps debug info; the wheel drops the DWARF sections (symbols stay),
# as scripts/package.sh does, and maturin --strip does for the launcher.
for f in "$stage/scripts/seedance-analyze" "$stage/platlib/seedance_fix/libseedance_fix.so" \
         "$stage/platlib/seedance_fix/fake-cuda/libcuda.so.1"; do
  strip --strip-debug "$f" 2>/dev/null || echo "wheel.sh: note: could not strip $f; kept as built" >&2
done
rm -f target/wheels/seedance_fix-*.whl
echo "== building the wheel (maturin build --release, launcher seedance-fix)" >&2
"$maturin" build --release --quiet --strip --compatibility "$compat" --out target/wheels >&2
ls -1 target/wheels/seedance_fix-*.whl
