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

/// The line said when the program exited with status `status` (not 0) after asking the
/// driver for the device count, and the traces explain nothing (no warning or error
/// problem, no repair, no failed call): a CUDA runtime linked statically into the program
/// or into an extension module (CuPy 14, cuda-python 13) checks a device ordinal against
/// that count itself and refuses it without asking the driver, so the shim has no failing
/// call to explain (docs/configuration.md, "Device selection above the driver"). `None`
/// otherwise, and when no trace has the device list.
pub fn refused_above_driver(r: &Report, status: u8) -> Option<String> {
    if status == 0 {
        return None;
    }
    let explained = r
        .problems
        .iter()
        .any(|p| p.severity != seedance_analyze::report::Severity::Info);
    // The runtime's cuGetProcAddress version probes fail by design (docs/design.md, fact 11).
    let failed = r
        .functions
        .iter()
        .any(|f| f.errors > 0 && !f.function.starts_with("cuGetProcAddress"));
    if explained || failed || r.repairs.calls_repaired > 0 {
        return None;
    }
    let asked = r
        .functions
        .iter()
        .any(|f| f.function == "cuDeviceGetCount" && f.calls > 0);
    let count = r
        .processes
        .iter()
        .filter(|p| p.has_session_start)
        .map(|p| p.devices.len())
        .max()?;
    if !asked {
        return None;
    }
    let devices = match count {
        0 => "no device".to_string(),
        1 => "1 device, ordinal 0".to_string(),
        n => format!("{n} devices, ordinals 0 to {}", n - 1),
    };
    Some(format!(
        "the program exited with status {status} after asking the driver for the device count \
         ({devices}), and no driver call failed: a device selection may have been refused \
         above the driver, by a CUDA runtime linked into the program or an extension module \
         (CuPy, cuda-python), which checks the ordinal against that count itself"
    ))
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
