//! Signals and exits: SIGTERM, SIGINT, SIGKILL, `exit()` from another thread and
//! `_exit`. The shim installs no signal handler, so a process killed by a signal, or ended by
//! `_exit`, writes no exit summary; what the writer thread had written stays, as complete
//! lines, and the analyzer reads it and reports the process as ended without an exit summary.
//! `exit()` runs the atexit handlers, whichever thread calls it: the exit summary is written,
//! with the calls of every thread.
//!
//! Each test runs `signals_wait` (`tests/programs/signals_wait.c`) in observe mode: it makes
//! a few driver calls, one of them a device fault (`cuDeviceGet(9)` with 2 devices), says
//! "ready", and waits. The trace writer is asynchronous, so the test waits until the trace
//! file holds the `device_fault` line before it ends the process.

use seedance_e2e::{Run, Running};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

/// What the program prints once its calls are made.
const READY: &str = "ready: 2 devices, cuDeviceGet(9) -> 101\n";

/// The shim's explanation of `cuDeviceGet(9)` on stderr (observe mode): the only line.
const FAULT_STDERR: &str = "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 9 \
    requested, 2 devices visible (ordinal 0 = physical GPU 0, Fake H200 #0, 0000:10:00.0; \
    ordinal 1 = physical GPU 1, Fake H200 #1, 0000:11:00.0); the program expects more GPUs \
    than this host or container exposes; use ordinals 0..1 or run it with fewer ranks per node\n";

/// Longest wait for something the program or its trace writer does.
const PATIENCE: Duration = Duration::from_secs(10);

fn start(args: &[&str]) -> Running {
    Run::new("signals_wait", true)
        .env("SEEDANCE_MODE", "observe")
        .args(args)
        .spawn()
}

/// Polls `cond` every 5 ms until it holds; fails after [`PATIENCE`], saying what it waited
/// for and what `state` shows then.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}; {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The one trace file in `dir`.
fn trace_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "trace files: {files:?}");
    files.into_iter().next().unwrap()
}

