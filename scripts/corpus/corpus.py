"""The differential corpus's judge: compares the runs scripts/corpus/run.sh made of each program
(without the shim, with it in observe and in fix mode), checks the rules cases' expectations,
and writes the results table and summary.

    python3 corpus.py report WORK OUT      # WORK: run.sh's work folder; writes OUT/results.txt,
                                           # OUT/summary.txt, prints the summary; exit 1 when an
                                           # expectation fails
    python3 corpus.py normalize FILE       # a file's lines as the comparison sees them
    python3 corpus.py selftest             # the normalisation and the expectation checks on
                                           # example lines

run.sh leaves, for each run, WORK/runs/GROUP/NAME/MODE/{rc,stdout,stderr,wall,trace/} (MODE:
plain, observe, fix), or a file 'skipped' saying why the run was not made; for each sample build
WORK/build/NAME.rc and NAME.log.
"""

import json
import os
import re
import sys

MODES = ("plain", "observe", "fix")

# stdout normalisation: each rule a (name, pattern, replacement, reason). Applied in order to
# each line of the three runs' stdout before they are compared. A line that a rule in
# VOLATILE_LINES matches has every number in it replaced by N; a line DEVICE_LINES matches keeps
# only its text up to the first ':', '[', '=' or '"' (the device's name and properties follow).
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
RULES = [
    ("address", re.compile(r"0[xX][0-9a-fA-F]{4,}"), "0xADDR",
     "pointers and handles differ from process to process"),
    ("pid", re.compile(r"(?i)\b(pid|process id|process)\s*[:=]?\s*\d+"), r"\1 N",
     "process ids differ from run to run"),
    ("uuid", re.compile(r"(?i)\bGPU-[0-9a-f-]{8,}|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "UUID",
     "device UUIDs name the machine, not the result"),
    ("pci", re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9]\b"), "PCI",
     "PCI bus ids name the machine, not the result"),
    ("trailing space", re.compile(r"\s+$"), "", "trailing blanks carry no result"),
]
VOLATILE_LINES = [
    ("timing", re.compile(r"(?i)\b(time|timing|timer|elapsed|duration|msec|millisec|ms|sec|secs|seconds|usec|us|ns|clock|cycles|latency)\b|\d(ms|s|us)\b"),
     "wall-clock and clock-cycle measurements differ from run to run"),
    ("rate", re.compile(r"(?i)bandwidth|throughput|[GMKT]B/s|[GMT]i?B/sec|\b[GMKT]?flop|flops|[GMT]ops|ops/s|/s\b|per second|speed ?up|rate\b|perf"),
     "bandwidths, rates and speed-ups are measurements"),
    ("host work while waiting", re.compile(r"(?i)iterations while waiting|cpu executed|spin|polls?\b"),
     "how much host work overlapped the GPU depends on timing"),
    ("free memory", re.compile(r"(?i)\bfree\b|available memory|memory (in )?use|used memory"),
     "free and used device memory depend on the other processes on the GPU"),
    ("device properties", re.compile(r"(?i)\bSMs?\b|multiprocessors|clock rate|L2 cache|MapSMtoCores"),
     "device properties describe the machine, not the result"),
]
DEVICE_LINES = re.compile(r"(?i)^\s*(GPU )?Device \d+\s*:|\bdevice name\b|compute capability|driver version|"
                          r"runtime version|CUDA Driver|> Using (CUDA )?Device|GPU Device|\bPCI\b|Bus ID|location ID")
DEVICE_WHY = "device names, versions, properties and bus ids describe the machine, not the result"


def normalize_line(line):
    for _name, pattern, repl, _why in RULES:
        line = pattern.sub(repl, line)
    if DEVICE_LINES.search(line):
        return re.sub(r"[:\[=\"].*$", ": <device>", line)
    for _name, pattern, _why in VOLATILE_LINES:
        if pattern.search(line):
            return NUMBER.sub("N", line)
    return line


