#!/usr/bin/env bash
# Exports the cuda-samples that scripts/corpus/samples.txt selects, with Common/ (headers and
# helpers), from a git mirror of NVIDIA/cuda-samples into .corpus/cuda-samples/ (git-ignored),
# for scripts/corpus/run.sh on a GPU machine that has no network. Run from the repository root
# on a machine that has the mirror:
#
#   scripts/corpus/prepare-samples.sh [MIRROR_GIT_DIR] [COMMIT]
#
# MIRROR_GIT_DIR: a bare git directory (default /work/.mirror/NVIDIA+cuda-samples/repo).
# COMMIT: default HEAD of the mirror; the commit used is written to .corpus/cuda-samples/COMMIT.
# Left out of the export (listed in .corpus/cuda-samples/EXPORT.txt with the reason):
# documentation (doc/, *.doc, *.docx, *.pdf), files over MAX_FILE_BYTES (default 1 MiB: none of
# the selected samples reads one), blobs the mirror does not store, and Common/GL, Common/lib
# (display samples only) and Common/data except the images watershedSegmentationNPP reads.
# Fails when the export exceeds MAX_TOTAL_MIB (default 40).
set -u
here=$(cd "$(dirname "$0")" && pwd)
mirror=${1:-/work/.mirror/NVIDIA+cuda-samples/repo}
rev=${2:-HEAD}
dest=${DEST:-.corpus/cuda-samples}
max_file=${MAX_FILE_BYTES:-1048576}
max_total=${MAX_TOTAL_MIB:-40}
git_m() { git --git-dir="$mirror" "$@"; }

commit=$(git_m rev-parse --verify "$rev^{commit}") || { echo "no commit $rev in $mirror" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"

# The folders to export: every selected (not SKIP) sample, and Common.
mapfile -t dirs < <(grep -v '^#' "$here/samples.txt" | awk -F'|' 'NF >= 4 && $3 != "SKIP" {print "Samples/" $2}')
common_data_keep='^Common/data/(teapot_512x512_8u_Gray|CT_skull_512x512_8u_Gray|Rocks_512x512_8u_Gray)\.raw$'

listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
git_m ls-tree -r -l "$commit" -- Common "${dirs[@]}" >"$listing" || exit 1
# Blobs absent from the mirror (its largest files may be listed but not stored).
missing=$(awk '{print $3}' "$listing" | git_m cat-file --batch-check | awk '$2 == "missing" {print $1}')

exported=0 skipped=0
{
  echo "cuda-samples commit $commit (exported $(date -u +%Y-%m-%dT%H:%MZ))"
  echo "left out:"
} >"$dest/EXPORT.txt"
while IFS=$'\t' read -r meta path; do
  read -r _mode _type hash size <<<"$meta"
  why=
  case "$path" in
    */doc/* | *.doc | *.docx | *.pdf) why="documentation" ;;
    Common/GL/* | Common/lib/*) why="display samples only" ;;
    Common/data/*) [[ $path =~ $common_data_keep ]] || why="no selected sample reads it" ;;
  esac
  [ -z "$why" ] && grep -qx "$hash" <<<"$missing" && why="not stored in the mirror"
  [ -z "$why" ] && [ "$size" -gt "$max_file" ] && why="over $max_file bytes"
  if [ -n "$why" ]; then
    echo "  $path ($size bytes): $why" >>"$dest/EXPORT.txt"
    skipped=$((skipped + 1))
    continue
  fi
  mkdir -p "$dest/$(dirname "$path")"
  git_m cat-file blob "$hash" >"$dest/$path" || exit 1
  exported=$((exported + 1))
done <"$listing"
echo "$commit" >"$dest/COMMIT"
cp "$here/samples.txt" "$dest/samples.txt"

kib=$(du -sk "$dest" | cut -f1)
echo "exported $exported files of ${#dirs[@]} samples and Common/ from cuda-samples $commit into $dest: $((kib / 1024)) MiB ($kib KiB); $skipped files left out (see $dest/EXPORT.txt)"
if [ "$kib" -gt $((max_total * 1024)) ]; then
  echo "FAIL: $dest is over $max_total MiB" >&2
  exit 1
fi
