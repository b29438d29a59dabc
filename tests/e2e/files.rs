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
        // Descriptor 3 unless the trace writer, finding its file closed, opened it again
        // between the program's closing and its open (its queue still held the failed
        // calls' records): then the writer has 3 and the data file 4.
        assert!(
            ["data fd 3\n", "data fd 4\n"].contains(&r.stdout().as_str()),
            "{}",
            r.stdout()
        );
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
    // Descriptor 2 unless the writer opened its file again in between (above).
    assert!(
        ["data fd 2\n", "data fd 3\n"].contains(&r.stdout().as_str()),
        "{}",
        r.stdout()
    );
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

/// A trace cut by a refused write, as a full disk cuts it: `trace_limit` sets its file size
/// limit (RLIMIT_FSIZE, SIGXFSZ ignored) so that the trace's fourth record is written only
/// in part and the write then fails with EFBIG, the same failed `write` a full disk gives
/// with ENOSPC (the writer's one write-error path, which does not look at the error's
/// kind). The program's output and exit are unchanged; the trace is cut back to its last
/// whole line and ends with a `trace_cut` record naming the error; the analyzer reports
/// the process as cut by a refused write, not as killed. Before, the trace ended with the
/// cut line and the analyzer said "killed or still running ... check dmesg for the OOM
/// killer".
#[test]
fn a_trace_cut_by_a_refused_write_says_so() {
    let whole = Run::new("trace_limit", true)
        .env("SEEDANCE_MODE", "observe")
        .env_remove("FAKE_CUDA_LOG")
        .finish()
        .ok();
    assert_eq!(whole.stdout(), "failed 20\n");
    let lens: Vec<u64> = whole
        .records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap().len() as u64 + 1)
        .collect();
    // Three whole records, then all but the last 10 bytes of the fourth: a trace_cut
    // record (about 140 bytes) fits in the room the cut one leaves.
    let limit = lens[..3].iter().sum::<u64>() + lens[3] - 10;
    let dir = tempfile::tempdir().unwrap();
    let r = Run::new("trace_limit", true)
        .env("SEEDANCE_MODE", "observe")
        .env_remove("FAKE_CUDA_LOG")
        .env("SEEDANCE_TRACE_DIR", dir.path())
        .arg(&limit.to_string())
        .finish()
        .ok();
    assert_eq!(r.stdout(), "failed 20\n");
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    let path = files[0].as_ref().unwrap().path();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["session_start", "call_failed", "call_failed", "trace_cut"]
    );
    let cut = &records[3];
    assert_eq!(cut["error"], "File too large (os error 27)");
    assert_eq!(cut["os_error"], 27);
    assert_eq!(cut["tid"], 0);
    assert!(
        r.stderr()
            .lines()
            .any(|l| l.starts_with("seedance: writing the trace ")
                && l.ends_with(
                    "failed (File too large (os error 27)); nothing more is written to it and \
                 the records are counted as dropped"
                )),
        "{}",
        r.stderr()
    );
    let report = crate::signals::analyze(dir.path());
    assert_eq!(report["processes"][0]["status"], "trace_cut", "{report:#}");
    let kinds: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"trace_cut"), "{kinds:?}");
    assert!(!kinds.contains(&"no_exit_summary"), "{kinds:?}");
}

/// A trace directory that is a symbolic link to nothing: one line that says so, the
/// program unchanged. Before, the line said "File exists".
#[test]
fn a_dangling_symlink_as_the_trace_directory_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("traces");
    std::os::unix::fs::symlink(dir.path().join("gone"), &link).unwrap();
    let plain = Run::new("linked", true)
        .env_remove("SEEDANCE_TRACE_DIR")
        .finish();
    let r = Run::new("linked", true)
        .env("SEEDANCE_TRACE_DIR", &link)
        .finish();
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.output.status.code(), plain.output.status.code());
    let want = format!(
        "seedance: no trace will be written: {} is a symbolic link to {}, which does not \
         exist; create that directory or point SEEDANCE_TRACE_DIR at an existing one",
        link.display(),
        dir.path().join("gone").display()
    );
    let lines: Vec<String> = r.stderr().lines().map(str::to_string).collect();
    assert!(lines.contains(&want), "{}", r.stderr());
    assert_eq!(
        lines.len(),
        plain.stderr().lines().count() + 1,
        "{}",
        r.stderr()
    );
    assert!(!dir.path().join("gone").exists());
}
