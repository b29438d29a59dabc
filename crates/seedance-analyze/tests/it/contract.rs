//! The JSON report is a contract: these types are written from docs/analyzer.md, not from
//! the crate's own types, and deny unknown fields. A field added to the report must be
//! added here and in the docs; a field renamed or removed breaks this test.

#![allow(dead_code)]

use super::run;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Report {
    report_version: u32,
    input: Input,
    overview: Overview,
    problems: Vec<Problem>,
    hosts: Vec<Host>,
    processes: Vec<Process>,
    devices: Vec<Device>,
    functions: Vec<Function>,
    errors_over_time: ErrorsOverTime,
    repairs: Repairs,
    #[serde(default)]
    process_health: Vec<ProcessHealth>,
    #[serde(default)]
    device_contexts: Vec<DeviceContexts>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceContexts {
    hostname: Option<String>,
    device: i32,
    processes: u64,
    worked: u64,
    stray: u64,
    stray_bytes: u64,
    stray_bytes_unknown: u64,
    stray_processes: Vec<StrayProcess>,
    out_of_memory_processes: u64,
    stray_pids_at_out_of_memory: Vec<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrayProcess {
    file: String,
    pid: u32,
    executable: Option<String>,
    works_on: Vec<i32>,
    context_bytes: Option<u64>,
    decided: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ProcessHealth {
    file: String,
    pid: u32,
    hostname: Option<String>,
    executable: Option<String>,
    live_contexts: u64,
    leaked_allocations: u64,
    leaked_bytes: u64,
    leaks: Vec<DeviceLeak>,
    unsynchronized_streams: u64,
    unsynchronized_work: u64,
    #[serde(default)]
    unsynchronized_ops: u64,
    calls_after_deinit: u64,
    calls_after_deinit_by_function: Vec<NameCountC>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct DeviceLeak {
    device: Option<i32>,
    host: bool,
    allocations: u64,
    bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct NameCountC {
    name: String,
    count: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Repairs {
    calls_repaired: u64,
    processes: u64,
    by_kind: Vec<RepairKind>,
    fallbacks: Vec<Fallback>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepairKind {
    kind: String,
    calls: u64,
    processes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fallback {
    requested_ordinal: i32,
    chosen_ordinal: i32,
    chosen_pci_bus_id: Option<String>,
    processes: u64,
    hosts: Vec<String>,
    functions: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    paths: Vec<String>,
    files_seen: u64,
    files_read: u64,
    gzip_files: u64,
    files_skipped: u64,
    skipped_files: Vec<String>,
    empty_files: u64,
    unreadable_files: u64,
    files_with_read_errors: u64,
    errors: Vec<FileError>,
    bytes: u64,
    bytes_uncompressed: u64,
    lines: u64,
    records: u64,
    records_by_kind: BTreeMap<String, u64>,
    malformed_lines: u64,
    truncated_lines: u64,
    oversized_lines: u64,
    newer_schema_records: u64,
    unknown_event_kinds: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileError {
    path: String,
    error: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Overview {
    hosts: u64,
    processes: u64,
    processes_exited: u64,
    processes_without_exit_summary: u64,
    processes_without_session_start: u64,
    devices: u64,
    functions: u64,
    calls: u64,
    errors: u64,
    first_ts_ns: Option<u64>,
    last_ts_ns: Option<u64>,
    first_time: Option<String>,
    last_time: Option<String>,
    modes: BTreeMap<String, u64>,
    shim_versions: BTreeMap<String, u64>,
    driver_versions: BTreeMap<String, u64>,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Severity {
    Error,
    Warning,
    Info,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    CudaError,
    DroppedRecords,
    MissingRecords,
    NoExitSummary,
    TraceCut,
    NoSessionStart,
    MalformedInput,
    UnreadableFiles,
    MixedDriverVersions,
    NewerSchema,
    ProcaddrUnmatched,
    DeviceFault,
    CudaVisibleDevicesInvalid,
    DeviceOrder,
    LaunchFault,
    AllocFault,
    LifetimeFault,
    StrayContext,
    RuntimeNewerThanDriver,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Problem {
    rank: u32,
    kind: Kind,
    severity: Severity,
    title: String,
    key: String,
    code: Option<u32>,
    result: Option<String>,
    count: u64,
    processes: u64,
    hosts: Vec<String>,
    functions: Vec<NameCount>,
    examples: Vec<Example>,
    context: Vec<String>,
    remediation: Vec<String>,
    fault: Option<String>,
    requested_ordinal: Option<i32>,
    processes_repaired: Option<u64>,
    explanations: Vec<String>,
    check: Option<String>,
    unit: Option<String>,
    values: Vec<FaultValue>,
    driver_messages: Vec<String>,
    processes_refused: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultValue {
    device: Option<i32>,
    limit: Option<u64>,
    requested: Option<u64>,
    requested_signed: Option<i64>,
    free_bytes: Option<u64>,
    total_bytes: Option<u64>,
    shortage: Option<bool>,
    processes: u64,
    records: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameCount {
    name: String,
    count: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Example {
    function: String,
    args: serde_json::Value,
    count: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Host {
    hostname: Option<String>,
    processes: u64,
    processes_without_exit_summary: u64,
    driver_versions: Vec<String>,
    devices: u64,
    calls: u64,
    errors: u64,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Status {
    Exited,
    NoExitSummary,
    ForkedChild,
    TraceCut,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Process {
    hostname: Option<String>,
    pid: u32,
    executable: Option<String>,
    argv: Vec<String>,
    file: String,
    status: Status,
    has_session_start: bool,
    start_ts_ns: u64,
    start_time: String,
    end_ts_ns: u64,
    duration_ns: u64,
    mode: Option<String>,
    shim_version: Option<String>,
    driver_version: Option<i32>,
    libcuda_path: Option<String>,
    cuda_visible_devices: Option<String>,
    cuda_device_order: Option<String>,
    devices: Vec<ProcessDevice>,
    calls: Option<u64>,
    errors: u64,
    errors_by_result: BTreeMap<String, u64>,
    records: u64,
    dropped_records: u64,
    missing_records: u64,
    other_events: u64,
    procaddr_unmatched: Vec<String>,
    device_faults: Vec<ProcessFault>,
    launch_faults: Vec<ProcessExplained>,
    alloc_faults: Vec<ProcessExplained>,
    repairs: BTreeMap<String, u64>,
    fallbacks: BTreeMap<String, i32>,
    topology: Option<ProcessTopology>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessDevice {
    ordinal: i32,
    name: Option<String>,
    pci_bus_id: Option<String>,
    total_mem_bytes: Option<u64>,
    uuid: Option<String>,
    physical_index: Option<u32>,
    nvml_index: Option<u32>,
    compute_mode: Option<String>,
    free_mem_bytes: Option<u64>,
    busy_processes: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessFault {
    function: String,
    requested_ordinal: i32,
    fault: String,
    result: String,
    repaired: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessExplained {
    function: String,
    check: String,
    result: String,
    records: u64,
    errors: u64,
    refused_before_driver: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessTopology {
    device_order: Option<String>,
    order_warning: Option<String>,
    nvml_present: bool,
    nvml_reason: Option<String>,
    physical_count: Option<u32>,
    stopped_at: Option<Stop>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stop {
    position: u64,
    entry: String,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Device {
    hostname: Option<String>,
    pci_bus_id: Option<String>,
    name: Option<String>,
    total_mem_bytes: Option<u64>,
    ordinals: Vec<i32>,
    processes: u64,
    uuid: Option<String>,
    physical_index: Option<u32>,
    nvml_index: Option<u32>,
    compute_mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Function {
    function: String,
    calls: u64,
    errors: u64,
    errors_by_result: BTreeMap<String, u64>,
    processes: u64,
    processes_without_exit_summary: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorsOverTime {
    bucket_ns: u64,
    buckets: Vec<Bucket>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Bucket {
    start_ns: u64,
    start_time: String,
    errors: u64,
    by_result: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Diff {
    report_version: u32,
    a: Side,
    b: Side,
    new_errors: Vec<ErrorChange>,
    disappeared_errors: Vec<ErrorChange>,
    changed_errors: Vec<ErrorChange>,
    call_shifts: Vec<CallShift>,
    new_faults: Vec<FaultChange>,
    resolved_faults: Vec<FaultChange>,
    fault_changes: Vec<FaultChange>,
    new_repairs: Vec<KindChange>,
    repair_changes: Vec<KindChange>,
    new_event_kinds: Vec<KindChange>,
    event_kind_changes: Vec<KindChange>,
    new_problems: Vec<ProblemChange>,
    resolved_problems: Vec<ProblemChange>,
    changed_problems: Vec<ProblemShift>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Side {
    paths: Vec<String>,
    files_read: u64,
    processes: u64,
    processes_without_exit_summary: u64,
    calls: u64,
    errors: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorChange {
    function: String,
    result: String,
    count_a: u64,
    count_b: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallShift {
    function: String,
    calls_a: u64,
    calls_b: u64,
    delta: i64,
    delta_pct: Option<f64>,
    partial: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultChange {
    kind: String,
    function: String,
    check: String,
    count_a: u64,
    count_b: u64,
    processes_a: u64,
    processes_b: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindChange {
    kind: String,
    count_a: u64,
    count_b: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemShift {
    severity_a: String,
    severity_b: String,
    title_a: String,
    title_b: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemChange {
    severity: String,
    title: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Explanation {
    code: u32,
    name: Option<String>,
    known: bool,
    meaning: String,
    what_to_try: Vec<String>,
}

#[test]
fn summary_report_matches_the_documented_schema() {
    for paths in [
        &["tests/fixtures/fleet"][..],
        &["tests/fixtures/after"],
        &["tests/fixtures/v2"],
        &["tests/fixtures/v3"],
        &["tests/fixtures/v3-after"],
        &["tests/fixtures/v4"],
        &["tests/fixtures/v4-after"],
        &["tests/fixtures/v5"],
        &["tests/fixtures/v5-probes"],
        &["tests/fixtures/fleet/gpu-b/empty.jsonl"],
    ] {
        let mut args = vec!["summary", "--format", "json"];
        args.extend_from_slice(paths);
        let (code, out, err) = run(&args);
        // An empty file is no trace: exit 3 (crates/seedance-analyze/tests/it/gates.rs).
        let expected = if paths[0].ends_with("empty.jsonl") {
            3
        } else {
            0
        };
        assert_eq!(code, expected, "{err}");
        let r: Report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{paths:?}: {e}"));
        assert_eq!(r.report_version, 5);
        // Keys are unique: diff compares problems by them.
        let keys: std::collections::BTreeSet<&str> =
            r.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys.len(), r.problems.len(), "{paths:?}");
        // Ranks are 1..n in order.
        for (i, p) in r.problems.iter().enumerate() {
            assert_eq!(p.rank as usize, i + 1);
        }
    }
}

#[test]
fn fleet_report_values_through_the_contract_types() {
    let (_, out, _) = run(&["summary", "--format", "json", "tests/fixtures/fleet"]);
    let r: Report = serde_json::from_str(&out).unwrap();
    assert_eq!(r.processes.len(), 4);
    assert_eq!(
        r.processes
            .iter()
            .filter(|p| p.status == Status::NoExitSummary)
            .count(),
        1
    );
    assert_eq!(r.problems[0].kind, Kind::CudaError);
    assert_eq!(r.problems[0].severity, Severity::Error);
    assert_eq!(
        r.hosts
            .iter()
            .map(|h| h.hostname.clone().unwrap())
            .collect::<Vec<_>>(),
        ["gpu-a", "gpu-b", "gpu-c"]
    );
    let p = r.processes.iter().find(|p| p.pid == 1001).unwrap();
    assert_eq!(p.procaddr_unmatched, ["cuStreamBeginCaptureToGraph"]);
    // Its device_fallback record is a known kind now.
    assert_eq!(p.other_events, 0);
    assert_eq!(p.repairs["device_fallback"], 1);
    assert_eq!(p.fallbacks["2"], 0);
    assert!(p.topology.is_none(), "schema 1: no topology");
    assert_eq!(p.devices.len(), 2);
    assert_eq!(p.devices[0].uuid, None);
    assert_eq!(r.repairs.by_kind[0].kind, "device_fallback");
}

#[test]
fn v2_report_values_through_the_contract_types() {
    let (_, out, _) = run(&["summary", "--format", "json", "tests/fixtures/v2"]);
    let r: Report = serde_json::from_str(&out).unwrap();
    let first = &r.problems[0];
    assert_eq!(first.kind, Kind::DeviceFault);
    assert_eq!(first.severity, Severity::Error);
    assert_eq!(first.fault.as_deref(), Some("device_unavailable"));
    assert_eq!(first.requested_ordinal, Some(1));
    assert_eq!(first.processes_repaired, Some(0));
    assert_eq!(first.explanations.len(), 1);
    let kinds: Vec<&Kind> = r.problems.iter().map(|p| &p.kind).collect();
    assert!(kinds.contains(&&Kind::CudaVisibleDevicesInvalid));
    assert!(kinds.contains(&&Kind::DeviceOrder));
    assert_eq!(r.repairs.calls_repaired, 1);
    assert_eq!(r.repairs.fallbacks[0].chosen_ordinal, 0);
    let p = r.processes.iter().find(|p| p.pid == 4001).unwrap();
    let t = p.topology.as_ref().unwrap();
    assert!(t.nvml_present);
    assert_eq!(t.physical_count, Some(3));
    assert_eq!(t.stopped_at.as_ref().unwrap().position, 3);
    assert_eq!(p.devices[1].busy_processes, Some(1));
    assert_eq!(p.device_faults[0].result, "CUDA_ERROR_DEVICE_UNAVAILABLE");
}

#[test]
fn v5_report_values_through_the_contract_types() {
    let (_, out, _) = run(&["summary", "--format", "json", "tests/fixtures/v5"]);
    let r: Report = serde_json::from_str(&out).unwrap();
    assert_eq!(r.device_contexts.len(), 1);
    let d = &r.device_contexts[0];
    assert_eq!(d.hostname.as_deref(), Some("vm"));
    assert_eq!(d.device, 0);
    assert_eq!((d.processes, d.worked, d.stray), (6, 3, 3));
    assert_eq!(d.stray_bytes, 524_288_000 + 536_870_912);
    assert_eq!(d.stray_bytes_unknown, 1);
    let works: Vec<(Vec<i32>, Option<u64>, &str)> = d
        .stray_processes
        .iter()
        .map(|s| (s.works_on.clone(), s.context_bytes, s.decided.as_str()))
        .collect();
    assert_eq!(
        works,
        [
            (vec![2], Some(536_870_912), "exit"),
            (vec![1], Some(524_288_000), "exit"),
            (vec![3], None, "context_end"),
        ]
    );
    let p: Vec<&Problem> = r
        .problems
        .iter()
        .filter(|p| p.kind == Kind::StrayContext)
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(d.out_of_memory_processes, 1);
    let mut strays: Vec<u32> = d.stray_processes[..2].iter().map(|s| s.pid).collect();
    strays.sort_unstable();
    assert_eq!(d.stray_pids_at_out_of_memory, strays);
    assert_eq!(p[0].key, "stray_context/0");
    // An allocation failed on the device they crowd: an error, ranked first.
    assert_eq!(p[0].severity, Severity::Error);
    assert_eq!(p[0].rank, 1);
    assert_eq!((p[0].count, p[0].processes), (3, 3));
    assert_eq!(p[0].requested_ordinal, Some(0));
    assert_eq!(p[0].explanations.len(), 3);
    assert_eq!(
        p[0].title,
        "stray contexts on device 0: 3 processes on 1 host that work on other devices made a \
         context there (1012.0 MiB by NVML, 1 more unknown)"
    );
}

#[test]
fn diff_report_matches_the_documented_schema() {
    let (code, out, err) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/fleet",
        "tests/fixtures/after",
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Diff = serde_json::from_str(&out).unwrap();
    assert_eq!(d.report_version, 5);
    assert_eq!(d.a.processes, 4);
    assert_eq!(d.b.processes, 3);
    assert_eq!(d.repair_changes[0].kind, "device_fallback");
    assert_eq!(d.new_event_kinds[0].kind, "sync_before_destroy");
    assert!(d.new_faults.is_empty() && d.resolved_faults.is_empty() && d.fault_changes.is_empty());

    let (code, out, err) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/v3",
        "tests/fixtures/v3-after",
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Diff = serde_json::from_str(&out).unwrap();
    assert_eq!(d.new_faults.len(), 2);
    assert_eq!(d.new_faults[0].check, "cooperative_grid");
    assert_eq!(d.new_faults[1].check, "launch_bounds");
    assert!(!d.resolved_faults.is_empty() && !d.fault_changes.is_empty());
}

#[test]
fn v3_report_values_through_the_contract_types() {
    let (_, out, _) = run(&["summary", "--format", "json", "tests/fixtures/v3"]);
    let r: Report = serde_json::from_str(&out).unwrap();
    let launch: Vec<&Problem> = r
        .problems
        .iter()
        .filter(|p| p.kind == Kind::LaunchFault)
        .collect();
    let alloc: Vec<&Problem> = r
        .problems
        .iter()
        .filter(|p| p.kind == Kind::AllocFault)
        .collect();
    assert_eq!((launch.len(), alloc.len()), (5, 4));
    for p in launch.iter().chain(&alloc) {
        assert!(
            p.check.is_some() && p.processes_refused.is_some(),
            "{}",
            p.title
        );
        assert_eq!(p.functions.len(), 1);
        assert!(!p.explanations.is_empty());
    }
    let oom = alloc
        .iter()
        .find(|p| p.check.as_deref() == Some("out_of_memory"))
        .unwrap();
    assert_eq!(oom.unit.as_deref(), Some("bytes"));
    let shortage: Vec<Option<bool>> = oom.values.iter().map(|v| v.shortage).collect();
    assert_eq!(shortage, [Some(true), Some(false)]);
    assert_eq!(oom.values[0].free_bytes, Some(2 << 30));
    let p = r.processes.iter().find(|p| p.pid == 6001).unwrap();
    assert_eq!(p.launch_faults.len(), 3);
    assert_eq!(p.alloc_faults.len(), 2);
    assert!(p.launch_faults.iter().any(|f| f.refused_before_driver));
    assert_eq!(r.input.newer_schema_records, 4);
}

#[test]
fn explain_json_matches_the_documented_schema() {
    let (code, out, _) = run(&["explain", "--format", "json", "101"]);
    assert_eq!(code, 0);
    let e: Explanation = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (e.code, e.name.as_deref(), e.known),
        (101, Some("CUDA_ERROR_INVALID_DEVICE"), true)
    );
    assert!(!e.what_to_try.is_empty());
}

/// Every fixture line of a known kind is a valid `seedance_trace::Record`, and what the
/// shim's own types write back reads the same through the analyzer's parser.
#[test]
fn fixtures_follow_the_trace_schema() {
    use seedance_analyze::read::input::{parse_line, Line};
    let mut checked = 0;
    for dir in [
        "tests/fixtures/fleet",
        "tests/fixtures/after",
        "tests/fixtures/v2",
        "tests/fixtures/v3",
        "tests/fixtures/v3-after",
        "tests/fixtures/v4",
        "tests/fixtures/v4-after",
        "tests/fixtures/v5",
        "tests/fixtures/v5-probes",
    ] {
        let (files, _) =
            seedance_analyze::read::input::collect_files(&[super::crate_dir().join(dir)]).unwrap();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let kind = v.get("event").and_then(|e| e.as_str()).unwrap_or("");
                if !seedance_analyze::read::input::KNOWN_KINDS.contains(&kind) {
                    continue;
                }
                let rec: seedance_trace::Record = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{line}", f.display()));
                let again = serde_json::to_string(&rec).unwrap();
                let same = |l: &Line| match l {
                    Line::SessionStart(h, s) => format!("{h:?} {s:?}"),
                    Line::CallFailed(h, c) => format!(
                        "{h:?} {} {} {:?} {:?}",
                        c.function,
                        c.result,
                        c.result_name,
                        c.args.map(|a| a.get())
                    ),
                    Line::ExitSummary(h, e) => format!("{h:?} {e:?}"),
                    Line::DeviceFault(h, e) => format!("{h:?} {e:?}"),
                    Line::DeviceFallback(h, e) => format!("{h:?} {e:?}"),
                    Line::LaunchFault(h, e) => format!("{h:?} {e:?}"),
                    Line::AllocFault(h, e) => format!("{h:?} {e:?}"),
                    Line::LifetimeFault(h, e) => format!("{h:?} {e:?}"),
                    Line::LifetimeRepair(h, e) => format!("{h:?} {e:?}"),
                    Line::StrayContext(h, e) => format!("{h:?} {e:?}"),
                    Line::HostHazard(h, e) => format!("{h:?} {e:?}"),
                    Line::CallFailedRepeats(h, e) => format!("{h:?} {e:?}"),
                    other => panic!("{}: not read as a known record: {other:?}", f.display()),
                };
                let ours = parse_line(line.as_bytes());
                let theirs = parse_line(again.as_bytes());
                if let (Line::CallFailed(_, a), Line::CallFailed(_, b)) = (&ours, &theirs) {
                    let va: serde_json::Value =
                        serde_json::from_str(a.args.unwrap().get()).unwrap();
                    let vb: serde_json::Value =
                        serde_json::from_str(b.args.unwrap().get()).unwrap();
                    assert_eq!(va, vb);
                } else {
                    assert_eq!(same(&ours), same(&theirs));
                }
                checked += 1;
            }
        }
    }
    // 25 records of schema-1 kinds and 4 device_fallback records in the schema-1 fixtures,
    // 7 records in the schema-2 ones, 32 of known kinds in the schema-3 ones (19 launch and
    // allocation faults), 16 in the schema-4 ones (6 lifetime faults, 3 lifetime repairs),
    // 16 in the schema-5 stray-context ones (3 stray contexts, 1 allocation fault), 10 in
    // the schema-5 version-probe ones.
    assert_eq!(checked, 110);
}
