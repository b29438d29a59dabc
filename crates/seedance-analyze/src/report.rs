//! The report: what `summary` prints, as a stable, documented, serializable value.
//!
//! `seedance-analyze summary --format json` writes a [`Report`] as one JSON object. Its
//! schema is versioned by [`REPORT_VERSION`] in the `report_version` field and follows the
//! trace's rule: fields are only ever added (a consumer must ignore fields it does not
//! know); a rename, removal or change of meaning bumps the version. `docs/analyzer.md`
//! documents every field.
//!
//! Conventions: times are `*_ts_ns` (nanoseconds since the Unix epoch, UTC) with a
//! `*_time` companion in RFC 3339 (`2025-11-30T02:42:00Z`); durations are `*_ns`; CUresult
//! codes appear by their `cuda.h` name (or the number as a string when the table lacks it);
//! every list has a fixed order, given on its field, so that equal input gives byte-equal
//! output.

use crate::aggregate::{Aggregate, ExplainedKind, ProcessAgg, Timeline};
use crate::explain;
use crate::explained;
use crate::faults;
use crate::fmt;
use crate::lifetime;
use crate::problems;
use crate::records::{DeviceEntry, SessionInfo, TopologyDevice};
use crate::SatAdd;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Version of the report schema, in [`Report::report_version`].
///
/// History: 1 = first version. 2 = device faults and repairs (trace schema 2): `repairs`;
/// problems of kinds `device_fault`, `cuda_visible_devices_invalid`, `device_order`, with
/// `key`, `fault`, `requested_ordinal`, `processes_repaired`, `explanations`; a
/// `cuda_error` problem no longer counts the errors its `device_fault` problems explain;
/// processes' `device_faults`, `repairs`, `fallbacks`, `topology`; devices' topology
/// fields; in the diff, `new_repairs`/`repair_changes` count repaired calls by repair kind
/// and the unknown event kinds moved to `new_event_kinds`/`event_kind_changes`. 3 = launch
/// and allocation faults (trace schema 3): problems of kinds `launch_fault` and
/// `alloc_fault`, with `check`, `unit`, `values`, `driver_messages`, `processes_refused`; a
/// `cuda_error` problem no longer counts the errors those problems explain; processes'
/// `launch_faults` and `alloc_faults`; `errors_over_time` counts the fault records
/// (`device_fault`, `launch_fault`, `alloc_fault`) besides `call_failed`; in the diff,
/// `new_faults`, `resolved_faults` and `fault_changes`. 4 = lifetime faults (trace schema
/// 4): problems of kind `lifetime_fault` (one per fault kind, with `fault`,
/// `processes_repaired`, `functions` counting records, `explanations`); `process_health`
/// (left out when empty); `repairs` counts the `lifetime_repair` kinds; in the diff,
/// lifetime faults are compared by fault kind among the `*_faults` (kind `lifetime_fault`,
/// `check` the fault kind, `function` empty). 5 = stray contexts (trace schema 5):
/// `device_contexts` (left out when empty) and problems of kind `stray_context` (one per
/// device ordinal, `requested_ordinal` the device);
/// and expected failures (trace schema 5):
/// problems of kind `runtime_newer_than_driver` (info, one per host, runtime and driver
/// version); a `cuda_error` problem of `CUDA_ERROR_NOT_FOUND` made only of
/// `cuGetProcAddress(_v2)` look-ups (version probes of older traces), and every
/// `CUDA_ERROR_DEINITIALIZED` one, is `info`;
/// and `errors_over_time.bucket_ns` is one
/// millisecond times a power of two (was one second), so that a run of milliseconds has a
/// readable chart.
pub const REPORT_VERSION: u32 = 5;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Schema version of this report, [`REPORT_VERSION`].
    pub report_version: u32,
    /// What was read.
    pub input: InputReport,
    /// Totals over everything read.
    pub overview: Overview,
    /// Problems found, most severe and most frequent first.
    pub problems: Vec<Problem>,
    /// One entry per host name, sorted by name (processes without a host name last).
    pub hosts: Vec<HostReport>,
    /// One entry per process, sorted by host name, start time, pid.
    pub processes: Vec<ProcessReport>,
    /// One entry per distinct device per host, sorted by host, PCI bus id, ordinal.
    pub devices: Vec<DeviceReport>,
    /// One entry per hooked function seen, most errors first, then most calls, then name.
    pub functions: Vec<FunctionReport>,
    /// Errors over time, from `call_failed` records and the fault records.
    pub errors_over_time: ErrorsOverTime,
    /// What the fix mode repaired (trace schema 2; `device_fallback` records of older
    /// traces count too).
    pub repairs: RepairsReport,
    /// Processes whose exit summary shows contexts left alive, memory never freed, streams
    /// never synchronised or calls after the driver shut down (trace schema 4), worst
    /// first; left out when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_health: Vec<ProcessHealth>,
    /// Devices where processes that work on other devices made contexts (trace schema 5),
    /// most stray memory first; left out when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_contexts: Vec<crate::stray::DeviceContexts>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one process left behind at exit (its exit summary, trace schema 4). Resources of
/// a primary context still retained at exit are not counted (the CUDA runtime keeps those
/// until after the driver shut down).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessHealth {
    /// Trace file.
    pub file: String,
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub hostname: Option<String>,
    /// Executable.
    pub executable: Option<String>,
    /// Contexts created (`cuCtxCreate`) and never destroyed.
    pub live_contexts: u64,
    /// Allocations never freed.
    pub leaked_allocations: u64,
    /// Bytes never freed.
    pub leaked_bytes: u64,
    /// The same per device (`device` `None` with `host` for pinned host memory).
    pub leaks: Vec<DeviceLeak>,
    /// Streams with work never synchronised.
    pub unsynchronized_streams: u64,
    /// Launches, copies and other stream operations on those streams.
    pub unsynchronized_work: u64,
    /// Of those, the other stream operations (asynchronous memsets, graph launches, host
    /// functions: the trace's `ops`); left out of the JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsynchronized_ops: u64,
    /// Calls made after the driver shut down (`CUDA_ERROR_DEINITIALIZED`).
    pub calls_after_deinit: u64,
    /// Those calls by function, most first.
    pub calls_after_deinit_by_function: Vec<NameCount>,
}

/// Memory never freed on one device of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceLeak {
    /// CUDA ordinal (`None` for pinned host memory or when unknown).
    pub device: Option<i32>,
    /// Pinned host memory.
    pub host: bool,
    /// Allocations.
    pub allocations: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What the fix mode repaired, over all processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepairsReport {
    /// Calls repaired, all kinds.
    pub calls_repaired: u64,
    /// Processes with at least one repair.
    pub processes: u64,
    /// Per repair kind, most calls first, then kind.
    pub by_kind: Vec<RepairKind>,
    /// Per (requested ordinal, chosen ordinal, chosen PCI bus id): the fallbacks made, most
    /// processes first, then requested, chosen, PCI bus id.
    pub fallbacks: Vec<FallbackReport>,
}

