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
//!   value, nothing lost (below [`MAX_RECORD_DEPTH`], as JSON text). The body is the
//!   record's `explanation` when it has one, else the event name.
//!
//! The files are read by `summary`'s reader ([`input::read_file_with`]): the same files are
//! traces, the same lines are records, with the same envelope (`pid` u32, `ts_ns` u64).
//!
//! Severity: `*_fault` and `call_failed` are ERROR (17), `device_fallback` and
//! `lifetime_repair` WARN (13), the rest INFO (9).

use crate::read::input::{self, Head, Line, Options};
use rayon::prelude::*;
use serde::de::{self, DeserializeOwned, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
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
    /// The JSON lines, each ending in a newline: one `ExportLogsServiceRequest` per element
    /// of [`Export::resource_logs`].
    pub json: String,
    /// Each `ResourceLogs` object of the output (one trace file, at most
    /// [`RECORDS_PER_LINE`] log records), as JSON, with its number of log records:
    /// what [`crate::export::push`] batches into requests.
    pub resource_logs: Vec<(String, u64)>,
    /// Files (objects) looked at.
    pub files_seen: u64,
    /// Files that held a trace.
    pub files_read: u64,
    /// Log records written.
    pub log_records: u64,
    /// Files without a single byte.
    pub empty_files: u64,
    /// Lines of trace files that are not records (malformed, truncated or oversized lines,
    /// records of a known kind with wrong fields): counted, skipped.
    pub skipped_lines: u64,
}

/// Exports every trace in `files` (plain or gzip JSON lines) as described in the module
/// documentation. The files are read by `summary`'s reader ([`input::read_file_with`]), with
/// its rules: a file `summary` does not take for a trace is not exported, and a log record
/// is written for exactly the lines `summary` counts as records (the report's
/// `input.records`), with their envelope as `summary` reads it.
pub fn otlp_json(files: &[PathBuf], env: &Environment) -> Export {
    let parts: Vec<Export> = files.par_iter().map(|f| export_file(f, env)).collect();
    let mut out = Export::default();
    for p in parts {
        out.append(p);
    }
    out
}

/// [`otlp_json`] of the objects an object-storage URL names, in key order: in a build
/// without the `remote` feature, always the error naming it.
#[cfg(not(feature = "remote"))]
pub fn otlp_json_url(url: &str, _env: &Environment) -> Result<Export, String> {
    Err(crate::read::remote_url::unsupported(url))
}

/// [`otlp_json`] of the objects an object-storage URL names (`crate::read::remote`), in key
/// order. `Err` when the URL cannot be listed.
#[cfg(feature = "remote")]
pub fn otlp_json_url(url: &str, env: &Environment) -> Result<Export, String> {
    let listing = crate::read::remote::list(url)?;
    let mut out = Export::default();
    for p in listing.read_all(|name, data| {
        export_with(env, |hook| {
            crate::read::remote::read_object(name, data, &Options::default(), Some(hook))
        })
    }) {
        out.append(p);
    }
    Ok(out)
}

impl Export {
    /// Adds `other`'s lines and counts after this one's.
    pub fn append(&mut self, other: Export) {
        self.json.push_str(&other.json);
        self.resource_logs.extend(other.resource_logs);
        self.files_seen += other.files_seen;
        self.files_read += other.files_read;
        self.log_records += other.log_records;
        self.empty_files += other.empty_files;
        self.skipped_lines += other.skipped_lines;
    }
}

/// What the session start says about the process and its devices.
#[derive(Default)]
struct Session {
    resource: Vec<Value>,
    scope_version: String,
    /// ordinal -> (uuid, name)
    devices: Vec<(i64, Option<String>, Option<String>)>,
}

/// The fields of one record, in the order written, each as its JSON text.
struct Fields(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<Fields, A::Error> {
                let mut v = Vec::new();
                while let Some(e) = m.next_entry::<String, Box<RawValue>>()? {
                    v.push(e);
                }
                Ok(Fields(v))
            }
        }
        d.deserialize_map(V)
    }
}

impl Fields {
    /// The field `key` (the last one when it is repeated, as a JSON object means), read
    /// as `T`; `None` when absent or of another type.
    fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let raw = self.0.iter().rev().find(|(k, _)| k == key)?;
        serde_json::from_str(raw.1.get()).ok()
    }
}

