//! `seedance-analyze`: turns seedance-fix traces, from one process or a whole fleet, into a
//! diagnosis.
//!
//! # Design
//!
//! The sources are folders, one per stage, each using only the stages before it:
//!
//! - [`read`]: finding the input (files, directories, object-storage prefixes), splitting
//!   it into lines and parsing each line. The input can be large (a fleet writes gigabytes
//!   of JSON lines), so every file is read line by line through one reused buffer
//!   ([`read::input`]), each line parsed first loosely into borrowed fields and only then,
//!   for the rare record kinds that need it, into lenient copies of the [`seedance_trace`]
//!   types ([`read::records`]).
//! - [`aggregate`]: what is kept, a set of mergeable aggregates keyed by process, function
//!   and CUresult: memory grows with the number of distinct keys, never with the number of
//!   lines. Files are independent, so they are read in parallel (one rayon task per file)
//!   and their aggregates merged.
//! - [`problems`]: one finder per problem kind or family of kinds, run from one list.
//! - [`report`]: the [`report::Report`], a documented, versioned and serde-serializable
//!   value (`report_version`), and its builder; each problem carries its kind's own data
//!   ([`report::ProblemDetail`]).
//! - [`render`]: the report as a terminal table ([`render::text`], one public function per
//!   section), JSON ([`render::json`]) or a self-contained HTML page ([`render::html`]).
//! - [`diff`] compares two reports, [`export`] turns the traces' events into OTLP log
//!   records and sends them, [`gate`] decides the exit codes of CI gates, and
//!   [`problems::curesult`] describes a CUresult code.
//!
//! Robustness rules: unknown event kinds are counted and skipped (later schema versions add
//! kinds); malformed, truncated or oversized lines are counted, never fatal; files that are
//! not traces are skipped and counted. Nothing in here panics on bad input.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod aggregate;
pub mod diff;
pub mod export;
pub mod gate;
pub mod problems;
pub mod read;
pub mod render;
pub mod report;

pub use aggregate::Aggregate;
pub use read::input::{analyze_paths, Options};
pub use report::build::build_report;
pub use report::{Report, REPORT_VERSION};

use std::path::PathBuf;

/// Why an analysis could not start. Problems inside the input (bad lines, unreadable
/// files found while walking a directory) are not errors: they are counted in the report.
#[derive(Debug)]
pub enum Error {
    /// A path given on the command line does not exist or cannot be inspected.
    Path(PathBuf, std::io::Error),
    /// An object-storage URL that cannot be listed (no such bucket, no credentials, ...).
    Remote(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Path(p, e) => write!(f, "{}: {e}", p.display()),
            Error::Remote(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}

/// Reads every trace under `paths` and builds the report: [`analyze_paths`] then
/// [`build_report`].
pub fn summarize(paths: &[PathBuf], options: &Options) -> Result<Report, Error> {
    let agg = analyze_paths(paths, options)?;
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    Ok(build_report(agg, &shown))
}

/// Saturating `+=` for the counts read from traces: a hostile or corrupt exit summary
/// (counts near `u64::MAX`) makes totals stop at `u64::MAX` instead of wrapping or
/// panicking.
pub(crate) trait SatAdd {
    /// `*self = self.saturating_add(n)`.
    fn sat_add(&mut self, n: impl std::borrow::Borrow<u64>);
}

impl SatAdd for u64 {
    #[inline]
    fn sat_add(&mut self, n: impl std::borrow::Borrow<u64>) {
        *self = self.saturating_add(*n.borrow());
    }
}

/// Saturating sum of counts.
pub(crate) fn sat_sum<I: IntoIterator<Item = u64>>(it: I) -> u64 {
    it.into_iter().fold(0, u64::saturating_add)
}
