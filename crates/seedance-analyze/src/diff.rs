//! What changed between two runs: `seedance-analyze diff A B`.
//!
//! Both sides are summarized into [`Report`]s and compared by key: errors by (function,
//! CUresult), calls by function, launch and allocation faults by (kind, function, check)
//! and lifetime faults by fault kind
//! (the reports' `launch_fault` and `alloc_fault` problems), repaired calls by repair kind
//! (the reports' `repairs`), records of event kinds the analyzer does not know by kind,
//! problems by their `key`. The result is a [`DiffReport`], versioned like the summary
//! report (`report_version`).

use crate::fmt;
use crate::render_text::{push_wrapped, Table};
use crate::report::{ProblemKind, Report, Severity, REPORT_VERSION};
use crate::SatAdd;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Totals of one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The paths given.
    pub paths: Vec<String>,
    /// Trace files read.
    pub files_read: u64,
    /// Processes.
    pub processes: u64,
    /// Processes without an exit summary.
    pub processes_without_exit_summary: u64,
    /// Calls (exit summaries).
    pub calls: u64,
    /// Errors.
    pub errors: u64,
}

/// Errors of one (function, CUresult) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorChange {
    /// Function.
    pub function: String,
    /// CUresult name (or number).
    pub result: String,
    /// Errors in A.
    pub count_a: u64,
    /// Errors in B.
    pub count_b: u64,
}

/// Calls of one function on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallShift {
    /// Function.
    pub function: String,
    /// Calls in A.
    pub calls_a: u64,
    /// Calls in B.
    pub calls_b: u64,
    /// `calls_b - calls_a`.
    pub delta: i64,
    /// `delta` in percent of `calls_a`, one decimal; `None` when A has no calls.
    pub delta_pct: Option<f64>,
    /// Some process on either side called the function but has no exit summary, so its
    /// calls are not counted: the shift may be an artefact.
    pub partial: bool,
}

/// One repair kind (calls repaired) or one unknown event kind (records) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindChange {
    /// Repair kind (`device_fallback`) or event kind.
    pub kind: String,
    /// Calls repaired (repairs) or records (event kinds) in A.
    pub count_a: u64,
    /// The same in B.
    pub count_b: u64,
}

/// The launch or allocation faults of one (kind, function, check) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultChange {
    /// `launch_fault`, `alloc_fault` or `lifetime_fault`.
    pub kind: String,
    /// Function.
    pub function: String,
    /// The check that failed.
    pub check: String,
    /// Failed calls in A (the problem's `count`).
    pub count_a: u64,
    /// Failed calls in B.
    pub count_b: u64,
    /// Processes with the fault in A.
    pub processes_a: u64,
    /// Processes with the fault in B.
    pub processes_b: u64,
}

/// A problem present on one side only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemChange {
    /// Severity (`error`, `warning`, `info`).
    pub severity: String,
    /// The problem's title on the side where it is.
    pub title: String,
}

/// A problem present on both sides whose severity or title (its counts, whether it was
/// repaired) changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemShift {
    /// Severity in A.
    pub severity_a: String,
    /// Severity in B.
    pub severity_b: String,
    /// Title in A.
    pub title_a: String,
    /// Title in B.
    pub title_b: String,
}

/// The difference between two runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffReport {
    /// Schema version, the same as the summary report's.
    pub report_version: u32,
    /// The first run.
    pub a: Side,
    /// The second run.
    pub b: Side,
    /// Errors in B for a (function, CUresult) that A does not have, most first.
    pub new_errors: Vec<ErrorChange>,
    /// Errors of A that B does not have, most first.
    pub disappeared_errors: Vec<ErrorChange>,
    /// (function, CUresult) with errors on both sides, in different numbers; largest change
    /// first.
    pub changed_errors: Vec<ErrorChange>,
    /// Functions whose call count differs, largest absolute change first.
    pub call_shifts: Vec<CallShift>,
    /// Launch and allocation faults, by (kind, function, check), that B has and A does not,
    /// most failed calls first.
    pub new_faults: Vec<FaultChange>,
    /// Those that A has and B does not, most failed calls first.
    pub resolved_faults: Vec<FaultChange>,
    /// Those on both sides with different numbers of failed calls or processes, largest
    /// change first.
    pub fault_changes: Vec<FaultChange>,
    /// Repair kinds with calls repaired in B and none in A, most calls first.
    pub new_repairs: Vec<KindChange>,
    /// Repair kinds in A whose count of repaired calls differs in B, by kind.
    pub repair_changes: Vec<KindChange>,
    /// Event kinds unknown to this analyzer that B has and A does not, most records first.
    pub new_event_kinds: Vec<KindChange>,
    /// Unknown event kinds in A whose count of records differs in B, by kind.
    pub event_kind_changes: Vec<KindChange>,
    /// Problems of B that A does not have.
    pub new_problems: Vec<ProblemChange>,
    /// Problems of A that B does not have.
    pub resolved_problems: Vec<ProblemChange>,
    /// Problems on both sides whose severity or title changed (e.g. now repaired), by
    /// severity in B, then title.
    #[serde(default)]
    pub changed_problems: Vec<ProblemShift>,
}

