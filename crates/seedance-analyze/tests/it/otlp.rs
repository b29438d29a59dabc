//! `export --format otlp-json` decoded with the OpenTelemetry project's own OTLP types
//! (`opentelemetry-proto` with its serde JSON mapping): every line is one
//! `ExportLogsServiceRequest`, one resource per traced process, with the semantic-convention
//! attributes the exporter documents (crates/seedance-analyze/src/export.rs).

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as Any, KeyValue};
use std::process::Command;

pub(super) fn export(
    path: &str,
    env: &[(&str, &str)],
) -> (i32, Vec<ExportLogsServiceRequest>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seedance-analyze"));
    cmd.args(["export", "--format", "otlp-json", path])
        .current_dir(super::crate_dir())
        .env_remove("OTEL_RESOURCE_ATTRIBUTES");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let reqs = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        reqs,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(super) fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attrs
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

pub(super) fn string(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key) {
        Some(Any::StringValue(s)) => Some(s.clone()),
        other => {
            assert!(other.is_none(), "{key}: {other:?}");
            None
        }
    }
}

pub(super) fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key) {
        Some(Any::IntValue(n)) => Some(*n),
        other => {
            assert!(other.is_none(), "{key}: {other:?}");
            None
        }
    }
}

#[test]
fn launch_faults_decode_with_semantic_conventions() {
    let (code, reqs, err) = export(
        "tests/fixtures/v3/gpu-e/seedance-gpu-e-5001-1796100000000000000.jsonl",
        &[
            ("K8S_POD_NAME", "trainer-0"),
            ("K8S_NAMESPACE_NAME", "ml"),
            ("OTEL_RESOURCE_ATTRIBUTES", "k8s.cluster.name=west"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].resource_logs.len(), 1);
    let rl = &reqs[0].resource_logs[0];
    let res = &rl.resource.as_ref().unwrap().attributes;
    assert_eq!(string(res, "host.name").as_deref(), Some("gpu-e"));
    assert_eq!(int(res, "process.pid"), Some(5001));
    assert!(string(res, "process.executable.path").is_some());
    assert_eq!(string(res, "k8s.pod.name").as_deref(), Some("trainer-0"));
    assert_eq!(string(res, "k8s.namespace.name").as_deref(), Some("ml"));
    assert_eq!(string(res, "k8s.cluster.name").as_deref(), Some("west"));
    assert_eq!(rl.scope_logs.len(), 1);
    assert_eq!(
        rl.scope_logs[0].scope.as_ref().unwrap().name,
        "seedance-fix"
    );
    let logs = &rl.scope_logs[0].log_records;
    let names: Vec<String> = logs
        .iter()
        .map(|l| string(&l.attributes, "event.name").unwrap())
        .collect();
    assert_eq!(names[0], "seedance.session_start");
    assert_eq!(names.last().unwrap(), "seedance.exit_summary");
    let launch: Vec<_> = logs
        .iter()
        .filter(|l| string(&l.attributes, "event.name").as_deref() == Some("seedance.launch_fault"))
        .collect();
    assert_eq!(launch.len(), 3);
    let first = launch[0];
    assert_eq!(first.time_unix_nano, 1_796_100_002_000_000_000);
    assert_eq!(first.severity_number, 17);
    assert_eq!(first.severity_text, "ERROR");
    let a = &first.attributes;
    assert_eq!(
        string(a, "error.type").as_deref(),
        Some("CUDA_ERROR_INVALID_VALUE")
    );
    assert_eq!(
        string(a, "code.function.name").as_deref(),
        Some("cuLaunchKernel")
    );
    assert_eq!(
        string(a, "hw.id").as_deref(),
        Some("GPU-7d2e9a10-3c4b-4f5e-8a6b-0c1d2e3f4a50")
    );
    assert_eq!(string(a, "hw.model").as_deref(), Some("NVIDIA H200"));
    assert_eq!(string(a, "hw.vendor").as_deref(), Some("NVIDIA"));
    assert_eq!(int(a, "seedance.device.ordinal"), Some(0));
    match &first.body.as_ref().unwrap().value {
        Some(Any::StringValue(s)) => {
            assert!(s.starts_with("block (32,33,1) = 1056 threads"), "{s}")
        }
        other => panic!("{other:?}"),
    }
    // The whole record rides along, structured: the requested block size is there.
    let Some(Any::KvlistValue(rec)) = attr(a, "seedance.record") else {
        panic!("no seedance.record");
    };
    assert_eq!(int(&rec.values, "requested"), Some(1056));
    assert_eq!(int(&rec.values, "limit"), Some(1024));
}

#[test]
fn every_record_of_a_fleet_is_exported_once() {
    let (code, reqs, err) = export("tests/fixtures/fleet", &[]);
    assert_eq!(code, 0, "{err}");
    let (_, summary, _) = super::run(&["summary", "--format", "json", "tests/fixtures/fleet"]);
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let records: u64 = reqs
        .iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .map(|s| s.log_records.len() as u64)
        .sum();
    assert_eq!(Some(records), summary["input"]["records"].as_u64());
    let files = reqs.iter().map(|r| r.resource_logs.len()).sum::<usize>() as u64;
    assert_eq!(Some(files), summary["input"]["files_read"].as_u64());
    // No CUDA_SUCCESS as an error type, anywhere.
    for r in reqs.iter().flat_map(|r| &r.resource_logs) {
        for l in r.scope_logs.iter().flat_map(|s| &s.log_records) {
            assert_ne!(
                string(&l.attributes, "error.type").as_deref(),
                Some("CUDA_SUCCESS")
            );
        }
    }
}

#[test]
fn an_empty_directory_is_a_warning_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let (code, reqs, err) = export(dir.path().to_str().unwrap(), &[]);
    assert_eq!(code, 3);
    assert!(reqs.is_empty());
    assert_eq!(
        err,
        format!(
            "seedance-analyze: warning: no trace found in {} (no files)\n",
            dir.path().display()
        )
    );
}