fn session(rec: &Fields, head: &Head, env: &Environment) -> Session {
    let mut resource = Vec::new();
    if let Some(h) = rec.get::<String>("hostname") {
        resource.push(kv("host.name", json!({ "stringValue": h })));
    }
    resource.push(kv("process.pid", int(i64::from(head.pid))));
    if let Some(exe) = rec.get::<String>("executable") {
        let name = Path::new(&exe)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| exe.clone());
        resource.push(kv("process.executable.path", json!({ "stringValue": exe })));
        resource.push(kv("service.name", json!({ "stringValue": name })));
    }
    if let Some((_, argv)) = rec.0.iter().rev().find(|(k, _)| k == "argv") {
        if argv.get().starts_with('[') {
            resource.push(kv("process.command_args", any_raw(argv, 1)));
        }
    }
    for (k, v) in &env.attributes {
        resource.retain(|a| a["key"] != k.as_str());
        resource.push(kv(k, json!({ "stringValue": v })));
    }
    let mut devices: Vec<(i64, Option<String>, Option<String>)> = Vec::new();
    let entries = |v: Option<Value>| -> Vec<Value> {
        match v {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        }
    };
    for d in entries(rec.get("devices")) {
        if let Some(o) = d["ordinal"].as_i64() {
            devices.push((o, None, d["name"].as_str().map(String::from)));
        }
    }
    let topology = rec
        .get::<Value>("topology")
        .map(|mut t| t["devices"].take());
    for d in entries(topology) {
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
        scope_version: rec.get::<String>("shim_version").unwrap_or_default(),
        devices,
    }
}

fn export_file(path: &Path, env: &Environment) -> Export {
    export_with(env, |hook| {
        input::read_file_with(path, &Options::default(), Some(hook))
    })
}

/// The export of one file, which `read` reads with `summary`'s reader, handing it the hook
/// that builds the log records.
fn export_with(
    env: &Environment,
    read: impl FnOnce(input::RecordHook<'_>) -> crate::Aggregate,
) -> Export {
    let mut out = Export::default();
    let mut sess: Option<Session> = None;
    let mut records: Vec<Value> = Vec::new();
    let mut hook = |text: &[u8], line: &Line<'_>| {
        let Some(head) = line.head() else {
            return;
        };
        // `summary` took the line for a record, so it is a JSON object; a line the
        // generic reader refuses all the same still gets its log record, with the text.
        let rec = serde_json::from_slice::<Fields>(text).ok();
        if let (Line::SessionStart(..), None, Some(rec)) = (line, &sess, &rec) {
            sess = Some(session(rec, &head, env));
        }
        let devices = sess.as_ref().map(|s| s.devices.as_slice()).unwrap_or(&[]);
        records.push(log_record(&head, rec.as_ref(), text, devices));
    };
    let agg = read(&mut hook);
    let c = &agg.counters;
    out.files_seen = c.files_seen;
    out.empty_files = c.empty_files;
    if c.files_read == 0 {
        return out;
    }
    out.files_read = c.files_read;
    out.log_records = records.len() as u64;
    out.skipped_lines = crate::sat_sum([c.malformed_lines, c.truncated_lines, c.oversized_lines]);
    let sess = sess.unwrap_or_else(|| {
        // No session start (the head of the file is missing): the pid is in every record.
        let mut s = Session::default();
        for (k, v) in &env.attributes {
            s.resource.push(kv(k, json!({ "stringValue": v })));
        }
        s
    });
    for chunk in records.chunks(RECORDS_PER_LINE) {
        let item = json!({
            "resource": { "attributes": sess.resource },
            "scopeLogs": [{
                "scope": { "name": "seedance-fix", "version": sess.scope_version },
                "logRecords": chunk,
            }],
        })
        .to_string();
        out.json.push_str("{\"resourceLogs\":[");
        out.json.push_str(&item);
        out.json.push_str("]}\n");
        out.resource_logs.push((item, chunk.len() as u64));
    }
    out
}

/// The ordinal of the device a record is about: `device`, else where a fallback sent the
/// call, else the ordinal the program asked for (which may not exist).
fn device_ordinal(rec: &Fields) -> Option<i64> {
    ["device", "chosen_ordinal", "requested_ordinal"]
        .iter()
        .find_map(|k| rec.get::<i64>(k))
}