fn side(r: &Report) -> Side {
    Side {
        paths: r.input.paths.clone(),
        files_read: r.input.files_read,
        processes: r.overview.processes,
        processes_without_exit_summary: r.overview.processes_without_exit_summary,
        calls: r.overview.calls,
        errors: r.overview.errors,
    }
}

fn errors(r: &Report) -> BTreeMap<(String, String), u64> {
    let mut m = BTreeMap::<_, u64>::new();
    for f in &r.functions {
        for (res, n) in &f.errors_by_result {
            if *n > 0 {
                m.entry((f.function.clone(), res.clone()))
                    .or_default()
                    .sat_add(n);
            }
        }
    }
    m
}

/// Problems by their identity across runs, `key` (titles carry counts).
fn problem_keys(r: &Report) -> BTreeMap<String, (Severity, ProblemChange)> {
    r.problems
        .iter()
        .map(|p| {
            (
                p.key.clone(),
                (
                    p.severity,
                    ProblemChange {
                        severity: p.severity.as_str().to_string(),
                        title: p.title.clone(),
                    },
                ),
            )
        })
        .collect()
}

/// Compares run `a` with run `b`.
pub fn diff(a: &Report, b: &Report) -> DiffReport {
    let ea = errors(a);
    let eb = errors(b);
    let keys: BTreeSet<&(String, String)> = ea.keys().chain(eb.keys()).collect();
    let mut new_errors = Vec::new();
    let mut disappeared = Vec::new();
    let mut changed = Vec::new();
    for k in keys {
        let ca = ea.get(k).copied().unwrap_or(0);
        let cb = eb.get(k).copied().unwrap_or(0);
        let c = ErrorChange {
            function: k.0.clone(),
            result: k.1.clone(),
            count_a: ca,
            count_b: cb,
        };
        match (ca, cb) {
            (0, _) => new_errors.push(c),
            (_, 0) => disappeared.push(c),
            (x, y) if x != y => changed.push(c),
            _ => {}
        }
    }
    new_errors.sort_by(|x, y| {
        y.count_b
            .cmp(&x.count_b)
            .then_with(|| (&x.function, &x.result).cmp(&(&y.function, &y.result)))
    });
    disappeared.sort_by(|x, y| {
        y.count_a
            .cmp(&x.count_a)
            .then_with(|| (&x.function, &x.result).cmp(&(&y.function, &y.result)))
    });
    changed.sort_by(|x, y| {
        let dx = x.count_a.abs_diff(x.count_b);
        let dy = y.count_a.abs_diff(y.count_b);
        dy.cmp(&dx)
            .then_with(|| (&x.function, &x.result).cmp(&(&y.function, &y.result)))
    });

    let ca = calls_by_function(a);
    let cb = calls_by_function(b);
    let fns: BTreeSet<&str> = ca.keys().chain(cb.keys()).copied().collect();
    let mut shifts: Vec<CallShift> = fns
        .into_iter()
        .filter_map(|f| {
            let (x, pa) = ca.get(f).copied().unwrap_or((0, false));
            let (y, pb) = cb.get(f).copied().unwrap_or((0, false));
            (x != y).then(|| {
                let delta = y as i64 - x as i64;
                CallShift {
                    function: f.to_string(),
                    calls_a: x,
                    calls_b: y,
                    delta,
                    delta_pct: (x > 0).then(|| (delta as f64 * 1000.0 / x as f64).round() / 10.0),
                    partial: pa || pb,
                }
            })
        })
        .collect();
    shifts.sort_by(|x, y| {
        y.delta
            .unsigned_abs()
            .cmp(&x.delta.unsigned_abs())
            .then_with(|| x.function.cmp(&y.function))
    });

    let (new_faults, resolved_faults, fault_changes) = fault_diff(a, b);

    let repairs = |r: &Report| -> BTreeMap<String, u64> {
        r.repairs
            .by_kind
            .iter()
            .map(|k| (k.kind.clone(), k.calls))
            .collect()
    };
    let (new_repairs, repair_changes) = kind_changes(&repairs(a), &repairs(b));
    let (new_event_kinds, event_kind_changes) =
        kind_changes(&a.input.unknown_event_kinds, &b.input.unknown_event_kinds);

    let pa = problem_keys(a);
    let pb = problem_keys(b);
    let only = |x: &BTreeMap<String, (Severity, ProblemChange)>,
                y: &BTreeMap<String, (Severity, ProblemChange)>| {
        let mut v: Vec<&(Severity, ProblemChange)> = x
            .iter()
            .filter(|(k, _)| !y.contains_key(*k))
            .map(|(_, v)| v)
            .collect();
        v.sort_by(|p, q| (p.0, &p.1.title).cmp(&(q.0, &q.1.title)));
        v.into_iter().map(|(_, c)| c.clone()).collect::<Vec<_>>()
    };
    let new_problems = only(&pb, &pa);
    let resolved_problems = only(&pa, &pb);
    let mut shifted: Vec<(Severity, ProblemShift)> = pa
        .iter()
        .filter_map(|(k, (sa, ca))| {
            let (sb, cb) = pb.get(k)?;
            (sa != sb || ca.title != cb.title).then(|| {
                (
                    *sb,
                    ProblemShift {
                        severity_a: ca.severity.clone(),
                        severity_b: cb.severity.clone(),
                        title_a: ca.title.clone(),
                        title_b: cb.title.clone(),
                    },
                )
            })
        })
        .collect();
    shifted.sort_by(|p, q| (p.0, &p.1.title_b).cmp(&(q.0, &q.1.title_b)));
    let changed_problems = shifted.into_iter().map(|(_, c)| c).collect();

    DiffReport {
        report_version: REPORT_VERSION,
        a: side(a),
        b: side(b),
        new_errors,
        disappeared_errors: disappeared,
        changed_errors: changed,
        call_shifts: shifts,
        new_faults,
        resolved_faults,
        fault_changes,
        new_repairs,
        repair_changes,
        new_event_kinds,
        event_kind_changes,
        new_problems,
        resolved_problems,
        changed_problems,
    }
}