/// The OTLP severity number and text of a report severity (`error`, `warning`, `info`).
fn otlp_severity(report_severity: &str) -> (i32, &'static str) {
    match report_severity {
        "error" => (17, "ERROR"),
        "warning" => (13, "WARN"),
        "info" => (9, "INFO"),
        other => panic!("report severity {other}"),
    }
}

/// Exports `path` and checks every log record against `summary --format json` of the same
/// path: a record tied to a problem (`seedance.problem.key`) has that problem's severity,
/// every fault record is tied to one, every resource and scope names the semantic
/// conventions' schema, and every body is a sentence, not the bare event name. Returns
/// (event name, severity number, body, problem key) of every record.
fn check_against_report(path: &str) -> Vec<(String, i32, String, Option<String>)> {
    let (code, reqs, err) = export(path, &[]);
    assert_eq!(code, 0, "{path}: {err}");
    let (_, summary, _) = super::run(&["summary", "--format", "json", path]);
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let problems: std::collections::HashMap<&str, &str> = summary["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["key"].as_str().unwrap(), p["severity"].as_str().unwrap()))
        .collect();
    let mut out = Vec::new();
    for rl in reqs.iter().flat_map(|r| &r.resource_logs) {
        assert_eq!(rl.schema_url, "https://opentelemetry.io/schemas/1.37.0");
        for sl in &rl.scope_logs {
            assert_eq!(sl.schema_url, "https://opentelemetry.io/schemas/1.37.0");
            for l in &sl.log_records {
                let event = l.event_name.clone();
                let bare = event.trim_start_matches("seedance.");
                let body = match l.body.as_ref().and_then(|b| b.value.as_ref()) {
                    Some(Any::StringValue(s)) => s.clone(),
                    other => panic!("{path}: {event}: body {other:?}"),
                };
                assert!(
                    !body.is_empty() && body != event && body != bare,
                    "{path}: {event}: body {body:?}"
                );
                let key = string(&l.attributes, "seedance.problem.key");
                match &key {
                    Some(k) => {
                        let severity = problems
                            .get(k.as_str())
                            .unwrap_or_else(|| panic!("{path}: {event}: no problem {k}"));
                        let (number, text) = otlp_severity(severity);
                        assert_eq!(l.severity_number, number, "{path}: {event} ({k})");
                        assert_eq!(l.severity_text, text, "{path}: {event} ({k})");
                    }
                    None => assert!(
                        !matches!(
                            bare,
                            "device_fault"
                                | "launch_fault"
                                | "alloc_fault"
                                | "lifetime_fault"
                                | "host_hazard"
                                | "stray_context"
                        ),
                        "{path}: {event} without a problem key"
                    ),
                }
                out.push((event, l.severity_number, body, key));
            }
        }
    }
    out
}

#[test]
fn every_record_has_the_severity_of_its_problem_and_a_readable_body() {
    for dir in [
        "tests/fixtures/fleet",
        "tests/fixtures/v2",
        "tests/fixtures/v3",
        "tests/fixtures/v4",
        "tests/fixtures/v5",
    ] {
        check_against_report(dir);
    }
    // A stray context on a device where an allocation then ran out of memory: the report's
    // error, where the export said INFO.
    let v5 = check_against_report("tests/fixtures/v5");
    let stray: Vec<_> = v5
        .iter()
        .filter(|r| r.0 == "seedance.stray_context")
        .collect();
    assert_eq!(stray.len(), 3);
    for r in stray {
        assert_eq!((r.1, r.3.as_deref()), (17, Some("stray_context/0")));
    }
    // A failed call: its function and result, not the event name.
    let fleet = check_against_report("tests/fixtures/fleet");
    let oom: Vec<&str> = fleet
        .iter()
        .filter(|r| r.3.as_deref() == Some("cuda_error/CUDA_ERROR_OUT_OF_MEMORY"))
        .map(|r| r.2.as_str())
        .collect();
    assert_eq!(oom.len(), 4);
    assert!(
        oom.contains(&"cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)"),
        "{oom:?}"
    );
}

#[test]
fn a_pinned_copy_race_has_the_severity_of_its_problem() {
    let dir = tempfile::tempdir().unwrap();
    let hazard = |pid: u32, repaired: bool| {
        format!(
            r#"{{"v":5,"seq":1,"ts_ns":2,"pid":{pid},"tid":{pid},"event":"host_hazard","function":"cuMemcpyDtoHAsync_v2","kind":"pinned_copy_race","range":{{"address":"0x7f0000000000","bytes":65536}},"made_by":"cuMemHostAlloc","first":{{"function":"cuMemcpyHtoDAsync_v2","stream":"0x5eed50000100","default_stream":null,"tid":{pid},"access":"read","offset":0,"bytes":65536}},"second":{{"function":"cuMemcpyDtoHAsync_v2","stream":"0x5eed50000200","default_stream":null,"tid":{pid},"access":"write","offset":0,"bytes":65536}},"repaired":{repaired},"repair":{},"explanation":"the second copy may run before the first one reads"}}"#,
            if repaired { r#""event_wait""# } else { "null" }
        )
    };
    let failed = r#"{"v":5,"seq":2,"ts_ns":3,"pid":31,"tid":31,"event":"call_failed","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","args":{"bytesize":1}}"#;
    let cases = [
        ("observe", 31, false, 17, "ERROR"),
        ("fix", 32, true, 13, "WARN"),
    ];
    for (name, pid, repaired, number, text) in cases {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        let mut lines = vec![super::session_start(pid, 0, 1), hazard(pid, repaired)];
        if pid == 31 {
            lines.push(failed.to_string());
        }
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        super::write_trace(&sub, "t.jsonl", &lines, "");
        let records = check_against_report(sub.to_str().unwrap());
        let h = records
            .iter()
            .find(|r| r.0 == "seedance.host_hazard")
            .unwrap();
        assert_eq!(
            (h.1, h.3.as_deref()),
            (number, Some("lifetime_fault/pinned_copy_race")),
            "{name}"
        );
        assert_eq!(h.2, "the second copy may run before the first one reads");
        let (_, reqs, _) = export(sub.to_str().unwrap(), &[]);
        let l = &reqs[0].resource_logs[0].scope_logs[0].log_records[1];
        assert_eq!(l.severity_text, text);
        if pid == 31 {
            let c = &records[2];
            assert_eq!(
                (c.0.as_str(), c.1, c.2.as_str()),
                (
                    "seedance.call_failed",
                    17,
                    "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)"
                )
            );
        }
    }
}
