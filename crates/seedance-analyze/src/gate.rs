//! Gates for CI jobs: whether a report has problems of a given severity
//! (`summary --fail-on`), whether a diff has new ones (`diff --fail-on new`), and whether the
//! input held any trace at all. The exit codes the command line gives for them are
//! [`EXIT_NO_TRACE`] and [`EXIT_GATE`], and [`EXIT_PUSH`] for `export --otlp-endpoint`
//! (docs/analyzer.md, "Exit codes").

use crate::diff::DiffReport;
use crate::report::{Report, Severity};

/// Exit code when the input held no trace file ("no trace found in ..." on stderr).
pub const EXIT_NO_TRACE: u8 = 3;

/// Exit code when a `--fail-on` gate found what it gates on.
pub const EXIT_GATE: u8 = 4;

/// Exit code when `export --otlp-endpoint` could not deliver every request
/// ([`crate::export::push`]).
pub const EXIT_PUSH: u8 = 5;

/// The least severity that fails `summary --fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    /// Problems of severity `error`.
    Error,
    /// Problems of severity `error` or `warning`.
    Warning,
}

/// True when the report read no trace file: the paths were empty, or held only files that
/// are not traces.
pub fn no_trace(report: &Report) -> bool {
    report.input.files_read == 0
}

/// The problems of `report` at or above `level`, as one line for stderr
/// (`2 problems at severity warning or worse: 1 error, 1 warning`), or `None` when there
/// are none.
pub fn summary_gate(report: &Report, level: FailOn) -> Option<String> {
    let errors = report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    let warnings = report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Warning)
        .count();
    let (n, what) = match level {
        FailOn::Error => (errors, "error"),
        FailOn::Warning => (errors + warnings, "warning or worse"),
    };
    if n == 0 {
        return None;
    }
    let mut parts = vec![crate::render::fmt::counted(
        errors as u64,
        "error",
        "errors",
    )];
    if level == FailOn::Warning {
        parts.push(crate::render::fmt::counted(
            warnings as u64,
            "warning",
            "warnings",
        ));
    }
    Some(format!(
        "{} at severity {what}: {}",
        crate::render::fmt::counted(n as u64, "problem", "problems"),
        parts.join(", ")
    ))
}

/// What run B has that run A does not, or has worse: CUresults, launch or allocation
/// faults, problems of severity `error` or `warning` (an `info` problem does not fail the
/// gate), and problems on both sides whose severity rose (a fault A's run repaired, a
/// `warning`, that B's did not, an `error`), as one line for stderr, or `None` when there
/// is nothing new or worse. The first problem that rose is named in the line.
pub fn diff_gate(d: &DiffReport) -> Option<String> {
    let problems = d
        .new_problems
        .iter()
        .filter(|p| p.severity != Severity::Info.as_str())
        .count() as u64;
    let errors = d.new_errors.len() as u64;
    let faults = d.new_faults.len() as u64;
    let worse: Vec<_> = d
        .changed_problems
        .iter()
        .filter(|p| rank(&p.severity_b) < rank(&p.severity_a))
        .collect();
    if problems + errors + faults + worse.len() as u64 == 0 {
        return None;
    }
    let mut line = format!(
        "new in {}: {}, {}, {}",
        d.b.paths.join(" "),
        crate::render::fmt::counted(
            errors,
            "failing call (function, CUresult)",
            "failing calls (function, CUresult)",
        ),
        crate::render::fmt::counted(faults, "fault", "faults"),
        crate::render::fmt::counted(problems, "problem", "problems"),
    );
    if let Some(first) = worse.first() {
        line.push_str(&format!(
            ", {} more severe ({} -> {}: {})",
            crate::render::fmt::counted(worse.len() as u64, "problem", "problems"),
            first.severity_a,
            first.severity_b,
            first.title_b
        ));
    }
    Some(line)
}

/// The severity a diff reports as text, in [`Severity`]'s order (`error` first); a word
/// this analyzer does not know counts as `info` (in B it never trips the gate).
fn rank(severity: &str) -> Severity {
    Severity::from_name(severity).unwrap_or(Severity::Info)
}
