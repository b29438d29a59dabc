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
