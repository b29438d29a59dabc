//! The `problems` of a report: [`Problem`], its [`ProblemKind`] and [`Severity`].

use serde::{Deserialize, Serialize};

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

    /// The severity [`Severity::as_str`] spells `name`, or `None` for another word (a
    /// newer analyzer's).
    pub fn from_name(name: &str) -> Option<Severity> {
        [Severity::Error, Severity::Warning, Severity::Info]
            .into_iter()
            .find(|s| s.as_str() == name)
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
    /// Processes whose trace was cut by a refused write (a full disk, a file size limit):
    /// not killed, their exit summary could not be written.
    TraceCut,
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
