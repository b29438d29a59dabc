//! The per-process sections of a report: [`ProcessReport`] and [`ProcessHealth`].

use super::problem::NameCount;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Whether the process ended normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    /// It wrote an exit summary.
    Exited,
    /// No exit summary: killed or still running.
    NoExitSummary,
    /// A child forked after its parent initialised CUDA, traced at its first failing call
    /// (a `forked_after_init` lifetime fault): such a trace never has an exit summary, and
    /// the child's calls are not counted.
    ForkedChild,
    /// No exit summary because the trace was cut by a refused write (a `trace_cut`
    /// record: disk full, file size limit); not killed by it.
    TraceCut,
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
