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
    ("shared-memory name", re.compile(r"(\blshmName = [A-Za-z_]*?)\d+\b"), r"\1PID",
     "the IPC samples name their shared memory after a process id (simpleIPC.cu, "
     "streamOrderedAllocationIPC.cu, memMapIpc.cpp: getppid() or getpid() appended to the name; "
     "H100, driver 580.159: 'simpleIPCshm10837' without the shim, 'simpleIPCshm11075' in fix)"),
    ("trailing space", re.compile(r"\s+$"), "", "trailing blanks carry no result"),
]
VOLATILE_LINES = [
    ("timing", re.compile(r"(?i)\b(time|timing|timer|elapsed|duration|msec|millisec|ms|sec|secs|seconds|usec|us|ns|clocks?|cycles|latency)\b|\d(ms|s|us)\b"),
     "wall-clock and clock-cycle measurements differ from run to run (clock, clock_nvrtc: 'Average "
     "clocks/block' is the mean of clock() differences in each block; H100, driver 580.159: 1983.58, "
     "1950.05, 1961.20 without the shim, in observe, in fix)"),
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


class Mask:
    """A per-sample rule, applied after the general normalisation to the lines that `lines`
    matches (within `section` when given: from a line matching its first pattern up to the next
    line matching its second): 'numbers' replaces every number by N, 'line' replaces the whole
    line by `text`, 'sub' replaces what `lines` matches by `text` (a re.sub replacement), 'drop'
    removes the line. `why` says what in the sample makes those lines change
    from run to run, with the evidence."""

    def __init__(self, lines, action, why, text=None, section=None):
        self.lines, self.action, self.why, self.text = re.compile(lines), action, why, text
        self.section = tuple(re.compile(p) for p in section) if section else None

    def describe(self):
        what = {"numbers": "numbers replaced", "line": f"replaced by {self.text!r}", "drop": "left out",
                "sub": f"each match replaced by {self.text!r}"}[self.action]
        where = f" between {self.section[0].pattern!r} and {self.section[1].pattern!r}" if self.section else ""
        return f"lines matching {self.lines.pattern!r}{where}: {what}"


def apply_masks(lines, masks):
    for mask in masks:
        out, inside = [], mask.section is None
        for line in lines:
            if mask.section is not None:
                if mask.section[0].search(line):
                    inside = True
                elif inside and mask.section[1].search(line):
                    inside = False
            if inside and mask.lines.search(line):
                if mask.action == "drop":
                    continue
                if mask.action == "numbers":
                    line = NUMBER.sub("N", line)
                elif mask.action == "sub":
                    line = mask.lines.sub(mask.text, line)
                else:
                    line = mask.text
            out.append(line)
        lines = out
    return lines


# Per-sample rules: lines that change from run to run because of the sample itself (read in its
# source) or its environment, not the shim. Samples with such rules are marked `plain2` in
# samples.txt: run.sh runs them twice without the shim, and the report shows whether those two
# runs differ before the rules (the difference is the program's) and whether the rules cover it.
SAMPLE_MASKS = {
    "fp16ScalarProduct": [Mask(r"^Result ", "numbers", "its inputs come from rand() seeded with time(NULL)")],
    "UnifiedMemoryStreams": [Mask(r"^Task \[", "line", "each task's size comes from rand() seeded with "
                                  "time(NULL) and decides host or device (size < 100: host); tasks go to "
                                  "whichever OpenMP thread is free: only the number of 'Task' lines is "
                                  "compared (H100, driver 580.159: task 19 on host without the shim, on "
                                  "device in observe)", text="Task line")],
    "cdpSimplePrint": [Mask(r"\b(BLOCK|of block) \d+", "sub", "blocks number themselves with atomicAdd "
                            "in whatever order they start and print from the device in that order: the "
                            "lines are compared as a multiset with the block numbers masked (which thread "
                            "launched a block stays: each thread of each block launches one grid of 2) "
                            "(H100, driver 580.159: 'BLOCK 2 launched by thread 0 of block 1' without the "
                            "shim, '... of block 0' in observe)", text=r"\1 N")],
    "ptxjit": [Mask(r"^ptxas ", "drop", "ptxas's lines in the JIT log appear only when the driver compiles "
                    "the PTX, not when it finds the result in its JIT cache (~/.nv/ComputeCache): on a fresh "
                    "machine the first run prints them and the later ones do not (H100, driver 580.159: six "
                    "'ptxas' lines without the shim, none in observe or fix; the shim does not hook cuLink*)")],
    "graphMemoryFootprint": [Mask(r"FOOTPRINT:", "numbers", "in the simultaneous-streams example a graph "
                                  "reuses the physical memory of an earlier one whose 5 us kernel has "
                                  "finished by its launch, so the footprint depends on timing (the sample "
                                  "says so; H100, driver 580.159: 03: 201326592 bytes without the shim, "
                                  "134217728 in observe)",
                                  section=(r"^Running simultaneous streams example", r"^====="))],
    "simpleStreams": [Mask(r"^(memcopy|kernel|non-streamed|\d+ streams):", "numbers",
                           "its table of times (cudaEventElapsedTime, ms) has no word the general rules "
                           "know (H100, driver 580.159: 'memcopy: 1.38' without the shim, 1.25 in fix)")],
    "p2pBandwidthLatencyTest": [Mask("", "numbers", "its matrices of bandwidths and latencies have no label on each line")],
    "cudaGraphsPerfScaling": [Mask("", "numbers", "its CSV rows are times, with no label on each line")],
    "UnifiedMemoryPerf": [Mask("", "numbers", "its tables of times have no label on each line")],
}


def normalize(text, masks=()):
    lines = [normalize_line(line) for line in text.splitlines() if line.strip()]
    return apply_masks(lines, masks)


def numbers_masked(lines):
    return [NUMBER.sub("N", line) for line in lines]


def compare_stdout(plain, other, masks=()):
    """'same' (equal after normalisation), 'order' (the same lines in another order: threads and
    child processes print in whatever order they run), 'nums' (equal once every number is
    masked), or 'DIFF'; and the first differing pair of normalised lines."""
    a, b = normalize(plain, masks), normalize(other, masks)
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


# Samples whose healthy outcome is known beforehand: the exit code every mode must give, and
# the shim lines that are a correct explanation of what the program does on purpose (any other
# shim line still makes the verdict 'shim lines').
class Expect:
    def __init__(self, exit, allowed_lines, why):
        self.exit, self.allowed, self.why = exit, re.compile(allowed_lines), why


ASSERT_WHY = ("asserts in a kernel on purpose and checks that the launch reports cudaErrorAssert, then "
              "exits 0 (CUDA 13, H100, driver 580.159: exit 0 in all three modes, 'Device assert failed "
              "as expected'); the shim's line naming CUDA_ERROR_ASSERT (710) explains that real "
              "device-side assert")
EXPECTED = {
    "simpleAssert": Expect(0, r"CUDA_ERROR_ASSERT \(710\)", ASSERT_WHY),
    "simpleAssert_nvrtc": Expect(0, r"CUDA_ERROR_ASSERT \(710\)", ASSERT_WHY),
}


def first_failure_line(run):
    tail = [ln for ln in run.stderr.splitlines() if ln.strip() and not ln.startswith("seedance:")]
    last = tail[-1:] or run.stdout.strip().splitlines()[-1:] or ["no output"]
    return last[0][:200]


def judge_program(name, runs, expect=None, plain2=None):
    """The row of one program, its verdict ('same', 'differs', 'shim lines', 'unstable',
    'not run'), and notes. `expect`: an Expect for the program; `plain2`: a second run without
    the shim (samples marked plain2), which shows whether the per-sample rules cover what
    changes between two runs without the shim."""
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
    masks = SAMPLE_MASKS.get(name, ())
    cmp = [compare_stdout(plain.stdout, runs[m].stdout, masks) for m in ("observe", "fix")]
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
    if expect is not None and any(runs[m].rc != expect.exit for m in MODES):
        verdict = "differs"
        notes.append(f"expected exit {expect.exit} in every mode ({expect.why[:120]})")
    elif plain.rc != 0 and expect is None:
        notes.append(f"fails without the shim (exit {plain.rc}): {first_failure_line(plain)}")
    if plain2 is not None and plain2.ran:
        raw, first = compare_stdout(plain.stdout, plain2.stdout)
        masked, mfirst = compare_stdout(plain.stdout, plain2.stdout, masks)
        if plain2.rc != plain.rc or masked not in ("same", "order"):
            verdict = "unstable"
            what = f"exit {plain.exit_text()}/{plain2.exit_text()}" if plain2.rc != plain.rc else f"{mfirst[0]!r} vs {mfirst[1]!r}"
            notes.append(f"two runs without the shim differ where the rules do not mask: {what}")
        elif raw in ("same", "order"):
            notes.append("two runs without the shim: the same before the per-sample rules")
        else:
            notes.append(f"two runs without the shim differ before the per-sample rules (the program's own "
                         f"nondeterminism): {first[0]!r} vs {first[1]!r}")
    for mode in ("observe", "fix"):
        if runs[mode].records:
            counts = {}
            for event, kind in runs[mode].records:
                key = event + (f"/{kind}" if kind else "")
                counts[key] = counts.get(key, 0) + 1
            notes.append(f"{mode} trace: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    lines = [("observe", line) for line in obs.lines] + [("fix", line) for line in fix.lines]
    allowed = [(m, ln) for m, ln in lines if expect is not None and expect.allowed.search(ln)]
    lines = [(m, ln) for m, ln in lines if (m, ln) not in allowed]
    if lines and verdict == "same":
        verdict = "shim lines"
    for mode, line in lines[:6]:
        notes.append(f"{mode}: {line[:300]}")
    if len(lines) > 6:
        notes.append(f"... {len(lines) - 6} more shim lines")
    if allowed:
        notes.append(f"{len(allowed)} shim lines expected (matching {expect.allowed.pattern!r}), e.g. "
                     f"{allowed[0][0]}: {allowed[0][1][:160]}")
    return row, verdict, notes


def framework_verdict(verdict, runs):
    """A framework program's verdict: PASS (exit 0, the same in all three modes, no shim line),
    NOT RUN, ENV (it fails without the shim, and the same way with it, without a shim line: the
    environment's fault, e.g. a library version the program cannot use; listed, not a failure)
    or FAIL (the shim made a difference)."""
    if verdict == "not run":
        return "NOT RUN"
    if verdict == "same":
        return "PASS" if runs["plain"].rc == 0 else "ENV"
    return "FAIL"


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


def build_error(log, rc):
    """The line of a build log that says why it failed: the first compiler or linker error
    ('error:', 'undefined reference', 'No such file'), else any line naming an error, else the
    last line. (A warning quoting checkCudaErrors(...) names no error.)"""
    lines = log.splitlines()
    for pattern in (r"\berror:|undefined reference|No such file|not found", r"\berror\b|Error\b"):
        hit = next((ln for ln in lines if re.search(pattern, ln)), None)
        if hit is not None:
            return hit
    return lines[-1] if log.strip() else ("build not started (budget)" if rc == "" else "no log")


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
                err = build_error(log, rc)
                build_failed.append(f"{name}: {err.strip()[:200]}")
                continue
            built += 1
            runs = load_runs(work, "samples", name)
            plain2 = Run(os.path.join(work, "runs", "samples", name, "plain2"))
            row, verdict, notes = judge_program(name, runs, EXPECTED.get(name), plain2 if plain2.ran else None)
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
            row["verdict"] = framework_verdict(verdict, runs)
            if row["verdict"] not in ("PASS", "ENV"):
                failures += 1
            rows.append(row)
            lines += [f"  {name}: {n}" for n in notes]
        table = fmt_table(rows, cols + ["verdict"])
        full += ["", "== frameworks (each: exit 0, the same stdout in all three modes, no shim line; ENV: fails "
                 "without the shim and the same way with it, no shim line: the environment's fault, not counted)"] + table + lines
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

def mask_checks(fails):
    """The per-sample rules on lines of the runs they were written from: each pair must compare
    as the same (or the same lines in another order), each counter-example not."""
    ums = "Executing tasks on host / device\nTask [0], thread [0] executing on device (505)\nTask [19], thread [0] executing on host (64)\nAll Done!\n"
    ums2 = "Executing tasks on host / device\nTask [19], thread [1] executing on device (664)\nTask [0], thread [0] executing on host (50)\nAll Done!\n"
    cdp = "BLOCK 0 launched by the host\n|  BLOCK 2 launched by thread 0 of block 1\n|  BLOCK 3 launched by thread 0 of block 0\n"
    cdp2 = "BLOCK 0 launched by the host\n|  BLOCK 3 launched by thread 0 of block 1\n|  BLOCK 2 launched by thread 0 of block 0\n"
    ptx = "Linker Output:\nptxas info    : 0 bytes gmem\nptxas info    : Compile time = 2.496 ms\ninfo    : 0 bytes gmem\nCUDA kernel launched\n"
    ptx2 = "Linker Output:\ninfo    : 0 bytes gmem\nCUDA kernel launched\n"
    gmf = ("Running simultaneous streams example.\n03:     FOOTPRINT: 201326592 bytes\n================================\n"
           "Running unfreed streams example.\n03:     FOOTPRINT: 268435456 bytes\n")
    gmf2 = gmf.replace("201326592", "134217728")
    gmf3 = gmf.replace("268435456", "134217728")
    cases = [  # (sample, plain, other, expected classes)
        ("UnifiedMemoryStreams", ums, ums2, ("same", "order")),
        ("UnifiedMemoryStreams", ums, ums2.replace("All Done!", "Task [1], thread [0] executing on host (64)\nAll Done!"), ("DIFF",)),
        ("cdpSimplePrint", cdp, cdp2, ("same", "order")),
        ("cdpSimplePrint", cdp, cdp2.replace("thread 0 of block 0", "thread 1 of block 0"), ("DIFF", "nums")),
        ("cdpSimplePrint", cdp, cdp + cdp.splitlines()[1] + "\n", ("DIFF",)),
        ("ptxjit", ptx, ptx2, ("same",)),
        ("ptxjit", ptx, ptx2.replace("0 bytes gmem", "8 bytes gmem"), ("nums", "DIFF")),
        ("graphMemoryFootprint", gmf, gmf2, ("same",)),
        ("graphMemoryFootprint", gmf, gmf3, ("nums",)),
        ("simpleStreams", "memcopy:\t1.38\n4 streams:\t1.27\nTest passed\n", "memcopy:\t1.25\n4 streams:\t1.28\nTest passed\n", ("same",)),
    ]
    for name, a, b, want in cases:
        got = compare_stdout(a, b, SAMPLE_MASKS[name])[0]
        if got not in want:
            print(f"FAIL: {name}'s rules: {got}, expected {want}: {a!r} / {b!r}")
            fails += 1
    return fails, len(cases)


class _Run:
    """A run as judge_program sees it, for the self-test."""

    def __init__(self, rc, stdout="", stderr=""):
        self.rc, self.stdout, self.stderr, self.ran, self.skipped = rc, stdout, stderr, True, None
        self.lines, self.records, self.traces, self.timed_out = shim_lines(stderr), [], 1, False

    def exit_text(self):
        return str(self.rc)


def judge_checks(fails):
    """judge_program, framework_verdict and build_error on example runs."""
    out = "-- Begin assert output\n-- End assert output\nDevice assert failed as expected\n"
    assert_line = ("seedance: cuCtxSynchronize() returned CUDA_ERROR_ASSERT (710): A device-side assert() "
                   "failed in a kernel; sticky, so the process must restart.\n")
    at_exit = "seedance: at exit: 1 context still alive (context 0x5645 (device 0)).\n"
    a = EXPECTED["simpleAssert"]

    def runs(p, o, f):
        return {"plain": p, "observe": o, "fix": f}

    cdp, cdp2 = "BLOCK 2 launched by thread 0 of block 1\n", "BLOCK 2 launched by thread 0 of block 0\n"
    cases = [  # (description, verdict, expected)
        ("assert: exit 0, the CUDA_ERROR_ASSERT line", judge_program(
            "simpleAssert", runs(_Run(0, out), _Run(0, out, assert_line), _Run(0, out, assert_line)), a)[1], "same"),
        ("assert: another shim line stays visible", judge_program(
            "simpleAssert_nvrtc", runs(_Run(0, out), _Run(0, out, assert_line + at_exit), _Run(0, out, assert_line)), a)[1],
         "shim lines"),
        ("assert: exit 1 is not the expected outcome", judge_program(
            "simpleAssert", runs(_Run(1, out), _Run(1, out), _Run(1, out)), a)[1], "differs"),
        ("assert line elsewhere: shim lines", judge_program(
            "vectorAdd", runs(_Run(0, out), _Run(0, out, assert_line), _Run(0, out)))[1], "shim lines"),
        ("plain2: nondeterminism the rules cover", judge_program(
            "cdpSimplePrint", runs(_Run(0, cdp), _Run(0, cdp2), _Run(0, cdp)), None, _Run(0, cdp2))[1], "same"),
        ("plain2: a difference the rules do not cover", judge_program(
            "cdpSimplePrint", runs(_Run(0, cdp), _Run(0, cdp), _Run(0, cdp)), None, _Run(0, cdp + "extra\n"))[1], "unstable"),
        ("plain2: another exit code", judge_program(
            "clock", runs(_Run(0, cdp), _Run(0, cdp), _Run(0, cdp)), None, _Run(1, cdp))[1], "unstable"),
        ("framework failing without the shim, the same with it", framework_verdict(
            "same", runs(_Run(1), _Run(1), _Run(1))), "ENV"),
        ("framework failing without the shim, a shim line with it", framework_verdict(
            judge_program("numba_kernel", runs(_Run(1), _Run(1, "", at_exit), _Run(1)))[1], runs(_Run(1), _Run(1), _Run(1))), "FAIL"),
        ("framework healthy", framework_verdict("same", runs(_Run(0), _Run(0), _Run(0))), "PASS"),
        ("framework exit differs", framework_verdict(
            judge_program("torch_caching", runs(_Run(0), _Run(1), _Run(0)))[1], runs(_Run(0), _Run(1), _Run(0))), "FAIL"),
        ("build error: the linker's line, not a warning quoting checkCudaErrors", build_error(
            "cuSolverRf.cpp:295:37: warning: deprecated\n  295 |     checkCudaErrors(cusolverSpCreate(&h));\n"
            "/usr/bin/ld: x.o: in function `main':\nx.cpp:(.text+0x2b5): undefined reference to `cusparseCreate'\n", "1"),
         "x.cpp:(.text+0x2b5): undefined reference to `cusparseCreate'"),
    ]
    for what, got, want in cases:
        if got != want:
            print(f"FAIL: {what}: {got!r}, expected {want!r}")
            fails += 1
    return fails, len(cases)


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
        ("Average clocks/block = 1983.578125", "Average clocks/block = 1950.046875"),
        ("CP: lshmName = simpleIPCshm10837", "CP: lshmName = simpleIPCshm11075"),
        ("PP: lshmName = memmap_ipc_shm15137", "PP: lshmName = memmap_ipc_shm15197"),
    ]
    differ_pairs = [
        ("Result = PASS", "Result = FAIL"),
        ("sum=1099511627776", "sum=1099511627775"),
        ("GPU sum : 12345.5", "GPU sum : 12345.7"),
        ("L1 norm: 1.2e-07", "L1 norm: 3.4e-02"),
        ("Checking computed result for correctness: Result = PASS", "Checking computed result for correctness: Result = FAIL"),
        ("CP: lshmName = simpleIPCshm10837", "CP: lshmName = otherIPCshm10837"),
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
            or compare_stdout("Result x: 1.5\n", "Result x: 2.5\n", SAMPLE_MASKS["fp16ScalarProduct"])[0] != "same"):
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
    fails, n_masks = mask_checks(fails)
    fails, n_judge = judge_checks(fails)
    print(f"normalisation rules (each replaces what it matches):")
    for name, _p, repl, why in RULES:
        print(f"  {name} -> {repl!r}: {why}")
    print("lines whose numbers are all replaced by N:")
    for name, _p, why in VOLATILE_LINES:
        print(f"  {name}: {why}")
    print(f"lines that describe the device (cut at the first ':', '[', '=' or '\"'): {DEVICE_WHY}")
    print("line order: the same lines in another order count as the same (threads and child processes)")
    print("per-sample rules:")
    for name, masks in SAMPLE_MASKS.items():
        for m in masks:
            print(f"  {name}: {m.describe()}: {m.why}")
    print("expected outcomes:")
    for name, e in EXPECTED.items():
        print(f"  {name}: exit {e.exit} in every mode; shim lines matching {e.allowed.pattern!r} allowed: {e.why}")
    total = len(same_pairs) + len(differ_pairs) + 2 + len(checks) + n_masks + n_judge
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
