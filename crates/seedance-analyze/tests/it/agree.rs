//! `export` and `summary` read the same records: one reader (`input::read_file_with`), one
//! set of rules, on input that tries to make them disagree. Each test builds its trace in a
//! temporary directory, runs both subcommands and compares what they counted.

use super::otlp::{attr, export, int, string};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as Any, AnyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use serde_json::Value;
use std::path::Path;

const SESSION: &str = r#","hostname":"h","executable":"/bin/app","argv":["app"],"mode":"fix","driver_version":13000,"devices":[]"#;
const EXIT: &str = r#","duration_ns":5,"functions":{},"dropped_records":0"#;

/// One record line: the envelope, then `rest` (starting with a comma, or empty).
fn rec(seq: &str, ts: &str, pid: &str, event: &str, rest: &str) -> String {
    format!(r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"tid":7,"event":"{event}"{rest}}}"#)
}

fn write(dir: &Path, name: &str, lines: &[String]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p.to_str().unwrap().to_string()
}

fn summary_json(path: &str) -> Value {
    let (code, out, err) = super::run(&["summary", "--format", "json", path]);
    assert!(code == 0 || code == 3, "{code}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn logs(reqs: &[ExportLogsServiceRequest]) -> Vec<&LogRecord> {
    reqs.iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .flat_map(|s| &s.log_records)
        .collect()
}

fn event(l: &LogRecord) -> String {
    string(&l.attributes, "event.name").unwrap()
}

/// Follows `arrayValue`s down from `v`; returns how many were nested and the first value
/// that is not one.
fn array_depth(mut v: &AnyValue) -> (usize, &Any) {
    let mut n = 0;
    loop {
        match v.value.as_ref().unwrap() {
            Any::ArrayValue(a) if a.values.len() == 1 => {
                n += 1;
                v = &a.values[0];
            }
            other => return (n, other),
        }
    }
}

#[test]
fn deeply_nested_records_are_exported_as_summary_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let deep_array = format!(r#","deep":{}{}"#, "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!(r#","o":{}1{}"#, r#"{"a":"#.repeat(5_000), "}".repeat(5_000));
    let path = write(
        dir.path(),
        "deep.jsonl",
        &[
            rec("0", "100", "42", "session_start", SESSION),
            rec("1", "101", "42", "later_kind", &deep_array),
            rec("2", "102", "42", "other_kind", &deep_object),
            rec("3", "103", "42", "exit_summary", EXIT),
        ],
    );
    let s = summary_json(&path);
    assert_eq!(s["input"]["records"], 4);
    assert_eq!(s["input"]["malformed_lines"], 0);
    let (code, reqs, err) = export(&path, &[]);
    assert_eq!(code, 0, "{err}");
    let logs = logs(&reqs);
    let events: Vec<String> = logs.iter().map(|l| event(l)).collect();
    assert_eq!(
        events,
        [
            "seedance.session_start",
            "seedance.later_kind",
            "seedance.other_kind",
            "seedance.exit_summary"
        ]
    );
    assert_eq!(
        logs.iter().map(|l| l.time_unix_nano).collect::<Vec<_>>(),
        [100, 101, 102, 103]
    );
    // The record is structured down to the documented depth, then its JSON text.
    let Some(Any::KvlistValue(rec)) = attr(&logs[1].attributes, "seedance.record") else {
        panic!("no seedance.record");
    };
    let deep = rec.values.iter().find(|kv| kv.key == "deep").unwrap();
    let (levels, rest) = array_depth(deep.value.as_ref().unwrap());
    // The record is level 1, `deep` level 2: 15 arrays are structured.
    assert_eq!(levels, 15);
    let Any::StringValue(text) = rest else {
        panic!("{rest:?}");
    };
    assert_eq!(text.len(), 2 * (100_000 - 15));
    assert!(text.starts_with("[[") && text.ends_with("]]"));
    assert_eq!(int(&rec.values, "seq"), Some(1));
}

#[test]
fn a_pid_beyond_u32_is_not_a_record_for_either() {
    let dir = tempfile::tempdir().unwrap();
    let huge = (1u64 << 63) + 1;
    // A file whose only records have such a pid is not a trace for summary: not exported.
    let only = write(
        dir.path(),
        "only.jsonl",
        &[
            rec("0", "100", &huge.to_string(), "session_start", SESSION),
            rec("1", "101", &huge.to_string(), "exit_summary", EXIT),
        ],
    );
    let s = summary_json(&only);
    assert_eq!(s["input"]["files_read"], 0);
    assert_eq!(s["input"]["files_skipped"], 1);
    let (code, reqs, err) = export(&only, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(reqs.is_empty());
    assert_eq!(
        err,
        format!("seedance-analyze: warning: no trace found in {only} (1 file, not a trace)\n")
    );
    // In a trace, such a line is malformed for both: not exported, and the resource's
    // pid is the session start's.
    let mixed = write(
        dir.path(),
        "mixed.jsonl",
        &[
            rec("0", "100", "42", "session_start", SESSION),
            rec("1", "101", &huge.to_string(), "later_kind", ""),
            rec("2", "102", "42", "exit_summary", EXIT),
        ],
    );
    let s = summary_json(&mixed);
    assert_eq!(s["input"]["records"], 2);
    assert_eq!(s["input"]["malformed_lines"], 1);
    let (code, reqs, err) = export(&mixed, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(logs(&reqs).len(), 2);
    let res = &reqs[0].resource_logs[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    assert_eq!(int(res, "process.pid"), Some(42));
}

#[test]
fn a_file_summary_calls_not_a_trace_is_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    // A 10 MB first line: past the bounded read of a file not yet known to be a trace.
    let path = write(
        dir.path(),
        "garbage.jsonl",
        &[
            "x".repeat(10 << 20),
            rec("0", "100", "42", "session_start", SESSION),
        ],
    );
    let s = summary_json(&path);
    assert_eq!(s["input"]["files_read"], 0);
    assert_eq!(s["input"]["files_skipped"], 1);
    let (code, reqs, err) = export(&path, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(reqs.is_empty());
    assert!(err.ends_with("(1 file, not a trace)\n"), "{err}");
}

#[test]
fn records_whose_ts_ns_is_not_a_u64_are_exported_by_neither() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "ts.jsonl",
        &[
            rec("0", "100", "42", "session_start", SESSION),
            rec("1", "-5", "42", "later_kind", ""),
            rec("2", "1.5", "42", "later_kind", ""),
            rec("3", r#""12""#, "42", "later_kind", ""),
            rec("4", "18446744073709551616", "42", "later_kind", ""),
            rec("5", "104", "42", "later_kind", ""),
            rec("6", "105", "42", "exit_summary", EXIT),
        ],
    );
    let s = summary_json(&path);
    assert_eq!(s["input"]["records"], 3);
    assert_eq!(s["input"]["malformed_lines"], 4);
    let (code, reqs, err) = export(&path, &[]);
    assert_eq!(code, 0, "{err}");
    let logs = logs(&reqs);
    assert_eq!(
        logs.iter()
            .map(|l| (l.time_unix_nano, l.observed_time_unix_nano))
            .collect::<Vec<_>>(),
        [(100, 100), (104, 104), (105, 105)]
    );
}

#[test]
fn sequence_numbers_at_u64_max_give_no_absurd_missing_count() {
    let dir = tempfile::tempdir().unwrap();
    let max = u64::MAX.to_string();
    // Every record at 2^64-1, and a session start at 0 followed by records at 2^64-1:
    // repeated numbers are corrupt numbers, not 18 quintillion lost records.
    for (name, first) in [("all.jsonl", max.as_str()), ("tail.jsonl", "0")] {
        let path = write(
            dir.path(),
            name,
            &[
                rec(first, "100", "42", "session_start", SESSION),
                rec(&max, "101", "42", "later_kind", ""),
                rec(&max, "102", "42", "exit_summary", EXIT),
            ],
        );
        let s = summary_json(&path);
        assert_eq!(s["processes"][0]["missing_records"], 0, "{name}");
        let problems = s["problems"].as_array().unwrap();
        assert!(
            !problems
                .iter()
                .any(|p| p["title"].as_str().unwrap().contains("missing")),
            "{name}: {problems:?}"
        );
        let (_, text, _) = super::run(&["summary", &path]);
        assert!(!text.contains("18,446,744"), "{name}: {text}");
    }
    // Real gaps are still counted, whatever the order of the records.
    let path = write(
        dir.path(),
        "gaps.jsonl",
        &[
            rec("0", "100", "42", "session_start", SESSION),
            rec("4", "104", "42", "later_kind", ""),
            rec("2", "102", "42", "later_kind", ""),
            rec("5", "105", "42", "exit_summary", EXIT),
        ],
    );
    let s = summary_json(&path);
    assert_eq!(s["processes"][0]["missing_records"], 2);
}
