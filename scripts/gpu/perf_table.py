#!/usr/bin/env python3
"""The table of scripts/bench/gpu-threads-perf.sh: hardware events the shim's wrappers add per
operation, from threads_bench.c's PERF=1 lines prefixed with their round and mode:

    round R mode M perf NAME threads T event E linked L direct D added A

One row per operation, thread count, mode and event: the medians over processes of the
linked and direct counts per operation, and of what the wrappers add (with its range).

    perf_table.py RAW          print the table (or one line when RAW has no events)
    perf_table.py --selftest   check the table of synthetic lines
"""
import statistics
import sys
from collections import defaultdict


def table(lines):
    cells = defaultdict(list)
    for line in lines:
        f = line.split()
        if len(f) < 16 or f[4] != "perf":
            continue
        mode, op, threads, event = f[3], f[5], int(f[7]), f[9]
        cells[(op, threads, mode, event)].append((float(f[11]), float(f[13]), float(f[15])))
    if not cells:
        return ["no hardware events were counted on this machine (perf_event_open refused)"]
    out = [
        "| operation | threads | mode | event | linked / op | direct / op | "
        "added / op (median, min-max over processes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (op, threads, mode, event), v in sorted(cells.items()):
        lk = statistics.median(x[0] for x in v)
        dr = statistics.median(x[1] for x in v)
        ad = [x[2] for x in v]
        out.append(
            f"| {op} | {threads} | {mode} | {event} | {lk:.1f} | {dr:.1f} | "
            f"{statistics.median(ad):+.1f} ({min(ad):+.1f} to {max(ad):+.1f}), n={len(v)} |"
        )
    return out


def selftest():
    raw = [
        "round 1 mode observe perf launch threads 1 event cycles linked 100.0 direct 80.0 added 20.0",
        "round 2 mode observe perf launch threads 1 event cycles linked 110.0 direct 80.0 added 30.0",
        "round 3 mode observe perf launch threads 1 event cycles linked 90.0 direct 80.0 added 10.0",
        "round 1 mode off perf launch threads 1 event cycles linked 81.0 direct 80.0 added 1.0",
        "a line of something else",
    ]
    got = table(raw)
    want = [
        "| launch | 1 | observe | cycles | 100.0 | 80.0 | +20.0 (+10.0 to +30.0), n=3 |",
        "| launch | 1 | off | cycles | 81.0 | 80.0 | +1.0 (+1.0 to +1.0), n=1 |",
    ]
    assert sorted(got[2:]) == sorted(want), got
    assert table(["PERF: cycles not counted here"])[0].startswith("no hardware events"), table([])
    print("perf_table selftest: ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
    elif len(sys.argv) == 2:
        print("\n".join(table(open(sys.argv[1]))))
    else:
        sys.exit(__doc__)
