//! A failed call: a `call_failed` record with the function, code, name and arguments, and
//! one stderr line per distinct (function, code), however often it fails. (Device faults get
//! a `device_fault` record instead, see `devices`; explained launch and allocation faults a
//! `launch_fault` or `alloc_fault`, see `launch` and `alloc`.) `SEEDANCE_FALLBACK=off` keeps
//! the workload's deliberate `cuDeviceGet(7)` failing.

use seedance_e2e::Run;

#[test]
fn failed_calls_are_traced_and_announced_once() {
    let r = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stdout());
    let failed = r.events("call_failed");
    let alloc = r.events("alloc_fault");
    assert_eq!(alloc.len(), 1);
    assert_eq!(alloc[0]["function"], "cuMemAlloc_v2");
    assert_eq!(alloc[0]["result"], 1);
    assert_eq!(alloc[0]["result_name"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(alloc[0]["check"], "zero_size");
    assert_eq!(alloc[0]["requested_bytes"], 0);
    let dev = r.events("device_fault");
    assert_eq!(dev.len(), 1);
    assert_eq!(dev[0]["function"], "cuDeviceGet");
    assert_eq!(dev[0]["requested_ordinal"], 7);
    assert_eq!(dev[0]["result_name"], "CUDA_ERROR_INVALID_DEVICE");
    assert_eq!(dev[0]["fault"], "invalid_ordinal");
    assert_eq!(dev[0]["visible_devices"], 2);
    assert!(r.events("device_fallback").is_empty());
    let launch = r.events("launch_fault");
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["function"], "cuLaunchKernel");
    assert_eq!(launch[0]["block"], serde_json::json!([32, 33, 1]));
    assert_eq!(launch[0]["check"], "threads_per_block");
    assert!(failed.is_empty(), "{failed:?}");

    let err = r.stderr();
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(
        err.contains(
            "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 7 requested, 2 devices visible"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "seedance: cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE (1): the program asked for 0 bytes"
        ),
        "{err}"
    );
    let summary = &r.events("exit_summary")[0]["functions"]["cuDeviceGet"];
    assert_eq!(summary["errors_by_result"]["CUDA_ERROR_INVALID_DEVICE"], 1);
}

#[test]
fn quiet_silences_stderr_but_not_the_trace() {
    let r = Run::new("linked", true)
        .env("SEEDANCE_QUIET", "1")
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(r.stderr(), "");
    assert_eq!(r.events("alloc_fault").len(), 1);
    assert_eq!(r.events("launch_fault").len(), 1);
    assert_eq!(r.events("device_fault").len(), 1);
}

/// A full disk under the trace directory (an 8 KiB tmpfs, filled, in a private mount
/// namespace): the program runs as without a trace, the shim says so in one line, and the
/// exit does not wait for lines that can never be written (it waited 10 s before).
#[test]
fn a_full_trace_disk_costs_one_line_and_no_wait() {
    if let Some(why) = seedance_e2e::mount_namespace_unavailable() {
        seedance_e2e::say_skipped(
            "failures::a_full_trace_disk_costs_one_line_and_no_wait",
            &why,
        );
        return;
    }
    let plain = Run::new("ordinals", true)
        .env("SEEDANCE_TRACE_DIR", "")
        .args(&["5", "1"])
        .finish();
    let run = Run::new("ordinals", true).args(&["5", "1"]);
    let traces = run.trace_dir.path().join("traces");
    let script = "mount -t tmpfs -o size=8k tmpfs \"$SEEDANCE_TRACE_DIR\" || exit 97; \
                  dd if=/dev/zero of=\"$SEEDANCE_TRACE_DIR/filler\" bs=1k count=64 2>/dev/null; \
                  exec \"$0\" \"$@\"";
    let started = std::time::Instant::now();
    let r = run
        .env("SEEDANCE_TRACE_DIR", &traces)
        .wrapped_in(&[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
        ])
        .finish();
    let took = started.elapsed();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(
        r.stdout(),
        "ordinal 5 -> 0000:11:00.0\nordinal 1 -> 0000:11:00.0\n"
    );
    // The plain run's stderr (the fault explained and repaired) plus one line.
    let stderr = r.stderr();
    let extra: Vec<&str> = stderr
        .lines()
        .filter(|l| !plain.stderr().lines().any(|p| p == *l))
        .collect();
    assert_eq!(extra.len(), 1, "{stderr}");
    let prefix = format!("seedance: writing the trace {}/seedance-", traces.display());
    assert!(extra[0].starts_with(&prefix), "{}", extra[0]);
    assert!(
        extra[0].ends_with(
            ".jsonl failed (No space left on device (os error 28)); nothing more is written to it \
             and the records are counted as dropped"
        ),
        "{}",
        extra[0]
    );
    assert!(
        took < seedance_e2e::target::wall_time_bound(std::time::Duration::from_secs(5)),
        "took {took:?}"
    );
}