/// Calls repaired by one kind of repair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepairKind {
    /// Kind, e.g. `device_fallback`.
    pub kind: String,
    /// Calls repaired: per process the exit summary's `repairs` count, or, when that is
    /// lower or missing (no exit summary, older shim), the number of records of the kind
    /// (a lower bound: the shim writes one per distinct call site and ordinal).
    pub calls: u64,
    /// Processes with repairs of this kind.
    pub processes: u64,
}

/// One fallback: requests for one ordinal sent to another device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FallbackReport {
    /// The ordinal the programs asked for.
    pub requested_ordinal: i32,
    /// The ordinal the calls were sent to.
    pub chosen_ordinal: i32,
    /// PCI bus id of the chosen device (lower case), when known.
    pub chosen_pci_bus_id: Option<String>,
    /// Processes where this fallback was made.
    pub processes: u64,
    /// Their host names, sorted.
    pub hosts: Vec<String>,
    /// Functions repaired this way (from `device_fallback` records), sorted.
    pub functions: Vec<String>,
}

/// What was read, and what could not be used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputReport {
    /// The paths given, as given.
    pub paths: Vec<String>,
    /// Files looked at (directories walked recursively).
    pub files_seen: u64,
    /// Files read as traces.
    pub files_read: u64,
    /// Of those, gzip-compressed.
    pub gzip_files: u64,
    /// Files skipped because they are not traces.
    pub files_skipped: u64,
    /// The first 20 skipped files, sorted.
    pub skipped_files: Vec<String>,
    /// Empty files (or only blank lines).
    pub empty_files: u64,
    /// Files or directories that could not be opened or read at all.
    pub unreadable_files: u64,
    /// Trace files whose reading stopped early on an I/O or decompression error.
    pub files_with_read_errors: u64,
    /// The first 20 I/O errors, sorted by path.
    pub errors: Vec<FileError>,
    /// Bytes read from disk (compressed size for gzip files).
    pub bytes: u64,
    /// Bytes of trace lines after decompression.
    pub bytes_uncompressed: u64,
    /// Lines in trace files.
    pub lines: u64,
    /// Trace records used.
    pub records: u64,
    /// Records per event kind (known and unknown), sorted by kind.
    pub records_by_kind: BTreeMap<String, u64>,
    /// Lines that are not trace records (garbage, other JSON, known kinds with bad fields).
    pub malformed_lines: u64,
    /// Unparseable last lines without a newline: traces cut short.
    pub truncated_lines: u64,
    /// Lines over 4 MiB, skipped.
    pub oversized_lines: u64,
    /// Records with a schema version newer than this analyzer knows.
    pub newer_schema_records: u64,
    /// Records of event kinds this analyzer does not know, by kind (skipped otherwise).
    pub unknown_event_kinds: BTreeMap<String, u64>,
}

/// An I/O error met while reading the input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileError {
    /// The file or directory.
    pub path: String,
    /// The error message.
    pub error: String,
}

/// Totals over everything read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// Distinct host names (processes without one count as one more host).
    pub hosts: u64,
    /// Processes (one per session in a trace file).
    pub processes: u64,
    /// Processes that wrote an exit summary.
    pub processes_exited: u64,
    /// Processes without an exit summary: killed or still running.
    pub processes_without_exit_summary: u64,
    /// Processes whose trace lacks the session start.
    pub processes_without_session_start: u64,
    /// Distinct devices (see [`DeviceReport`]).
    pub devices: u64,
    /// Distinct functions.
    pub functions: u64,
    /// Calls, from exit summaries (processes without one add none).
    pub calls: u64,
    /// Errors: from exit summaries, plus `call_failed` records of processes without one.
    pub errors: u64,
    /// Time of the earliest record.
    pub first_ts_ns: Option<u64>,
    /// Time of the latest record.
    pub last_ts_ns: Option<u64>,
    /// [`Overview::first_ts_ns`] in RFC 3339.
    pub first_time: Option<String>,
    /// [`Overview::last_ts_ns`] in RFC 3339.
    pub last_time: Option<String>,
    /// Processes per mode (`observe`, `fix`; `unknown` without a session start).
    pub modes: BTreeMap<String, u64>,
    /// Processes per shim version (`unknown` without a session start).
    pub shim_versions: BTreeMap<String, u64>,
    /// Processes per driver version (`13.0`; `unknown` when not reported).
    pub driver_versions: BTreeMap<String, u64>,
}

/// How severe a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Calls failed in a way that breaks programs.
    Error,
    /// Something is lost or suspicious.
    Warning,
    /// Worth knowing, usually harmless.
    Info,
}

impl Severity {
    /// `error`, `warning`, `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// What kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Driver calls returned this CUresult (`code`, `result`).
    CudaError,
    /// The shim could not write some records (exit summaries' `dropped_records`).
    DroppedRecords,
    /// Sequence numbers missing from traces, beyond the records the shim counted as dropped.
    MissingRecords,
    /// Processes without an exit summary: killed or still running.
    NoExitSummary,
    /// Traces without their session start: the head of the file is missing.
    NoSessionStart,
    /// Lines that could not be read as records.
    MalformedInput,
    /// Files that could not be read.
    UnreadableFiles,
    /// Processes report different driver versions.
    MixedDriverVersions,
    /// Records of a schema version newer than this analyzer.
    NewerSchema,
    /// Entry points the shim could not match to a variant it implements: a driver newer
    /// than the shim's table (exit summaries' `procaddr_unmatched`).
    ProcaddrUnmatched,
    /// A request for a device the process cannot have (`device_fault` records), per fault
    /// and requested ordinal; `warning` when every affected process was repaired by
    /// fallback, else `error`.
    DeviceFault,
    /// The driver stopped reading `CUDA_VISIBLE_DEVICES` at an invalid entry (the entries
    /// from there on were ignored).
    CudaVisibleDevicesInvalid,
    /// CUDA's device numbering differs from nvidia-smi's in a way that matters, or
    /// `CUDA_DEVICE_ORDER` has a value the driver does not know (`order_warning`).
    DeviceOrder,
    /// Kernel launches that failed (or were refused) over a limit the shim named
    /// (`launch_fault` records), per function and check.
    LaunchFault,
    /// Allocations that failed (or were refused) for a reason the shim named
    /// (`alloc_fault` records), per function and check.
    AllocFault,
    /// A context, stream, event or memory lifetime hazard (`lifetime_fault` records), per
    /// fault kind; `warning` when a `lifetime_repair` of the same function repaired it in
    /// every affected process, else `error`.
    LifetimeFault,
    /// Processes that work on other devices made contexts on this device and did nothing
    /// there (trace schema 5), per device ordinal; `warning`.
    StrayContext,
    /// A CUDA runtime newer than its driver probed entry points the driver lacks
    /// (exit summaries' `runtime_probes`, trace schema 5), per host, runtime and driver
    /// version; always `info`.
    RuntimeNewerThanDriver,
}

