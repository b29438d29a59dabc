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

pub(crate) mod build;
pub(crate) mod device_contexts;
pub(crate) mod health;
mod problem;
mod process;
pub(crate) mod repairs;

pub use problem::{
    ArgExample, CallFaultDetail, CudaErrorDetail, DeviceFaultDetail, FaultValue,
    LifetimeFaultDetail, NameCount, Problem, ProblemDetail, ProblemKind, Severity,
    StrayContextDetail,
};
pub use process::{
    DeviceLeak, ProcessDevice, ProcessExplained, ProcessFault, ProcessHealth, ProcessReport,
    ProcessStatus, ProcessTopology, VisibilityStop,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    pub device_contexts: Vec<DeviceContexts>,
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

/// One process with a stray context on a device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrayProcess {
    /// Trace file.
    pub file: String,
    /// Process id.
    pub pid: u32,
    /// Executable.
    pub executable: Option<String>,
    /// The devices it works on, ascending.
    pub works_on: Vec<i32>,
    /// Its used memory on the device (NVML), bytes; `None` when unknown.
    pub context_bytes: Option<u64>,
    /// When the shim decided: `context_end`, `exit`, `redirected`, `refused`.
    pub decided: String,
}

/// The contexts made on one device of one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceContexts {
    /// Host name.
    pub hostname: Option<String>,
    /// CUDA ordinal (as the processes numbered it).
    pub device: i32,
    /// Processes that made a context there (from exit summaries and stray records).
    pub processes: u64,
    /// Of those, the ones that worked there.
    pub worked: u64,
    /// Of those, the ones whose context there is stray (redirected or refused ones
    /// included: they would have been).
    pub stray: u64,
    /// NVML's used memory of the stray processes there, summed where known, bytes.
    pub stray_bytes: u64,
    /// Stray processes whose memory there is unknown (no NVML, or another PID namespace).
    pub stray_bytes_unknown: u64,
    /// The stray processes, most memory first, then file and pid.
    pub stray_processes: Vec<StrayProcess>,
    /// Processes of the host whose allocation on this device failed for lack of memory.
    pub out_of_memory_processes: u64,
    /// Pids of stray processes here that NVML listed on the device at those failures
    /// (NVML's pids are the host's: they match the traces' when the processes share a PID
    /// namespace), ascending.
    pub stray_pids_at_out_of_memory: Vec<u32>,
}

/// Name used for a missing host name.
pub const UNKNOWN_HOST: &str = "(unknown)";

pub(crate) fn host_label(h: &Option<String>) -> String {
    h.clone().unwrap_or_else(|| UNKNOWN_HOST.to_string())
}
