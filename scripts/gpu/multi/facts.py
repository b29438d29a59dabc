#!/usr/bin/env python3
"""The facts scripts/gpu/multi.sh checks in a trace directory, one line each, for grep
(record and field names from docs/trace-schema.md):

    python3 facts.py TRACEDIR

  proc pid=P summary=yes|no use=D:worked|idle,... stray=D,...|- repairs=KIND:N,...|-
       one per process (pid of the records' envelope): whether it has an exit_summary, its
       device_use (worked or not per device), the devices of its stray_contexts, its repairs
  stray pid=P device=D decided=X redirected_to=T function=F context_bytes=B
       one per stray_context record ("-" for null)
  alloc_fault pid=P function=F check=C device=D holders=PID:BYTES:this|other,...|- room=ORD:BYTES,...|-
       one per alloc_fault record (processes_on_device, other_devices_with_room)
  host_hazard pid=P kind=K function=F repaired=true|false
  device_fault pid=P function=F
  device_fallback pid=P function=F
Needs only the standard library (uses scripts/gpu/traces.py).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from traces import records  # noqa: E402


def dash(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    recs = records(sys.argv[1])
    procs = {}
    for r in recs:
        pid = r.get("pid")
        p = procs.setdefault(pid, {"summary": None})
        ev = r.get("event")
        if ev == "exit_summary":
            p["summary"] = r
        elif ev == "stray_context":
            print(f"stray pid={pid} device={dash(r.get('device'))} decided={dash(r.get('decided'))} "
                  f"redirected_to={dash(r.get('redirected_to'))} function={dash(r.get('function'))} "
                  f"context_bytes={dash(r.get('context_bytes'))}")
        elif ev == "alloc_fault":
            hs = r.get("processes_on_device")
            holders = "-" if not hs else ",".join(
                f"{h.get('pid')}:{dash(h.get('used_bytes'))}:{'this' if h.get('this_process') else 'other'}"
                for h in hs)
            rm = r.get("other_devices_with_room")
            room = "-" if not rm else ",".join(f"{x.get('ordinal')}:{x.get('free_bytes')}" for x in rm)
            print(f"alloc_fault pid={pid} function={dash(r.get('function'))} check={dash(r.get('check'))} "
                  f"device={dash(r.get('device'))} holders={holders} room={room}")
        elif ev == "host_hazard":
            print(f"host_hazard pid={pid} kind={dash(r.get('kind'))} function={dash(r.get('function'))} "
                  f"repaired={dash(r.get('repaired'))}")
        elif ev in ("device_fault", "device_fallback"):
            print(f"{ev} pid={pid} function={dash(r.get('function'))}")
    for pid, p in sorted(procs.items(), key=lambda kv: str(kv[0])):
        s = p["summary"]
        if s is None:
            print(f"proc pid={pid} summary=no use=- stray=- repairs=-")
            continue
        use = ",".join(f"{u.get('device')}:{'worked' if u.get('worked') else 'idle'}"
                       for u in s.get("device_use") or []) or "-"
        stray = ",".join(str(x.get("device")) for x in s.get("stray_contexts") or []) or "-"
        reps = ",".join(f"{k}:{v}" for k, v in sorted((s.get("repairs") or {}).items())) or "-"
        print(f"proc pid={pid} summary=yes use={use} stray={stray} repairs={reps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