/// Waits until the program said "ready" and its trace holds the complete `device_fault` line.
fn wait_ready(r: &Running) {
    let stdout = || format!("stdout so far: {:?}", r.stdout_so_far());
    wait_until("\"ready\" on stdout", || r.stdout_so_far() == READY, stdout);
    let traces = r.traces();
    let trace = || {
        let files: Vec<_> = std::fs::read_dir(&traces)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        match files.as_slice() {
            [one] => std::fs::read_to_string(one).unwrap_or_default(),
            _ => String::new(),
        }
    };
    wait_until(
        "the device_fault line in the trace",
        || {
            trace()
                .split_inclusive('\n')
                .any(|l| l.ends_with('\n') && l.contains(r#""event":"device_fault""#))
        },
        || format!("trace so far: {:?}", trace()),
    );
}

fn send(r: &Running, sig: i32) {
    // SAFETY: kill(2) with the pid of our own child, which has not been waited for yet.
    let rc = unsafe { kill(r.child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({}, {sig})", r.child.id());
}

/// Every line of the trace file, parsed: the file ends with a newline and every line is a
/// JSON object (no partial line).
fn complete_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "last line cut short: {text:?}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// Event kinds in `seq` order.
fn kinds(records: &[Value]) -> Vec<String> {
    let mut by_seq: Vec<&Value> = records.iter().collect();
    by_seq.sort_by_key(|r| r["seq"].as_u64().unwrap());
    by_seq
        .iter()
        .map(|r| r["event"].as_str().unwrap().to_string())
        .collect()
}

/// `seedance-analyze`, built once per test binary (cargo does not build another package's
/// binary for a test).
pub(crate) fn analyzer() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/e2e-<hash> -> target/<profile>
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
            .args([
                "build",
                "-p",
                "seedance-analyze",
                "--bin",
                "seedance-analyze",
            ]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("run cargo build");
        assert!(
            out.status.success(),
            "cargo build of seedance-analyze failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        profile_dir.join("seedance-analyze")
    })
}

/// `seedance-analyze summary --format json DIR`, parsed.
pub(crate) fn analyze(dir: &Path) -> Value {
    let out = Command::new(analyzer())
        .args(["summary", "--format", "json"])
        .arg(dir)
        .output()
        .expect("run seedance-analyze");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("analyzer JSON")
}

/// The trace and the analyzer's report of a process that ended after its `device_fault` line
/// was written, without an exit summary (killed by a signal, or `_exit`).
fn assert_ended_without_summary(r: &Running, records: &[Value]) {
    let pid = u64::from(r.child.id());
    assert_eq!(kinds(records), ["session_start", "device_fault"]);
    assert!(records.iter().all(|x| x["pid"] == pid), "{records:#?}");
    let fault = &records
        .iter()
        .find(|x| x["event"] == "device_fault")
        .unwrap();
    assert_eq!(fault["function"], "cuDeviceGet");
    assert_eq!(fault["requested_ordinal"], 9);
    assert_eq!(fault["result"], 101);
    assert_eq!(fault["fault"], "invalid_ordinal");
    assert_eq!(fault["tid"], pid, "the fault happened on the main thread");

    let report = analyze(&r.traces());
    let input = &report["input"];
    assert_eq!(input["files_read"], 1);
    assert_eq!(input["lines"], 2);
    assert_eq!(input["records"], 2);
    assert_eq!(
        input["records_by_kind"],
        serde_json::json!({"session_start": 1, "device_fault": 1})
    );
    assert_eq!(input["malformed_lines"], 0);
    assert_eq!(input["truncated_lines"], 0);
    let overview = &report["overview"];
    assert_eq!(overview["processes"], 1);
    assert_eq!(overview["processes_exited"], 0);
    assert_eq!(overview["processes_without_exit_summary"], 1);
    assert_eq!(overview["calls"], 0);
    assert_eq!(overview["errors"], 1);
    let p = &report["processes"][0];
    assert_eq!(p["pid"], pid);
    assert_eq!(p["status"], "no_exit_summary");
    assert_eq!(p["has_session_start"], true);
    assert_eq!(p["mode"], "observe");
    assert_eq!(
        p["calls"],
        Value::Null,
        "calls unknown without an exit summary"
    );
    assert_eq!(p["errors"], 1);
    assert_eq!(
        p["errors_by_result"],
        serde_json::json!({"CUDA_ERROR_INVALID_DEVICE": 1})
    );
    assert_eq!(p["records"], 2);
    assert_eq!(p["missing_records"], 0);
    assert_eq!(p["dropped_records"], 0);
    assert_eq!(
        p["device_faults"],
        serde_json::json!([{"function": "cuDeviceGet", "requested_ordinal": 9,
            "fault": "invalid_ordinal", "result": "CUDA_ERROR_INVALID_DEVICE", "repaired": false}])
    );
    let problems: Vec<(&str, &str, u64)> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["key"].as_str().unwrap(),
                x["severity"].as_str().unwrap(),
                x["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            ("device_fault/invalid_ordinal/9", "error", 1),
            ("no_exit_summary", "warning", 1)
        ]
    );
    assert_eq!(report["process_health"], Value::Null, "nothing left behind");
}

/// Starts the program, waits for its fault line, sends `sig`, and checks that the process
/// died of it, leaving complete lines and no exit summary.
fn killed_by(sig: i32) {
    let mut r = start(&[]);
    wait_ready(&r);
    send(&r, sig);
    let f = r.finish();
    assert_eq!(f.output.status.signal(), Some(sig), "{:?}", f.output.status);
    assert_eq!(f.output.status.code(), None);
    assert_eq!(f.stdout(), READY);
    assert_eq!(f.stderr(), FAULT_STDERR);
    assert_eq!(f.trace_files, 1);
    let records = complete_lines(&trace_file(&r.traces()));
    assert_eq!(records, f.records);
    assert_ended_without_summary(&r, &records);
}

/// SIGTERM (default action: terminate): no exit summary; the session start and the device
/// fault written before it are complete lines, and the analyzer reports the process as
/// ended without an exit summary, with its one error.
#[test]
fn sigterm_leaves_complete_lines_without_exit_summary() {
    killed_by(SIGTERM);
}

/// SIGINT (Ctrl-C; default action: terminate): as SIGTERM.
#[test]
fn sigint_leaves_complete_lines_without_exit_summary() {
    killed_by(SIGINT);
}

/// SIGKILL: as SIGTERM (nothing can run at all).
#[test]
fn sigkill_leaves_complete_lines_without_exit_summary() {
    killed_by(SIGKILL);
}

/// `_exit` skips the atexit handlers: no exit summary; the lines already written stay.
#[test]
fn underscore_exit_leaves_complete_lines_without_exit_summary() {
    use std::io::Write;
    let mut r = start(&[]);
    wait_ready(&r);
    r.child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"_exit\n")
        .unwrap();
    let f = r.finish();
    assert_eq!(f.output.status.code(), Some(4), "{:?}", f.output.status);
    assert_eq!(f.stdout(), READY);
    assert_eq!(f.stderr(), FAULT_STDERR);
    let records = complete_lines(&trace_file(&r.traces()));
    assert_eq!(records, f.records);
    assert_ended_without_summary(&r, &records);
}

/// `exit()` from a second thread while the main thread is blocked in `pause()`: the atexit
/// handlers run on that thread, so the exit summary is written (by that thread), with the
/// exact calls of both threads, and the analyzer reports a process that exited.
#[test]
fn exit_from_another_thread_writes_the_exit_summary() {
    use std::io::Write;
    let mut r = start(&["thread"]);
    wait_ready(&r);
    r.child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(b"exit\n")
        .unwrap();
    let f = r.finish();
    assert_eq!(f.output.status.code(), Some(3), "{:?}", f.output.status);
    let stdout = f.stdout();
    let thread_line = stdout.strip_prefix(READY).expect(&stdout);
    let tid: u64 = thread_line
        .strip_prefix("thread ")
        .and_then(|t| t.strip_suffix(": cuDriverGetVersion -> 0, cuDeviceGet(1) -> 0; exit(3)\n"))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{stdout:?}"));
    let pid = u64::from(r.child.id());
    assert_ne!(tid, pid);
    assert_eq!(f.stderr(), FAULT_STDERR);
    let records = complete_lines(&trace_file(&r.traces()));
    assert_eq!(records, f.records);
    assert_eq!(
        kinds(&records),
        ["session_start", "device_fault", "exit_summary"]
    );
    let summary = &f.events("exit_summary")[0];
    assert_eq!(
        summary["tid"], tid,
        "written by the thread that called exit"
    );
    assert_eq!(summary["dropped_records"], 0);
    let mut calls = f.summary_calls();
    calls.sort();
    assert_eq!(
        calls,
        [
            ("cuDeviceGet".to_string(), 3),
            ("cuDeviceGetCount".to_string(), 1),
            ("cuDriverGetVersion".to_string(), 1),
            ("cuInit".to_string(), 1),
        ]
    );
    assert_eq!(f.summary_count("cuDeviceGet"), (3, 1));
    assert_eq!(
        summary["functions"]["cuDeviceGet"]["errors_by_result"],
        serde_json::json!({"CUDA_ERROR_INVALID_DEVICE": 1})
    );

    let report = analyze(&r.traces());
    assert_eq!(report["input"]["lines"], 3);
    assert_eq!(report["input"]["malformed_lines"], 0);
    assert_eq!(report["input"]["truncated_lines"], 0);
    assert_eq!(report["overview"]["processes_exited"], 1);
    assert_eq!(report["overview"]["processes_without_exit_summary"], 0);
    assert_eq!(report["overview"]["calls"], 6);
    assert_eq!(report["overview"]["errors"], 1);
    let p = &report["processes"][0];
    assert_eq!(p["pid"], pid);
    assert_eq!(p["status"], "exited");
    assert_eq!(p["calls"], 6);
    assert_eq!(p["errors"], 1);
    assert_eq!(p["missing_records"], 0);
    let functions: Vec<(&str, u64, u64)> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["function"].as_str().unwrap(),
                x["calls"].as_u64().unwrap(),
                x["errors"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        functions,
        [
            ("cuDeviceGet", 3, 1),
            ("cuDeviceGetCount", 1, 0),
            ("cuDriverGetVersion", 1, 0),
            ("cuInit", 1, 0)
        ]
    );
    let keys: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["device_fault/invalid_ordinal/9"]);
    assert_eq!(report["process_health"], Value::Null);
}

