#!/usr/bin/env bash
# Builds the pip wheel of seedance-fix into target/wheels/: `pip wheel .`, whose build
# backend (packaging/seedance_build.py) builds the shim, the analyzer, the fake driver and
# the fake NVML with cargo, stages them as the wheel's data and hands over to maturin for the
# launcher (pyproject.toml). pip fetches maturin (and zig, with --zig) from PyPI into its
# build environment; PYTHON is the python whose pip is used (default python3).
#
#   bash scripts/release/wheel.sh                                           # this machine, its glibc
#   bash scripts/release/wheel.sh --zig                                     # manylinux2014 (glibc 2.17)
#   bash scripts/release/wheel.sh --zig --target aarch64-unknown-linux-gnu  # Grace Hopper, Grace Blackwell
#
# then: pip install target/wheels/seedance_fix-*.whl (on a machine of that architecture).
# Prints the wheel's path.
#
# Without --zig the files are linked with this machine's C toolchain and the wheel is tagged
# manylinux_2_<N>_<arch>, N the newest glibc symbol version any of its files needs (readelf;
# maturin checks the launcher again): pip on an older system refuses it instead of failing at
# run time. A cross build for aarch64 then needs Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross (.cargo/config.toml) and strips with aarch64-linux-gnu-strip.
#
# With --zig (SEEDANCE_WHEEL_LINK=zig) every file is linked by zig (PyPI ziglang) against
# glibc 2.17's symbol versions and the wheel is tagged manylinux2014 (manylinux_2_17): the
# wheel to hand out, for any Linux of its architecture from 2014 on; no container, no cross
# toolchain. scripts/release/check-wheel.sh --max-glibc 2.17 checks every file of it (CI).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=
while (($#)); do
  case $1 in
    --target) target=${2:?--target needs a triple}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    --zig) export SEEDANCE_WHEEL_LINK=zig; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "release/wheel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-python3}
[[ -z $target ]] || export SEEDANCE_WHEEL_TARGET=$target
[[ -n $target ]] || target=$(rustc -vV | sed -n 's/^host: //p')
arch=${target%%-*}
rm -f target/wheels/seedance_fix-*"$arch".whl
echo "== pip wheel . (SEEDANCE_WHEEL_LINK=${SEEDANCE_WHEEL_LINK:-native}, target $target)" >&2
# -v: the backend's cargo and maturin output, which pip otherwise hides until a failure.
"$python" -m pip wheel -v --no-deps --wheel-dir target/wheels . >&2
ls -1t target/wheels/seedance_fix-*"$arch".whl | head -n1
