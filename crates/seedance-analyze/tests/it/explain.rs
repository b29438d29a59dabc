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
