"""The shim's traces as the GPU scripts' checks read them (gpu/contexts.sh, gpu/lifetime.sh:
their Python runs with scripts/gpu on PYTHONPATH)."""
import json
import pathlib


def records(directory):
    """Every record of every trace (`*.jsonl`) in `directory`, file by file, in line order;
    a line that is not JSON (a record cut short by a kill) is skipped."""
    recs = []
    for f in pathlib.Path(directory).glob("*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    return recs