# Per-sample rules: lines whose numbers come from a time-seeded or thread-ordered source in the
# sample itself (read in its source) have their numbers replaced by N.
SAMPLE_MASKS = {
    "fp16ScalarProduct": (re.compile(r"^Result "), "its inputs come from rand() seeded with time(NULL)"),
    "UnifiedMemoryStreams": (re.compile(r"^Task \["), "task sizes from rand() seeded with time(NULL), "
                             "handed to whichever OpenMP thread is free"),
    "p2pBandwidthLatencyTest": (re.compile(""), "its matrices of bandwidths and latencies have no label on each line"),
    "cudaGraphsPerfScaling": (re.compile(""), "its CSV rows are times, with no label on each line"),
    "UnifiedMemoryPerf": (re.compile(""), "its tables of times have no label on each line"),
}


def normalize(text, mask=None):
    lines = [normalize_line(line) for line in text.splitlines() if line.strip()]
    if mask is not None:
        lines = [NUMBER.sub("N", line) if mask.search(line) else line for line in lines]
    return lines


def numbers_masked(lines):
    return [NUMBER.sub("N", line) for line in lines]


def compare_stdout(plain, other, mask=None):
    """'same' (equal after normalisation), 'order' (the same lines in another order: threads and
    child processes print in whatever order they run), 'nums' (equal once every number is
    masked), or 'DIFF'; and the first differing pair of normalised lines."""
    a, b = normalize(plain, mask), normalize(other, mask)
    if a == b:
        return "same", None
    if sorted(a) == sorted(b):
        return "order", None
    first = next(((x, y) for x, y in zip(a, b) if x != y), None)
    if first is None:
        first = (a[len(b)] if len(a) > len(b) else "<end>", b[len(a)] if len(b) > len(a) else "<end>")
    if numbers_masked(a) == numbers_masked(b):
        return "nums", first
    return "DIFF", first


def shim_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("seedance:")]


ROUTINE_EVENTS = {"session_start", "exit_summary", "call_failed", "call_failed_repeats"}


def trace_records(trace_dir):
    """(number of trace files, list of (event, kind) of the records that are not routine)."""
    files, notable = 0, []
    if not os.path.isdir(trace_dir):
        return 0, notable
    for name in sorted(os.listdir(trace_dir)):
        if not name.endswith(".jsonl"):
            continue
        files += 1
        with open(os.path.join(trace_dir, name), errors="replace") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                event = rec.get("event", "?")
                if event not in ROUTINE_EVENTS:
                    notable.append((event, rec.get("kind")))
    return files, notable


def read(path, default=""):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return default


class Run:
    def __init__(self, folder):
        self.folder = folder
        self.skipped = read(os.path.join(folder, "skipped")).strip() or None
        rc = read(os.path.join(folder, "rc")).strip()
        self.ran = self.skipped is None and rc != ""
        if not self.ran and self.skipped is None:
            self.skipped = "not run"
        self.rc = int(rc) if rc.lstrip("-").isdigit() else None
        self.stdout = read(os.path.join(folder, "stdout"))
        self.stderr = read(os.path.join(folder, "stderr"))
        self.lines = shim_lines(self.stderr)
        self.traces, self.records = trace_records(os.path.join(folder, "trace"))
        self.timed_out = self.rc in (124, 137)

    def exit_text(self):
        if not self.ran:
            return "-"
        return "T/O" if self.timed_out else str(self.rc)


# Samples that fail on purpose: the same non-zero exit in every mode is their healthy outcome,
# and a shim line explaining the failure is not a defect.
EXPECTED_FAILURE = {
    "simpleAssert": "asserts in a kernel on purpose",
    "simpleAssert_nvrtc": "asserts in a kernel on purpose",
}