/// A panic inside the shim's cold paths (made to happen with the debug-build-only
/// `SEEDANCE_TEST_PANIC`) is caught: every call keeps the driver's result, so the program
/// sees exactly what it sees without the shim, the driver gets the same calls, and stderr
/// has one line instead of Rust's panic message; `SEEDANCE_QUIET=1` silences it too.
#[test]
fn a_panic_inside_the_shim_never_reaches_the_program() {
    if seedance_e2e::artifacts()
        .shim
        .components()
        .any(|c| c.as_os_str() == "release")
    {
        seedance_e2e::say_skipped(
            "failures::a_panic_inside_the_shim_never_reaches_the_program",
            "SEEDANCE_TEST_PANIC exists in debug builds only",
        );
        return;
    }
    let sites = "device_fault,alloc_fault,launch_fault,call_failed,lifetime,exit_summary";
    let plain = Run::new("linked", false).finish();
    let r = Run::new("linked", true)
        .env("SEEDANCE_TEST_PANIC", sites)
        .finish();
    assert_eq!(r.output.status.code(), plain.output.status.code());
    assert_eq!(r.stdout(), plain.stdout());
    seedance_e2e::assert_forwarded_unchanged(&plain.driver_calls, &r.driver_calls);
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("seedance: internal error (SEEDANCE_TEST_PANIC="),
        "{stderr}"
    );
    assert!(lines[0].ends_with(
        "); the call kept the driver's result and the program goes on; later internal errors \
         are not shown. Please report it"
    ));
    // The panicking paths wrote nothing; the session record (not a panicking site) did.
    assert_eq!(r.events("session_start").len(), 1);
    for kind in ["device_fault", "alloc_fault", "call_failed", "exit_summary"] {
        assert!(r.events(kind).is_empty(), "{kind}");
    }
    let quiet = Run::new("linked", true)
        .env("SEEDANCE_TEST_PANIC", sites)
        .env("SEEDANCE_QUIET", "1")
        .finish();
    assert_eq!(quiet.stdout(), plain.stdout());
    assert_eq!(quiet.stderr(), "");
}

/// Traces hold no payloads: kernel arguments, copied host memory and memory behind
/// pointer arguments carry a marker, a non-CUDA environment variable another; after
/// failures, explanations and a repair, no trace byte holds either, while the CUDA_*
/// variable the shim does record is there.
#[test]
fn traces_hold_no_payloads_or_foreign_environment() {
    let r = Run::new("payloads", true)
        .env("DEPLOY_TOKEN", "ENV-SECRET-91b2")
        .env("CUDA_VISIBLE_DEVICES", "0,1")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "alloc -> 0\ncopy -> 0\nlaunch -> 1\ndevice -> 0\nzero -> 1\n"
    );
    // Each path that writes arguments or explanations ran.
    assert_eq!(r.events("launch_fault").len(), 1);
    assert_eq!(r.events("alloc_fault").len(), 1);
    assert_eq!(r.events("device_fault").len(), 1);
    assert_eq!(r.events("device_fallback").len(), 1);
    assert_eq!(r.events("session_start")[0]["cuda_visible_devices"], "0,1");
    let traces = r.records.len();
    assert!(traces >= 6, "{traces} records");
    for rec in &r.records {
        let text = rec.to_string();
        for marker in ["SECRET-PAYLOAD-7f3a", "ENV-SECRET-91b2", "DEPLOY_TOKEN"] {
            assert!(!text.contains(marker), "{marker} in {text}");
        }
    }
}

/// A trace directory that does not exist yet is created (mode 0700, with its missing
/// parents) and the trace lands in it, silently; one that cannot be created says what was
/// tried, and the program runs as without a trace.
#[test]
fn a_missing_trace_directory_is_created() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("new/traces");
    let r = Run::new("ordinals", true)
        .args(&["0"])
        .env("SEEDANCE_TRACE_DIR", &dir)
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stderr(), "");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o700, 0, "{mode:o}");

    let blocker = root.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let dir = blocker.join("traces");
    let r = Run::new("ordinals", true)
        .args(&["0"])
        .env("SEEDANCE_TRACE_DIR", &dir)
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "seedance: no trace will be written: {} does not exist; tried to create it (mode \
             0700) below {}, but creating {} failed: Not a directory",
            dir.display(),
            blocker.display(),
            dir.display()
        )),
        "{err}"
    );
}

