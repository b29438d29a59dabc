//! Comparing two reports by key into a [`DiffReport`].

use super::types::{
    CallShift, DiffReport, ErrorChange, FaultChange, KindChange, ProblemChange, ProblemShift, Side,
};
use crate::report::{ProblemDetail, ProblemKind, Report, Severity, REPORT_VERSION};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

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
        let key = match &p.detail {
            // One problem per fault kind: compared by kind, counted in processes.
            ProblemDetail::LifetimeFault(d) => ("lifetime_fault", String::new(), d.fault.clone()),
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => (
                if p.kind() == ProblemKind::LaunchFault {
                    "launch_fault"
                } else {
                    "alloc_fault"
                },
                d.functions
                    .first()
                    .map(|f| f.name.clone())
                    .unwrap_or_default(),
                d.check.clone(),
            ),
            _ => continue,
        };
        let e: &mut (u64, u64) = m.entry((key.0.to_string(), key.1, key.2)).or_default();
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
