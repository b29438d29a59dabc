#!/usr/bin/env bash
# Checks that traces shipped through a log pipeline and exported back to files still read
# in seedance-analyze, with the same results as the original files.
#
#   bash scripts/ci/check-logging-export.sh [TRACE_FILE_OR_DIR ...]
#
# Default input: the fleet fixtures of crates/seedance-analyze/tests/fixtures. The export
# is simulated the way examples/logging/vector.toml does it (no Vector needed):
#   - each file is read as a log agent reads it: only newline-terminated lines; a line
#     that is not a JSON object with "event" and "v" is dropped (the remap program aborts);
#   - each record becomes what Vector's file sink writes with encoding.codec = "json": the
#     original object merged with added top-level fields (host, file, timestamp,
#     k8s_namespace, k8s_pod), keys sorted as Vector's JSON encoder writes them, integers
#     above 2^63-1 turned into floats (VRL integers are 64-bit signed);
#   - one gzip file per trace, <export>/<node>/<namespace>_<pod>/<trace>.jsonl.gz, written
#     as two gzip members (the sink closes an idle file and appends to it later).
# Then `seedance-analyze summary --format json` runs on the originals and on the export,
# and the reports must agree on everything but file names and the counts of the dropped
# lines. SEEDANCE_ANALYZE overrides the analyzer binary (default target/release/...).
set -euo pipefail
cd "$(dirname "$0")/../.."

analyzer=${SEEDANCE_ANALYZE:-target/release/seedance-analyze}
if [[ ! -x $analyzer ]]; then
  cargo build --release --quiet -p seedance-analyze
fi
if (($# == 0)); then
  set -- crates/seedance-analyze/tests/fixtures/fleet crates/seedance-analyze/tests/fixtures/after
fi
command -v python3 >/dev/null || { echo "check-logging-export: needs python3" >&2; exit 2; }

work=$(mktemp -d)
trap '[[ -n ${KEEP_WORK:-} ]] || rm -rf "$work"' EXIT
export_dir=$work/export

echo "== simulating the Vector export of: $*"
python3 - "$export_dir" "$@" <<'PY'
import datetime, gzip, json, os, sys

export_dir, inputs = sys.argv[1], sys.argv[2:]
I64_MAX = (1 << 63) - 1
node = "node-1"
now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")

def vrl_numbers(v):
    """VRL integers are i64: parse_json turns larger integers into floats."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v > I64_MAX:
        return float(v)
    if isinstance(v, dict):
        return {k: vrl_numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [vrl_numbers(x) for x in v]
    return v

def trace_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith(".jsonl"):
                        yield os.path.join(root, n)
        else:
            yield p

files = kept = dropped = 0
for path in trace_files(inputs):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    complete = lines[:-1]          # a last line without "\n" is never emitted by the agent
    dropped += 1 if lines[-1].strip() else 0
    name = os.path.basename(path)
    pod = os.path.basename(os.path.dirname(os.path.abspath(path))) or "pod"
    ns = "default"
    agent_path = f"/var/log/seedance/{ns}_{pod}/{name}"
    out = []
    for raw in complete:
        try:
            record = json.loads(raw)
        except ValueError:
            dropped += 1 if raw.strip() else 0
            continue
        if not isinstance(record, dict) or record.get("event") is None or record.get("v") is None:
            dropped += 1
            continue
        meta = {"host": node, "file": agent_path, "timestamp": now,
                "k8s_namespace": ns, "k8s_pod": pod}
        meta.update(vrl_numbers(record))          # merge(meta, record): the record wins
        out.append(json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n")
    if not out:
        continue                                    # nothing shipped, no output file
    dest = os.path.join(export_dir, node, f"{ns}_{pod}", name + ".gz")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    half = len(out) // 2
    with open(dest, "wb") as f:                     # two gzip members in one file
        for part in (out[:half], out[half:]):
            if part:
                f.write(gzip.compress("".join(part).encode()))
    files += 1
    kept += len(out)
print(f"exported {kept} records in {files} gzip files; dropped {dropped} lines that were not records")
PY

echo "== seedance-analyze summary on the export"
"$analyzer" summary "$export_dir"
"$analyzer" summary --format json -o "$work/original.json" "$@"
"$analyzer" summary --format json -o "$work/exported.json" "$export_dir"

echo "== comparing the JSON reports (originals vs export)"
python3 - "$work/original.json" "$work/exported.json" <<'PY'
import json, re, sys

orig, exp = (json.load(open(p)) for p in sys.argv[1:3])

FILE_IN_TEXT = re.compile(r"\(([^()]*/)?([^()/]+?\.jsonl)(\.gz)?\)")

def strip_files(v):
    """Drops what names files and ranks (which shift when a problem is left out): both
    differ by construction. File paths inside texts are reduced to the trace's name."""
    if isinstance(v, dict):
        return {k: strip_files(x) for k, x in v.items()
                if k not in ("file", "files", "path", "paths", "rank")}
    if isinstance(v, list):
        return [strip_files(x) for x in v]
    if isinstance(v, str):
        return FILE_IN_TEXT.sub(r"(\2)", v)
    return v

I64_MAX = (1 << 63) - 1
widened = 0

def as_vrl(v):
    """The original's integers above 2^63-1 as the pipeline carries them: floats."""
    global widened
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v > I64_MAX:
        widened += 1
        return float(v)
    if isinstance(v, dict):
        return {k: as_vrl(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_vrl(x) for x in v]
    return v

def key(p):
    return (str(p.get("hostname")), p.get("pid", 0), p.get("start_ts_ns") or 0)

failures = []
i, e = orig["input"], exp["input"]
for k in ("files_read", "records", "records_by_kind", "unknown_event_kinds", "newer_schema_records"):
    if i.get(k) != e.get(k):
        failures.append(f"input.{k}: {i.get(k)!r} != {e.get(k)!r}")
if e.get("gzip_files") != e.get("files_read"):
    failures.append(f"input.gzip_files {e.get('gzip_files')} != files_read {e.get('files_read')}")
for k in ("malformed_lines", "oversized_lines", "files_skipped", "unreadable_files"):
    if e.get(k):
        failures.append(f"export: input.{k} = {e.get(k)} (expected 0)")
for k in orig:
    if k in ("input", "report_version"):
        continue
    a, b = as_vrl(strip_files(orig[k])), strip_files(exp.get(k))
    if k == "problems":
        # The pipeline drops the lines that are not records, so the original's report of
        # them has no counterpart in the export.
        a = [p for p in a if p.get("kind") != "malformed_input"]
    if k == "processes":
        a, b = sorted(a, key=key), sorted(b, key=key)
    if a != b:
        failures.append(f"{k} differs:\n  original: {json.dumps(a)[:600]}\n  exported: {json.dumps(b)[:600]}")
print(f"original: {i['files_read']} trace files, {i['records']} records, "
      f"{i['malformed_lines']} malformed and {i['truncated_lines']} truncated lines")
print(f"exported: {e['files_read']} gzip files, {e['records']} records, "
      f"{len(exp.get('processes', []))} processes")
if widened:
    print(f"note: {widened} integer(s) above 2^63-1 in the report (call arguments) came back as "
          "floats, as VRL carries them: the value is rounded to 53 bits")
if failures:
    print("FAIL")
    for f in failures:
        print(" -", f)
    sys.exit(1)
print("OK: the exported traces give the same report (processes, problems, hosts, devices, functions, timeline)")
PY