/// A loop of identical failures (`repeat_failures 5000 sync`: cuCtxSynchronize_v2 with no
/// context) writes the first 10 as `call_failed` records and counts the other 4,990 in one
/// `call_failed_repeats` record at exit, with the first and last of them; the exit summary
/// has all 5,000. Before, each was a record: 19.5 MB for 100,000 calls.
#[test]
fn repeated_identical_failures_are_counted_not_written_each() {
    let r = Run::new("repeat_failures", true)
        .args(&["5000", "sync"])
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "5000 of 5000 failed, last 201\n");
    let failed = r.events("call_failed");
    assert_eq!(failed.len(), 10, "{failed:#?}");
    assert!(failed.iter().all(|f| f["function"] == "cuCtxSynchronize_v2"
        && f["result"] == 201
        && f["args"] == serde_json::json!({"ctx": "0x0"})));
    let repeats = r.events("call_failed_repeats");
    assert_eq!(repeats.len(), 1, "{repeats:#?}");
    let rep = repeats[0];
    assert_eq!(rep["function"], "cuCtxSynchronize_v2");
    assert_eq!(rep["result"], 201);
    assert_eq!(rep["result_name"], "CUDA_ERROR_INVALID_CONTEXT");
    assert_eq!(rep["count"], 4990);
    assert_eq!(rep["first_args"], serde_json::json!({"ctx": "0x0"}));
    assert_eq!(rep["last_args"], serde_json::json!({"ctx": "0x0"}));
    assert!(rep["first_ts_ns"].as_u64() <= rep["last_ts_ns"].as_u64());
    // Written at exit, just before the exit summary, which counts every call.
    let kinds: Vec<&str> = r
        .records
        .iter()
        .map(|x| x["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["call_failed_repeats", "exit_summary"]
    );
    assert_eq!(r.summary_count("cuCtxSynchronize_v2"), (5000, 5000));
    let summary = &r.events("exit_summary")[0];
    assert_eq!(summary["records_over_limit"], 0);
    assert_eq!(summary["dropped_records"], 0);
    // One stderr line, as before.
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
}

/// Past `SEEDANCE_TRACE_MAX_BYTES` records are counted in the exit summary
/// (`records_over_limit`), not written, with one stderr line; the exit summary and
/// `call_failed_repeats` are still written. With the smallest limit (4 KiB) the session
/// record and a few of the 20 `call_failed` records of `repeat_failures 5000 three` (two
/// kinds of failure, 10 records each) fill it. A bad value warns once and keeps 64 MiB.
#[test]
fn the_trace_size_limit_counts_what_it_does_not_write() {
    let r = Run::new("repeat_failures", true)
        .args(&["5000", "three"])
        .env("SEEDANCE_TRACE_MAX_BYTES", "4KiB")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let written = r.events("call_failed").len() as u64;
    let summary = &r.events("exit_summary")[0];
    let over = summary["records_over_limit"].as_u64().unwrap();
    assert!(over > 0 && written < 20, "written {written}, over {over}");
    assert_eq!(written + over, 20);
    let counts: Vec<(String, u64)> = r
        .events("call_failed_repeats")
        .iter()
        .map(|x| {
            (
                x["function"].as_str().unwrap().to_string(),
                x["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("cuCtxDestroy_v2".to_string(), 4990),
            ("cuCtxSynchronize_v2".to_string(), 9990)
        ]
    );
    assert_eq!(r.summary_count("cuCtxSynchronize_v2"), (10000, 10000));
    assert_eq!(r.summary_count("cuCtxDestroy_v2"), (5000, 5000));
    let before_summary: usize = r.records[..r.records.len() - 3]
        .iter()
        .map(|x| serde_json::to_string(x).unwrap().len() + 1)
        .sum();
    assert!(
        before_summary <= 4096,
        "{before_summary} bytes before the summary"
    );
    let err = r.stderr();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert_eq!(
        lines[2],
        "seedance: the trace reached its size limit (SEEDANCE_TRACE_MAX_BYTES=4096 bytes); \
         later records are counted in its exit summary (records_over_limit), not written"
    );

    let bad = Run::new("repeat_failures", true)
        .args(&["20", "sync"])
        .env("SEEDANCE_TRACE_MAX_BYTES", "lots")
        .finish();
    assert!(
        bad.stderr().starts_with(
            "seedance: SEEDANCE_TRACE_MAX_BYTES=\"lots\" is not a size of at least 4KiB (4096, \
             16MiB, 1GiB); using 64MiB\n"
        ),
        "{}",
        bad.stderr()
    );
    assert_eq!(bad.events("call_failed").len(), 10);
    assert_eq!(bad.events("exit_summary")[0]["records_over_limit"], 0);
}

/// A stream synchronised while it is captured (`.item()` inside `torch.cuda.graph`): the
/// shim's stderr line and the analyzer's problem for the failure say the same words (the
/// CUresult table's description of `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`).
#[test]
fn capture_failure_says_the_same_on_stderr_and_in_the_report() {
    let r = Run::new("capture_sync", true).finish();
    assert_eq!(r.output.status.code(), Some(1), "{}", r.stderr());
    assert_eq!(r.stdout(), "sync 900, end 901\n");
    let err = r.stderr();
    let line = err
        .lines()
        .find(|l| l.contains("cuStreamSynchronize("))
        .unwrap_or_else(|| panic!("{err}"));
    let said = "returned CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): ";
    let words = &line[line.find(said).unwrap_or_else(|| panic!("{line}")) + said.len()..];
    assert!(
        words.starts_with("The operation is not allowed while the stream is captured"),
        "{line}"
    );
    assert!(
        words.ends_with("use stream-ordered async variants inside capture or move the call out."),
        "{line}"
    );
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = r.records.iter().map(|v| v.to_string()).collect();
    std::fs::write(dir.path().join("capture.jsonl"), lines.join("\n") + "\n").unwrap();
    let report = crate::signals::analyze(dir.path());
    let problem = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "cuda_error/CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(problem["remediation"][0], words);
    assert_eq!(problem["count"], 1);
}
