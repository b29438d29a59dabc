#!/usr/bin/env bash
# Builds the pip wheel of seedance-fix into target/wheels/: the launcher (maturin, bin
# bindings, pyproject.toml), plus the analyzer, the shim and the fake driver staged as the
# wheel's data (pyproject.toml says where each lands): the shim and the fake driver as
# platform-library data (site-packages/seedance_fix/; `pip install --target` keeps that,
# while it drops plain data files), the analyzer as a script. Needs maturin (`pip install maturin`)
# on PATH or in $MATURIN.
#
#   bash scripts/wheel.sh                                     # this machine's architecture
#   bash scripts/wheel.sh --target aarch64-unknown-linux-gnu  # Grace Hopper, Grace Blackwell
#
# then: pip install target/wheels/seedance_fix-*.whl (on a machine of that architecture).
# Prints the wheel's path. Every file in it (launcher, analyzer, shim, fake driver) is built
# for the one target: a cross build links with the cross linker of .cargo/config.toml
# (Debian: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross; rustup target add
# aarch64-unknown-linux-gnu), is stripped with aarch64-linux-gnu-strip, and is checked under
# qemu-user by scripts/check-wheel.sh.
#
# The wheel, for the host or another target, is tagged manylinux_2_<N>_<arch>, N the newest
# glibc symbol version any of its files needs (readelf), which maturin checks again for the
# launcher: pip on an older system refuses it instead of failing at run time, and
# scripts/check-wheel.sh checks the tag against every file. WHEEL_COMPATIBILITY overrides it. A wheel for PyPI is built inside a manylinux
# container (quay.io/pypa/manylinux_2_28_x86_64 or _aarch64) with
# WHEEL_COMPATIBILITY=manylinux_2_28.
set -euo pipefail
cd "$(dirname "$0")/.."
target=
while (($#)); do
  case $1 in
    --target) target=${2:?--target needs a triple}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "wheel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
maturin=${MATURIN:-maturin}
host=$(rustc -vV | sed -n 's/^host: //p')
[[ -n $target ]] || target=$host
cargo_target=()
maturin_target=()
rel=${CARGO_TARGET_DIR:-target}/release
strip=strip
if [[ $target != "$host" ]]; then
  cargo_target=(--target "$target")
  maturin_target=(--target "$target")
  rel=${CARGO_TARGET_DIR:-target}/$target/release
  case $target in
    aarch64-unknown-linux-gnu) strip=aarch64-linux-gnu-strip ;;
    *) echo "wheel.sh: cross wheels are built for aarch64-unknown-linux-gnu only, not $target" >&2; exit 2 ;;
  esac
fi
echo "== building the shim, the analyzer, the fake driver and fake NVML (cargo build --release ${cargo_target[*]})" >&2
cargo build --release --quiet "${cargo_target[@]}" -p seedance-fix -p seedance-analyze -p fake-cuda -p fake-nvml
stage=target/wheel-data
rm -rf "$stage"
mkdir -p "$stage/scripts" "$stage/platlib/seedance_fix/fake-cuda"
install -m 0755 "$rel/seedance-analyze" "$stage/scripts/seedance-analyze"
install -m 0755 "$rel/libseedance_fix.so" "$stage/platlib/seedance_fix/libseedance_fix.so"
install -m 0755 "$rel/libcuda.so" "$stage/platlib/seedance_fix/fake-cuda/libcuda.so.1"
# The fake NVML beside the fake driver: --fake-driver puts that directory first on the
# library path, and the shim loads libnvidia-ml.so.1 from it (crates/seedance-launch/src/locate.rs).
install -m 0755 "$rel/libnvidia_ml.so" "$stage/platlib/seedance_fix/fake-cuda/libnvidia-ml.so.1"
staged=("$stage/scripts/seedance-analyze" "$stage/platlib/seedance_fix/libseedance_fix.so"
        "$stage/platlib/seedance_fix/fake-cuda/libcuda.so.1"
        "$stage/platlib/seedance_fix/fake-cuda/libnvidia-ml.so.1")
# The release profile keeps debug info; the wheel drops the DWARF sections (symbols stay),
# as scripts/package.sh does, and maturin --strip does for the launcher.
for f in "${staged[@]}"; do
  "$strip" --strip-debug "$f" 2>/dev/null || echo "wheel.sh: note: could not strip $f; kept as built" >&2
done
compat=${WHEEL_COMPATIBILITY:-}
if [[ -z $compat ]]; then
  # The newest GLIBC_2.N any staged file needs; the launcher is checked by maturin itself.
  minor=$(for f in "${staged[@]}"; do readelf --version-info --wide "$f"; done |
          grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n1)
  compat=manylinux_2_${minor:-17}
  # maturin knows no manylinux tag below the architecture's first (aarch64: 2.17).
  [[ ${minor:-17} -ge 17 ]] || compat=manylinux_2_17
fi
rm -f target/wheels/seedance_fix-*"${target%%-*}".whl
echo "== building the wheel (maturin build --release --target $target --compatibility $compat, launcher seedance-fix)" >&2
"$maturin" build --release --quiet --strip "${maturin_target[@]}" --compatibility "$compat" --out target/wheels >&2
ls -1t target/wheels/seedance_fix-*"${target%%-*}".whl | head -n1