def judge_program(name, runs, expected_failure=None):
    """The row of one program, its verdict ('same', 'differs', 'not run', ...), and notes."""
    plain, obs, fix = (runs[m] for m in MODES)
    row = {"name": name, "plain": plain.exit_text(), "observe": obs.exit_text(), "fix": fix.exit_text(),
           "stdout": "-", "lines": f"{len(obs.lines)}/{len(fix.lines)}",
           "records": f"{len(obs.records)}/{len(fix.records)}", "traces": f"{obs.traces}/{fix.traces}"}
    notes = []
    if not plain.ran:
        return row, "not run", [plain.skipped]
    if plain.timed_out:
        return row, "not run", ["without the shim it ran past its timeout (waits for input or runs long)"]
    missing = [m for m in ("observe", "fix") if not runs[m].ran]
    if missing:
        return row, "not run", [f"{m}: {runs[m].skipped}" for m in missing]
    mask = SAMPLE_MASKS.get(name, (None, ""))[0]
    cmp = [compare_stdout(plain.stdout, runs[m].stdout, mask) for m in ("observe", "fix")]
    order = {"same": 0, "order": 1, "nums": 2, "DIFF": 3}
    worst = max(cmp, key=lambda c: order[c[0]])
    row["stdout"] = worst[0]
    exits_same = plain.rc == obs.rc == fix.rc
    verdict = "same"
    if not exits_same:
        verdict = "differs"
        notes.append(f"exit codes {plain.exit_text()}/{obs.exit_text()}/{fix.exit_text()}")
    if worst[0] not in ("same", "order"):
        verdict = "differs"
        notes.append(f"stdout {worst[0]}: plain {worst[1][0]!r} vs {worst[1][1]!r}")
    if plain.rc != 0 and not expected_failure:
        tail = [ln for ln in plain.stderr.splitlines() if ln.strip() and not ln.startswith("seedance:")]
        last = (tail[-1] if tail else plain.stdout.strip().splitlines()[-1:] or ["no output"])
        notes.append(f"fails without the shim (exit {plain.rc}): {str(last if isinstance(last, str) else last[0])[:200]}")
    for mode in ("observe", "fix"):
        if runs[mode].records:
            counts = {}
            for event, kind in runs[mode].records:
                key = event + (f"/{kind}" if kind else "")
                counts[key] = counts.get(key, 0) + 1
            notes.append(f"{mode} trace: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    lines = [("observe", line) for line in obs.lines] + [("fix", line) for line in fix.lines]
    if lines and not expected_failure:
        verdict = "differs" if verdict == "differs" else "shim lines"
    if expected_failure and plain.rc == 0:
        notes.append(f"expected to fail ({expected_failure}) but exited 0 without the shim")
    for mode, line in lines[:6]:
        notes.append(f"{mode}: {line[:300]}")
    if len(lines) > 6:
        notes.append(f"... {len(lines) - 6} more shim lines")
    return row, verdict, notes


# --- rules cases -------------------------------------------------------------------------------

def parse_cases(path):
    """cases.txt: 'program|variant|mode|expectations' lines; expectations separated by ';'."""
    cases = []
    for line in read(path).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        program, variant, mode, expect = (f.strip() for f in line.split("|", 3))
        cases.append((program, variant, mode, [e.strip() for e in expect.split(";") if e.strip()]))
    return cases


def check_expectation(exp, run, plain):
    """None when the expectation holds, else why not. Expectations:
    silent | line=REGEX | noline=REGEX | maxlines=N | trace=KIND | notrace=KIND | exit=N | stdout=plain |
    out=REGEX (stdout matches)."""
    key, _, arg = exp.partition("=")
    kinds = {k for e, k in run.records} | {e for e, k in run.records}
    if key == "silent":
        return None if not run.lines else f"{len(run.lines)} shim lines: {run.lines[0][:200]}"
    if key == "line":
        return None if any(re.search(arg, ln) for ln in run.lines) else f"no shim line matches {arg!r}"
    if key == "noline":
        bad = [ln for ln in run.lines if re.search(arg, ln)]
        return None if not bad else f"a shim line matches {arg!r}: {bad[0][:200]}"
    if key == "maxlines":
        return None if len(run.lines) <= int(arg) else f"{len(run.lines)} shim lines, at most {arg} expected: {run.lines[0][:200]}"
    if key == "trace":
        return None if arg in kinds else f"no trace record of kind {arg} (records: {sorted(kinds) or 'none'})"
    if key == "notrace":
        return None if arg not in kinds else f"a trace record of kind {arg}"
    if key == "exit":
        return None if run.rc == int(arg) else f"exit {run.exit_text()}, expected {arg}"
    if key == "stdout" and arg == "plain":
        verdict, first = compare_stdout(plain.stdout, run.stdout)
        return None if verdict in ("same", "order") else f"stdout {verdict} from the run without the shim: {first}"
    if key == "out":
        return None if re.search(arg, run.stdout) else f"stdout does not match {arg!r}: {run.stdout.strip()[-200:]!r}"
    return f"unknown expectation {exp!r}"


# --- report -------------------------------------------------------------------------------------

def load_runs(work, group, name):
    return {m: Run(os.path.join(work, "runs", group, name, m)) for m in MODES}


def manifest(path):
    rows = []
    for line in read(path).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("|")
        rows.append(f)
    return rows


def fmt_table(rows, cols):
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) if rows else len(c) for c in cols}
    out = ["  ".join(c.ljust(widths[c]) for c in cols)]
    out += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return out


