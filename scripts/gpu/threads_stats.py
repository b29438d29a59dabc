#!/usr/bin/env python3
"""Statistics of scripts/bench/gpu-threads.sh: paired ratios to plain with confidence intervals.

    threads_stats.py RAW...         the tables, from the raw files the benchmark writes
    threads_stats.py --added RAW... nanoseconds added per operation instead of ratios (for
                                    runs against the null driver, scripts/bench/host-threads.sh,
                                    where the driver costs next to nothing and a ratio says
                                    nothing)
    threads_stats.py --selftest     checks the statistics on synthetic data (no GPU)

Runs in threads_bench.c's interleaved mode (INTERLEAVE) write pair lines instead:

    round R pos P mode M pairop O threads T index I lw LW dw DW lc LC dc DC

(a pair of blocks in one process: wall and CPU ns per operation through the linked symbols,
the shim's wrappers when preloaded, and through the driver's own definitions). Their table
(`interleaved_tables`): per (operation, threads, mode), each process's median of its
pairs' ratios linked / direct (and differences linked - direct), then the median over the
processes with the order-statistic interval above; plain processes are the in-process A/A
control.

RAW has one line per (run, operation):

    round R pos P mode M op O threads T wall W cpu C med X [iterations N]

A round runs, for each thread count, the modes in a shuffled order with a plain run (no
preload) before the first and after each one: plain, M1, plain, M2, ..., plain. Each run of
a mode other than plain is paired with the plain runs beside it in that sequence: its ratio
is its value over the geometric mean of its two neighbours (one, if the other failed), so
drift slower than one run (clocks, other tenants, the GPU's temperature) cancels. Mode `aa`
is a plain run in a mode's place: its ratios are the A/A control, the noise floor of the
method.

Per (operation, threads, mode), for the wall time per operation (WALL, the process's
throughput) and for the threads' CPU time per operation (CPU): the median of the paired
ratios over the rounds and a 95 % confidence interval of that median, distribution-free:
the order statistics x(k), x(n+1-k) with the largest k such that P(Binomial(n, 1/2) < k)
<= 2.5 % (exact for any distribution, conservative; `--ci bootstrap` uses a percentile
bootstrap of the median instead, which with fewer than ~10 rounds takes few distinct values
and covers less than it claims). Verdict: "within" when the interval's upper bound is
<= LIMIT (1.02), "over" when its lower bound is > LIMIT, "undecided" otherwise (more rounds
would decide it). With fewer than 6 rounds no interval reaches 95 %: the cell says so.
"""
import argparse
import collections
import math
import random
import statistics
import sys

MODES = ["aa", "off", "observe", "fix", "hami"]
HEADS = {"aa": "A/A (plain)", "off": "off", "observe": "observe", "fix": "fix",
         "hami": "HAMi-core"}


def parse(lines, tag=0):
    """Runs as {(tag, round, threads): [(pos, mode, {op: (wall, cpu)})]}, sorted by pos
    (`tag` tells the raw files of several calls apart)."""
    runs = collections.defaultdict(dict)
    for line in lines:
        f = line.split()
        if not f or f[0] != "round" or "pairop" in f:
            continue
        kv = dict(zip(f[0::2], f[1::2]))
        key = (tag, int(kv["round"]), int(kv["threads"]))
        pos = int(kv["pos"])
        run = runs[key].setdefault(pos, (kv["mode"], {}))
        run[1][kv["op"]] = (float(kv["wall"]), float(kv["cpu"]))
    return {k: sorted((p, m, ops) for p, (m, ops) in v.items()) for k, v in runs.items()}


def paired(runs, added=False):
    """Paired ratios {(op, threads, mode): {"wall": [...], "cpu": [...]}} and the plain
    values {(op, threads): {"wall": [...], "cpu": [...]}}. With `added`, differences in ns
    (the run less the arithmetic mean of its plain neighbours) instead of ratios."""
    ratios = collections.defaultdict(lambda: {"wall": [], "cpu": []})
    plain = collections.defaultdict(lambda: {"wall": [], "cpu": []})
    for (_, _, threads), seq in sorted(runs.items()):
        for i, (_, mode, ops) in enumerate(seq):
            if mode == "plain":
                for op, (w, c) in ops.items():
                    plain[(op, threads)]["wall"].append(w)
                    plain[(op, threads)]["cpu"].append(c)
                continue
            before = next((s for s in reversed(seq[:i]) if s[1] == "plain"), None)
            after = next((s for s in seq[i + 1:] if s[1] == "plain"), None)
            for op, vals in ops.items():
                for j, metric in enumerate(("wall", "cpu")):
                    near = [s[2][op][j] for s in (before, after) if s and op in s[2]]
                    if added and near:
                        base = sum(near) / len(near)
                        ratios[(op, threads, mode)][metric].append(vals[j] - base)
                        continue
                    if not near or vals[j] <= 0 or min(near) <= 0:
                        continue
                    base = math.exp(sum(math.log(x) for x in near) / len(near))
                    ratios[(op, threads, mode)][metric].append(vals[j] / base)
    return ratios, plain


