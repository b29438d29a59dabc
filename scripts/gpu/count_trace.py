"""Prints 'launches allocs calls errors' summed from the exit_summary of every trace file in a
directory (launches: cuLaunchKernel*, allocs: cuMemAlloc* and cuMemCreate), or 'none' without a summary."""
import json
import pathlib
import sys

launches = allocs = calls = errors = summaries = 0
functions = {}
for path in pathlib.Path(sys.argv[1]).glob("*.jsonl"):
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("event") != "exit_summary":
            continue
        summaries += 1
        for name, st in rec["functions"].items():
            functions[name] = functions.get(name, 0) + st["calls"]
            calls += st["calls"]
            errors += st["errors"]
            if name.startswith("cuLaunchKernel"):
                launches += st["calls"]
            if name.startswith("cuMemAlloc") or name == "cuMemCreate":
                allocs += st["calls"]
        if rec.get("procaddr_unmatched"):
            print("unmatched:", ",".join(rec["procaddr_unmatched"]), file=sys.stderr)
if summaries == 0:
    print("none")
else:
    print(launches, allocs, calls, errors)
    if len(sys.argv) > 2:
        print(json.dumps(functions, sort_keys=True), file=open(sys.argv[2], "w"))
