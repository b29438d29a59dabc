//! The serde types of a diff: [`DiffReport`] and its parts.

use serde::{Deserialize, Serialize};

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
