//! What changed between two runs: `seedance-analyze diff A B`.
//!
//! Both sides are summarized into [`Report`]s and compared by key: errors by (function,
//! CUresult), calls by function, launch and allocation faults by (kind, function, check)
//! and lifetime faults by fault kind
//! (the reports' `launch_fault` and `alloc_fault` problems), repaired calls by repair kind
//! (the reports' `repairs`), records of event kinds the analyzer does not know by kind,
//! problems by their `key`. The result is a [`DiffReport`], versioned like the summary
//! report (`report_version`).

mod compare;
mod text;
mod types;

pub use compare::diff;
pub use text::render_text;
pub use types::{
    CallShift, DiffReport, ErrorChange, FaultChange, KindChange, ProblemChange, ProblemShift, Side,
};
