#!/usr/bin/env bash
# Memory errors with the shim preloaded, under valgrind memcheck.
#
#   scripts/ci/memcheck.sh                  the end-to-end memcheck test: every test program on
#                                        the fake driver, natively and under memcheck
#                                        (tests/e2e/memcheck.rs)
#   scripts/ci/memcheck.sh CMD [ARGS...]    CMD under memcheck with the shim preloaded, e.g. a
#                                        program on a real GPU; the same options and
#                                        suppressions as the test
#
# For CMD the reports (vg.<pid>.xml, vg.<pid>.log) go to $MEMCHECK_OUT (default
# target/memcheck/<date>). Verdict: every error whose own stack has a frame in
# libseedance_fix.so counts against the shim; others (e.g. the real libcuda's ioctl buffers,
# which memcheck cannot see being filled) are listed by kind but do not fail the run.
# SEEDANCE_SHIM overrides the library (default: a debug build, for file:line in stacks).
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v valgrind >/dev/null || { echo "memcheck: valgrind not found (apt-get install valgrind)"; exit 2; }
if [ $# -eq 0 ]; then
  exec cargo test -p seedance-e2e --test e2e memcheck -- --nocapture
fi

if [ -z "${SEEDANCE_SHIM:-}" ]; then
  cargo build -q -p seedance-shim
  SEEDANCE_SHIM=$PWD/target/debug/libseedance_fix.so
fi
out=${MEMCHECK_OUT:-target/memcheck/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

set +e
LD_PRELOAD=$SEEDANCE_SHIM${LD_PRELOAD:+:$LD_PRELOAD} valgrind --tool=memcheck \
  --xml=yes --xml-file="$out/vg.%p.xml" --log-file="$out/vg.%p.log" \
  --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --keep-debuginfo=yes --num-callers=30 \
  --suppressions="$PWD/tests/valgrind/memcheck.supp" "$@"
rc=$?
set -e

# One line per error: kind, and whether its own (first) stack has a frame in the shim.
summary=$(cat "$out"/vg.*.xml | awk '
  /<error>/ { inerr = 1; kind = ""; stack = 0; shim = 0; next }
  inerr && /<kind>/ { gsub(/.*<kind>|<\/kind>.*/, ""); kind = $0 }
  inerr && /<stack>/ { stack++ }
  inerr && stack == 1 && /<obj>.*libseedance_fix\.so<\/obj>/ { shim = 1 }
  /<\/error>/ { inerr = 0; print kind, (shim ? "shim" : "other") }')
total=$(printf '%s' "$summary" | grep -c . || true)
shim=$(printf '%s\n' "$summary" | grep -c ' shim$' || true)
echo "memcheck: exit status $rc; $total errors, $shim with the shim in the stack; reports in $out" >&2
if [ "$total" -gt 0 ]; then
  printf '%s\n' "$summary" | sort | uniq -c | sed 's/^/memcheck:   /' >&2
fi
if [ "$shim" -gt 0 ]; then
  echo "memcheck: FAIL: errors attributed to the shim (see $out/vg.*.log)" >&2
  exit 1
fi
echo "memcheck: PASS: no memory error attributed to the shim" >&2
