//! `export --format otlp-json`: the traces' events as OpenTelemetry log records in the
//! OTLP/JSON encoding, for an OpenTelemetry Collector (`examples/opentelemetry/` reads them
//! with the `otlpjsonfile` receiver) or any OTLP/HTTP endpoint that takes JSON.
//!
//! The output is JSON lines: each line is one complete `ExportLogsServiceRequest`
//! (`{"resourceLogs":[...]}`) holding one trace file (one process) as one resource, split
//! into lines of at most [`RECORDS_PER_LINE`] log records. The encoding follows the OTLP
//! specification's JSON mapping (opentelemetry-proto `docs/specification.md`, "JSON Protobuf
//! Encoding"): field names in lowerCamelCase, 64-bit integers as decimal strings, enums as
//! numbers.
//!
//! Attributes follow the OpenTelemetry semantic conventions where one exists:
//!
//! - resource: `host.name`, `process.pid`, `process.executable.path`,
//!   `process.command_args`, `service.name` (the executable's file name), and the `k8s.*`
//!   attributes when the exporting process's environment gives them ([`Environment`]:
//!   `OTEL_RESOURCE_ATTRIBUTES` and the Downward API variables `K8S_POD_NAME`, ...), since
//!   the trace itself does not record them;
//! - log record: `event.name` = `seedance.<event>` (our namespace: `seedance.device_fault`,
//!   `seedance.exit_summary`, ...), `error.type` = the CUresult name of a failing call
//!   (never `CUDA_SUCCESS`), `code.function.name` = the driver function, `thread.id`,
//!   `hw.id` = the GPU UUID, `hw.model` = its name, `hw.vendor` = `NVIDIA`, `hw.type` =
//!   `gpu` for the device the record is about (its ordinal looked up in the session start),
//!   `seedance.device.ordinal`, and `seedance.record`: the whole record as a structured
//!   value, nothing lost. The body is the record's `explanation` when it has one, else the
//!   event name.
//!
//! Severity: `*_fault` and `call_failed` are ERROR (17), `device_fallback` and
//! `lifetime_repair` WARN (13), the rest INFO (9).

use crate::input::MAX_LINE_BYTES;
use crate::reader::read_line_bounded;
use flate2::read::MultiGzDecoder;
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Most log records in one output line (one `ExportLogsServiceRequest`).
pub const RECORDS_PER_LINE: usize = 1000;

/// OTLP `SeverityNumber` values (opentelemetry-proto `logs/v1/logs.proto`).
const SEVERITY_INFO: u32 = 9;
const SEVERITY_WARN: u32 = 13;
const SEVERITY_ERROR: u32 = 17;

/// Resource attributes taken from the exporting process's environment, added to every
/// resource: the trace does not record the pod it ran in, so an exporter running in the
/// same pod (a sidecar) or told by the Downward API supplies them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    /// `(key, value)` pairs, in order; later keys override earlier ones.
    pub attributes: Vec<(String, String)>,
}

/// Downward API variables and the `k8s.*` attribute each gives (the names the
/// OpenTelemetry Collector's Kubernetes examples use).
const K8S_VARIABLES: [(&str, &str); 6] = [
    ("K8S_NAMESPACE_NAME", "k8s.namespace.name"),
    ("K8S_POD_NAME", "k8s.pod.name"),
    ("K8S_POD_UID", "k8s.pod.uid"),
    ("K8S_NODE_NAME", "k8s.node.name"),
    ("K8S_CONTAINER_NAME", "k8s.container.name"),
    ("K8S_CLUSTER_NAME", "k8s.cluster.name"),
];

impl Environment {
    /// Reads [`Environment::from_vars`] from this process's environment.
    pub fn from_process() -> Environment {
        Environment::from_vars(|k| std::env::var(k).ok())
    }

    /// Builds the attributes from variables looked up with `get`: first
    /// `OTEL_RESOURCE_ATTRIBUTES` (`key=value,key=value`, values percent-decoded as the
    /// OpenTelemetry SDK specification says), then the `K8S_*` variables of
    /// [`K8S_VARIABLES`]. Empty values and malformed pairs are skipped.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Environment {
        let mut attributes: Vec<(String, String)> = Vec::new();
        let mut set = |k: &str, v: String| {
            if k.is_empty() || v.is_empty() {
                return;
            }
            attributes.retain(|(key, _)| key != k);
            attributes.push((k.to_string(), v));
        };
        if let Some(s) = get("OTEL_RESOURCE_ATTRIBUTES") {
            for pair in s.split(',') {
                if let Some((k, v)) = pair.split_once('=') {
                    set(k.trim(), percent_decode(v.trim()));
                }
            }
        }
        for (var, key) in K8S_VARIABLES {
            if let Some(v) = get(var) {
                set(key, v);
            }
        }
        Environment { attributes }
    }
}

/// `%2C` -> `,`; an invalid escape is kept as written.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() && s.is_char_boundary(i + 3) {
            if let Ok(n) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(n);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The export of a set of trace files.
