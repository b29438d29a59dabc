//! The program's descriptors are its own: the trace and the shim's stderr lines never land
//! in a file the program opened on a descriptor number the shim used (a daemon that closes
//! every descriptor from 3 up, or from 2 up, then opens its data file), and a program that
//! points descriptor 2 at a log file before its first CUDA call still gets the lines there.

use seedance_e2e::{Finished, Run};
use std::collections::BTreeMap;

/// Event kinds and how many of each.
fn kinds(r: &Finished) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for rec in &r.records {
        *m.entry(rec["event"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    m
}

/// `daemon_fds` in `mode`, its data file in the run's directory; without the fake driver's
/// call log (an open descriptor of the fake's own, which the program would close too).
fn daemon(mode: &str) -> (Finished, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let r = Run::new("daemon_fds", true)
        .env_remove("FAKE_CUDA_LOG")
        .env("SEEDANCE_MODE", "observe")
        .args(&[data.to_str().unwrap(), mode])
        .finish();
    let text = std::fs::read_to_string(&data).unwrap_or_default();
    (r, text)
}

/// Descriptor 3 closed by the program and reused for its data file: the data file holds
/// the program's two lines only, and the trace is whole (the same records as when the
/// program closes nothing). Before, the data file got the shim's later records and the
/// trace lost them.
#[test]
fn a_daemon_closing_every_descriptor_keeps_its_data_file_and_the_trace() {
    let (keep, keep_data) = daemon("keep");
    let keep = keep.ok();
    assert_eq!(keep_data, "data begins\ndata ends\n");
    let want = kinds(&keep);
    assert_eq!(want.get("call_failed"), Some(&15), "{want:?}");
    assert_eq!(want.get("exit_summary"), Some(&1), "{want:?}");
    for run in 0..3 {
        let (r, data) = daemon("close3");
        let r = r.ok();
        assert_eq!(r.stdout(), "data fd 3\n");
        assert_eq!(data, "data begins\ndata ends\n", "run {run}");
        assert_eq!(kinds(&r), want, "run {run}");
        assert_eq!(r.trace_files, 1);
    }
}

/// Descriptor 2 closed and reused for the data file: no `seedance:` line (nor trace record)
/// lands in it; the trace is whole.
#[test]
fn stderr_lines_never_land_in_a_file_that_took_descriptor_2() {
    let (keep, _) = daemon("keep");
    let want = kinds(&keep.ok());
    let (r, data) = daemon("close2");
    let r = r.ok();
    assert_eq!(r.stdout(), "data fd 2\n");
    assert_eq!(data, "data begins\ndata ends\n");
    assert_eq!(kinds(&r), want);
}

/// A log file put on descriptor 2 (`dup2`) before the first CUDA call gets the shim's
/// lines, after the program's own.
#[test]
fn a_log_file_dup2ed_onto_stderr_before_cuda_gets_the_lines() {
    let (r, data) = daemon("dup2");
    let r = r.ok();
    assert_eq!(r.stdout(), "data fd 2\n");
    let lines: Vec<&str> = data.lines().collect();
    assert!(
        lines.contains(&"data begins") && lines.contains(&"data ends"),
        "{data}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("seedance: ")).count(),
        2,
        "{data}"
    );
}
