//! What `seedance-fix run` prints at the end: the SUMMARY, PROBLEMS and REPAIRS sections of
//! the analyzer's text report of this run's traces (the same words as
//! `seedance-analyze summary`, from the analyzer's section renderers), or nothing when
//! there is nothing to say.

use seedance_analyze::render::text;
use seedance_analyze::report::Report;

/// True when the run has something to report: a problem, or a call the fix mode repaired.
pub fn worth_saying(r: &Report) -> bool {
    !r.problems.is_empty() || r.repairs.calls_repaired > 0 || !r.repairs.fallbacks.is_empty()
}

/// The sections of the analyzer's text report shown after a run: SUMMARY, PROBLEMS and
/// REPAIRS (without its fallback table), each followed by a blank line.
pub fn sections(r: &Report) -> String {
    [text::summary(r), text::problems(r), text::repairs(r)]
        .map(|s| s + "\n")
        .concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> Report {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../seedance-analyze/tests/fixtures")
            .join(name);
        seedance_analyze::summarize(&[dir], &seedance_analyze::Options::default()).unwrap()
    }

    #[test]
    fn the_sections_open_the_full_report() {
        for name in ["v2", "v3", "v4", "v5", "fleet"] {
            let r = fixture(name);
            let full = text::render(&r);
            let shown = sections(&r);
            assert!(full.starts_with(&shown), "{name}:\n{shown}");
            let headings: Vec<&str> = shown
                .split("\n\n")
                .filter_map(|part| part.lines().next())
                .collect();
            assert_eq!(headings, ["SUMMARY", "PROBLEMS", "REPAIRS"], "{name}");
        }
    }

    #[test]
    fn the_fallback_table_is_left_to_the_full_report() {
        let r = fixture("v2");
        assert!(!r.repairs.fallbacks.is_empty());
        assert!(text::render(&r).contains("\n  FALLBACK "));
        assert!(!sections(&r).contains("\n  FALLBACK "));
        assert!(sections(&r).ends_with("\n\n"));
    }
}
