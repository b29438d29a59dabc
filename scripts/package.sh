#!/usr/bin/env bash
# Builds the release artifacts and packs them into one tarball:
#
#   bash scripts/package.sh [--target TRIPLE]
#
# writes dist/seedance-fix-<version>-<target>.tar.gz (and a .sha256 beside it) holding
#
#   seedance-fix-<version>-<target>/
#     bin/seedance-fix         the launcher (seedance-fix run -- CMD), finds ../lib
#     bin/seedance-analyze     the analyzer
#     lib/libseedance_fix.so   the shim (LD_PRELOAD it, or let bin/seedance-fix do it)
#     lib/fake-cuda/libcuda.so.1  the fake driver, for seedance-fix run --fake-driver
#     docs/  examples/  LICENSE (if the repository has one)
#     README.md                about this tarball (not the repository's: that one
#                              builds from source and runs scripts the tarball lacks)
#     SHA256SUMS               checksums of every other file, `sha256sum -c SHA256SUMS`
#
# and prints the tarball's path on the last line. The version is the seedance-fix
# package's (cargo pkgid); the target is rustc's host triple unless --target is given.
# Timestamps and owners in the tarball are fixed (SOURCE_DATE_EPOCH, else the last commit's
# time), so the same build gives the same tarball.
set -euo pipefail
cd "$(dirname "$0")/.."

target=""
while (($#)); do
  case $1 in
    --target) target=${2:?--target needs a triple}; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

pkgid=$(cargo pkgid -p seedance-fix)              # path+file:///...#seedance-fix@0.1.0
version=${pkgid##*@}
version=${version##*#}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)
fi
[[ -n $version ]] || { echo "package.sh: cannot tell the version" >&2; exit 1; }

cargo_args=(build --release --locked -p seedance-fix -p seedance-analyze -p seedance-launch -p fake-cuda)
if [[ -n $target ]]; then
  cargo_args+=(--target "$target")
  out=${CARGO_TARGET_DIR:-target}/$target/release
else
  target=$(rustc -vV | sed -n 's/^host: //p')
  out=${CARGO_TARGET_DIR:-target}/release
fi
echo "== cargo ${cargo_args[*]}" >&2
cargo "${cargo_args[@]}" >&2

name=seedance-fix-$version-$target
stage=dist/$name
tarball=dist/$name.tar.gz
rm -rf "$stage" "$tarball" "$tarball.sha256"
mkdir -p "$stage/lib/fake-cuda" "$stage/bin"
install -m 0755 "$out/libseedance_fix.so" "$stage/lib/libseedance_fix.so"
install -m 0755 "$out/libcuda.so" "$stage/lib/fake-cuda/libcuda.so.1"
install -m 0755 "$out/seedance-analyze" "$stage/bin/seedance-analyze"
install -m 0755 "$out/seedance-fix" "$stage/bin/seedance-fix"
# The release profile keeps debug info (debug = 1) for local profiling; the package drops
# the DWARF sections (symbols stay, so backtraces still name functions): 17 MB -> ~2 MB for
# the shim. A strip that does not know the target's format leaves the files as they are.
for f in "$stage/lib/libseedance_fix.so" "$stage/lib/fake-cuda/libcuda.so.1" \
         "$stage/bin/seedance-analyze" "$stage/bin/seedance-fix"; do
  strip --strip-debug "$f" 2>/dev/null || echo "package.sh: note: could not strip $f; kept as built" >&2
done
cp -R docs examples "$stage/"
sed -e "s/@VERSION@/$version/" -e "s/@TARGET@/$target/" scripts/release-README.md >"$stage/README.md"
for f in LICENSE LICENSE-APACHE LICENSE-MIT LICENSE.md LICENSE.txt NOTICE; do
  if [[ -f $f ]]; then cp "$f" "$stage/"; fi
done
# Nothing generated belongs in the package (traces, editor or build leftovers).
find "$stage" \( -name '*.jsonl' -o -name '*.jsonl.gz' -o -name '*~' -o -name '.*.swp' \) -delete
sums=$(mktemp)
(cd "$stage" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum) > "$sums"
mv "$sums" "$stage/SHA256SUMS"
chmod 0644 "$stage/SHA256SUMS"

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --mode='u+rwX,go+rX,go-w' -C dist -cf - "$name" | gzip -n -9 > "$tarball"
(cd dist && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
rm -rf "$stage"
echo "$tarball"
