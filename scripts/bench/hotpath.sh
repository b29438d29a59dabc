#!/usr/bin/env bash
# Hot-path benchmark of the shim against the null driver, in every mode, on 1, 4 and 16
# threads (criterion, shim/benches/hot_path.rs). Prints per-call CPU time without and with the
# shim, the shim's added nanoseconds and the ratio. Usage: scripts/bench/hotpath.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p seedance-shim
for mode in off observe fix; do
  SEEDANCE_MODE=$mode cargo bench --quiet -p seedance-shim --bench hot_path >/dev/null 2>&1
done
python3 - <<'PY'
import json, pathlib
root = pathlib.Path("target/criterion")
def median(group, t):
    p = root / group / str(t) / "new" / "estimates.json"
    return json.loads(p.read_text())["median"]["point_estimate"]
print(f"{'call':<11} {'mode':<8} {'threads':>7} {'baseline ns':>12} {'shim ns':>9} {'added ns':>9} {'ratio':>6}")
for call in ["launch", "alloc_free"]:
    for mode in ["off", "observe", "fix"]:
        for t in [1, 4, 16]:
            b = median(f"{call}_baseline", t)
            s = median(f"{call}_shim-{mode}", t)
            print(f"{call:<11} {mode:<8} {t:>7} {b:>12.2f} {s:>9.2f} {s - b:>9.2f} {s / b:>6.2f}")
PY
