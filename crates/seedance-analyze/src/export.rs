//! `export --format otlp-json`: the traces' events as OpenTelemetry log records in the
//! OTLP/JSON encoding, for an OpenTelemetry Collector (`examples/opentelemetry/` reads them
//! with the `otlpjsonfile` receiver) or any OTLP/HTTP endpoint that takes JSON.
//!
//! The output is JSON lines: each line is one complete `ExportLogsServiceRequest`
//! (`{"resourceLogs":[...]}`) holding one trace file (one process) as one resource, split
//! into lines of at most [`RECORDS_PER_LINE`] log records: one request per trace file (more
//! for a file of more records), not one for the whole input. The encoding follows the OTLP
//! specification's JSON mapping (opentelemetry-proto `docs/specification.md`, "JSON Protobuf
//! Encoding"): field names in lowerCamelCase, 64-bit integers as decimal strings, enums as
//! numbers.
//!
//! Attributes follow the OpenTelemetry semantic conventions where one exists, version
//! [`SCHEMA_URL`] (1.37.0, the first with `hw.model` and `hw.vendor`), named in every
//! resource's and scope's `schemaUrl`:
//!
//! - resource: `host.name`, `process.pid`, `process.executable.path`,
//!   `process.command_args`, `service.name` (the executable's file name), and the `k8s.*`
//!   attributes when the exporting process's environment gives them ([`Environment`]:
//!   `OTEL_RESOURCE_ATTRIBUTES` and the Downward API variables `K8S_POD_NAME`, ...), since
//!   the trace itself does not record them;
//! - log record: `event.name` = `seedance.<event>` (our namespace: `seedance.device_fault`,
//!   `seedance.exit_summary`, ...; the record's `eventName` too, which replaces the
//!   attribute since 1.30.0: kept for back-ends that read only attributes), `error.type` = the CUresult name of a failing call
//!   (never `CUDA_SUCCESS`), `code.function.name` = the driver function, `thread.id`,
//!   `hw.id` = the GPU UUID, `hw.model` = its name, `hw.vendor` = `NVIDIA`, `hw.type` =
//!   `gpu` for the device the record is about (its ordinal looked up in the session start),
//!   `seedance.device.ordinal`, and `seedance.record`: the whole record as a structured
//!   value, nothing lost (below [`MAX_RECORD_DEPTH`], as JSON text), and
//!   `seedance.problem.key`: the `key` of the report problem the record belongs to (as
//!   `summary --format json` of the same input writes it), when it belongs to one.
//!
//! The body is a sentence a person reads in a log viewer: the record's `explanation` when
//! it has one, else one built from its fields (`cuMemAlloc_v2 failed:
//! CUDA_ERROR_OUT_OF_MEMORY (2)`, `session start: /usr/bin/python3 (mode observe,
//! seedance-fix 0.5.0)`, ...), never the bare event name.
//!
//! The files are read by `summary`'s reader ([`input::read_file_with`]): the same files are
//! traces, the same lines are records, with the same envelope (`pid` u32, `ts_ns` u64).
//!
//! Severity: a record that belongs to a problem of the report (`summary` of the same input)
//! has that problem's severity: `error` is ERROR (17), `warning` WARN (13), `info` INFO
//! (9), so that a Collector filtering on severity keeps what the report calls a problem
//! (a pinned-copy race that was not repaired is an error, a stray context a warning, a
//! `call_failed` of a failure the program recovered from info). Which problem: a
//! `device_fault`, `launch_fault`, `alloc_fault`, `lifetime_fault`, `host_hazard`,
//! `stray_context` or `trace_cut` record names it by its fields; a `device_fallback` or
//! `lifetime_repair` belongs to the fault it repaired (same process, function and ordinal,
//! or function); a `call_failed` or `call_failed_repeats` to the fault record of the same
//! process, function and result when there is one (the report counts those errors under
//! the fault), else to the `cuda_error` problem of its result, else to the
//! `cuda_error_recovered` one. A record of no problem is INFO; a record whose problem the
//! report does not have (more distinct faults than the report keeps) is ERROR for a fault
//! or `host_hazard`, WARN for a repair, a fallback, a stray context or a trace cut.

