//! The JSON form of a report: the [`Report`] serialized, pretty-printed, one trailing
//! newline. The schema is documented on the types of [`crate::report`] and in
//! `docs/analyzer.md`.

use crate::report::Report;
use serde::Serialize;

/// Serializes any report value (a [`Report`], a [`crate::diff::DiffReport`]) as pretty
/// JSON with a trailing newline.
pub fn to_json<T: Serialize>(value: &T) -> String {
    // Serializing these types cannot fail: string keys, no non-finite floats are produced.
    let mut s = serde_json::to_string_pretty(value)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    s.push('\n');
    s
}

/// The summary report as JSON.
pub fn render(report: &Report) -> String {
    to_json(report)
}