def binom_cdf(k, n):
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n


def order_ci(xs, level=0.95):
    """Distribution-free interval of the median: (lo, hi, covered). The interval
    x(j)..x(n+1-j) (1-based order statistics) covers the median with probability
    1 - 2 P(Binomial(n, 1/2) <= j - 1); j is the largest for which that is >= `level`.
    When even the extremes (j = 1) fall short (n < 6), they are returned, covered False."""
    xs = sorted(xs)
    n = len(xs)
    j = 1
    while j + 1 <= (n + 1) // 2 and 1 - 2 * binom_cdf(j, n) >= level:
        j += 1
    covered = 1 - 2 * binom_cdf(j - 1, n) >= level
    return xs[j - 1], xs[n - j], covered


def bootstrap_ci(xs, level=0.95, resamples=4000, seed=1):
    rng = random.Random(seed)
    n = len(xs)
    meds = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(resamples))
    a = (1 - level) / 2
    return meds[int(a * resamples)], meds[min(int((1 - a) * resamples), resamples - 1)], n >= 6


def verdict(lo, hi, limit):
    if hi <= limit:
        return "within"
    if lo > limit:
        return "over"
    return "undecided"


def summarize(ratios, ci="order", limit=1.02):
    """{(op, threads, mode): {metric: (median, lo, hi, n, covered, verdict)}}."""
    out = {}
    for key, by in ratios.items():
        cell = {}
        for metric, xs in by.items():
            if not xs:
                continue
            lo, hi, covered = (order_ci if ci == "order" else bootstrap_ci)(xs)
            cell[metric] = (statistics.median(xs), lo, hi, len(xs), covered,
                            verdict(lo, hi, limit))
        out[key] = cell
    return out


def bound(x, limit):
    """An interval's end to three decimals, or to four where three would print the limit
    itself for an end that is not the limit (1.0202 would read 1.020, and the verdict
    "undecided" beside it would look wrong)."""
    return f"{x:.4f}" if f"{x:.3f}" == f"{limit:.3f}" and x != limit else f"{x:.3f}"


def fmt(c, limit=1.02):
    med, lo, hi, n, covered, v = c
    mark = "" if covered else f", n={n}: under 95 %"
    return f"{med:.3f}x [{bound(lo, limit)}-{bound(hi, limit)}] {v}{mark}"


def tables(runs, ci="order", limit=1.02):
    ratios, plain = paired(runs)
    s = summarize(ratios, ci, limit)
    modes = [m for m in MODES if any(k[2] == m for k in s)]
    out = []
    for metric, title in (("wall", "wall time per operation (throughput)"),
                          ("cpu", "CPU time per operation (the threads' mean)")):
        out.append(f"### Paired ratio to plain: {title}; median [95 % CI], verdict at {limit}x")
        out.append("")
        out.append("| operation | threads | plain ns (IQR) | "
                   + " | ".join(HEADS[m] for m in modes) + " |")
        out.append("|---|---|---|" + "---|" * len(modes))
        for op, t in sorted(plain):
            xs = plain[(op, t)][metric]
            q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
            cells = [f"{statistics.median(xs):.0f} ({q[0]:.0f}-{q[2]:.0f})"]
            for m in modes:
                c = s.get((op, t, m), {}).get(metric)
                cells.append(fmt(c, limit) if c else "-")
            out.append(f"| {op} | {t} | " + " | ".join(cells) + " |")
        out.append("")
    floor = [max(c["wall"][2] - c["wall"][0], c["wall"][0] - c["wall"][1])
             for k, c in s.items() if k[2] == "aa" and "wall" in c]
    if floor:
        out.append(f"A/A noise floor (wall): the widest half-interval of a plain-against-plain "
                   f"ratio is {max(floor):.3f} (median {statistics.median(floor):.3f}); a "
                   f"{limit}x claim needs intervals narrower than {limit - 1:.2f}.")
    rounds = sorted({k[:2] for k in runs})
    out.append(f"rounds: {len(rounds)}; CI: {ci}")
    return "\n".join(out), s