#[derive(Debug, Clone, Default)]
pub struct Export {
    /// The JSON lines, each ending in a newline.
    pub json: String,
    /// Files that held a trace.
    pub files_read: u64,
    /// Log records written.
    pub log_records: u64,
    /// Files without a single byte.
    pub empty_files: u64,
    /// Lines that were not JSON objects with an `event` (counted, skipped).
    pub skipped_lines: u64,
}

/// Exports every trace in `files` (plain or gzip JSON lines; files without any record are
/// skipped) as described in the module documentation.
pub fn otlp_json(files: &[PathBuf], env: &Environment) -> Export {
    let mut out = Export::default();
    for f in files {
        export_file(f, env, &mut out);
    }
    out
}

fn open(path: &Path) -> Option<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).ok()?;
    let mut raw = BufReader::with_capacity(64 << 10, file);
    let gzip = raw.fill_buf().ok()?.starts_with(&[0x1f, 0x8b]);
    Some(if gzip {
        Box::new(BufReader::new(MultiGzDecoder::new(raw)))
    } else {
        Box::new(raw)
    })
}

/// What the session start says about the process and its devices.
#[derive(Default)]
struct Session {
    resource: Vec<Value>,
    scope_version: String,
    /// ordinal -> (uuid, name)
    devices: Vec<(i64, Option<String>, Option<String>)>,
}

fn session(rec: &Map<String, Value>, env: &Environment) -> Session {
    let mut resource = Vec::new();
    let s = |k: &str| rec.get(k).and_then(Value::as_str);
    if let Some(h) = s("hostname") {
        resource.push(kv("host.name", json!({ "stringValue": h })));
    }
    if let Some(pid) = rec.get("pid").and_then(Value::as_u64) {
        resource.push(kv("process.pid", int(pid as i64)));
    }
    if let Some(exe) = s("executable") {
        resource.push(kv("process.executable.path", json!({ "stringValue": exe })));
        let name = Path::new(exe)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| exe.to_string());
        resource.push(kv("service.name", json!({ "stringValue": name })));
    }
    if let Some(argv) = rec.get("argv").filter(|v| v.is_array()) {
        resource.push(kv("process.command_args", any_value(argv)));
    }
    for (k, v) in &env.attributes {
        resource.retain(|a| a["key"] != k.as_str());
        resource.push(kv(k, json!({ "stringValue": v })));
    }
    let mut devices: Vec<(i64, Option<String>, Option<String>)> = Vec::new();
    let entries = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(Value::as_array).cloned().unwrap_or_default()
    };
    for d in entries(rec.get("devices")) {
        if let Some(o) = d["ordinal"].as_i64() {
            devices.push((o, None, d["name"].as_str().map(String::from)));
        }
    }
    for d in entries(rec.get("topology").and_then(|t| t.get("devices"))) {
        let Some(o) = d["ordinal"].as_i64() else {
            continue;
        };
        let uuid = d["uuid"].as_str().map(String::from);
        let name = d["name"].as_str().map(String::from);
        match devices.iter_mut().find(|e| e.0 == o) {
            Some(e) => {
                e.1 = uuid.or(e.1.take());
                e.2 = e.2.take().or(name);
            }
            None => devices.push((o, uuid, name)),
        }
    }
    Session {
        resource,
        scope_version: s("shim_version").unwrap_or_default().to_string(),
        devices,
    }
}

fn export_file(path: &Path, env: &Environment, out: &mut Export) {
    let Some(mut reader) = open(path) else {
        return;
    };
    let mut buf = Vec::new();
    if reader.fill_buf().map(|b| b.is_empty()).unwrap_or(false) {
        out.empty_files += 1;
        return;
    }
    let mut sess: Option<Session> = None;
    let mut records: Vec<Value> = Vec::new();
    let mut any = false;
    while let Ok(Some(raw)) = read_line_bounded(&mut reader, &mut buf, MAX_LINE_BYTES) {
        if raw.oversized {
            out.skipped_lines += 1;
            continue;
        }
        let rec = match serde_json::from_slice::<Value>(&buf) {
            Ok(Value::Object(m)) if m.get("event").is_some_and(Value::is_string) => m,
            _ => {
                if !buf.iter().all(u8::is_ascii_whitespace) {
                    out.skipped_lines += 1;
                }
                continue;
            }
        };
        any = true;
        if rec["event"] == "session_start" && sess.is_none() {
            sess = Some(session(&rec, env));
        }
        let devices = sess.as_ref().map(|s| s.devices.as_slice()).unwrap_or(&[]);
        records.push(log_record(&rec, devices));
        out.log_records += 1;
    }
    if !any {
        return;
    }
    out.files_read += 1;
    let sess = sess.unwrap_or_else(|| {
        // No session start (the head of the file is missing): the pid is in every record.
        let mut s = Session::default();
        for (k, v) in &env.attributes {
            s.resource.push(kv(k, json!({ "stringValue": v })));
        }
        s
    });
    for chunk in records.chunks(RECORDS_PER_LINE) {
        let req = json!({
            "resourceLogs": [{
                "resource": { "attributes": sess.resource },
                "scopeLogs": [{
                    "scope": { "name": "seedance-fix", "version": sess.scope_version },
                    "logRecords": chunk,
                }],
            }],
        });
        out.json.push_str(&req.to_string());
        out.json.push('\n');
    }
}

