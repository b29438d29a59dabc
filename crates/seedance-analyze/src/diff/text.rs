//! A diff for the terminal.

use super::types::{DiffReport, ErrorChange, KindChange};
use crate::render::fmt::{self, counted};
use crate::render::table::{push_wrapped, Table};

fn pct(p: Option<f64>) -> String {
    match p {
        Some(v) => format!("{v:+.1}%"),
        None => "new".to_string(),
    }
}

/// Renders a diff for the terminal.
pub fn render_text(d: &DiffReport) -> String {
    let escaped = crate::render::escape::strings(d);
    crate::render::escape::terminal(&render_escaped(escaped.as_ref().unwrap_or(d)))
}

fn render_escaped(d: &DiffReport) -> String {
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

    errors(&mut out, "NEW ERRORS (in B, not in A)", &d.new_errors);
    errors(
        &mut out,
        "DISAPPEARED ERRORS (in A, not in B)",
        &d.disappeared_errors,
    );
    errors(&mut out, "CHANGED ERROR COUNTS", &d.changed_errors);
    call_shifts(&mut out, d);
    faults(&mut out, d);

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
    problems(&mut out, d);
    out
}

/// One list of errors by (function, result).
fn errors(out: &mut String, title: &str, list: &[ErrorChange]) {
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
}

/// The CALL COUNT SHIFTS section.
fn call_shifts(out: &mut String, d: &DiffReport) {
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
}

/// The section of launch, allocation and lifetime faults; nothing when none changed.
fn faults(out: &mut String, d: &DiffReport) {
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
}

/// A section of counts by kind: new ones, then changed ones.
fn kinds(out: &mut String, title: &str, new: &[KindChange], changed: &[KindChange], always: bool) {
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
}

/// The NEW, RESOLVED and CHANGED PROBLEMS sections.
fn problems(out: &mut String, d: &DiffReport) {
    for (title, list) in [
        ("NEW PROBLEMS", &d.new_problems),
        ("RESOLVED PROBLEMS", &d.resolved_problems),
    ] {
        out.push_str(&format!("\n{title}\n"));
        if list.is_empty() {
            out.push_str("  none\n");
        }
        for p in list {
            push_wrapped(out, &format!("  [{}] ", p.severity), &p.title);
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
        push_wrapped(out, &format!("  [{sev}] "), &p.title_b);
        if p.title_a != p.title_b {
            push_wrapped(out, "      was: ", &p.title_a);
        }
    }
}
