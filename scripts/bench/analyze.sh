#!/usr/bin/env bash
# Throughput of `seedance-analyze summary --format json` against an equivalent jq pipeline.
#
# Generates a synthetic trace set with seedance-tracegen (SIZE_MB in total, FILES files, one
# process each), warms the page cache, then times, interleaved, RUNS times each:
#   1. seedance-analyze summary --format json DIR   on all cores (one task per file)
#   2. the same with RAYON_NUM_THREADS=1            one thread: the per-core figure
# and once (JQ_RUNS times):
#   3. jq -n 'reduce inputs ...' FILES...           one core: the same totals -- calls and
#      errors per function from exit summaries, call_failed records by function and result,
#      processes, unknown event kinds
# It prints the median wall time and MB/s of each, the median CPU time (user + sys) of the
# analyzer runs, and the ratios to jq. Both answers are checked to agree on the totals, and
# the one-thread report to equal the all-thread one. MB are 10^6 bytes of input.
#
# Usage: scripts/bench/analyze.sh [SIZE_MB] [FILES]     (default 1024 MB in 16 files)
# Environment: RUNS (default 5), JQ_RUNS (default 1), KEEP=DIR (generate into DIR and keep
# it; an existing DIR is reused as it is), ANALYZE=BINARY (time this seedance-analyze, e.g.
# an older build, instead of the tree's).
# Needs jq (Debian: apt-get install -y jq).
set -euo pipefail
cd "$(dirname "$0")/../.."

MB=${1:-1024}
FILES=${2:-16}
RUNS=${RUNS:-5}
JQ_RUNS=${JQ_RUNS:-1}

if ! command -v jq >/dev/null; then
  echo "jq is missing: apt-get install -y jq" >&2
  exit 1
fi

cargo build --release -q -p seedance-analyze --bins
BIN=target/release
ANALYZE=${ANALYZE:-$BIN/seedance-analyze}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/analyze-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
TRACES=${KEEP:-$WORK/traces}
if [ -z "${KEEP:-}" ] || [ ! -d "$TRACES" ]; then
  "$BIN/seedance-tracegen" --out "$TRACES" --mb "$MB" --files "$FILES"
fi
BYTES=$(cat "$TRACES"/* | wc -c)
cat "$TRACES"/* >/dev/null # page cache

# Runs a command with its output to $STDOUT (default /dev/null); appends "wall user sys"
# (seconds) to the file $1.
timed() {
  local out=$1
  shift
  local TIMEFORMAT='%R %U %S'
  { time "$@" >"${STDOUT:-/dev/null}"; } 2>>"$out"
}

"$ANALYZE" summary --format json "$TRACES" >"$WORK/report.json"
RAYON_NUM_THREADS=1 "$ANALYZE" summary --format json "$TRACES" >"$WORK/report1.json"
if ! cmp -s "$WORK/report.json" "$WORK/report1.json"; then
  echo "MISMATCH: the one-thread report differs from the all-thread one" >&2
  exit 1
fi

for _ in $(seq "$RUNS"); do
  timed "$WORK/all.times" "$ANALYZE" summary --format json "$TRACES"
  timed "$WORK/one.times" env RAYON_NUM_THREADS=1 "$ANALYZE" summary --format json "$TRACES"
done

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
for _ in $(seq "$JQ_RUNS"); do
  STDOUT=$WORK/jq.json timed "$WORK/jq.times" jq -n -c "$JQ_PROG" "$TRACES"/*
done

ours_calls=$(jq '.overview.calls' "$WORK/report.json")
jq_calls=$(jq '.calls' "$WORK/jq.json")
ours_procs=$(jq '.overview.processes' "$WORK/report.json")
jq_procs=$(jq '.processes' "$WORK/jq.json")
if [ "$ours_calls" != "$jq_calls" ] || [ "$ours_procs" != "$jq_procs" ]; then
  echo "MISMATCH: seedance-analyze calls=$ours_calls processes=$ours_procs, jq calls=$jq_calls processes=$jq_procs" >&2
  exit 1
fi

# Median of column $2 (1 wall, 2 user, 3 sys, 4 user+sys) of file $1.
median() {
  awk -v c="$2" '{ print (c == 4 ? $2 + $3 : $c) }' "$1" | sort -g |
    awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}

all_wall=$(median "$WORK/all.times" 1)
all_cpu=$(median "$WORK/all.times" 4)
one_wall=$(median "$WORK/one.times" 1)
one_cpu=$(median "$WORK/one.times" 4)
jq_wall=$(median "$WORK/jq.times" 1)
one_range=$(awk '{ print $1 }' "$WORK/one.times" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo " to " hi }')

awk -v b="$BYTES" -v files="$FILES" -v cores="$(nproc)" -v runs="$RUNS" -v jqruns="$JQ_RUNS" \
  -v aw="$all_wall" -v ac="$all_cpu" -v ow="$one_wall" -v oc="$one_cpu" -v jw="$jq_wall" \
  -v range="$one_range" 'BEGIN {
  mb = b / 1e6;
  printf "input: %.0f MB (%d bytes) in %d files, %d cores; medians of %d runs (jq: %d)\n", mb, b, files, cores, runs, jqruns;
  printf "seedance-analyze, all threads:          %6.2f s wall, %5.0f MB/s (CPU %.2f s)\n", aw, mb / aw, ac;
  printf "seedance-analyze, one thread:           %6.2f s wall, %5.0f MB/s per core (wall %s s)\n", ow, mb / ow, range;
  printf "  same, CPU time (user+sys):            %6.2f s,      %5.0f MB/s of CPU\n", oc, mb / oc;
  printf "jq -n reduce inputs (one thread):       %6.2f s wall, %5.0f MB/s\n", jw, mb / jw;
  printf "ratio to jq: %.1fx (all threads), %.1fx (one thread)\n", jw / aw, jw / ow;
}'
echo "totals agree: $ours_calls calls, $ours_procs processes; one-thread report identical ($ANALYZE)"