/// A name and a count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameCount {
    /// The name.
    pub name: String,
    /// The count.
    pub count: u64,
}

/// An example of the arguments of failing calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgExample {
    /// The function.
    pub function: String,
    /// The `args` object of its `call_failed` records.
    pub args: serde_json::Value,
    /// How many records had exactly these arguments.
    pub count: u64,
}

/// One problem, with what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// 1 for the first (most important) problem.
    pub rank: u32,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// How severe.
    pub severity: Severity,
    /// One line saying what happened.
    pub title: String,
    /// The problem's identity across runs (what `diff` compares): the kind, then what tells
    /// problems of that kind apart (`cuda_error/CUDA_ERROR_OUT_OF_MEMORY`,
    /// `device_fault/invalid_ordinal/1`, ...).
    pub key: String,
    /// The CUresult number, for `cuda_error` problems.
    pub code: Option<u32>,
    /// The CUresult name (or number as a string), for `cuda_error` problems.
    pub result: Option<String>,
    /// How many times it happened (errors, records, processes, lines: see `title`).
    pub count: u64,
    /// Processes affected.
    pub processes: u64,
    /// Host names affected, sorted (`(unknown)` for processes without one).
    pub hosts: Vec<String>,
    /// Functions involved with their counts, most first (for `cuda_error`).
    pub functions: Vec<NameCount>,
    /// Argument examples of failing calls, most frequent first (at most 5).
    pub examples: Vec<ArgExample>,
    /// Facts from the traces that bear on the cause.
    pub context: Vec<String>,
    /// What to do, most likely fix first.
    pub remediation: Vec<String>,
    /// The fault kind, for `device_fault` problems (`invalid_ordinal`,
    /// `device_unavailable`, `context_out_of_memory`, ...).
    pub fault: Option<String>,
    /// The ordinal the programs asked for, for `device_fault` problems.
    pub requested_ordinal: Option<i32>,
    /// Of `processes`, those where every such fault was repaired by a fallback, for
    /// `device_fault` problems.
    pub processes_repaired: Option<u64>,
    /// The shim's own explanations (`device_fault`, `launch_fault`, `alloc_fault`
    /// records), distinct, most processes first (at most 5).
    pub explanations: Vec<String>,
    /// The check that failed, for `launch_fault` and `alloc_fault` problems
    /// (`threads_per_block`, `out_of_memory`, ...).
    pub check: Option<String>,
    /// The unit of the values' `limit` and `requested` (`threads`, `blocks`, `bytes`), for
    /// `launch_fault` and `alloc_fault` problems whose check has one.
    pub unit: Option<String>,
    /// The values asked for and the limits broken, for `launch_fault` and `alloc_fault`
    /// problems: distinct, most processes first (at most 10).
    pub values: Vec<FaultValue>,
    /// The driver's own messages for these failures (`driver_message`), distinct, most
    /// processes first (at most 5).
    pub driver_messages: Vec<String>,
    /// Of `processes`, those where the shim refused such a call before it reached the
    /// driver (`SEEDANCE_VALIDATE=pre`), for `launch_fault` and `alloc_fault` problems.
    pub processes_refused: Option<u64>,
}

/// What one launch or allocation asked for, and the limit it broke.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultValue {
    /// Ordinal of the device (`None`: no current context, pinned host memory, or unknown).
    pub device: Option<i32>,
    /// The limit in force (launches: in the problem's `unit`; allocations: bytes of total
    /// memory, granularity or free memory, as the check says).
    pub limit: Option<u64>,
    /// The value asked for (allocations: bytes).
    pub requested: Option<u64>,
    /// Allocations: the requested size read as a signed number (negative when a negative
    /// size was converted to `size_t`).
    pub requested_signed: Option<i64>,
    /// Allocations: free bytes at the moment of the failure.
    pub free_bytes: Option<u64>,
    /// Allocations: total bytes (of the device; of the host for pinned memory).
    pub total_bytes: Option<u64>,
    /// `out_of_memory`: whether the request was larger than the free memory (a genuine
    /// shortage) or not (fragmentation, memory held back by an allocator); `None` when the
    /// free memory is unknown, and for other checks.
    pub shortage: Option<bool>,
    /// Processes with a record of exactly these values.
    pub processes: u64,
    /// Records with exactly these values.
    pub records: u64,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// Host name, `None` for processes whose session start is missing or lacks it.
    pub hostname: Option<String>,
    /// Processes on the host.
    pub processes: u64,
    /// Of those, without an exit summary.
    pub processes_without_exit_summary: u64,
    /// Driver versions reported (`13.0`), sorted.
    pub driver_versions: Vec<String>,
    /// Distinct devices.
    pub devices: u64,
    /// Calls (from exit summaries).
    pub calls: u64,
    /// Errors.
    pub errors: u64,
}

/// Whether the process ended normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    /// It wrote an exit summary.
    Exited,
    /// No exit summary: killed or still running.
    NoExitSummary,
}

/// A device as one process saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessDevice {
    /// CUDA ordinal in that process.
    pub ordinal: i32,
    /// Name.
    pub name: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Total memory, bytes.
    pub total_mem_bytes: Option<u64>,
    /// UUID, `GPU-...` (session topology).
    pub uuid: Option<String>,
    /// The index an integer `CUDA_VISIBLE_DEVICES` entry uses for it (session topology).
    pub physical_index: Option<u32>,
    /// nvidia-smi's index (session topology, with NVML).
    pub nvml_index: Option<u32>,
    /// Compute mode as nvidia-smi prints it (`Default`, `Exclusive_Process`,
    /// `Prohibited`, `Exclusive_Thread`, or the number) (session topology).
    pub compute_mode: Option<String>,
    /// Free memory when the process started, bytes (session topology, with NVML).
    pub free_mem_bytes: Option<u64>,
    /// Processes with a context on it when the process started (session topology, with
    /// NVML).
    pub busy_processes: Option<u32>,
}

/// A device fault of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessFault {
    /// The function that asked.
    pub function: String,
    /// The ordinal it asked for.
    pub requested_ordinal: i32,
    /// The fault kind.
    pub fault: String,
    /// The result (name, or number as a string).
    pub result: String,
    /// A `device_fallback` of the same function and ordinal followed: the call was sent
    /// to another device.
    pub repaired: bool,
}

/// A launch or allocation fault of one process (schema 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessExplained {
    /// The function.
    pub function: String,
    /// The check that failed.
    pub check: String,
    /// The result (name, or number as a string).
    pub result: String,
    /// Records (one per distinct requested value).
    pub records: u64,
    /// Failed calls counted for it (see [`Problem::count`] of its problem).
    pub errors: u64,
    /// Some of the calls were refused by the shim before they reached the driver.
    pub refused_before_driver: bool,
}

