//! CI gates: `summary --fail-on error|warning` and `diff --fail-on new` exit 4 with one
//! line on stderr when they find what they gate on, 0 otherwise; a directory without a
//! trace exits 3 with "no trace found in ..." (docs/analyzer.md, "Exit codes").

use super::run;

#[test]
fn summary_fail_on_error_trips_on_errors_only() {
    // v4: two lifetime hazards that were not repaired everywhere (severity error).
    let (code, out, err) = run(&["summary", "--fail-on", "error", "tests/fixtures/v4"]);
    assert_eq!(code, 4, "{err}");
    assert!(
        out.starts_with("SUMMARY"),
        "the report is still written: {out}"
    );
    assert_eq!(
        err,
        "seedance-analyze: --fail-on: 2 problems at severity error: 2 errors\n"
    );
    // fix: the device fault was repaired by fallback, a warning, no error.
    let (code, _, err) = run(&["summary", "--fail-on", "error", "tests/fixtures/fix"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = run(&["summary", "--fail-on", "warning", "tests/fixtures/fix"]);
    assert_eq!(code, 4);
    assert_eq!(
        err,
        "seedance-analyze: --fail-on: 1 problem at severity warning or worse: 0 errors, 1 warning\n"
    );
    // Without --fail-on the exit is 0 whatever the report holds.
    let (code, _, err) = run(&["summary", "tests/fixtures/v4"]);
    assert_eq!((code, err.as_str()), (0, ""));
}

#[test]
fn diff_fail_on_new_trips_on_new_and_more_severe_problems_only() {
    let (code, _, err) = run(&[
        "diff",
        "--fail-on",
        "new",
        "tests/fixtures/v3",
        "tests/fixtures/v3-after",
    ]);
    assert_eq!(code, 4, "{err}");
    assert_eq!(
        err,
        "seedance-analyze: --fail-on new: new in tests/fixtures/v3-after: 1 failing call \
         (function, CUresult), 2 faults, 2 problems\n"
    );
    // observe -> fix: the same fault, now repaired; nothing new.
    let (code, _, err) = run(&[
        "diff",
        "--fail-on",
        "new",
        "tests/fixtures/observe",
        "tests/fixtures/fix",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    // fix -> observe: the same fault, no longer repaired (warning -> error): worse, so the
    // gate trips although nothing is new.
    let (code, _, err) = run(&[
        "diff",
        "--fail-on",
        "new",
        "tests/fixtures/fix",
        "tests/fixtures/observe",
    ]);
    assert_eq!(code, 4, "{err}");
    assert_eq!(
        err,
        "seedance-analyze: --fail-on new: new in tests/fixtures/observe: 0 failing calls \
         (function, CUresult), 0 faults, 0 problems, 1 problem more severe (warning -> error: \
         device fault: ordinal 1 requested but not visible (invalid_ordinal, \
         CUDA_ERROR_INVALID_DEVICE 101) in 1 process on 1 host; not repaired)\n"
    );
    // A run against itself never has anything new.
    let (code, _, _) = run(&[
        "diff",
        "--fail-on",
        "new",
        "tests/fixtures/v4",
        "tests/fixtures/v4",
    ]);
    assert_eq!(code, 0);
}

#[test]
fn no_trace_is_a_warning_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, out, err) = run(&["summary", d]);
    assert_eq!(code, 3);
    assert!(out.starts_with("SUMMARY"), "{out}");
    assert_eq!(
        err,
        format!("seedance-analyze: warning: no trace found in {d} (no files)\n")
    );
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let (code, _, err) = run(&["summary", "--fail-on", "warning", d]);
    assert_eq!(code, 3);
    assert_eq!(
        err,
        format!("seedance-analyze: warning: no trace found in {d} (1 file, not a trace)\n")
    );
    let (code, _, err) = run(&["diff", "tests/fixtures/v4", d]);
    assert_eq!(code, 3);
    assert!(err.contains(&format!("no trace found in {d}")), "{err}");
}

/// Failures the program recovered from (the exit summary's `recovered_by_result`) are one
/// info problem that no gate counts; the failures of the same kind it did not recover from
/// stay a `cuda_error` error.
#[test]
fn recovered_failures_are_info_and_pass_the_warning_gate() {
    let dir = tempfile::tempdir().unwrap();
    let summary = |pid: u32, errors: u64, recovered: u64| {
        format!(
            r#"{{"v":5,"seq":2,"ts_ns":3,"pid":{pid},"tid":{pid},"event":"exit_summary","duration_ns":5000000000,"functions":{{"cuMemAllocAsync":{{"calls":{},"errors":{errors},"errors_by_result":{{"CUDA_ERROR_INVALID_CONTEXT":{errors}}},"recovered_by_result":{{"CUDA_ERROR_INVALID_CONTEXT":{recovered}}}}}}},"dropped_records":0}}"#,
            errors + 1
        )
    };
    let failed = |pid| {
        super::call_failed(
            pid,
            1,
            2,
            "cuMemAllocAsync",
            201,
            "CUDA_ERROR_INVALID_CONTEXT",
        )
    };
    let p = dir.path().join("recovered");
    std::fs::create_dir(&p).unwrap();
    super::write_trace(
        &p,
        "a.jsonl",
        &[
            &super::session_start(10, 0, 1),
            &failed(10),
            &summary(10, 1, 1),
        ],
        "",
    );
    let path = p.to_str().unwrap();
    let (code, out, err) = run(&["summary", "--fail-on", "warning", "--format", "json", path]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert_eq!(problems[0]["severity"], "info");
    assert_eq!(
        problems[0]["key"],
        "cuda_error_recovered/CUDA_ERROR_INVALID_CONTEXT"
    );
    assert_eq!(problems[0]["count"], 1);
    // Two failures, one recovered: the other is an error.
    super::write_trace(
        &p,
        "b.jsonl",
        &[
            &super::session_start(11, 0, 1),
            &failed(11),
            &summary(11, 2, 1),
        ],
        "",
    );
    let (code, out, _) = run(&["summary", "--fail-on", "warning", "--format", "json", path]);
    assert_eq!(code, 4, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let by_key = |k: &str| {
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["key"] == k)
            .cloned()
            .unwrap_or_default()
    };
    let error = by_key("cuda_error/CUDA_ERROR_INVALID_CONTEXT");
    assert_eq!(
        (error["severity"].as_str(), error["count"].as_u64()),
        (Some("error"), Some(1))
    );
    let info = by_key("cuda_error_recovered/CUDA_ERROR_INVALID_CONTEXT");
    assert_eq!(
        (info["severity"].as_str(), info["count"].as_u64()),
        (Some("info"), Some(2))
    );
}