/// The ordinal of the device a record is about: `device`, else where a fallback sent the
/// call, else the ordinal the program asked for (which may not exist).
fn device_ordinal(rec: &Map<String, Value>) -> Option<i64> {
    ["device", "chosen_ordinal", "requested_ordinal"]
        .iter()
        .find_map(|k| rec.get(*k).and_then(Value::as_i64))
}

fn log_record(
    rec: &Map<String, Value>,
    devices: &[(i64, Option<String>, Option<String>)],
) -> Value {
    let event = rec["event"].as_str().unwrap_or_default();
    let severity = if event.ends_with("_fault") || event == "call_failed" {
        (SEVERITY_ERROR, "ERROR")
    } else if event == "device_fallback" || event == "lifetime_repair" {
        (SEVERITY_WARN, "WARN")
    } else {
        (SEVERITY_INFO, "INFO")
    };
    let mut attrs = vec![kv(
        "event.name",
        json!({ "stringValue": format!("seedance.{event}") }),
    )];
    if let Some(r) = rec.get("result_name").and_then(Value::as_str) {
        if r != "CUDA_SUCCESS" {
            attrs.push(kv("error.type", json!({ "stringValue": r })));
        }
    }
    if let Some(f) = rec.get("function").and_then(Value::as_str) {
        attrs.push(kv("code.function.name", json!({ "stringValue": f })));
    }
    if let Some(t) = rec.get("tid").and_then(Value::as_i64) {
        attrs.push(kv("thread.id", int(t)));
    }
    if let Some(o) = device_ordinal(rec) {
        attrs.push(kv("seedance.device.ordinal", int(o)));
        if let Some((_, uuid, name)) = devices.iter().find(|d| d.0 == o) {
            attrs.push(kv("hw.type", json!({ "stringValue": "gpu" })));
            attrs.push(kv("hw.vendor", json!({ "stringValue": "NVIDIA" })));
            if let Some(u) = uuid {
                attrs.push(kv("hw.id", json!({ "stringValue": u })));
            }
            if let Some(n) = name {
                attrs.push(kv("hw.model", json!({ "stringValue": n })));
            }
        }
    }
    attrs.push(kv(
        "seedance.record",
        any_value(&Value::Object(rec.clone())),
    ));
    let body = rec
        .get("explanation")
        .and_then(Value::as_str)
        .unwrap_or(event);
    let mut lr = json!({
        "severityNumber": severity.0,
        "severityText": severity.1,
        "eventName": format!("seedance.{event}"),
        "body": { "stringValue": body },
        "attributes": attrs,
    });
    if let Some(ts) = rec.get("ts_ns").and_then(Value::as_u64) {
        lr["timeUnixNano"] = Value::String(ts.to_string());
        lr["observedTimeUnixNano"] = Value::String(ts.to_string());
    }
    lr
}

fn kv(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

/// An `intValue`: a decimal string, as the OTLP/JSON mapping writes 64-bit integers.
fn int(n: i64) -> Value {
    json!({ "intValue": n.to_string() })
}

/// A JSON value as an OTLP `AnyValue`: objects as `kvlistValue`, arrays as `arrayValue`,
/// integers as `intValue` (a `u64` over `i64::MAX` as a `doubleValue`), null as an empty
/// value.
fn any_value(v: &Value) -> Value {
    match v {
        Value::Null => json!({}),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => int(i),
            None => json!({ "doubleValue": n.as_f64().unwrap_or(0.0) }),
        },
        Value::String(s) => json!({ "stringValue": s }),
        Value::Array(a) => {
            json!({ "arrayValue": { "values": a.iter().map(any_value).collect::<Vec<_>>() } })
        }
        Value::Object(m) => json!({
            "kvlistValue": {
                "values": m.iter().map(|(k, v)| kv(k, any_value(v))).collect::<Vec<_>>()
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_attributes_from_the_environment() {
        let vars = |k: &str| match k {
            "OTEL_RESOURCE_ATTRIBUTES" => {
                Some("deployment.environment.name=prod,k8s.pod.name=old,bad,x=a%2Cb".into())
            }
            "K8S_POD_NAME" => Some("trainer-0".into()),
            "K8S_NAMESPACE_NAME" => Some("ml".into()),
            "K8S_NODE_NAME" => Some(String::new()),
            _ => None,
        };
        let env = Environment::from_vars(vars);
        assert_eq!(
            env.attributes,
            vec![
                ("deployment.environment.name".into(), "prod".into()),
                ("x".into(), "a,b".into()),
                ("k8s.namespace.name".into(), "ml".into()),
                ("k8s.pod.name".into(), "trainer-0".into()),
            ]
        );
    }

    #[test]
    fn percent_decoding_keeps_invalid_escapes() {
        assert_eq!(percent_decode("a%2Cb"), "a,b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