/// The session topology of one process, in short (schema 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessTopology {
    /// `CUDA_DEVICE_ORDER` in force (`FASTEST_FIRST`, `PCI_BUS_ID`).
    pub device_order: Option<String>,
    /// The topology's order warning.
    pub order_warning: Option<String>,
    /// Whether NVML was present.
    pub nvml_present: bool,
    /// Why NVML was absent.
    pub nvml_reason: Option<String>,
    /// Physical devices `CUDA_VISIBLE_DEVICES` was checked against (null: inferred).
    pub physical_count: Option<u32>,
    /// Where the driver stopped reading `CUDA_VISIBLE_DEVICES`, if it did.
    pub stopped_at: Option<VisibilityStop>,
}

/// The first invalid `CUDA_VISIBLE_DEVICES` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisibilityStop {
    /// Position of the entry, from 1.
    pub position: u64,
    /// The entry.
    pub entry: String,
    /// Why it is invalid (`is out of range for 2 GPUs`).
    pub reason: String,
}

/// One process: one session of a pid in a trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessReport {
    /// Host name.
    pub hostname: Option<String>,
    /// Process id.
    pub pid: u32,
    /// Executable path.
    pub executable: Option<String>,
    /// Command line.
    pub argv: Vec<String>,
    /// The trace file.
    pub file: String,
    /// Whether it exited normally.
    pub status: ProcessStatus,
    /// Whether the trace has its session start (when false, the fields that come from it
    /// are empty).
    pub has_session_start: bool,
    /// Start: the session start record, else the first record.
    pub start_ts_ns: u64,
    /// [`ProcessReport::start_ts_ns`] in RFC 3339.
    pub start_time: String,
    /// End: the exit summary, else the last record.
    pub end_ts_ns: u64,
    /// Duration: from the exit summary, else from start to the last record.
    pub duration_ns: u64,
    /// `observe` or `fix`.
    pub mode: Option<String>,
    /// Version of the shim that wrote the trace.
    pub shim_version: Option<String>,
    /// Driver version as reported (`13000`).
    pub driver_version: Option<i32>,
    /// Where libcuda was loaded from.
    pub libcuda_path: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` (`None` when unset).
    pub cuda_visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER` (`None` when unset).
    pub cuda_device_order: Option<String>,
    /// Visible devices, by ordinal.
    pub devices: Vec<ProcessDevice>,
    /// Calls (from the exit summary; `None` without one).
    pub calls: Option<u64>,
    /// Errors (exit summary, else `call_failed` records).
    pub errors: u64,
    /// Errors by CUresult name.
    pub errors_by_result: BTreeMap<String, u64>,
    /// Records read.
    pub records: u64,
    /// Records the shim could not write (exit summary).
    pub dropped_records: u64,
    /// Sequence numbers missing from the trace.
    pub missing_records: u64,
    /// Records of unknown kinds (later schema versions).
    pub other_events: u64,
    /// Base names the shim hooks but whose `cuGetProcAddress` pointer matched none of its
    /// variants (exit summary): calls passed through uninstrumented.
    pub procaddr_unmatched: Vec<String>,
    /// Device faults (`device_fault` records), by function, ordinal and result.
    pub device_faults: Vec<ProcessFault>,
    /// Launch faults (`launch_fault` records), by function, check and result.
    pub launch_faults: Vec<ProcessExplained>,
    /// Allocation faults (`alloc_fault` records), by function, check and result.
    pub alloc_faults: Vec<ProcessExplained>,
    /// Calls repaired, by kind (see [`RepairKind::calls`]).
    pub repairs: BTreeMap<String, u64>,
    /// Fallbacks: requested ordinal (string key) -> chosen ordinal, from the exit summary
    /// and the `device_fallback` records.
    pub fallbacks: BTreeMap<String, i32>,
    /// The session topology in short; `None` for traces without one.
    pub topology: Option<ProcessTopology>,
}

/// One device of one host, as seen by all processes there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// Host name.
    pub hostname: Option<String>,
    /// PCI bus id (the device's identity when known).
    pub pci_bus_id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Total memory, bytes.
    pub total_mem_bytes: Option<u64>,
    /// CUDA ordinals it had in the processes that saw it (differ with
    /// `CUDA_VISIBLE_DEVICES`), sorted.
    pub ordinals: Vec<i32>,
    /// Processes that saw it.
    pub processes: u64,
    /// UUID (session topology).
    pub uuid: Option<String>,
    /// The index an integer `CUDA_VISIBLE_DEVICES` entry uses for it, as the first process
    /// with a topology saw it.
    pub physical_index: Option<u32>,
    /// nvidia-smi's index (with NVML).
    pub nvml_index: Option<u32>,
    /// Compute mode as nvidia-smi prints it, as the first process with a topology saw it.
    pub compute_mode: Option<String>,
}

/// One hooked function, summed over processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionReport {
    /// Exported symbol (ABI variant), e.g. `cuMemAlloc_v2`.
    pub function: String,
    /// Calls, from exit summaries.
    pub calls: u64,
    /// Errors: exit summaries plus `call_failed` records of processes without one.
    pub errors: u64,
    /// Errors by CUresult name.
    pub errors_by_result: BTreeMap<String, u64>,
    /// Processes that called it (or had it fail).
    pub processes: u64,
    /// Of those, processes without an exit summary: their calls are not in `calls`.
    pub processes_without_exit_summary: u64,
}

/// Errors over time, from `call_failed` records and the fault records (`device_fault`,
/// `launch_fault`, `alloc_fault`: one per record, the first failure of each distinct fault;
/// records dropped by the shim are missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorsOverTime {
    /// Bucket width, nanoseconds (one millisecond times a power of two, so that there are
    /// at most 512 buckets; one second times a power of two before report version 5).
    pub bucket_ns: u64,
    /// Buckets with at least one error, in time order.
    pub buckets: Vec<TimeBucket>,
}

/// One bucket of [`ErrorsOverTime`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeBucket {
    /// Start of the bucket.
    pub start_ns: u64,
    /// [`TimeBucket::start_ns`] in RFC 3339.
    pub start_time: String,
    /// Errors in the bucket.
    pub errors: u64,
    /// Errors by CUresult name.
    pub by_result: BTreeMap<String, u64>,
}

/// Name used for a missing host name.
pub const UNKNOWN_HOST: &str = "(unknown)";

pub(crate) fn host_label(h: &Option<String>) -> String {
    h.clone().unwrap_or_else(|| UNKNOWN_HOST.to_string())
}

/// Function -> (calls, errors, errors by result name or number).
pub(crate) type ByFunction<'a> = BTreeMap<&'a str, (u64, u64, BTreeMap<Cow<'a, str>, u64>)>;

/// A launch or allocation fault of a process: (kind, function, check, result number).
pub(crate) type ExplainedKey<'a> = (ExplainedKind, &'a str, &'a str, u32);

/// Errors a process's launch and allocation faults account for, by (function, result key
/// as in [`ByFunction`], kind).
pub(crate) type ExplainedByResult<'a> = BTreeMap<(&'a str, String, ExplainedKind), u64>;

