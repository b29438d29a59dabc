//! The problems of the input itself: lines that are not records, files that could not be
//! read, records of a newer schema.

use crate::problems::parts::{plural, simple_problem};
use crate::problems::Input;
use crate::render::fmt;
use crate::report::{Problem, ProblemDetail, Severity};

/// `malformed_input`: lines that could not be read as records.
pub(crate) fn malformed_input(input: &Input, out: &mut Vec<Problem>) {
    let c = &input.agg.counters;
    let bad = c.malformed_lines + c.truncated_lines + c.oversized_lines;
    if bad > 0 {
        out.push(simple_problem(
            ProblemDetail::MalformedInput,
            Severity::Info,
            format!(
                "{} of {} {} could not be read as trace records",
                fmt::count(bad),
                fmt::count(c.lines),
                plural(c.lines, "line", "lines")
            ),
            bad,
            &[],
            vec![format!(
                "malformed: {}, truncated last lines: {}, oversized: {}",
                c.malformed_lines, c.truncated_lines, c.oversized_lines
            )],
            &[
                "Truncated last lines are normal for processes that were killed. Other malformed \
                 lines mean the files were corrupted or mixed with other output: keep each trace \
                 file to the shim alone.",
            ],
        ));
    }
}

/// `unreadable_files`: files that could not be read completely.
pub(crate) fn unreadable_files(input: &Input, out: &mut Vec<Problem>) {
    let c = &input.agg.counters;
    if c.unreadable_files + c.files_with_read_errors > 0 {
        let n = c.unreadable_files + c.files_with_read_errors;
        out.push(simple_problem(
            ProblemDetail::UnreadableFiles,
            Severity::Warning,
            format!(
                "{n} {} could not be read completely",
                plural(n, "file", "files")
            ),
            n,
            &[],
            c.errors.iter().map(|(p, e)| format!("{p}: {e}")).collect(),
            &["Check permissions and, for .gz files, that they were completely written."],
        ));
    }
}

/// `newer_schema`: records of a newer trace schema than this analyzer knows.
pub(crate) fn newer_schema(input: &Input, out: &mut Vec<Problem>) {
    let c = &input.agg.counters;
    if c.newer_schema_records > 0 {
        out.push(simple_problem(
            ProblemDetail::NewerSchema,
            Severity::Info,
            format!(
                "{} {} written with a newer trace schema than this analyzer knows",
                fmt::count(c.newer_schema_records),
                plural(c.newer_schema_records, "record", "records")
            ),
            c.newer_schema_records,
            &[],
            Vec::new(),
            &["Upgrade seedance-analyze to see the new event kinds; known fields are still read."],
        ));
    }
}
