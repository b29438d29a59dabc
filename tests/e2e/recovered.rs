//! Failures a program recovers from (`tests/programs/recovered.c`): the CUDA runtime's
//! retry of `cuMemAllocAsync` once the primary context is current on a new thread, and
//! PyTorch's fall-back from a fabric handle to a POSIX file descriptor in `cuMemCreate`
//! (docs/design.md). Silent on stderr in observe and fix, the `call_failed` record kept, the
//! recovery counted in the exit summary (`recovered_by_result`) and no warning in the
//! analyzer's report. The same failures without the recovery (the thread goes on to other
//! work, ends, or the process exits) are explained on stderr as before.

use seedance_e2e::{Finished, Run};
use serde_json::Value;
use std::process::Command;

fn run(scenario: &str, mode: &str) -> Finished {
    Run::new("recovered", true)
        .env("SEEDANCE_MODE", mode)
        .arg(scenario)
        .finish()
}

fn plain(scenario: &str) -> Finished {
    Run::new("recovered", false).arg(scenario).finish()
}

/// `seedance-analyze summary --fail-on warning --format json` on the run's records: the
/// exit code and the report.
pub(crate) fn gate(r: &Finished) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = r.records.iter().map(|v| v.to_string()).collect();
    std::fs::write(dir.path().join("run.jsonl"), lines.join("\n") + "\n").unwrap();
    let out = Command::new(crate::signals::analyzer())
        .args(["summary", "--fail-on", "warning", "--format", "json"])
        .arg(dir.path())
        .output()
        .expect("run seedance-analyze");
    let report = serde_json::from_slice(&out.stdout).expect("analyzer JSON");
    (out.status.code(), report)
}

/// The one `call_failed` record of `function`, with its result.
fn failed_record(r: &Finished, function: &str, result: u64) {
    let failed = r.events("call_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["function"], function);
    assert_eq!(failed[0]["result"], result);
}

fn functions(r: &Finished) -> &Value {
    &r.events("exit_summary")[0]["functions"]
}

fn assert_recovered(scenario: &str, function: &str, result: u64, name: &str) {
    let base = plain(scenario);
    assert_eq!(base.output.status.code(), Some(0), "{}", base.stdout());
    for mode in ["observe", "fix"] {
        let r = run(scenario, mode);
        assert_eq!(r.output.status.code(), Some(0), "{mode}");
        assert_eq!(r.stdout(), base.stdout(), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        failed_record(&r, function, result);
        let f = &functions(&r)[function];
        assert_eq!(f["errors_by_result"][name], 1, "{mode}: {f}");
        assert_eq!(
            f["recovered_by_result"],
            serde_json::json!({ name: 1 }),
            "{mode}"
        );
        let (code, report) = gate(&r);
        assert_eq!(code, Some(0), "{mode}: {report}");
        let problems = report["problems"].as_array().unwrap();
        assert_eq!(problems.len(), 1, "{report}");
        assert_eq!(problems[0]["severity"], "info");
        assert_eq!(problems[0]["count"], 1);
        assert_eq!(problems[0]["result"], name);
    }
}

#[test]
fn a_retry_once_the_context_is_current_is_silent_and_counted() {
    assert_recovered(
        "lazy_context",
        "cuMemAllocAsync",
        201,
        "CUDA_ERROR_INVALID_CONTEXT",
    );
    assert_eq!(
        plain("lazy_context").stdout(),
        "cuMemAllocAsync (no current context) -> 201\ncuDevicePrimaryCtxRetain -> 0\n\
         cuCtxSetCurrent -> 0\ncuMemAllocAsync -> 0\ncuMemFreeAsync -> 0\n\
         cuStreamSynchronize -> 0\ncuDevicePrimaryCtxRelease -> 0\nthread done\n"
    );
}

#[test]
fn a_fabric_handle_fallback_is_silent_and_counted() {
    assert_recovered(
        "fabric_fallback",
        "cuMemCreate",
        800,
        "CUDA_ERROR_NOT_PERMITTED",
    );
    assert_eq!(
        plain("fabric_fallback").stdout(),
        "cuMemCreate (fabric handle) -> 800\ncuMemCreate (POSIX fd handle) -> 0\n\
         cuMemRelease -> 0\n"
    );
}

const INVALID_CONTEXT: &str = ") returned CUDA_ERROR_INVALID_CONTEXT (201): No context is current \
     on the calling thread, or the context handle is invalid or destroyed; make a context \
     current (cuCtxSetCurrent, or retain the primary context) on every thread that calls the \
     driver, and never use a context after destroying it.\n";

const NOT_PERMITTED: &str = ") returned CUDA_ERROR_NOT_PERMITTED (800): The operation is not \
     permitted here, e.g. a call forbidden during stream capture or inside a host callback, \
     one disallowed under MPS or the compute mode, or one needing privileges the process \
     lacks; check the calling context against the API's restrictions.\n";

/// The one stderr line of a failure the program did not recover from: the generic report,
/// `function(args) returned NAME (code): description`.
fn assert_explained(r: &Finished, prefix: &str, suffix: &str) {
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(prefix), "{err}");
    assert!(err.ends_with(suffix), "{err}");
}

/// The thread goes on to other work (a stream made) after its failed allocation, or ends
/// right after it; the program makes a stream instead of retrying its `cuMemCreate`; the
/// program exits at once: each is explained as before, one line, and the trace keeps the
/// record, with nothing recovered; the analyzer's gate trips.
#[test]
fn the_same_failures_without_a_retry_are_explained_as_before() {
    for (scenario, function, result, prefix, suffix, exit) in [
        (
            "no_retry",
            "cuMemAllocAsync",
            201,
            "seedance: cuMemAllocAsync(dptr=",
            INVALID_CONTEXT,
            0,
        ),
        (
            "no_retry_thread_exit",
            "cuMemAllocAsync",
            201,
            "seedance: cuMemAllocAsync(dptr=",
            INVALID_CONTEXT,
            0,
        ),
        (
            "fabric_no_retry",
            "cuMemCreate",
            800,
            "seedance: cuMemCreate(handle=",
            NOT_PERMITTED,
            0,
        ),
        (
            "give_up_exit",
            "cuMemCreate",
            800,
            "seedance: cuMemCreate(handle=",
            NOT_PERMITTED,
            3,
        ),
    ] {
        let base = plain(scenario);
        for mode in ["observe", "fix"] {
            let r = run(scenario, mode);
            assert_eq!(r.output.status.code(), Some(exit), "{scenario} {mode}");
            assert_eq!(r.stdout(), base.stdout(), "{scenario} {mode}");
            assert_explained(&r, prefix, suffix);
            failed_record(&r, function, result);
            assert!(
                functions(&r)[function].get("recovered_by_result").is_none(),
                "{scenario} {mode}"
            );
            let (code, report) = gate(&r);
            assert_eq!(code, Some(4), "{scenario} {mode}: {report}");
            assert_eq!(report["problems"][0]["severity"], "error", "{report}");
        }
    }
}