/// Per-process numbers, computed once.
pub(crate) struct Proc<'a> {
    pub(crate) agg: &'a ProcessAgg,
    pub(crate) calls: Option<u64>,
    pub(crate) errors: u64,
    /// Function -> (calls, errors, errors by result).
    pub(crate) by_function: ByFunction<'a>,
    pub(crate) errors_by_result: BTreeMap<String, u64>,
    /// Calls repaired, by kind (see [`RepairKind::calls`]).
    pub(crate) repairs: BTreeMap<String, u64>,
    /// Failed calls counted for each launch or allocation fault (see [`explained_shares`]).
    pub(crate) explained: BTreeMap<ExplainedKey<'a>, u64>,
    /// The same summed per (function, result key as in `by_function`): the errors of the
    /// `cuda_error` problems leave out, per kind.
    pub(crate) explained_by_result: ExplainedByResult<'a>,
}

/// Splits `total` in proportion to `weights` (largest remainders, ties to the first).
pub(crate) fn split(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|w| *w as u128).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<u128> = weights.iter().map(|w| total as u128 * *w as u128).collect();
    let mut out: Vec<u64> = exact.iter().map(|e| (e / sum) as u64).collect();
    let mut rest = total - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(exact[i] % sum), i));
    for i in order {
        if rest == 0 {
            break;
        }
        out[i] += 1;
        rest -= 1;
    }
    out
}

/// The failed calls of each launch or allocation fault of a process, and per (function,
/// result key) how many of the function's errors with that result they account for.
///
/// The shim writes one record per distinct (function, check, requested value) and no
/// `call_failed` for the failures it explains, while failures it cannot explain stay
/// `call_failed` records. So the explained failures of a (function, result) are its errors
/// (exit summary) less its `call_failed` records, and at least one per record; without an
/// exit summary, one per record. When several checks share a function and result, these
/// failures are split in proportion to the checks' records (the exit summary counts by
/// result only).
fn explained_shares<'a>(
    p: &'a ProcessAgg,
    by_function: &ByFunction<'a>,
) -> (BTreeMap<ExplainedKey<'a>, u64>, ExplainedByResult<'a>) {
    let mut shares = BTreeMap::new();
    let mut by_result = BTreeMap::<_, u64>::new();
    // (function, result number) -> its faults: (key, records, result key).
    type Member<'b> = (ExplainedKey<'b>, u64, String);
    let mut groups: BTreeMap<(&str, u32), Vec<Member>> = BTreeMap::new();
    for ((kind, f, check, r), e) in &p.explained {
        groups.entry((f.as_str(), *r)).or_default().push((
            (*kind, f.as_str(), check.as_str(), *r),
            e.records,
            e.result_key(*r),
        ));
    }
    // Errors not yet given to a fault, by (function, result key): two groups can match one
    // key (the same name written with different numbers), and share it.
    let mut avail: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for (f, (_, _, by)) in by_function {
        for (k, n) in by {
            avail.insert((f, k.as_ref()), *n);
        }
    }
    for ((f, r), members) in groups {
        let name = members[0].2.clone();
        let matches = |k: &str| k == name || explain::code_of(k) == Some(r);
        // The function's errors with this result, by the key they are counted under.
        let counted: Vec<(&str, u64)> = avail
            .range((f, "")..)
            .take_while(|((ff, _), _)| *ff == f)
            .filter(|((_, k), n)| **n > 0 && matches(k))
            .map(|((_, k), n)| (*k, *n))
            .collect();
        let errors: u64 = crate::sat_sum(counted.iter().map(|(_, n)| *n));
        let records: u64 = crate::sat_sum(members.iter().map(|m| m.1));
        let share = if p.exit.is_some() {
            let plain: u64 = p
                .failed
                .get(f)
                .map(|m| {
                    crate::sat_sum(
                        m.iter()
                            .filter(|(k, fl)| matches(k) || fl.code == r)
                            .map(|(_, fl)| fl.count),
                    )
                })
                .unwrap_or(0);
            errors.saturating_sub(plain).max(records).min(errors)
        } else {
            records.min(errors)
        };
        let weights: Vec<u64> = members.iter().map(|m| m.1).collect();
        let mut per_kind: BTreeMap<ExplainedKind, u64> = BTreeMap::new();
        for (m, n) in members.iter().zip(split(share, &weights)) {
            shares.insert(m.0, n);
            per_kind.entry(m.0 .0).or_default().sat_add(n);
        }
        // Take the kinds' shares from the counted keys in order.
        for (kind, mut n) in per_kind {
            for (k, _) in &counted {
                let Some(left) = avail.get_mut(&(f, *k)) else {
                    continue;
                };
                let take = n.min(*left);
                if take > 0 {
                    by_result
                        .entry((f, k.to_string(), kind))
                        .or_default()
                        .sat_add(take);
                    *left -= take;
                    n -= take;
                }
            }
        }
    }
    (shares, by_result)
}

impl<'a> Proc<'a> {
    fn new(p: &'a ProcessAgg) -> Proc<'a> {
        let mut by_function: ByFunction = BTreeMap::new();
        match &p.exit {
            Some(exit) => {
                for (f, s) in &exit.functions {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.0.sat_add(s.calls);
                    e.1.sat_add(s.errors);
                    for (r, n) in &s.errors_by_result {
                        e.2.entry(Cow::Borrowed(r.as_str())).or_default().sat_add(n);
                    }
                }
            }
            None => {
                for (f, m) in &p.failed {
                    let e = by_function.entry(f.as_str()).or_default();
                    for (r, fl) in m {
                        e.1.sat_add(fl.count);
                        e.2.entry(Cow::Borrowed(r.as_str()))
                            .or_default()
                            .sat_add(fl.count);
                    }
                }
                // Device faults are not written as call_failed: each record stands for at
                // least one failed call.
                for ((f, _, result), fa) in &p.faults {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.1.sat_add(fa.records);
                    let key = match &fa.result_name {
                        Some(n) => Cow::Borrowed(n.as_str()),
                        None => Cow::Owned(result.to_string()),
                    };
                    e.2.entry(key).or_default().sat_add(fa.records);
                }
                // Launch and allocation faults likewise.
                for ((_, f, _, result), ea) in &p.explained {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.1.sat_add(ea.records);
                    let key = match &ea.result_name {
                        Some(n) => Cow::Borrowed(n.as_str()),
                        None => Cow::Owned(result.to_string()),
                    };
                    e.2.entry(key).or_default().sat_add(ea.records);
                }
            }
        }
        let mut errors_by_result = BTreeMap::<_, u64>::new();
        for (_, _, m) in by_function.values() {
            for (r, n) in m {
                errors_by_result
                    .entry(r.to_string())
                    .or_default()
                    .sat_add(n);
            }
        }
        let mut repairs: BTreeMap<String, u64> = p
            .exit
            .as_ref()
            .map(|e| {
                e.repairs
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| (k.clone(), *n))
                    .collect()
            })
            .unwrap_or_default();
        if p.fallback_events > 0 {
            let n = repairs.entry("device_fallback".to_string()).or_default();
            *n = (*n).max(p.fallback_events);
        }
        // The shim counts lifetime repairs in the exit summary's `repairs` too (every
        // repaired call, the records only the first of each function): the records count
        // only when they are more (no exit summary).
        let mut lifetime: BTreeMap<&str, u64> = BTreeMap::new();
        for ((kind, _), n) in &p.lifetime_repairs {
            lifetime.entry(kind).or_default().sat_add(n);
        }
        for (kind, n) in lifetime {
            let e = repairs.entry(kind.to_string()).or_default();
            *e = (*e).max(n);
        }
        let (explained, explained_by_result) = explained_shares(p, &by_function);
        Proc {
            agg: p,
            calls: p
                .exit
                .as_ref()
                .map(|_| crate::sat_sum(by_function.values().map(|v| v.0))),
            errors: crate::sat_sum(by_function.values().map(|v| v.1)),
            by_function,
            errors_by_result,
            repairs,
            explained,
            explained_by_result,
        }
    }

