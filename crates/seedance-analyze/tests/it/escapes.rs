//! The text report shows a trace's strings with their control characters escaped: a
//! program name holding an escape, a carriage return and newlines neither clears the
//! terminal nor forges a line of the report.

use super::{exit_summary, run, session_start, write_trace};

/// A program name `app<ESC>[2J<CR><LF>REPAIRS<LF>  99 calls repaired` and a function
/// name with an escape: the text report holds no ESC or CR, one `REPAIRS` heading, the
/// forged line nowhere, and the name written with escapes. Before, all of it was printed
/// as it came.
#[test]
fn control_characters_of_trace_strings_are_escaped_in_the_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let name = "/bin/app\u{1b}[2J\r\nREPAIRS\n  99 calls repaired";
    let start = session_start(7, 0, 1_000).replace(
        r#""executable":"/bin/app""#,
        &format!(r#""executable":{}"#, serde_json::to_string(name).unwrap()),
    );
    assert_ne!(start, session_start(7, 0, 1_000));
    let failed = r#"{"v":1,"seq":1,"ts_ns":2000,"pid":7,"tid":7,"event":"call_failed","function":"cuFoo\u001b]0;title\u0007","result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","args":{"ordinal":3}}"#;
    let p = write_trace(
        dir.path(),
        "t.jsonl",
        &[
            &start,
            failed,
            &exit_summary(
                7,
                2,
                3_000,
                "cuDeviceGet",
                4,
                1,
                "CUDA_ERROR_INVALID_DEVICE",
            ),
        ],
        "",
    );
    let (code, out, err) = run(&["summary", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains('\u{1b}') && !out.contains('\r') && !out.contains('\u{7}'),
        "{out:?}"
    );
    assert_eq!(out.lines().filter(|l| *l == "REPAIRS").count(), 1, "{out}");
    assert!(
        !out.lines().any(|l| l.trim() == "99 calls repaired"),
        "{out}"
    );
    assert!(
        out.contains("app\\u{1b}[2J\\r\\nREPAIRS\\n  99 calls repaired"),
        "{out}"
    );
    assert!(out.contains("cuFoo\\u{1b}]0;title\\u{7}"), "{out}");
    // The JSON form keeps the strings as they were (JSON escapes them itself).
    let (_, json, _) = run(&["summary", "--format", "json", p.to_str().unwrap()]);
    assert!(json.contains(r#"cuFoo\u001b]0;title\u0007"#), "{json}");
}
