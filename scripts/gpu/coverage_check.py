#!/usr/bin/env python3
"""Refreshes docs/model-coverage.md's view from real runs: reads every trace under the given
directories, collects the exit summaries' untouched_entry_points (the driver entry points
cuGetProcAddress handed out that no hook wraps) and looks each one up in the table.

    python3 scripts/gpu/coverage_check.py docs/model-coverage.md TRACE_DIR...

Prints, per model column (no, gap, hooked) and for names the table does not list, the names
seen and in how many processes. A `hooked` name handed out untouched (an ABI variant the
shim lacks) or a name the table does not list (the runtime asked for something the measured
list lacks) is a finding: exit status 1. `no` and `gap` names are what the table says."""
import json
import pathlib
import re
import sys
from collections import Counter

table = {}
for line in pathlib.Path(sys.argv[1]).read_text().splitlines():
    m = re.match(r"\| `(cu\w+)` \| (\w+) \|", line)
    if m:
        table[m.group(1)] = m.group(2)
seen = Counter()
procs = 0
for d in sys.argv[2:]:
    for f in pathlib.Path(d).rglob("*.jsonl"):
        for line in f.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("event") == "exit_summary":
                procs += 1
                seen.update(set(r.get("untouched_entry_points") or []))
groups = {}
for name, n in sorted(seen.items()):
    groups.setdefault(table.get(name, "unlisted"), []).append(f"{name} ({n})")
print(f"processes: {procs}; distinct untouched entry points: {len(seen)}")
for kind in ["no", "gap", "hooked", "unlisted"]:
    names = groups.get(kind, [])
    print(f"{kind}: {len(names)}" + (": " + ", ".join(names) if names and kind != "no" else ""))
sys.exit(1 if groups.get("hooked") or groups.get("unlisted") else 0)