    pub(crate) fn hostname(&self) -> Option<String> {
        self.agg.session.as_ref().and_then(|s| s.hostname.clone())
    }

    pub(crate) fn start(&self) -> u64 {
        self.agg.session_ts_ns.unwrap_or(self.agg.first_ts_ns)
    }

    /// Whether the errors of `function` with result `result` (a name or a number) are
    /// device faults of this process: the shim classifies by function and result, so all
    /// of them are, and it wrote `device_fault` instead of `call_failed` for them.
    pub(crate) fn fault_covers(&self, function: &str, result: &str) -> bool {
        let code = explain::code_of(result);
        self.agg.faults.iter().any(|((f, _, r), fa)| {
            f == function && (fa.result_key(*r) == result || code == Some(*r))
        })
    }

    /// Whether a `lifetime_fault` of this process explains the errors of `function` with
    /// the result counted under `result` (the shim writes one record per distinct function,
    /// kind and context, and counts every such error in the exit summary).
    pub(crate) fn lifetime_covers(&self, function: &str, result: &str) -> bool {
        self.agg
            .lifetime_faults
            .iter()
            .any(|((_, f), la)| f == function && la.results.contains_key(result))
    }

    /// Errors of `function` with the result counted under `result` that launch or
    /// allocation faults account for, per kind.
    pub(crate) fn explained_errors(
        &self,
        function: &str,
        result: &str,
    ) -> [(ExplainedKind, u64); 2] {
        let get = |k| {
            self.explained_by_result
                .get(&(function, result.to_string(), k))
                .copied()
                .unwrap_or(0)
        };
        [
            (ExplainedKind::Launch, get(ExplainedKind::Launch)),
            (ExplainedKind::Alloc, get(ExplainedKind::Alloc)),
        ]
    }

    /// The launch (or allocation) faults of this process as the report lists them.
    fn explained_list(&self, kind: ExplainedKind) -> Vec<ProcessExplained> {
        self.agg
            .explained
            .iter()
            .filter(|((k, _, _, _), _)| *k == kind)
            .map(|((k, f, check, r), ea)| ProcessExplained {
                function: f.clone(),
                check: check.clone(),
                result: ea.result_key(*r),
                records: ea.records,
                errors: self
                    .explained
                    .get(&(*k, f.as_str(), check.as_str(), *r))
                    .copied()
                    .unwrap_or(0),
                refused_before_driver: ea.refused > 0,
            })
            .collect()
    }

    /// Whether a `device_fallback` of `function` for `requested` follows in this process.
    pub(crate) fn repaired(&self, function: &str, requested: i32) -> bool {
        self.agg
            .fallbacks
            .keys()
            .any(|(f, r, _)| f == function && *r == requested)
    }

    /// The process's fallbacks, requested -> chosen: the exit summary's, and those of the
    /// `device_fallback` records.
    pub(crate) fn fallback_map(&self) -> BTreeMap<String, i32> {
        let mut m: BTreeMap<String, i32> = self
            .agg
            .exit
            .as_ref()
            .map(|e| e.fallbacks.clone())
            .unwrap_or_default();
        for (_, r, c) in self.agg.fallbacks.keys() {
            m.entry(r.to_string()).or_insert(*c);
        }
        m
    }
}

/// The topology device of `ordinal` in a session start.
pub(crate) fn topology_device(s: &SessionInfo, ordinal: i32) -> Option<&TopologyDevice> {
    s.topology
        .as_ref()
        .and_then(|t| t.devices.iter().find(|d| d.ordinal == ordinal))
}

/// The devices of a session start: the `devices` list, or, when that is empty, those of
/// the topology.
pub(crate) fn session_devices(s: &SessionInfo) -> Cow<'_, [DeviceEntry]> {
    match &s.topology {
        Some(t) if s.devices.is_empty() && !t.devices.is_empty() => Cow::Owned(
            t.devices
                .iter()
                .map(|d| DeviceEntry {
                    ordinal: d.ordinal,
                    name: d.name.clone(),
                    pci_bus_id: d.pci_bus_id.clone(),
                    total_mem_bytes: d.total_mem_bytes,
                })
                .collect(),
        ),
        _ => Cow::Borrowed(&s.devices),
    }
}

/// A compute mode as nvidia-smi prints it, from the trace's spelling.
pub(crate) fn compute_mode_name(mode: &str) -> String {
    match mode {
        "default" => "Default".into(),
        "exclusive_thread" => "Exclusive_Thread".into(),
        "prohibited" => "Prohibited".into(),
        "exclusive_process" => "Exclusive_Process".into(),
        other => other.to_string(),
    }
}

/// Builds the report from a finished aggregate; `paths` are the inputs as given.
pub fn build_report(agg: Aggregate, paths: &[String]) -> Report {
    let procs: Vec<Proc> = agg.processes.iter().map(Proc::new).collect();
    let input = input_report(&agg, paths);
    let processes = process_reports(&procs);
    let devices = device_reports(&procs);
    let functions = function_reports(&procs);
    let hosts = host_reports(&procs);
    let repairs = faults::repairs_report(&procs);
    let mut problems = Vec::new();
    problems::cuda_problems(&procs, &mut problems);
    faults::device_fault_problems(&procs, &mut problems);
    explained::explained_problems(&procs, &mut problems);
    lifetime::lifetime_problems(&procs, &mut problems);
    let device_contexts = crate::stray::device_contexts(&procs);
    crate::stray::stray_problems(&procs, &device_contexts, &mut problems);
    faults::topology_problems(&procs, &mut problems);
    problems::other_problems(&agg, &procs, &mut problems);
    problems.sort_by(|a, b| {
        (a.severity, std::cmp::Reverse(a.count), &a.title).cmp(&(
            b.severity,
            std::cmp::Reverse(b.count),
            &b.title,
        ))
    });
    for (i, p) in problems.iter_mut().enumerate() {
        p.rank = i as u32 + 1;
    }
    let overview = overview(&procs, &hosts, &devices, &functions);
    Report {
        report_version: REPORT_VERSION,
        input,
        overview,
        problems,
        hosts,
        processes,
        devices,
        functions,
        errors_over_time: errors_over_time(&agg.timeline),
        repairs,
        process_health: lifetime::process_health(&procs),
        device_contexts,
    }
}

