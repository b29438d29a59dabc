//! `seedance-analyze explain`.

use super::run;

#[test]
fn by_number() {
    let (code, out, err) = run(&["explain", "101"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("CUDA_ERROR_INVALID_DEVICE (101)\n"),
        "{out}"
    );
    assert!(out.contains("\nMeaning:\n"));
    assert!(
        out.contains(
            "\nWhat to try:\n  - The ordinal is at or above the number of visible devices"
        ),
        "{out}"
    );
    // The meaning is the CUresult table's row (owned by seedance-cuda).
    let meaning = seedance_cuda::CUresult(101).info().unwrap().description;
    let first_words: String = meaning
        .split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(out.contains(&format!("Meaning:\n  {first_words}")), "{out}");
}

#[test]
fn by_name_short_and_long() {
    let (_, by_number, _) = run(&["explain", "101"]);
    for name in [
        "INVALID_DEVICE",
        "CUDA_ERROR_INVALID_DEVICE",
        "invalid_device",
        "0x65",
    ] {
        let (code, out, err) = run(&["explain", name]);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(out, by_number, "{name}");
    }
}

#[test]
fn unknown_number() {
    let (code, out, _) = run(&["explain", "999999"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("CUresult 999999 (not in the CUDA 13.0 table)\n"),
        "{out}"
    );
    assert!(out.contains("999999 is not in the CUDA 13.0 table of CUresult codes"));
}

#[test]
fn garbage() {
    for arg in ["garbage", "CUDA_ERROR_NO_SUCH_THING", "-3", "1e3"] {
        let (code, out, err) = run(&["explain", arg]);
        assert_eq!(code, 2, "{arg}");
        assert!(out.is_empty());
        assert!(
            err.contains("is neither a CUresult number nor a name in the CUDA 13.0 table"),
            "{err}"
        );
    }
}

#[test]
fn json() {
    let (code, out, _) = run(&["explain", "--format", "json", "OUT_OF_MEMORY"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["code"], 2);
    assert_eq!(v["name"], "CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(v["known"], true);
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = run(&["explain"]);
    assert_eq!(code, 2);
    assert!(err.contains("Usage"), "{err}");
    let (code, _, _) = run(&["summary", "--format", "pdf", "x"]);
    assert_eq!(code, 2);
}

/// For every CUresult the shim explains on stderr (`function(args) returned NAME (code):
/// description`, `CUresult::said`), the report's problem for a failed call with that result
/// carries the same words: its first step is the description, which with the name and code
/// gives the shim's text exactly.
#[test]
fn every_explained_result_has_the_shims_words_in_its_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for row in seedance_cuda::CUresult::table()
        .iter()
        .filter(|r| r.code != 0)
    {
        let lines = [
            super::session_start(7, 1, 1000),
            super::call_failed(7, 2, 2000, "cuCtxSynchronize", row.code, row.name),
            super::exit_summary(7, 3, 3000, "cuCtxSynchronize", 1, 1, row.name),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let name = format!("seedance-{}.jsonl", row.code);
        let path = super::write_trace(dir.path(), &name, &lines, "");
        let report =
            seedance_analyze::summarize(&[path], &seedance_analyze::Options::default()).unwrap();
        let key = format!("cuda_error/{}", row.name);
        let problem = report
            .problems
            .iter()
            .find(|p| p.key == key)
            .unwrap_or_else(|| panic!("no problem {key}"));
        let first = problem.remediation.first().expect("a step");
        assert_eq!(
            format!("{} ({}): {first}", row.name, row.code),
            seedance_cuda::CUresult(row.code).said(),
            "{key}"
        );
        checked += 1;
    }
    assert_eq!(checked, seedance_cuda::CUresult::table().len() - 1);
}