def report(work, out):
    here = os.path.dirname(os.path.abspath(__file__))
    groups = os.environ.get("CORPUS_GROUPS", "samples,frameworks,rules").split(",")
    full, summary, failures = [], [], 0
    cols = ["name", "plain", "observe", "fix", "stdout", "lines", "records", "traces"]
    legend = ("columns: exit without the shim / in observe / in fix (T/O: past the timeout, -: not run); "
              "stdout: same | order (the same lines in another order) | nums (equal once every number "
              "is masked) | DIFF; lines: shim lines "
              "observe/fix; records: trace records other than session_start, exit_summary and "
              "call_failed, observe/fix; traces: trace files observe/fix")

    if "samples" in groups:
        rows, verdicts, details = [], {}, []
        skipped_manifest, build_failed, not_run = [], [], []
        sel = os.environ.get("SAMPLES", "").split()
        built = 0
        for f in manifest(os.path.join(work, "samples.txt")):
            name = f[0]
            if sel and name not in sel:
                continue
            if f[2] == "SKIP":
                skipped_manifest.append(f"{name}: {f[3]}")
                continue
            rc = read(os.path.join(work, "build", name + ".rc")).strip()
            if rc == "" and read(os.path.join(work, "build", name + ".log")).startswith("not started"):
                not_run.append(f"{name}: not built: BUDGET_S was reached before its build started")
                continue
            if rc != "0":
                log = read(os.path.join(work, "build", name + ".log"))
                err = next((ln for ln in log.splitlines() if re.search(r"error|Error|undefined reference|not found", ln)),
                           log.strip().splitlines()[-1] if log.strip() else ("build not started (budget)" if rc == "" else "no log"))
                build_failed.append(f"{name}: {err.strip()[:200]}")
                continue
            built += 1
            runs = load_runs(work, "samples", name)
            row, verdict, notes = judge_program(name, runs, EXPECTED_FAILURE.get(name))
            rows.append(row)
            verdicts[name] = verdict
            if verdict == "not run":
                not_run.append(f"{name}: {notes[0]}")
            elif verdict != "same" or notes:
                details.append((name, verdict, notes))
        ran = sum(1 for v in verdicts.values() if v != "not run")
        unbuilt = len(not_run) - sum(1 for v in verdicts.values() if v == "not run")
        same = sum(1 for v in verdicts.values() if v == "same")
        bad = [n for n, v in verdicts.items() if v not in ("same", "not run")]
        failures += len(bad)
        full += ["== cuda-samples", legend] + fmt_table(rows, cols)
        full += ["", "left out by samples.txt:"] + ["  " + s for s in skipped_manifest]
        full += ["build failed:"] + ["  " + s for s in build_failed]
        full += ["not run:"] + ["  " + s for s in not_run]
        full += ["details:"] + [f"  {n} [{v}]: " + " | ".join(notes) for n, v, notes in details]
        summary.append(f"cuda-samples: {len(rows) + len(build_failed) + unbuilt} selected, {built} built, {ran} run in all three modes, "
                       f"{same} same outcome, {len(bad)} not the same, {len(not_run)} not run, "
                       f"{len(build_failed)} build failed, {len(skipped_manifest)} left out by samples.txt")
        for n, v, notes in details[:10]:
            summary.append(f"  {n} [{v}]: " + " | ".join(notes)[:300])
        if len(details) > 10:
            summary.append(f"  ... {len(details) - 10} more in results.txt")
        for s in build_failed[:6]:
            summary.append(f"  build failed: {s[:160]}")
        if len(build_failed) > 6:
            summary.append(f"  ... {len(build_failed) - 6} more build failures in results.txt")
        for s in not_run[:8]:
            summary.append(f"  not run: {s[:160]}")
        if len(not_run) > 8:
            summary.append(f"  ... {len(not_run) - 8} more not run, in results.txt")

    if "frameworks" in groups:
        rows, lines = [], []
        names = sorted(n[:-3] for n in os.listdir(os.path.join(here, "frameworks")) if n.endswith(".py") and not n.startswith("_"))
        for name in names:
            runs = load_runs(work, "frameworks", name)
            row, verdict, notes = judge_program(name, runs)
            ok = verdict == "same" and runs["plain"].rc == 0
            if not ok:
                failures += 1
            row["verdict"] = "PASS" if ok else ("NOT RUN" if verdict == "not run" else "FAIL")
            rows.append(row)
            lines += [f"  {name}: {n}" for n in notes]
        table = fmt_table(rows, cols + ["verdict"])
        full += ["", "== frameworks (each: exit 0, the same stdout in all three modes, no shim line)"] + table + lines
        summary += ["frameworks:"] + ["  " + t for t in table] + [ln[:250] for ln in lines[:8]]

    if "rules" in groups:
        rows, lines = [], []
        for program, variant, mode, exps in parse_cases(os.path.join(here, "rules", "cases.txt")):
            unit = f"{program}.{variant}"
            plain = Run(os.path.join(work, "runs", "rules", unit, "plain"))
            run = Run(os.path.join(work, "runs", "rules", unit, mode))
            if not run.ran:
                why = [f"not run: {run.skipped}"]
            else:
                why = [w for w in (check_expectation(e, run, plain) for e in exps) if w]
            ok = run.ran and not why
            if not ok:
                failures += 1
            rows.append({"case": f"{unit} {mode}", "plain": plain.exit_text(), "exit": run.exit_text(),
                         "lines": len(run.lines), "expected": "; ".join(exps)[:60], "verdict": "PASS" if ok else "FAIL"})
            lines += [f"  {unit} {mode}: {w}" for w in why]
            lines += [f"  {unit} {mode} says: {ln[:300]}" for ln in run.lines[:2]]
        table = fmt_table(rows, ["case", "plain", "exit", "lines", "expected", "verdict"])
        full += ["", "== rules (cases.txt)"] + table + lines
        summary += ["rules:"] + ["  " + t for t in table] + [ln[:250] for ln in lines[:10]]

    summary.append(f"RESULT: {'PASS' if failures == 0 else 'FAIL'} ({failures} expectations not met)")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.txt"), "w") as fh:
        fh.write("\n".join(full + ["", "== summary"] + summary) + "\n")
    with open(os.path.join(out, "summary.txt"), "w") as fh:
        fh.write("\n".join(summary) + "\n")
    print("\n".join(summary))
    return 0 if failures == 0 else 1