def added_tables(runs, ci="order"):
    """The shim's own cost: ns added per operation, median of the paired differences
    [95 % CI], for wall and CPU time; and, per mode, the CPU ns added at each thread count
    over that at one thread (1.00 = flat in threads: no contention the threads add)."""
    diffs, plain = paired(runs, added=True)
    modes = [m for m in MODES if any(k[2] == m for k in diffs)]
    ci_of = order_ci if ci == "order" else bootstrap_ci
    cell = {}
    for key, by in diffs.items():
        for metric, xs in by.items():
            if xs:
                lo, hi, covered = ci_of(xs)
                cell[key + (metric,)] = (statistics.median(xs), lo, hi, len(xs), covered)
    out = []
    for metric, title in (("wall", "wall time per operation"),
                          ("cpu", "CPU time per operation (the threads' mean)")):
        out.append(f"### ns added per operation, paired with plain: {title}; median [95 % CI]")
        out.append("")
        out.append("| operation | threads | plain ns | " + " | ".join(HEADS[m] for m in modes) + " |")
        out.append("|---|---|---|" + "---|" * len(modes))
        for op, t in sorted(plain):
            cells = [f"{statistics.median(plain[(op, t)][metric]):.0f}"]
            for m in modes:
                c = cell.get((op, t, m, metric))
                cells.append("-" if c is None else
                             f"{c[0]:+.0f} [{c[1]:+.0f} to {c[2]:+.0f}]"
                             + ("" if c[4] else f", n={c[3]}: under 95 %"))
            out.append(f"| {op} | {t} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("### CPU ns added at T threads over that at 1 thread (1.00: flat in threads)")
    out.append("")
    threads = sorted({t for _, t in plain})
    out.append("| operation | mode | " + " | ".join(f"{t}" for t in threads) + " |")
    out.append("|---|---|" + "---|" * len(threads))
    flat = {}
    for op in sorted({op for op, _ in plain}):
        for m in modes:
            if m == "aa":
                continue
            one = cell.get((op, 1, m, "cpu"))
            if one is None or one[0] <= 0:
                continue
            row = []
            for t in threads:
                c = cell.get((op, t, m, "cpu"))
                row.append("-" if c is None else f"{c[0] / one[0]:.2f}")
                if c is not None:
                    flat[(op, t, m)] = c[0] / one[0]
            out.append(f"| {op} | {m} | " + " | ".join(row) + " |")
    out.append("")
    out.append(f"rounds: {len(sorted({k[:2] for k in runs}))}; CI: {ci}")
    return "\n".join(out), cell, flat


def parse_pairs(lines, tag=0):
    """Interleaved pairs as {(op, threads, mode): {(tag, round, pos): [(lw, dw, lc, dc)]}}."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in lines:
        f = line.split()
        if not f or f[0] != "round" or "pairop" not in f:
            continue
        kv = dict(zip(f[0::2], f[1::2]))
        run = (tag, int(kv["round"]), int(kv["pos"]))
        out[(kv["pairop"], int(kv["threads"]), kv["mode"])][run].append(
            tuple(float(kv[k]) for k in ("lw", "dw", "lc", "dc")))
    return out


def interleaved_tables(pairs, ci="order", limit=1.02):
    """The in-process comparison: per (op, threads, mode) and metric, the median over
    processes of each process's median ratio linked / direct [95 % interval over the
    processes], its verdict at `limit`, and the median ns added (linked - direct)."""
    ci_of = order_ci if ci == "order" else bootstrap_ci
    cell = {}
    for key, runs in pairs.items():
        for metric, (li, di) in (("wall", (0, 1)), ("cpu", (2, 3))):
            ratios = [statistics.median(p[li] / p[di] for p in ps if p[di] > 0)
                      for ps in runs.values() if any(p[di] > 0 for p in ps)]
            added = [statistics.median(p[li] - p[di] for p in ps) for ps in runs.values()]
            if not ratios:
                continue
            lo, hi, covered = ci_of(ratios)
            cell[key + (metric,)] = (statistics.median(ratios), lo, hi, len(ratios), covered,
                                     verdict(lo, hi, limit), statistics.median(added),
                                     sum(len(ps) for ps in runs.values()))
    known = ["plain"] + MODES
    modes = [m for m in known if any(k[2] == m for k in pairs)]
    modes += sorted({k[2] for k in pairs} - set(known))
    heads = dict(HEADS, plain="plain (in-process A/A)")
    out = []
    for metric, title in (("wall", "wall time per operation (throughput)"),
                          ("cpu", "CPU time per operation (the threads' mean)")):
        out.append(f"### In-process ratio, shim's wrappers / driver's own definitions: {title}; "
                   f"median over processes [95 % CI], verdict at {limit}x; ns added")
        out.append("")
        out.append("| operation | threads | " + " | ".join(heads.get(m, m) for m in modes) + " |")
        out.append("|---|---|" + "---|" * len(modes))
        for op, t in sorted({(k[0], k[1]) for k in pairs}):
            cells = []
            for m in modes:
                c = cell.get((op, t, m, metric))
                if c is None:
                    cells.append("-")
                    continue
                # The summary's six fields, then the median ns added.
                cells.append(f"{fmt(c[:6], limit)}; {c[6]:+.0f} ns")
            out.append(f"| {op} | {t} | " + " | ".join(cells) + " |")
        out.append("")
    procs = sorted({len(r) for r in pairs.values()})
    out.append(f"processes per cell: {procs[0]}-{procs[-1]}; CI: {ci}")
    return "\n".join(out), cell


def synthetic(rounds=10, threads=(1, 16), effects=None, drift=0.15, noise=0.004, seed=7):
    """Raw lines of a made-up run: each (round, threads) sequence has a level of its own
    (a factor of about exp(N(0, drift)): the run-to-run noise that unpaired medians see) and
    drifts slowly within itself; each run has small noise of its own, and each mode
    multiplies plain by its effect."""
    effects = effects or {"aa": 1.0, "off": 1.0, "observe": 1.06, "fix": 1.0, "hami": 1.01}
    rng = random.Random(seed)
    lines = []
    for r in range(1, rounds + 1):
        for t in threads:
            order = list(effects)
            rng.shuffle(order)
            seq = ["plain"]
            for m in order:
                seq += [m, "plain"]
            level = math.exp(rng.gauss(0, drift))
            for pos, m in enumerate(seq):
                level *= math.exp(rng.gauss(0, drift / 20))
                e = 1.0 if m == "plain" else effects[m]
                for op, base in (("pinned_copy", 2800.0 * t), ("launch", 1500.0 * t)):
                    w = base * level * e * math.exp(rng.gauss(0, noise))
                    c = base / t * level * e * math.exp(rng.gauss(0, noise))
                    lines.append(f"round {r} pos {pos} mode {m} op {op} threads {t} "
                                 f"wall {w:.0f} cpu {c:.0f} med {w:.0f}")
    return lines


def selftest():
    # Order-statistic intervals: n = 6 keeps the extremes (coverage 96.9 %), n = 10 the
    # second from each end (97.9 %), n = 5 cannot reach 95 %.
    xs = list(range(1, 11))
    assert order_ci(xs) == (2, 9, True), order_ci(xs)
    assert order_ci(list(range(1, 7))) == (1, 6, True), order_ci(list(range(1, 7)))
    assert order_ci(list(range(1, 6)))[2] is False
    assert verdict(0.99, 1.02, 1.02) == "within"
    assert verdict(1.021, 1.05, 1.02) == "over"
    assert verdict(1.0, 1.03, 1.02) == "undecided"
    # Pairing: the nearest plain run on each side, across a failed one (pos 2 missing).
    runs = parse(["round 1 pos 0 mode plain op x threads 1 wall 100 cpu 10 med 100",
                  "round 1 pos 1 mode fix op x threads 1 wall 110 cpu 11 med 110",
                  "round 1 pos 3 mode off op x threads 1 wall 121 cpu 12 med 121",
                  "round 1 pos 4 mode plain op x threads 1 wall 121 cpu 12 med 121"])
    r, _ = paired(runs)
    assert abs(r[("x", 1, "fix")]["wall"][0] - 110 / 110) < 1e-9, r
    assert abs(r[("x", 1, "off")]["wall"][0] - 121 / 110) < 1e-9, r
    # Synthetic data with a large drift: the paired method finds the 6 % effect, calls the
    # A/A control and the null modes within 1.02, and the interval holds the truth.
    text, s = tables(parse(synthetic()))
    for t in (1, 16):
        for op in ("pinned_copy", "launch"):
            assert s[(op, t, "observe")]["wall"][5] == "over", text
            for m in ("aa", "off", "fix"):
                med, lo, hi, n, covered, v = s[(op, t, m)]["wall"]
                assert v == "within" and lo <= 1.0 <= hi and n == 10 and covered, (m, text)
            med, lo, hi, *_ = s[(op, t, "hami")]["cpu"]
            assert lo <= 1.01 <= hi, text
    # Bootstrap intervals on the same data agree on the verdicts.
    _, b = tables(parse(synthetic()), ci="bootstrap")
    assert all(b[k]["wall"][5] == s[k]["wall"][5] for k in s), "bootstrap disagrees"
    # Added ns: plain 1000 and a mode at 1300 at 1 thread, 1600 at 16, against a plain level
    # that drifts; the differences come out as 300 and 600 and the flatness as 2.00.
    lines = []
    for r in (1, 2, 3, 4, 5, 6):
        for t, cost in ((1, 300.0), (16, 600.0)):
            lvl = 1000.0 + 10 * r
            for pos, (m, v) in enumerate((("plain", lvl), ("fix", lvl + cost), ("plain", lvl))):
                lines.append(f"round {r} pos {pos} mode {m} op x threads {t} "
                             f"wall {v} cpu {v} med {v}")
    text, cell, flat = added_tables(parse(lines))
    assert cell[("x", 1, "fix", "cpu")][:3] == (300.0, 300.0, 300.0), text
    assert cell[("x", 16, "fix", "wall")][0] == 600.0, text
    assert abs(flat[("x", 16, "fix")] - 2.0) < 1e-9 and "| x | fix | 1.00 | 2.00 |" in text, text
    # Interleaved pairs: 6 processes of a mode at 1.05x with process levels that differ by
    # 30 %, and plain processes at 1.0x: the in-process ratio sees 1.05 and 1.0 exactly.
    lines = []
    for r in range(1, 7):
        for pos, (m, e) in enumerate((("plain", 1.0), ("fix", 1.05))):
            lvl = 1000.0 * (1 + 0.3 * (r % 3))
            for i in range(4):
                lines.append(f"round {r} pos {pos} mode {m} pairop x threads 2 index {i} "
                             f"lw {lvl * e} dw {lvl} lc {lvl * e / 2} dc {lvl / 2}")
    text, cell = interleaved_tables(parse_pairs(lines))
    fix = cell[("x", 2, "fix", "wall")]
    assert abs(fix[0] - 1.05) < 1e-9 and fix[5] == "over" and fix[3] == 6, text
    assert cell[("x", 2, "plain", "cpu")][5] == "within", text
    assert "| x | 2 | 1.000x [1.000-1.000] within; +0 ns | 1.050x" in text, text
    assert parse(lines) == {}, "pair lines are not runs"
    # An interval's end that three decimals would print as the limit gets a fourth, so the
    # verdict beside it reads true; other ends keep three.
    assert bound(1.0202, 1.02) == "1.0202" and bound(1.0199, 1.02) == "1.0199", "bound"
    assert bound(1.02, 1.02) == "1.020" and bound(1.0149, 1.02) == "1.015", "bound"
    lines = []
    for r in range(1, 7):
        for pos, (m, e) in enumerate((("plain", 1.0), ("fix", 1.0198 + 0.0001 * r))):
            lines.append(f"round {r} pos {pos} mode {m} pairop x threads 2 index 0 "
                         f"lw {1000 * e} dw 1000 lc 500 dc 500")
    text, _ = interleaved_tables(parse_pairs(lines))
    assert "[1.0199-1.0204] undecided" in text, text
    # Too few rounds: said in the cell.
    text, _ = tables(parse(synthetic(rounds=4)))
    assert "n=4: under 95 %" in text, text
    print("threads_stats selftest: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", nargs="*", help="raw files (one call's each; merged)")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--ci", choices=["order", "bootstrap"], default="order")
    ap.add_argument("--limit", type=float, default=1.02)
    ap.add_argument("--added", action="store_true", help="ns added instead of ratios")
    a = ap.parse_args()
    if a.selftest:
        selftest()
        return
    if not a.raw:
        ap.error("RAW or --selftest")
    runs, pairs = {}, collections.defaultdict(dict)
    for i, path in enumerate(a.raw):
        with open(path) as f:
            lines = f.readlines()
        runs.update(parse(lines, tag=i))
        for k, v in parse_pairs(lines, tag=i).items():
            pairs[k].update(v)
    if pairs:
        print(interleaved_tables(pairs, a.ci, a.limit)[0])
        if not runs:
            return
        print()
    if not runs:
        print("no runs in", *a.raw)
        sys.exit(1)
    print(added_tables(runs, a.ci)[0] if a.added else tables(runs, a.ci, a.limit)[0])


if __name__ == "__main__":
    main()