/// (kind, function, check) -> (failed calls, processes), from the `launch_fault` and
/// `alloc_fault` problems.
fn faults(r: &Report) -> BTreeMap<(String, String, String), (u64, u64)> {
    let mut m = BTreeMap::new();
    for p in &r.problems {
        let kind = match p.kind {
            ProblemKind::LaunchFault => "launch_fault",
            ProblemKind::AllocFault => "alloc_fault",
            ProblemKind::LifetimeFault => "lifetime_fault",
            _ => continue,
        };
        if p.kind == ProblemKind::LifetimeFault {
            // One problem per fault kind: compared by kind, counted in processes.
            let check = p.fault.clone().unwrap_or_default();
            let e: &mut (u64, u64) = m
                .entry((kind.to_string(), String::new(), check))
                .or_default();
            e.0.sat_add(p.count);
            e.1.sat_add(p.processes);
            continue;
        }
        let function = p
            .functions
            .first()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        let check = p.check.clone().unwrap_or_default();
        let e: &mut (u64, u64) = m.entry((kind.to_string(), function, check)).or_default();
        e.0.sat_add(p.count);
        e.1.sat_add(p.processes);
    }
    m
}

/// New, resolved and changed launch and allocation faults.
fn fault_diff(a: &Report, b: &Report) -> (Vec<FaultChange>, Vec<FaultChange>, Vec<FaultChange>) {
    let fa = faults(a);
    let fb = faults(b);
    let keys: BTreeSet<&(String, String, String)> = fa.keys().chain(fb.keys()).collect();
    let (mut new, mut resolved, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for k in keys {
        let x = fa.get(k).copied();
        let y = fb.get(k).copied();
        let (ca, pa) = x.unwrap_or((0, 0));
        let (cb, pb) = y.unwrap_or((0, 0));
        let c = FaultChange {
            kind: k.0.clone(),
            function: k.1.clone(),
            check: k.2.clone(),
            count_a: ca,
            count_b: cb,
            processes_a: pa,
            processes_b: pb,
        };
        match (x, y) {
            (None, Some(_)) => new.push(c),
            (Some(_), None) => resolved.push(c),
            (Some(_), Some(_)) if (ca, pa) != (cb, pb) => changed.push(c),
            _ => {}
        }
    }
    let key = |c: &FaultChange| (c.kind.clone(), c.function.clone(), c.check.clone());
    new.sort_by(|x, y| y.count_b.cmp(&x.count_b).then_with(|| key(x).cmp(&key(y))));
    resolved.sort_by(|x, y| y.count_a.cmp(&x.count_a).then_with(|| key(x).cmp(&key(y))));
    changed.sort_by(|x, y| {
        let dx = x.count_a.abs_diff(x.count_b);
        let dy = y.count_a.abs_diff(y.count_b);
        dy.cmp(&dx).then_with(|| key(x).cmp(&key(y)))
    });
    (new, resolved, changed)
}

/// Kinds B has and A does not (most first), and kinds of A whose count differs (by kind).
fn kind_changes(
    ka: &BTreeMap<String, u64>,
    kb: &BTreeMap<String, u64>,
) -> (Vec<KindChange>, Vec<KindChange>) {
    let kinds: BTreeSet<&String> = ka.keys().chain(kb.keys()).collect();
    let mut new = Vec::new();
    let mut changed = Vec::new();
    for k in kinds {
        let x = ka.get(k).copied().unwrap_or(0);
        let y = kb.get(k).copied().unwrap_or(0);
        let c = KindChange {
            kind: k.clone(),
            count_a: x,
            count_b: y,
        };
        if x == 0 {
            if y > 0 {
                new.push(c);
            }
        } else if x != y {
            changed.push(c);
        }
    }
    new.sort_by(|x, y| y.count_b.cmp(&x.count_b).then_with(|| x.kind.cmp(&y.kind)));
    (new, changed)
}

fn pct(p: Option<f64>) -> String {
    match p {
        Some(v) => format!("{v:+.1}%"),
        None => "new".to_string(),
    }
}

/// Renders a diff for the terminal.
pub fn render_text(d: &DiffReport) -> String {
    let mut out = String::new();
    out.push_str("DIFF\n");
    for (label, s) in [("A", &d.a), ("B", &d.b)] {
        push_wrapped(
            &mut out,
            &format!("  {label}: "),
            &format!(
                "{} -- {}, {} ({} without exit summary), {}, {}",
                s.paths.join(" "),
                counted(s.files_read, "file", "files"),
                counted(s.processes, "process", "processes"),
                s.processes_without_exit_summary,
                counted(s.calls, "call", "calls"),
                counted(s.errors, "error", "errors")
            ),
        );
    }

    let errors = |out: &mut String, title: &str, list: &[ErrorChange]| {
        out.push_str(&format!("\n{title}\n"));
        if list.is_empty() {
            out.push_str("  none\n");
            return;
        }
        let mut t = Table::new(&["FUNCTION", "RESULT", ">A", ">B"]);
        for e in list {
            t.row(vec![
                e.function.clone(),
                e.result.clone(),
                fmt::count(e.count_a),
                fmt::count(e.count_b),
            ]);
        }
        out.push_str(&t.render("  "));
    };
    errors(&mut out, "NEW ERRORS (in B, not in A)", &d.new_errors);
    errors(
        &mut out,
        "DISAPPEARED ERRORS (in A, not in B)",
        &d.disappeared_errors,
    );
    errors(&mut out, "CHANGED ERROR COUNTS", &d.changed_errors);

    out.push_str("\nCALL COUNT SHIFTS\n");
    if d.call_shifts.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut t = Table::new(&["FUNCTION", ">A", ">B", ">CHANGE", ">%"]);
        for s in &d.call_shifts {
            let sign = if s.delta < 0 { "-" } else { "+" };
            t.row(vec![
                format!("{}{}", s.function, if s.partial { " *" } else { "" }),
                fmt::count(s.calls_a),
                fmt::count(s.calls_b),
                format!("{sign}{}", fmt::count(s.delta.unsigned_abs())),
                pct(s.delta_pct),
            ]);
        }
        out.push_str(&t.render("  "));
        if d.call_shifts.iter().any(|s| s.partial) {
            out.push_str(
                "  * a side has processes without an exit summary: their calls are not counted\n",
            );
        }
    }

    if !(d.new_faults.is_empty() && d.resolved_faults.is_empty() && d.fault_changes.is_empty()) {
        let lifetime = [&d.new_faults, &d.resolved_faults, &d.fault_changes]
            .iter()
            .any(|l| l.iter().any(|c| c.kind == "lifetime_fault"));
        out.push_str(if lifetime {
            "\nFAULTS (failed calls by function and check; lifetime faults: processes by fault kind)\n"
        } else {
            "\nLAUNCH AND ALLOCATION FAULTS (failed calls by function and check)\n"
        });
        let mut t = Table::new(&[
            "KIND",
            "FUNCTION",
            "CHECK",
            "CHANGE",
            ">A",
            ">B",
            ">PROCESSES A",
            ">PROCESSES B",
        ]);
        for (list, what) in [
            (&d.new_faults, "new in B"),
            (&d.resolved_faults, "gone in B"),
            (&d.fault_changes, "changed"),
        ] {
            for c in list {
                t.row(vec![
                    c.kind.clone(),
                    if c.function.is_empty() {
                        "-".to_string()
                    } else {
                        c.function.clone()
                    },
                    c.check.clone(),
                    what.to_string(),
                    fmt::count(c.count_a),
                    fmt::count(c.count_b),
                    fmt::count(c.processes_a),
                    fmt::count(c.processes_b),
                ]);
            }
        }
        out.push_str(&t.render("  "));
    }

    let kinds = |out: &mut String,
                 title: &str,
                 new: &[KindChange],
                 changed: &[KindChange],
                 always: bool| {
        if new.is_empty() && changed.is_empty() && !always {
            return;
        }
        out.push_str(&format!("\n{title}\n"));
        if new.is_empty() && changed.is_empty() {
            out.push_str("  none\n");
            return;
        }
        let mut t = Table::new(&["KIND", "CHANGE", ">A", ">B"]);
        for k in new {
            t.row(vec![
                k.kind.clone(),
                "new in B".to_string(),
                fmt::count(k.count_a),
                fmt::count(k.count_b),
            ]);
        }
        for k in changed {
            t.row(vec![
                k.kind.clone(),
                if k.count_b == 0 {
                    "gone in B"
                } else {
                    "changed"
                }
                .to_string(),
                fmt::count(k.count_a),
                fmt::count(k.count_b),
            ]);
        }
        out.push_str(&t.render("  "));
    };
    kinds(
        &mut out,
        "REPAIRS (calls repaired in fix mode, by kind)",
        &d.new_repairs,
        &d.repair_changes,
        true,
    );
    kinds(
        &mut out,
        "UNKNOWN EVENT KINDS (records of kinds this analyzer does not know)",
        &d.new_event_kinds,
        &d.event_kind_changes,
        false,
    );

    for (title, list) in [
        ("NEW PROBLEMS", &d.new_problems),
        ("RESOLVED PROBLEMS", &d.resolved_problems),
    ] {
        out.push_str(&format!("\n{title}\n"));
        if list.is_empty() {
            out.push_str("  none\n");
        }
        for p in list {
            push_wrapped(&mut out, &format!("  [{}] ", p.severity), &p.title);
        }
    }
    out.push_str("\nCHANGED PROBLEMS (on both sides)\n");
    if d.changed_problems.is_empty() {
        out.push_str("  none\n");
    }
    for p in &d.changed_problems {
        let sev = if p.severity_a == p.severity_b {
            p.severity_b.clone()
        } else {
            format!("{}, was {}", p.severity_b, p.severity_a)
        };
        push_wrapped(&mut out, &format!("  [{sev}] "), &p.title_b);
        if p.title_a != p.title_b {
            push_wrapped(&mut out, "      was: ", &p.title_a);
        }
    }
    out
}

/// `1 file`, `2 files`, `1,234 calls`.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", fmt::count(n), if n == 1 { one } else { many })
}

/// Function -> (calls, whether a process without exit summary called it).
fn calls_by_function(r: &Report) -> BTreeMap<&str, (u64, bool)> {
    r.functions
        .iter()
        .map(|f| {
            (
                f.function.as_str(),
                (f.calls, f.processes_without_exit_summary > 0),
            )
        })
        .collect()
}