use crate::input::{self, Head, Line, Options};
use crate::report::Severity;
use rayon::prelude::*;
use serde::de::{self, DeserializeOwned, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Most log records in one output line (one `ExportLogsServiceRequest`).
pub const RECORDS_PER_LINE: usize = 1000;

/// The semantic conventions the attributes follow (`schemaUrl` of every resource and
/// scope): 1.37.0 is the first version with `hw.model` and `hw.vendor`, and every other
/// attribute name written is current there.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

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
    /// what [`crate::push`] batches into requests.
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
/// `input.records`), with their envelope as `summary` reads it. Severities are those of the
/// report of the same files.
pub fn otlp_json(files: &[PathBuf], env: &Environment) -> Export {
    finish(read_files(files, env))
}

/// [`otlp_json`] of `files` and of the objects the object-storage URLs `urls` name (in key
/// order), with the severities of the report of all of them together. `Err` when a URL
/// cannot be listed, or in a build without the `remote` feature, the error naming it.
pub fn otlp_json_with_urls(
    files: &[PathBuf],
    urls: &[String],
    env: &Environment,
) -> Result<Export, String> {
    let mut parts = read_files(files, env);
    for u in urls {
        parts.extend(read_url(u, env)?);
    }
    Ok(finish(parts))
}

fn read_files(files: &[PathBuf], env: &Environment) -> Vec<Part> {
    files.par_iter().map(|f| export_file(f, env)).collect()
}

#[cfg(not(feature = "remote"))]
fn read_url(url: &str, _env: &Environment) -> Result<Vec<Part>, String> {
    Err(crate::remote_url::unsupported(url))
}

#[cfg(feature = "remote")]
fn read_url(url: &str, env: &Environment) -> Result<Vec<Part>, String> {
    let listing = crate::remote::list(url)?;
    Ok(listing.read_all(|name, data| {
        export_with(env, |hook| {
            crate::remote::read_object(name, data, &Options::default(), Some(hook))
        })
    }))
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

/// One trace file read: its counts, its aggregate (for the report the severities come
/// from) and its log records, not yet written.
struct Part {
    counts: Export,
    agg: crate::Aggregate,
    logs: Option<FileLogs>,
}

/// The log records of one trace file, before the report is known.
struct FileLogs {
    session: Session,
    records: Vec<Pending>,
}

/// A log record without its severity, and what ties it to a problem of the report.
struct Pending {
    record: Value,
    link: Link,
    /// The severity when the record's problem is not in the report.
    otherwise: (u32, &'static str),
}

/// What ties a record to the report problem it belongs to; resolved once every file is read.
enum Link {
    /// No problem.
    None,
    /// A fault record (`device_fault`, `launch_fault`, `lifetime_fault`, `host_hazard`, ...)
    /// of problem `key`, made by `function` of process `pid`, which returned `result`
    /// (name, else number) for a requested `ordinal` (device faults).
    Fault {
        key: String,
        pid: u32,
        function: Option<String>,
        result: Option<String>,
        ordinal: Option<i64>,
    },
    /// A failed call (`call_failed`, `call_failed_repeats`).
    Call {
        pid: u32,
        function: String,
        result: String,
    },
    /// A `lifetime_repair`: the lifetime fault of the same function.
    Repair { pid: u32, function: String },
    /// A `device_fallback`: the device fault of the same function and ordinal.
    Fallback {
        pid: u32,
        function: String,
        ordinal: i64,
    },
}

/// The report of every part's aggregate, then each part's records, severities set, as
/// OTLP/JSON lines.
fn finish(parts: Vec<Part>) -> Export {
    let mut agg = crate::Aggregate::default();
    let mut logs = Vec::new();
    let mut out = Export::default();
    for p in parts {
        agg = agg.merge(p.agg);
        out.append(p.counts);
        logs.extend(p.logs);
    }
    agg.finish();
    let report = crate::build_report(agg, &[]);
    let severity: std::collections::HashMap<&str, Severity> = report
        .problems
        .iter()
        .map(|p| (p.key.as_str(), p.severity))
        .collect();
    for file in logs {
        write_file(file, &severity, &mut out);
    }
    out
}

/// One file's records with their severities, as lines of at most [`RECORDS_PER_LINE`].
fn write_file(
    file: FileLogs,
    severity: &std::collections::HashMap<&str, Severity>,
    out: &mut Export,
) {
    // The fault records of this file, by what the other records refer to them with.
    type Call<'a> = (u32, &'a str, &'a str);
    let mut by_call: std::collections::HashMap<Call, &str> = Default::default();
    let mut by_function: std::collections::HashMap<(u32, &str), &str> = Default::default();
    let mut by_ordinal: std::collections::HashMap<(u32, &str, i64), &str> = Default::default();
    for r in &file.records {
        if let Link::Fault {
            key,
            pid,
            function: Some(f),
            result,
            ordinal,
        } = &r.link
        {
            if let Some(res) = result {
                by_call.entry((*pid, f, res)).or_insert(key);
            }
            if key.starts_with("lifetime_fault/") {
                by_function.entry((*pid, f)).or_insert(key);
            }
            if let Some(o) = ordinal {
                by_ordinal.entry((*pid, f, *o)).or_insert(key);
            }
        }
    }
    let known = |k: String| severity.contains_key(k.as_str()).then_some(k);
    let keys: Vec<Option<String>> = file
        .records
        .iter()
        .map(|r| match &r.link {
            Link::None => None,
            Link::Fault { key, .. } => Some(key.clone()),
            Link::Call {
                pid,
                function,
                result,
            } => by_call
                .get(&(*pid, function.as_str(), result.as_str()))
                .map(|k| k.to_string())
                .or_else(|| known(format!("cuda_error/{result}")))
                .or_else(|| known(format!("cuda_error_recovered/{result}"))),
            Link::Repair { pid, function } => by_function
                .get(&(*pid, function.as_str()))
                .map(|k| k.to_string()),
            Link::Fallback {
                pid,
                function,
                ordinal,
            } => by_ordinal
                .get(&(*pid, function.as_str(), *ordinal))
                .map(|k| k.to_string()),
        })
        .collect();
    let records: Vec<Value> = file
        .records
        .into_iter()
        .zip(keys)
        .map(|(r, key)| {
            let (number, text) = match key.as_deref().and_then(|k| severity.get(k)) {
                Some(Severity::Error) => (SEVERITY_ERROR, "ERROR"),
                Some(Severity::Warning) => (SEVERITY_WARN, "WARN"),
                Some(Severity::Info) => (SEVERITY_INFO, "INFO"),
                None => r.otherwise,
            };
            let mut rec = r.record;
            rec["severityNumber"] = json!(number);
            rec["severityText"] = json!(text);
            if let (Some(k), Some(attrs)) = (key, rec["attributes"].as_array_mut()) {
                attrs.push(kv("seedance.problem.key", json!({ "stringValue": k })));
            }
            rec
        })
        .collect();
    let sess = &file.session;
    for chunk in records.chunks(RECORDS_PER_LINE) {
        let item = json!({
            "resource": { "attributes": sess.resource },
            "scopeLogs": [{
                "scope": { "name": "seedance-fix", "version": sess.scope_version },
                "logRecords": chunk,
                "schemaUrl": SCHEMA_URL,
            }],
            "schemaUrl": SCHEMA_URL,
        })
        .to_string();
        out.json.push_str("{\"resourceLogs\":[");
        out.json.push_str(&item);
        out.json.push_str("]}\n");
        out.resource_logs.push((item, chunk.len() as u64));
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

fn export_file(path: &Path, env: &Environment) -> Part {
    export_with(env, |hook| {
        input::read_file_with(path, &Options::default(), Some(hook))
    })
}

/// The records of one file, which `read` reads with `summary`'s reader, handing it the hook
/// that builds the log records.
fn export_with(
    env: &Environment,
    read: impl FnOnce(input::RecordHook<'_>) -> crate::Aggregate,
) -> Part {
    let mut out = Export::default();
    let mut sess: Option<Session> = None;
    let mut records: Vec<Pending> = Vec::new();
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
        return Part {
            counts: out,
            agg,
            logs: None,
        };
    }
    out.files_read = c.files_read;
    out.log_records = records.len() as u64;
    out.skipped_lines = crate::sat_sum([c.malformed_lines, c.truncated_lines, c.oversized_lines]);
    let session = sess.unwrap_or_else(|| {
        // No session start (the head of the file is missing): the pid is in every record.
        let mut s = Session::default();
        for (k, v) in &env.attributes {
            s.resource.push(kv(k, json!({ "stringValue": v })));
        }
        s
    });
    Part {
        counts: out,
        agg,
        logs: Some(FileLogs { session, records }),
    }
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
/// exported as a string). Its severity is set once the report is known.
fn log_record(
    head: &Head,
    rec: Option<&Fields>,
    text: &[u8],
    devices: &[(i64, Option<String>, Option<String>)],
) -> Pending {
    let event = rec
        .and_then(|r| r.get::<String>("event"))
        .unwrap_or_else(|| "unknown".to_string());
    let otherwise = if event.ends_with("_fault") || event == "host_hazard" {
        (SEVERITY_ERROR, "ERROR")
    } else if matches!(
        event.as_str(),
        "device_fallback" | "lifetime_repair" | "stray_context" | "trace_cut"
    ) {
        (SEVERITY_WARN, "WARN")
    } else {
        (SEVERITY_INFO, "INFO")
    };
    let mut attrs = vec![kv(
        "event.name",
        json!({ "stringValue": format!("seedance.{event}") }),
    )];
    let mut link = Link::None;
    let body;
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
        link = problem_link(&event, head.pid, rec);
        body = rec
            .get::<String>("explanation")
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| body_of(&event, rec));
    } else {
        let text = String::from_utf8_lossy(text);
        attrs.push(kv("seedance.record", json!({ "stringValue": text.trim() })));
        body = format!("seedance-fix {event} record: {}", text.trim());
    }
    // `summary` reads every record's `ts_ns` as a u64 (lines without one are not records).
    let ts = head.ts_ns.to_string();
    Pending {
        record: json!({
            "timeUnixNano": ts,
            "observedTimeUnixNano": ts,
            "eventName": format!("seedance.{event}"),
            "body": { "stringValue": body },
            "attributes": attrs,
        }),
        link,
        otherwise,
    }
}

/// The result of a record as the report keys it: its name, else its number.
fn result_key(rec: &Fields) -> Option<String> {
    rec.get::<String>("result_name")
        .or_else(|| rec.get::<u64>("result").map(|r| r.to_string()))
}

/// A name as a part of a problem key, as the report writes it (`%` and `/` escaped).
fn key_part(s: &str) -> String {
    s.replace('%', "%25").replace('/', "%2F")
}

/// What ties the record of kind `event` of process `pid` to its report problem: the
/// problem keys are those of the report's modules (`faults`, `explained`, `lifetime`,
/// `stray`, `cuda_errors`, `problems`).
fn problem_link(event: &str, pid: u32, rec: &Fields) -> Link {
    let function = rec.get::<String>("function");
    let fault = |key: String, ordinal: Option<i64>| Link::Fault {
        key,
        pid,
        function: function.clone(),
        result: result_key(rec),
        ordinal,
    };
    match event {
        "device_fault" => match (
            rec.get::<String>("fault"),
            rec.get::<i64>("requested_ordinal"),
        ) {
            (Some(f), Some(o)) => fault(format!("device_fault/{f}/{o}"), Some(o)),
            _ => Link::None,
        },
        "launch_fault" | "alloc_fault" => match (&function, rec.get::<String>("check")) {
            (Some(f), Some(c)) => fault(format!("{event}/{}/{}", key_part(f), key_part(&c)), None),
            _ => Link::None,
        },
        "lifetime_fault" | "host_hazard" => match rec.get::<String>("kind") {
            Some(k) => fault(format!("lifetime_fault/{}", key_part(&k)), None),
            None => Link::None,
        },
        "stray_context" => match rec.get::<i64>("device") {
            Some(d) => fault(format!("stray_context/{d}"), None),
            None => Link::None,
        },
        "trace_cut" => fault("trace_cut".to_string(), None),
        "call_failed" | "call_failed_repeats" => match (function, result_key(rec)) {
            (Some(function), Some(result)) => Link::Call {
                pid,
                function,
                result,
            },
            _ => Link::None,
        },
        "lifetime_repair" => match function {
            Some(function) => Link::Repair { pid, function },
            None => Link::None,
        },
        "device_fallback" => match (function, rec.get::<i64>("requested_ordinal")) {
            (Some(function), Some(ordinal)) => Link::Fallback {
                pid,
                function,
                ordinal,
            },
            _ => Link::None,
        },
        _ => Link::None,
    }
}

/// The body of a record without an explanation: what happened, in words.
fn body_of(event: &str, rec: &Fields) -> String {
    let function = rec.get::<String>("function");
    let result = match (rec.get::<String>("result_name"), rec.get::<u64>("result")) {
        (Some(n), Some(r)) => format!("{n} ({r})"),
        (Some(n), None) => n,
        (None, Some(r)) => format!("result {r}"),
        (None, None) => "an error".to_string(),
    };
    let f = function.as_deref().unwrap_or("a call");
    match event {
        "call_failed" => format!("{f} failed: {result}"),
        "call_failed_repeats" => {
            let n = rec.get::<u64>("count").unwrap_or(0);
            format!(
                "{f} failed {n} more {} with {result} (counted, not written one by one)",
                if n == 1 { "time" } else { "times" }
            )
        }
        "session_start" => {
            let mut s = format!(
                "session start: {}",
                rec.get::<String>("executable")
                    .unwrap_or_else(|| "(executable unknown)".to_string())
            );
            let mut parts = Vec::new();
            if let Some(m) = rec.get::<String>("mode") {
                parts.push(format!("mode {m}"));
            }
            if let Some(v) = rec.get::<String>("shim_version") {
                parts.push(format!("seedance-fix {v}"));
            }
            if !parts.is_empty() {
                s.push_str(&format!(" ({})", parts.join(", ")));
            }
            s
        }
        "exit_summary" => {
            let (mut calls, mut errors) = (0u64, 0u64);
            if let Some(Value::Object(fs)) = rec.get::<Value>("functions") {
                for st in fs.values() {
                    calls = calls.saturating_add(st["calls"].as_u64().unwrap_or(0));
                    errors = errors.saturating_add(st["errors"].as_u64().unwrap_or(0));
                }
            }
            let dropped = rec.get::<u64>("dropped_records").unwrap_or(0);
            let mut s = format!(
                "exit summary: {calls} {}, {errors} {}",
                if calls == 1 { "call" } else { "calls" },
                if errors == 1 { "error" } else { "errors" }
            );
            if dropped > 0 {
                s.push_str(&format!(
                    ", {dropped} trace {} dropped",
                    if dropped == 1 { "record" } else { "records" }
                ));
            }
            s
        }
        "trace_cut" => format!(
            "trace cut: the trace file refused a write ({})",
            rec.get::<String>("error")
                .unwrap_or_else(|| "error unknown".to_string())
        ),
        _ => match function {
            Some(f) => format!("seedance-fix {event} record of {f}"),
            None => format!("seedance-fix {event} record"),
        },
    }
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
