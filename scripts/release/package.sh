#!/usr/bin/env bash
# Builds the release artifacts and packs them into one tarball:
#
#   bash scripts/release/package.sh [--target TRIPLE]... [--all]
#
# writes dist/seedance-fix-<version>-<target>.tar.gz (and a .sha256 beside it) for each target,
# holding
#
#   seedance-fix-<version>-<target>/
#     bin/seedance-fix         the launcher (seedance-fix run -- CMD), finds ../lib
#     bin/seedance-analyze     the analyzer
#     lib/libseedance_fix.so   the shim (LD_PRELOAD it, or let bin/seedance-fix do it)
#     lib/fake-cuda/libcuda.so.1  the fake driver, for seedance-fix run --fake-driver
#     lib/fake-cuda/libnvidia-ml.so.1  the fake NVML (the same host), loaded with it
#     docs/  examples/  LICENSE (if the repository has one)
#     README.md                about this tarball (not the repository's: that one
#                              builds from source and runs scripts the tarball lacks)
#     SHA256SUMS               checksums of every other file, `sha256sum -c SHA256SUMS`
#
# and prints each tarball's path on a line of its own, the last one last. The version is the
# seedance-fix package's (cargo pkgid); the target is rustc's host triple unless --target is
# given (repeatable); --all builds both Linux architectures, x86_64-unknown-linux-gnu and
# aarch64-unknown-linux-gnu (Grace Hopper, Grace Blackwell). aarch64 links with the cross
# linker of .cargo/config.toml (Debian: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross;
# rustup target add aarch64-unknown-linux-gnu) and is stripped with aarch64-linux-gnu-strip.
# Timestamps and owners in the tarball are fixed (SOURCE_DATE_EPOCH, else the last commit's
# time), so the same build gives the same tarball.
set -euo pipefail
cd "$(dirname "$0")/../.."

targets=()
while (($#)); do
  case $1 in
    --target) targets+=("${2:?--target needs a triple}"); shift 2 ;;
    --target=*) targets+=("${1#--target=}"); shift ;;
    --all) targets+=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu); shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "release/package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

pkgid=$(cargo pkgid -p seedance-shim)              # path+file:///...#seedance-shim@0.1.0
version=${pkgid##*@}
version=${version##*#}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
fi
[[ -n $version ]] || { echo "release/package.sh: cannot tell the version" >&2; exit 1; }
host=$(rustc -vV | sed -n 's/^host: //p')
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

# Builds and packs one target; prints the tarball's path.
package() {
local target=$1
local cargo_args=(build --release --locked -p seedance-shim -p seedance-analyze -p seedance-launch -p fake-cuda -p fake-nvml --target "$target")
local out=${CARGO_TARGET_DIR:-target}/$target/release
if [[ $target == "$host" ]]; then
  # The host's build lives in target/release, where the other scripts look for it.
  cargo_args=(build --release --locked -p seedance-shim -p seedance-analyze -p seedance-launch -p fake-cuda -p fake-nvml)
  out=${CARGO_TARGET_DIR:-target}/release
fi
local strip=strip
case $target in
  aarch64-unknown-linux-gnu) [[ $host == "$target" ]] || strip=aarch64-linux-gnu-strip ;;
esac
echo "== cargo ${cargo_args[*]}" >&2
cargo "${cargo_args[@]}" >&2

local name=seedance-fix-$version-$target
local stage=dist/$name
local tarball=dist/$name.tar.gz
rm -rf "$stage" "$tarball" "$tarball.sha256"
mkdir -p "$stage/lib/fake-cuda" "$stage/bin"
install -m 0755 "$out/libseedance_fix.so" "$stage/lib/libseedance_fix.so"
install -m 0755 "$out/libcuda.so" "$stage/lib/fake-cuda/libcuda.so.1"
install -m 0755 "$out/libnvidia_ml.so" "$stage/lib/fake-cuda/libnvidia-ml.so.1"
install -m 0755 "$out/seedance-analyze" "$stage/bin/seedance-analyze"
install -m 0755 "$out/seedance-fix" "$stage/bin/seedance-fix"
# The release profile keeps debug info (debug = 1) for local profiling; the package drops
# the DWARF sections (symbols stay, so backtraces still name functions): 17 MB -> ~2 MB for
# the shim. A strip that does not know the target's format leaves the files as they are.
for f in "$stage/lib/libseedance_fix.so" "$stage/lib/fake-cuda/libcuda.so.1" "$stage/lib/fake-cuda/libnvidia-ml.so.1" \
         "$stage/bin/seedance-analyze" "$stage/bin/seedance-fix"; do
  "$strip" --strip-debug "$f" 2>/dev/null || echo "release/package.sh: note: could not strip $f; kept as built" >&2
done
cp -R docs examples "$stage/"
sed -e "s/@VERSION@/$version/" -e "s/@TARGET@/$target/" scripts/release/tarball-README.md >"$stage/README.md"
for f in LICENSE LICENSE-APACHE LICENSE-MIT LICENSE.md LICENSE.txt NOTICE; do
  if [[ -f $f ]]; then cp "$f" "$stage/"; fi
done
# Nothing generated belongs in the package (traces, editor or build leftovers).
find "$stage" \( -name '*.jsonl' -o -name '*.jsonl.gz' -o -name '*~' -o -name '.*.swp' \) -delete
local sums
sums=$(mktemp)
(cd "$stage" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum) > "$sums"
mv "$sums" "$stage/SHA256SUMS"
chmod 0644 "$stage/SHA256SUMS"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --mode='u+rwX,go+rX,go-w' -C dist -cf - "$name" | gzip -n -9 > "$tarball"
(cd dist && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
rm -rf "$stage"
echo "$tarball"
}

((${#targets[@]})) || targets=("$host")
for t in "${targets[@]}"; do
  package "$t"
done
