//! What `seedance-fix run` prints at the end: the SUMMARY, PROBLEMS and REPAIRS sections of
//! the analyzer's text report of this run's traces (the same words as
//! `seedance-analyze summary`), or nothing when there is nothing to say.

use seedance_analyze::report::Report;

/// The sections of the text report shown after a run, by their headings.
const SECTIONS: [&str; 3] = ["SUMMARY", "PROBLEMS", "REPAIRS"];

/// True when the run has something to report: a problem, or a call the fix mode repaired.
pub fn worth_saying(r: &Report) -> bool {
    !r.problems.is_empty() || r.repairs.calls_repaired > 0 || !r.repairs.fallbacks.is_empty()
}

/// The sections of `text` (the analyzer's text report, sections separated by a blank line,
/// each starting with its heading in capitals) named in [`SECTIONS`], in order.
pub fn sections(text: &str) -> String {
    let mut out = String::new();
    for part in text.split("\n\n") {
        let heading = part.lines().next().unwrap_or("").trim();
        if SECTIONS.contains(&heading) {
            out.push_str(part.trim_end_matches('\n'));
            out.push_str("\n\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_named_sections_only() {
        let text = "SUMMARY\n  a\n\nPROBLEMS\n  1. x\n\nREPAIRS\n  none\n\nHOSTS\n  h\n";
        assert_eq!(
            sections(text),
            "SUMMARY\n  a\n\nPROBLEMS\n  1. x\n\nREPAIRS\n  none\n\n"
        );
    }
}
