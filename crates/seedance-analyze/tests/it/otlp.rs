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