/// The log record of one trace record: `head` is its envelope as `summary` read it, `rec`
/// its fields (`None` for a line only `summary`'s own scanner reads, then `text` is
/// exported as a string).
fn log_record(
    head: &Head,
    rec: Option<&Fields>,
    text: &[u8],
    devices: &[(i64, Option<String>, Option<String>)],
) -> Value {
    let event = rec
        .and_then(|r| r.get::<String>("event"))
        .unwrap_or_else(|| "unknown".to_string());
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
    let mut body = event.clone();
    if let Some(rec) = rec {
        if let Some(r) = rec.get::<String>("result_name") {
            if r != "CUDA_SUCCESS" {
                attrs.push(kv("error.type", json!({ "stringValue": r })));
            }
        }
        if let Some(f) = rec.get::<String>("function") {
            attrs.push(kv("code.function.name", json!({ "stringValue": f })));
        }
        if let Some(t) = rec.get::<u64>("tid").and_then(|t| i64::try_from(t).ok()) {
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
        attrs.push(kv("seedance.record", kvlist(&rec.0, 1)));
        if let Some(e) = rec.get::<String>("explanation") {
            body = e;
        }
    } else {
        let text = String::from_utf8_lossy(text);
        attrs.push(kv("seedance.record", json!({ "stringValue": text.trim() })));
    }
    // `summary` reads every record's `ts_ns` as a u64 (lines without one are not records).
    let ts = head.ts_ns.to_string();
    json!({
        "timeUnixNano": ts,
        "observedTimeUnixNano": ts,
        "severityNumber": severity.0,
        "severityText": severity.1,
        "eventName": format!("seedance.{event}"),
        "body": { "stringValue": body },
        "attributes": attrs,
    })
}

fn kv(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

/// An `intValue`: a decimal string, as the OTLP/JSON mapping writes 64-bit integers.
fn int(n: i64) -> Value {
    json!({ "intValue": n.to_string() })
}

/// How deep the structured `seedance.record` goes: values nested deeper are kept as their
/// JSON text (a `stringValue`). 16 levels hold every record the shim writes, and keep the
/// OTLP/JSON of a record within the 128 levels that common JSON decoders (serde_json's
/// default) accept, whatever the record's own depth.
pub const MAX_RECORD_DEPTH: usize = 16;

/// An object's fields as an OTLP `kvlistValue`, at `depth` (1: the record itself).
fn kvlist(fields: &[(String, Box<RawValue>)], depth: usize) -> Value {
    let values: Vec<Value> = fields
        .iter()
        .map(|(k, v)| kv(k, any_raw(v, depth + 1)))
        .collect();
    json!({ "kvlistValue": { "values": values } })
}

/// A JSON value (its text) as an OTLP `AnyValue`: objects as `kvlistValue`, arrays as
/// `arrayValue`, integers as `intValue` (a `u64` over `i64::MAX` as a `doubleValue`), null
/// as an empty value; below [`MAX_RECORD_DEPTH`], objects and arrays as their JSON text.
/// The text is walked one level at a time (serde_json's `RawValue` skips nested values
/// without recursion), so no depth of input makes it fail or overflow the stack.
fn any_raw(raw: &RawValue, depth: usize) -> Value {
    let text = raw.get();
    let nested = matches!(text.as_bytes().first(), Some(b'{' | b'['));
    if nested && depth > MAX_RECORD_DEPTH {
        return json!({ "stringValue": text });
    }
    if text.starts_with('{') {
        if let Ok(f) = serde_json::from_str::<Fields>(text) {
            return kvlist(&f.0, depth);
        }
    } else if text.starts_with('[') {
        if let Ok(a) = serde_json::from_str::<Vec<Box<RawValue>>>(text) {
            let values: Vec<Value> = a.iter().map(|v| any_raw(v, depth + 1)).collect();
            return json!({ "arrayValue": { "values": values } });
        }
    } else if let Ok(v) = serde_json::from_str::<Value>(text) {
        return match v {
            Value::Null => json!({}),
            Value::Bool(b) => json!({ "boolValue": b }),
            Value::Number(n) => match n.as_i64() {
                Some(i) => int(i),
                None => json!({ "doubleValue": n.as_f64().unwrap_or(0.0) }),
            },
            Value::String(s) => json!({ "stringValue": s }),
            // Not reached: objects and arrays start with a bracket.
            other => json!({ "stringValue": other.to_string() }),
        };
    }
    json!({ "stringValue": text })
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