fn input_report(agg: &Aggregate, paths: &[String]) -> InputReport {
    let c = &agg.counters;
    InputReport {
        paths: paths.to_vec(),
        files_seen: c.files_seen,
        files_read: c.files_read,
        gzip_files: c.gzip_files,
        files_skipped: c.files_skipped,
        skipped_files: c.skipped_files.clone(),
        empty_files: c.empty_files,
        unreadable_files: c.unreadable_files,
        files_with_read_errors: c.files_with_read_errors,
        errors: c
            .errors
            .iter()
            .map(|(p, e)| FileError {
                path: p.clone(),
                error: e.clone(),
            })
            .collect(),
        bytes: c.bytes,
        bytes_uncompressed: c.bytes_uncompressed,
        lines: c.lines,
        records: c.records,
        records_by_kind: c.records_by_kind.clone(),
        malformed_lines: c.malformed_lines,
        truncated_lines: c.truncated_lines,
        oversized_lines: c.oversized_lines,
        newer_schema_records: c.newer_schema_records,
        unknown_event_kinds: c.unknown_event_kinds.clone(),
    }
}

fn process_reports(procs: &[Proc]) -> Vec<ProcessReport> {
    let mut out: Vec<ProcessReport> = procs
        .iter()
        .map(|p| {
            let a = p.agg;
            let s = a.session.as_ref();
            let start = p.start();
            let end = a.exit_ts_ns.unwrap_or(a.last_ts_ns).max(start);
            ProcessReport {
                hostname: p.hostname(),
                pid: a.pid,
                executable: s.and_then(|s| s.executable.clone()),
                argv: s.map(|s| s.argv.clone()).unwrap_or_default(),
                file: a.file.clone(),
                status: if a.exit.is_some() {
                    ProcessStatus::Exited
                } else {
                    ProcessStatus::NoExitSummary
                },
                has_session_start: s.is_some(),
                start_ts_ns: start,
                start_time: fmt::timestamp(start),
                end_ts_ns: end,
                duration_ns: a
                    .exit
                    .as_ref()
                    .map(|e| e.duration_ns)
                    .unwrap_or(end - start),
                mode: s.map(|s| s.mode.clone()),
                shim_version: s.map(|s| s.shim_version.clone()),
                driver_version: s.and_then(|s| s.driver_version),
                libcuda_path: s.and_then(|s| s.libcuda_path.clone()),
                cuda_visible_devices: s.and_then(|s| s.cuda_visible_devices.clone()),
                cuda_device_order: s.and_then(|s| s.cuda_device_order.clone()),
                devices: s
                    .map(|s| {
                        session_devices(s)
                            .iter()
                            .map(|d| {
                                let t = topology_device(s, d.ordinal);
                                ProcessDevice {
                                    ordinal: d.ordinal,
                                    name: d.name.clone(),
                                    pci_bus_id: d.pci_bus_id.clone(),
                                    total_mem_bytes: d.total_mem_bytes,
                                    uuid: t.and_then(|t| t.uuid.clone()),
                                    physical_index: t.and_then(|t| t.physical_index),
                                    nvml_index: t.and_then(|t| t.nvml_index),
                                    compute_mode: t
                                        .and_then(|t| t.compute_mode.as_deref())
                                        .map(compute_mode_name),
                                    free_mem_bytes: t.and_then(|t| t.free_mem_bytes),
                                    busy_processes: t.and_then(|t| t.busy_processes),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                calls: p.calls,
                errors: p.errors,
                errors_by_result: p.errors_by_result.clone(),
                records: a.records,
                dropped_records: a.exit.as_ref().map(|e| e.dropped_records).unwrap_or(0),
                missing_records: a.missing_records(),
                other_events: a.other_events,
                procaddr_unmatched: a
                    .exit
                    .as_ref()
                    .map(|e| e.procaddr_unmatched.clone())
                    .unwrap_or_default(),
                device_faults: a
                    .faults
                    .iter()
                    .map(|((f, o, r), fa)| ProcessFault {
                        function: f.clone(),
                        requested_ordinal: *o,
                        fault: fa.fault.clone(),
                        result: fa.result_key(*r),
                        repaired: p.repaired(f, *o),
                    })
                    .collect(),
                launch_faults: p.explained_list(ExplainedKind::Launch),
                alloc_faults: p.explained_list(ExplainedKind::Alloc),
                repairs: p.repairs.clone(),
                fallbacks: p.fallback_map(),
                topology: s
                    .and_then(|s| s.topology.as_ref())
                    .map(|t| ProcessTopology {
                        device_order: t.device_order.clone(),
                        order_warning: t.order_warning.clone(),
                        nvml_present: t.nvml.present,
                        nvml_reason: t.nvml.reason.clone(),
                        physical_count: t.visibility.physical_count,
                        stopped_at: t.visibility.stopped_at.as_ref().map(|x| VisibilityStop {
                            position: x.position,
                            entry: x.entry.clone(),
                            reason: x.reason.clone(),
                        }),
                    }),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (
            a.hostname.is_none(),
            &a.hostname,
            a.start_ts_ns,
            a.pid,
            &a.file,
        )
            .cmp(&(
                b.hostname.is_none(),
                &b.hostname,
                b.start_ts_ns,
                b.pid,
                &b.file,
            ))
    });
    out
}

pub(crate) type DeviceKey = (Option<String>, Option<String>, Option<String>, Option<i32>);

pub(crate) fn device_key(host: &Option<String>, d: &DeviceEntry) -> DeviceKey {
    match &d.pci_bus_id {
        // The PCI bus id identifies the device on its host, whatever its ordinal.
        Some(pci) => (host.clone(), Some(pci.to_ascii_lowercase()), None, None),
        None => (host.clone(), None, d.name.clone(), Some(d.ordinal)),
    }
}

fn device_reports(procs: &[Proc]) -> Vec<DeviceReport> {
    let mut map: BTreeMap<DeviceKey, DeviceReport> = BTreeMap::new();
    for p in procs {
        let host = p.hostname();
        let Some(s) = &p.agg.session else { continue };
        for d in session_devices(s).iter() {
            let e = map
                .entry(device_key(&host, d))
                .or_insert_with(|| DeviceReport {
                    hostname: host.clone(),
                    pci_bus_id: d.pci_bus_id.clone(),
                    name: None,
                    total_mem_bytes: None,
                    ordinals: Vec::new(),
                    processes: 0,
                    uuid: None,
                    physical_index: None,
                    nvml_index: None,
                    compute_mode: None,
                });
            e.name = e.name.take().or_else(|| d.name.clone());
            e.total_mem_bytes = e.total_mem_bytes.or(d.total_mem_bytes);
            if let Some(t) = topology_device(s, d.ordinal) {
                if e.uuid.is_none() {
                    e.uuid = t.uuid.clone();
                }
                if e.physical_index.is_none() && e.compute_mode.is_none() {
                    e.physical_index = t.physical_index;
                    e.compute_mode = t.compute_mode.as_deref().map(compute_mode_name);
                }
                e.nvml_index = e.nvml_index.or(t.nvml_index);
            }
            if !e.ordinals.contains(&d.ordinal) {
                e.ordinals.push(d.ordinal);
                e.ordinals.sort_unstable();
            }
            e.processes += 1;
        }
    }
    let mut out: Vec<DeviceReport> = map.into_values().collect();
    out.sort_by(|a, b| {
        (
            a.hostname.is_none(),
            &a.hostname,
            &a.pci_bus_id,
            a.ordinals.first(),
        )
            .cmp(&(
                b.hostname.is_none(),
                &b.hostname,
                &b.pci_bus_id,
                b.ordinals.first(),
            ))
    });
    out
}

fn function_reports(procs: &[Proc]) -> Vec<FunctionReport> {
    let mut map: BTreeMap<&str, FunctionReport> = BTreeMap::new();
    for p in procs {
        for (f, (calls, errors, by)) in &p.by_function {
            let e = map.entry(f).or_insert_with(|| FunctionReport {
                function: f.to_string(),
                calls: 0,
                errors: 0,
                errors_by_result: BTreeMap::new(),
                processes: 0,
                processes_without_exit_summary: 0,
            });
            e.calls.sat_add(calls);
            e.errors.sat_add(errors);
            for (r, n) in by {
                e.errors_by_result
                    .entry(r.to_string())
                    .or_default()
                    .sat_add(n);
            }
            e.processes += 1;
            if p.agg.exit.is_none() {
                e.processes_without_exit_summary += 1;
            }
        }
    }
    let mut out: Vec<FunctionReport> = map.into_values().collect();
    out.sort_by(|a, b| {
        (
            std::cmp::Reverse(a.errors),
            std::cmp::Reverse(a.calls),
            &a.function,
        )
            .cmp(&(
                std::cmp::Reverse(b.errors),
                std::cmp::Reverse(b.calls),
                &b.function,
            ))
    });
    out
}

fn host_reports(procs: &[Proc]) -> Vec<HostReport> {
    type Acc = (HostReport, BTreeSet<DeviceKey>, BTreeSet<String>);
    let mut map: BTreeMap<(bool, Option<String>), Acc> = BTreeMap::new();
    for p in procs {
        let host = p.hostname();
        let e = map
            .entry((host.is_none(), host.clone()))
            .or_insert_with(|| {
                (
                    HostReport {
                        hostname: host.clone(),
                        processes: 0,
                        processes_without_exit_summary: 0,
                        driver_versions: Vec::new(),
                        devices: 0,
                        calls: 0,
                        errors: 0,
                    },
                    BTreeSet::new(),
                    BTreeSet::new(),
                )
            });
        e.0.processes += 1;
        if p.agg.exit.is_none() {
            e.0.processes_without_exit_summary += 1;
        }
        e.0.calls.sat_add(p.calls.unwrap_or(0));
        e.0.errors.sat_add(p.errors);
        if let Some(s) = &p.agg.session {
            if let Some(v) = s.driver_version {
                e.2.insert(fmt::driver_version(v));
            }
            for d in session_devices(s).iter() {
                e.1.insert(device_key(&host, d));
            }
        }
    }
    map.into_values()
        .map(|(mut h, devs, drivers)| {
            h.devices = devs.len() as u64;
            h.driver_versions = drivers.into_iter().collect();
            h
        })
        .collect()
}

fn overview(
    procs: &[Proc],
    hosts: &[HostReport],
    devices: &[DeviceReport],
    functions: &[FunctionReport],
) -> Overview {
    let first = procs
        .iter()
        .filter(|p| p.agg.records > 0)
        .map(|p| p.agg.first_ts_ns)
        .min();
    let last = procs.iter().map(|p| p.agg.last_ts_ns).max();
    let mut modes = BTreeMap::new();
    let mut shims = BTreeMap::new();
    let mut drivers = BTreeMap::new();
    for p in procs {
        let s = p.agg.session.as_ref();
        let unknown = || "unknown".to_string();
        *modes
            .entry(s.map(|s| s.mode.clone()).unwrap_or_else(unknown))
            .or_default() += 1;
        *shims
            .entry(s.map(|s| s.shim_version.clone()).unwrap_or_else(unknown))
            .or_default() += 1;
        *drivers
            .entry(
                s.and_then(|s| s.driver_version)
                    .map(fmt::driver_version)
                    .unwrap_or_else(unknown),
            )
            .or_default() += 1;
    }
    let exited = procs.iter().filter(|p| p.agg.exit.is_some()).count() as u64;
    Overview {
        hosts: hosts.len() as u64,
        processes: procs.len() as u64,
        processes_exited: exited,
        processes_without_exit_summary: procs.len() as u64 - exited,
        processes_without_session_start: procs.iter().filter(|p| p.agg.session.is_none()).count()
            as u64,
        devices: devices.len() as u64,
        functions: functions.len() as u64,
        calls: crate::sat_sum(procs.iter().filter_map(|p| p.calls)),
        errors: crate::sat_sum(procs.iter().map(|p| p.errors)),
        first_ts_ns: first,
        last_ts_ns: last.filter(|_| first.is_some()),
        first_time: first.map(fmt::timestamp),
        last_time: last.filter(|_| first.is_some()).map(fmt::timestamp),
        modes,
        shim_versions: shims,
        driver_versions: drivers,
    }
}

fn errors_over_time(t: &Timeline) -> ErrorsOverTime {
    ErrorsOverTime {
        bucket_ns: t.width_ns,
        buckets: t
            .buckets
            .iter()
            .map(|(start, by)| TimeBucket {
                start_ns: *start,
                start_time: fmt::timestamp(*start),
                errors: crate::sat_sum(by.values().copied()),
                by_result: by.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_is_proportional_and_exact() {
        assert_eq!(split(8, &[2, 1]), [5, 3]);
        assert_eq!(split(3, &[1, 1]), [2, 1]);
        assert_eq!(split(0, &[4, 1]), [0, 0]);
        assert_eq!(split(7, &[0, 0]), [0, 0]);
        assert_eq!(
            split(u64::MAX, &[u64::MAX, 1]).iter().sum::<u64>(),
            u64::MAX
        );
    }
}