/// A write cut short by a kill: the trace of a SIGKILLed run with half a record appended
/// (no newline). The analyzer counts exactly one truncated line, and everything else
/// (processes, errors, problems, functions) reads as before.
#[test]
fn partial_last_line_is_skipped_and_counted() {
    let mut r = start(&[]);
    wait_ready(&r);
    send(&r, SIGKILL);
    let f = r.finish();
    assert_eq!(f.output.status.signal(), Some(SIGKILL));
    let path = trace_file(&r.traces());
    let before = analyze(&r.traces());
    let text = std::fs::read_to_string(&path).unwrap();
    let fault_line = text
        .lines()
        .find(|l| l.contains(r#""event":"device_fault""#))
        .unwrap();
    let half = &fault_line[..fault_line.len() / 2];
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, half.as_bytes()).unwrap();
    drop(file);
    let after = analyze(&r.traces());
    let input = &after["input"];
    assert_eq!(input["truncated_lines"], 1);
    assert_eq!(input["malformed_lines"], 0);
    assert_eq!(input["lines"], 3);
    assert_eq!(input["records"], 2);
    assert_eq!(input["records_by_kind"], before["input"]["records_by_kind"]);
    assert_eq!(
        input["bytes"].as_u64().unwrap(),
        before["input"]["bytes"].as_u64().unwrap() + half.len() as u64
    );
    // Everything the two complete records say is unchanged.
    for section in [
        "overview",
        "processes",
        "functions",
        "devices",
        "errors_over_time",
    ] {
        assert_eq!(after[section], before[section], "{section}");
    }
    // One more problem: the skipped line, as information.
    let mut problems = after["problems"].as_array().unwrap().clone();
    let skipped = problems.pop().unwrap();
    assert_eq!(skipped["key"], "malformed_input");
    assert_eq!(skipped["severity"], "info");
    assert_eq!(skipped["count"], 1);
    assert_eq!(
        skipped["title"],
        "1 of 3 lines could not be read as trace records"
    );
    assert_eq!(
        skipped["context"],
        serde_json::json!(["malformed: 0, truncated last lines: 1, oversized: 0"])
    );
    let keys = |ps: &[Value]| -> Vec<String> {
        ps.iter()
            .map(|x| x["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        keys(&problems),
        keys(before["problems"].as_array().unwrap()),
        "the other problems are unchanged"
    );
    assert_eq!(
        keys(&problems),
        ["device_fault/invalid_ordinal/9", "no_exit_summary"]
    );
    // The text report says it too.
    let text = Command::new(analyzer())
        .arg("summary")
        .arg(r.traces())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("malformed lines: 0, truncated last lines: 1, oversized lines: 0"),
        "{text}"
    );
}
