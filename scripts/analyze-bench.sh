#!/usr/bin/env bash
# Throughput of `seedance-analyze summary --format json` against an equivalent jq pipeline.
#
# Generates a synthetic trace set with seedance-tracegen (SIZE_MB in total, FILES files, one
# process each), warms the page cache, then times:
#   1. seedance-analyze summary --format json DIR          (all cores, one task per file,
#      then again on one thread)
#   2. jq -n 'reduce inputs ...' FILES...                   (one core: the same totals --
#      calls and errors per function from exit summaries, call_failed records by
#      function and result, unknown event kinds)
# and prints MB/s of each and the ratio. Both answers are checked to agree on the totals.
#
# Usage: scripts/analyze-bench.sh [SIZE_MB] [FILES]     (default 1024 MB in 16 files)
# Needs jq (Debian: apt-get install -y jq).
set -euo pipefail
cd "$(dirname "$0")/.."

MB=${1:-1024}
FILES=${2:-16}

if ! command -v jq >/dev/null; then
  echo "jq is missing: apt-get install -y jq" >&2
  exit 1
fi

cargo build --release -q -p seedance-analyze --bins
BIN=target/release

WORK=$(mktemp -d "${TMPDIR:-/tmp}/analyze-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"$BIN/seedance-tracegen" --out "$WORK/traces" --mb "$MB" --files "$FILES"
BYTES=$(cat "$WORK"/traces/* | wc -c)
cat "$WORK"/traces/* >/dev/null # page cache

now() { date +%s.%N; }

t0=$(now)
"$BIN/seedance-analyze" summary --format json "$WORK/traces" >"$WORK/report.json"
t1=$(now)
RAYON_NUM_THREADS=1 "$BIN/seedance-analyze" summary --format json "$WORK/traces" >"$WORK/report1.json"
t1b=$(now)

# shellcheck disable=SC2016
JQ_PROG='
reduce inputs as $r ({calls: 0, errors: 0, fn: {}, failed: {}, kinds: {}, processes: 0};
  if $r.event == "exit_summary" then
    reduce ($r.functions | to_entries[]) as $e (.;
      .calls += $e.value.calls | .errors += $e.value.errors
      | .fn[$e.key].calls += $e.value.calls | .fn[$e.key].errors += $e.value.errors)
  elif $r.event == "call_failed" then
    .failed[$r.function + " " + ($r.result_name // ($r.result | tostring))] += 1
  elif $r.event == "session_start" then .processes += 1
  else .kinds[$r.event] += 1
  end)'
t2=$(now)
jq -n -c "$JQ_PROG" "$WORK"/traces/* >"$WORK/jq.json"
t3=$(now)

ours_calls=$(jq '.overview.calls' "$WORK/report.json")
jq_calls=$(jq '.calls' "$WORK/jq.json")
ours_procs=$(jq '.overview.processes' "$WORK/report.json")
jq_procs=$(jq '.processes' "$WORK/jq.json")
if [ "$ours_calls" != "$jq_calls" ] || [ "$ours_procs" != "$jq_procs" ]; then
  echo "MISMATCH: seedance-analyze calls=$ours_calls processes=$ours_procs, jq calls=$jq_calls processes=$jq_procs" >&2
  exit 1
fi

awk -v b="$BYTES" -v a0="$t0" -v a1="$t1" -v s1="$t1b" -v j0="$t2" -v j1="$t3" -v cores="$(nproc)" -v files="$FILES" 'BEGIN {
  ta = a1 - a0; tj = j1 - j0; mb = b / 1e6;
  printf "input: %.0f MB (%d bytes) in %d files, %d cores\n", mb, b, files, cores;
  printf "seedance-analyze summary --format json: %.2f s, %.0f MB/s\n", ta, mb / ta;
  printf "  same, one thread (RAYON_NUM_THREADS=1): %.2f s, %.0f MB/s\n", s1 - a1, mb / (s1 - a1);
  printf "jq -n reduce inputs:                    %.2f s, %.0f MB/s\n", tj, mb / tj;
  printf "ratio: seedance-analyze is %.1fx faster than jq\n", tj / ta;
}'
echo "totals agree: $ours_calls calls, $ours_procs processes"