# --- self-test ----------------------------------------------------------------------------------

def selftest():
    same_pairs = [
        ("Processing time: 12.345 (ms)", "Processing time: 13.9 (ms)"),
        ("BlackScholesGPU() time    : 0.081160 msec", "BlackScholesGPU() time    : 0.090001 msec"),
        ("Effective bandwidth: 1234.5 GB/s", "Effective bandwidth: 1200.1 GB/s"),
        ("matrixMul, Performance= 3025.82 GFlop/s, Time= 0.043 msec, Size= 131072000 Ops",
         "matrixMul, Performance= 2999.00 GFlop/s, Time= 0.044 msec, Size= 131072000 Ops"),
        ("CPU executed 53470 iterations while waiting for GPU to finish",
         "CPU executed 1201 iterations while waiting for GPU to finish"),
        ("GPU Device 0: \"Hopper\" with compute capability 9.0", "GPU Device 0: \"Hopper\" with compute capability 9.0"),
        ("> Using CUDA Device [0]: NVIDIA H100 80GB HBM3", "> Using CUDA Device [0]: NVIDIA H200"),
        ("  Device PCI Domain ID / Bus ID / location ID:   0 / 24 / 0", "  Device PCI Domain ID / Bus ID / location ID:   0 / 25 / 0"),
        ("d_A = 0x7f12a4000000", "d_A = 0x7f0088000000"),
        ("Process 12345: done", "Process 777: done"),
        ("Total free memory 80123 MB", "Total free memory 79000 MB"),
        ("result = PASS   ", "result = PASS"),
        ("Throughput = 12.5 GB/s, Time = 0.1 s, Size = 1 elements", "Throughput = 11.5 GB/s, Time = 0.2 s, Size = 1 elements"),
        ("GPU-3b5c1d2e-0f4a-9b8c-7d6e-5f4a3b2c1d0e", "GPU-aaaaaaaa-0f4a-9b8c-7d6e-5f4a3b2c1d0e"),
    ]
    differ_pairs = [
        ("Result = PASS", "Result = FAIL"),
        ("sum=1099511627776", "sum=1099511627775"),
        ("GPU sum : 12345.5", "GPU sum : 12345.7"),
        ("L1 norm: 1.2e-07", "L1 norm: 3.4e-02"),
        ("Checking computed result for correctness: Result = PASS", "Checking computed result for correctness: Result = FAIL"),
    ]
    fails = 0
    for a, b in same_pairs:
        if compare_stdout(a, b)[0] != "same":
            print(f"FAIL: expected equal: {a!r} / {b!r} -> {normalize_line(a)!r} / {normalize_line(b)!r}")
            fails += 1
    for a, b in differ_pairs:
        if compare_stdout(a, b)[0] == "same":
            print(f"FAIL: expected different: {a!r} / {b!r}")
            fails += 1
    if (compare_stdout("sum=1\n", "sum=2\n")[0] != "nums" or compare_stdout("a\n", "a\nb\n")[0] != "DIFF"
            or compare_stdout("a\nb\n", "b\na\n")[0] != "order"
            or compare_stdout("Result x: 1.5\n", "Result x: 2.5\n", SAMPLE_MASKS["fp16ScalarProduct"][0])[0] != "same"):
        print("FAIL: nums / DIFF classes")
        fails += 1
    if shim_lines("x\nseedance: hello\n  seedance: no\n") != ["seedance: hello"]:
        print("FAIL: shim_lines")
        fails += 1

    class FakeRun:
        def __init__(self, rc, stdout, lines, records):
            self.rc, self.stdout, self.lines, self.records, self.ran = rc, stdout, lines, records, True

        def exit_text(self):
            return str(self.rc)

    plain = FakeRun(0, "d1 intact\n", [], [])
    racy = FakeRun(0, "d1 intact\n", ["seedance: cuMemcpyDtoHAsync_v2 on stream 0x1 writes host bytes"],
                   [("host_hazard", "pinned_copy_race")])
    checks = [
        ("silent", plain, True), ("silent", racy, False),
        ("line=", racy, True), ("line=", plain, False), ("line=writes host", racy, True),
        ("noline=(?i)corrupt", racy, True), ("noline=writes", racy, False),
        ("trace=pinned_copy_race", racy, True), ("trace=pinned_copy_race", plain, False),
        ("trace=host_hazard", racy, True), ("notrace=stray_context", racy, True),
        ("maxlines=1", racy, True), ("maxlines=0", racy, False), ("exit=0", racy, True), ("exit=1", racy, False), ("stdout=plain", racy, True),
        ("out=d1 intact", racy, True), ("out=corrupted", racy, False), ("bogus", racy, False),
    ]
    for exp, run, want in checks:
        got = check_expectation(exp, run, plain) is None
        if got != want:
            print(f"FAIL: expectation {exp!r} gave {got}, expected {want}")
            fails += 1
    print(f"normalisation rules (each replaces what it matches):")
    for name, _p, repl, why in RULES:
        print(f"  {name} -> {repl!r}: {why}")
    print("lines whose numbers are all replaced by N:")
    for name, _p, why in VOLATILE_LINES:
        print(f"  {name}: {why}")
    print(f"lines that describe the device (cut at the first ':', '[', '=' or '\"'): {DEVICE_WHY}")
    print("line order: the same lines in another order count as the same (threads and child processes)")
    for name, (_p, why) in SAMPLE_MASKS.items():
        print(f"  {name}: numbers of {'every line' if not _p.pattern else 'lines matching ' + repr(_p.pattern)} replaced: {why}")
    total = len(same_pairs) + len(differ_pairs) + 2 + len(checks)
    print(f"selftest: {total - fails} of {total} checks passed")
    return 1 if fails else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) == 3 and argv[1] == "normalize":
        print("\n".join(normalize(read(argv[2]))))
        return 0
    if len(argv) == 4 and argv[1] == "report":
        return report(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
