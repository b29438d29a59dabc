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

/// Defines [`ProblemKind`] and [`ProblemKind::ALL`] from one list, so that the list of
/// kinds cannot miss one.
macro_rules! problem_kinds {
    ($($(#[doc = $doc:literal])* $kind:ident,)*) => {
        /// What kind of problem.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ProblemKind {
            $($(#[doc = $doc])* $kind,)*
        }

        impl ProblemKind {
            /// Every kind the analyzer can emit, in declaration order.
            pub const ALL: &'static [ProblemKind] = &[$(ProblemKind::$kind,)*];
        }
    };
}

problem_kinds! {
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

impl ProblemKind {
    /// The kind's name as the JSON report spells it (`cuda_error`, `device_fault`, ...).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
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

/// One problem, with what to do about it: the fields every problem has, and what its kind
/// carries ([`ProblemDetail`]). It is written to JSON as one flat object
/// (`ProblemJson`: the fields of every kind, `null` or empty where the kind has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "ProblemJson", try_from = "ProblemJson")]
pub struct Problem {
    /// 1 for the first (most important) problem.
    pub rank: u32,
    /// How severe.
    pub severity: Severity,
    /// One line saying what happened.
    pub title: String,
    /// The problem's identity across runs (what `diff` compares): the kind, then what tells
    /// problems of that kind apart (`cuda_error/CUDA_ERROR_OUT_OF_MEMORY`,
    /// `device_fault/invalid_ordinal/1`, ...).
    pub key: String,
    /// How many times it happened (errors, records, processes, lines: see `title`).
    pub count: u64,
    /// Processes affected.
    pub processes: u64,
    /// Host names affected, sorted (`(unknown)` for processes without one).
    pub hosts: Vec<String>,
    /// Facts from the traces that bear on the cause.
    pub context: Vec<String>,
    /// What to do, most likely fix first.
    pub remediation: Vec<String>,
    /// The kind, with what problems of that kind carry.
    pub detail: ProblemDetail,
}

/// The kind of a problem with its kind's own data.
#[derive(Debug, Clone, PartialEq)]
pub enum ProblemDetail {
    /// See [`ProblemKind::CudaError`].
    CudaError(CudaErrorDetail),
    /// See [`ProblemKind::DroppedRecords`].
    DroppedRecords,
    /// See [`ProblemKind::MissingRecords`].
    MissingRecords,
    /// See [`ProblemKind::NoExitSummary`].
    NoExitSummary,
    /// See [`ProblemKind::TraceCut`].
    TraceCut,
    /// See [`ProblemKind::NoSessionStart`].
    NoSessionStart,
    /// See [`ProblemKind::MalformedInput`].
    MalformedInput,
    /// See [`ProblemKind::UnreadableFiles`].
    UnreadableFiles,
    /// See [`ProblemKind::MixedDriverVersions`].
    MixedDriverVersions,
    /// See [`ProblemKind::NewerSchema`].
    NewerSchema,
    /// See [`ProblemKind::ProcaddrUnmatched`].
    ProcaddrUnmatched,
    /// See [`ProblemKind::DeviceFault`].
    DeviceFault(DeviceFaultDetail),
    /// See [`ProblemKind::CudaVisibleDevicesInvalid`].
    CudaVisibleDevicesInvalid,
    /// See [`ProblemKind::DeviceOrder`].
    DeviceOrder,
    /// See [`ProblemKind::LaunchFault`].
    LaunchFault(CallFaultDetail),
    /// See [`ProblemKind::AllocFault`].
    AllocFault(CallFaultDetail),
    /// See [`ProblemKind::LifetimeFault`].
    LifetimeFault(LifetimeFaultDetail),
    /// See [`ProblemKind::StrayContext`].
    StrayContext(StrayContextDetail),
    /// See [`ProblemKind::RuntimeNewerThanDriver`].
    RuntimeNewerThanDriver,
}

/// What a `cuda_error` problem carries.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaErrorDetail {
    /// The CUresult number, when known.
    pub code: Option<u32>,
    /// The CUresult name (or number as a string).
    pub result: String,
    /// Functions involved with their counts, most first.
    pub functions: Vec<NameCount>,
    /// Argument examples of failing calls, most frequent first (at most 5).
    pub examples: Vec<ArgExample>,
}

/// What a `device_fault` problem carries.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFaultDetail {
    /// The CUresult number the faulting calls returned, when known.
    pub code: Option<u32>,
    /// The CUresult name the faulting calls returned, when known.
    pub result: Option<String>,
    /// Functions involved with their counts, most first.
    pub functions: Vec<NameCount>,
    /// The fault kind (`invalid_ordinal`, `device_unavailable`, `context_out_of_memory`, ...).
    pub fault: String,
    /// The ordinal the programs asked for.
    pub requested_ordinal: i32,
    /// Of the problem's processes, those where every such fault was repaired by a fallback.
    pub processes_repaired: u64,
    /// The shim's explanations, distinct, most processes first (at most 5).
    pub explanations: Vec<String>,
}

/// What a `launch_fault` or `alloc_fault` problem carries.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFaultDetail {
    /// The CUresult number the failing calls returned, when known.
    pub code: Option<u32>,
    /// The CUresult name the failing calls returned, when known.
    pub result: Option<String>,
    /// The function, with its failed calls.
    pub functions: Vec<NameCount>,
    /// The check that failed (`threads_per_block`, `out_of_memory`, ...).
    pub check: String,
    /// The unit of the values' `limit` and `requested` (`threads`, `blocks`, `bytes`), when
    /// the check has one.
    pub unit: Option<String>,
    /// The values asked for and the limits broken: distinct, most processes first (at most
    /// 10).
    pub values: Vec<FaultValue>,
    /// The shim's explanations, distinct, most processes first (at most 5).
    pub explanations: Vec<String>,
    /// The driver's own messages for these failures, distinct, most processes first (at
    /// most 5).
    pub driver_messages: Vec<String>,
    /// Of the problem's processes, those where the shim refused such a call before it
    /// reached the driver (`SEEDANCE_VALIDATE=pre`).
    pub processes_refused: u64,
}

/// What a `lifetime_fault` problem carries.
#[derive(Debug, Clone, PartialEq)]
pub struct LifetimeFaultDetail {
    /// The fault kind.
    pub fault: String,
    /// Of the problem's processes, those where a `lifetime_repair` repaired every such fault.
    pub processes_repaired: u64,
    /// Functions of the fault records with their counts, most first.
    pub functions: Vec<NameCount>,
    /// The shim's explanations, distinct, most processes first (at most 5).
    pub explanations: Vec<String>,
}

/// What a `stray_context` problem carries.
#[derive(Debug, Clone, PartialEq)]
pub struct StrayContextDetail {
    /// The device ordinal the stray contexts are on (`requested_ordinal` in JSON).
    pub device: i32,
    /// The shim's explanations, distinct, most processes first (at most 5).
    pub explanations: Vec<String>,
}

impl ProblemDetail {
    /// The kind.
    pub fn kind(&self) -> ProblemKind {
        use ProblemDetail as D;
        use ProblemKind as K;
        match self {
            D::CudaError(_) => K::CudaError,
            D::DroppedRecords => K::DroppedRecords,
            D::MissingRecords => K::MissingRecords,
            D::NoExitSummary => K::NoExitSummary,
            D::TraceCut => K::TraceCut,
            D::NoSessionStart => K::NoSessionStart,
            D::MalformedInput => K::MalformedInput,
            D::UnreadableFiles => K::UnreadableFiles,
            D::MixedDriverVersions => K::MixedDriverVersions,
            D::NewerSchema => K::NewerSchema,
            D::ProcaddrUnmatched => K::ProcaddrUnmatched,
            D::DeviceFault(_) => K::DeviceFault,
            D::CudaVisibleDevicesInvalid => K::CudaVisibleDevicesInvalid,
            D::DeviceOrder => K::DeviceOrder,
            D::LaunchFault(_) => K::LaunchFault,
            D::AllocFault(_) => K::AllocFault,
            D::LifetimeFault(_) => K::LifetimeFault,
            D::StrayContext(_) => K::StrayContext,
            D::RuntimeNewerThanDriver => K::RuntimeNewerThanDriver,
        }
    }

    /// The detail of a kind that carries nothing of its own; `None` for the others.
    pub fn plain(kind: ProblemKind) -> Option<ProblemDetail> {
        use ProblemDetail as D;
        use ProblemKind as K;
        Some(match kind {
            K::DroppedRecords => D::DroppedRecords,
            K::MissingRecords => D::MissingRecords,
            K::NoExitSummary => D::NoExitSummary,
            K::TraceCut => D::TraceCut,
            K::NoSessionStart => D::NoSessionStart,
            K::MalformedInput => D::MalformedInput,
            K::UnreadableFiles => D::UnreadableFiles,
            K::MixedDriverVersions => D::MixedDriverVersions,
            K::NewerSchema => D::NewerSchema,
            K::ProcaddrUnmatched => D::ProcaddrUnmatched,
            K::CudaVisibleDevicesInvalid => D::CudaVisibleDevicesInvalid,
            K::DeviceOrder => D::DeviceOrder,
            K::RuntimeNewerThanDriver => D::RuntimeNewerThanDriver,
            K::CudaError
            | K::DeviceFault
            | K::LaunchFault
            | K::AllocFault
            | K::LifetimeFault
            | K::StrayContext => return None,
        })
    }
}

impl Problem {
    /// What kind of problem.
    pub fn kind(&self) -> ProblemKind {
        self.detail.kind()
    }

    /// The CUresult number (`cuda_error`; `device_fault`, `launch_fault`, `alloc_fault`
    /// when known).
    pub fn code(&self) -> Option<u32> {
        match &self.detail {
            ProblemDetail::CudaError(d) => d.code,
            ProblemDetail::DeviceFault(d) => d.code,
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => d.code,
            _ => None,
        }
    }

    /// The CUresult name (`cuda_error`; `device_fault`, `launch_fault`, `alloc_fault` when
    /// known).
    pub fn result(&self) -> Option<&str> {
        match &self.detail {
            ProblemDetail::CudaError(d) => Some(&d.result),
            ProblemDetail::DeviceFault(d) => d.result.as_deref(),
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => d.result.as_deref(),
            _ => None,
        }
    }

    /// Functions involved with their counts, most first (empty for kinds without).
    pub fn functions(&self) -> &[NameCount] {
        match &self.detail {
            ProblemDetail::CudaError(d) => &d.functions,
            ProblemDetail::DeviceFault(d) => &d.functions,
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => &d.functions,
            ProblemDetail::LifetimeFault(d) => &d.functions,
            _ => &[],
        }
    }

    /// Argument examples of failing calls (`cuda_error`).
    pub fn examples(&self) -> &[ArgExample] {
        match &self.detail {
            ProblemDetail::CudaError(d) => &d.examples,
            _ => &[],
        }
    }

    /// The shim's own explanations (empty for kinds without).
    pub fn explanations(&self) -> &[String] {
        match &self.detail {
            ProblemDetail::DeviceFault(d) => &d.explanations,
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => &d.explanations,
            ProblemDetail::LifetimeFault(d) => &d.explanations,
            ProblemDetail::StrayContext(d) => &d.explanations,
            _ => &[],
        }
    }

    /// The driver's own messages (`launch_fault`, `alloc_fault`; empty for other kinds).
    pub fn driver_messages(&self) -> &[String] {
        self.call_fault().map_or(&[], |d| &d.driver_messages)
    }

    /// What a `launch_fault` or `alloc_fault` problem carries; `None` for other kinds.
    pub fn call_fault(&self) -> Option<&CallFaultDetail> {
        match &self.detail {
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => Some(d),
            _ => None,
        }
    }
}

impl From<Problem> for ProblemJson {
    fn from(p: Problem) -> ProblemJson {
        let mut j = ProblemJson {
            rank: p.rank,
            kind: p.detail.kind(),
            severity: p.severity,
            title: p.title,
            key: p.key,
            code: None,
            result: None,
            count: p.count,
            processes: p.processes,
            hosts: p.hosts,
            functions: Vec::new(),
            examples: Vec::new(),
            context: p.context,
            remediation: p.remediation,
            fault: None,
            requested_ordinal: None,
            processes_repaired: None,
            explanations: Vec::new(),
            check: None,
            unit: None,
            values: Vec::new(),
            driver_messages: Vec::new(),
            processes_refused: None,
        };
        match p.detail {
            ProblemDetail::CudaError(d) => {
                j.code = d.code;
                j.result = Some(d.result);
                j.functions = d.functions;
                j.examples = d.examples;
            }
            ProblemDetail::DeviceFault(d) => {
                j.code = d.code;
                j.result = d.result;
                j.functions = d.functions;
                j.fault = Some(d.fault);
                j.requested_ordinal = Some(d.requested_ordinal);
                j.processes_repaired = Some(d.processes_repaired);
                j.explanations = d.explanations;
            }
            ProblemDetail::LaunchFault(d) | ProblemDetail::AllocFault(d) => {
                j.code = d.code;
                j.result = d.result;
                j.functions = d.functions;
                j.check = Some(d.check);
                j.unit = d.unit;
                j.values = d.values;
                j.explanations = d.explanations;
                j.driver_messages = d.driver_messages;
                j.processes_refused = Some(d.processes_refused);
            }
            ProblemDetail::LifetimeFault(d) => {
                j.fault = Some(d.fault);
                j.processes_repaired = Some(d.processes_repaired);
                j.functions = d.functions;
                j.explanations = d.explanations;
            }
            ProblemDetail::StrayContext(d) => {
                j.requested_ordinal = Some(d.device);
                j.explanations = d.explanations;
            }
            _ => {}
        }
        j
    }
}

impl TryFrom<ProblemJson> for Problem {
    type Error = String;

    fn try_from(j: ProblemJson) -> Result<Problem, String> {
        let kind = j.kind;
        let missing = |field: &str| format!("a {} problem without `{field}`", kind.name());
        let call_fault = |j: &mut ProblemJson| -> Result<CallFaultDetail, String> {
            Ok(CallFaultDetail {
                code: j.code,
                result: j.result.take(),
                functions: std::mem::take(&mut j.functions),
                check: j.check.take().ok_or_else(|| missing("check"))?,
                unit: j.unit.take(),
                values: std::mem::take(&mut j.values),
                explanations: std::mem::take(&mut j.explanations),
                driver_messages: std::mem::take(&mut j.driver_messages),
                processes_refused: j
                    .processes_refused
                    .ok_or_else(|| missing("processes_refused"))?,
            })
        };
        let mut j = j;
        let detail = match kind {
            ProblemKind::CudaError => ProblemDetail::CudaError(CudaErrorDetail {
                code: j.code,
                result: j.result.take().ok_or_else(|| missing("result"))?,
                functions: std::mem::take(&mut j.functions),
                examples: std::mem::take(&mut j.examples),
            }),
            ProblemKind::DeviceFault => ProblemDetail::DeviceFault(DeviceFaultDetail {
                code: j.code,
                result: j.result.take(),
                functions: std::mem::take(&mut j.functions),
                fault: j.fault.take().ok_or_else(|| missing("fault"))?,
                requested_ordinal: j
                    .requested_ordinal
                    .ok_or_else(|| missing("requested_ordinal"))?,
                processes_repaired: j
                    .processes_repaired
                    .ok_or_else(|| missing("processes_repaired"))?,
                explanations: std::mem::take(&mut j.explanations),
            }),
            ProblemKind::LaunchFault => ProblemDetail::LaunchFault(call_fault(&mut j)?),
            ProblemKind::AllocFault => ProblemDetail::AllocFault(call_fault(&mut j)?),
            ProblemKind::LifetimeFault => ProblemDetail::LifetimeFault(LifetimeFaultDetail {
                fault: j.fault.take().ok_or_else(|| missing("fault"))?,
                processes_repaired: j
                    .processes_repaired
                    .ok_or_else(|| missing("processes_repaired"))?,
                functions: std::mem::take(&mut j.functions),
                explanations: std::mem::take(&mut j.explanations),
            }),
            ProblemKind::StrayContext => ProblemDetail::StrayContext(StrayContextDetail {
                device: j
                    .requested_ordinal
                    .ok_or_else(|| missing("requested_ordinal"))?,
                explanations: std::mem::take(&mut j.explanations),
            }),
            other => ProblemDetail::plain(other).ok_or_else(|| missing("its detail"))?,
        };
        Ok(Problem {
            rank: j.rank,
            severity: j.severity,
            title: j.title,
            key: j.key,
            count: j.count,
            processes: j.processes,
            hosts: j.hosts,
            context: j.context,
            remediation: j.remediation,
            detail,
        })
    }
}

/// A problem as the JSON report writes it: every field of every kind, `null` or empty where
/// the kind has none (the report's schema, `docs/analyzer.md`).
#[derive(Serialize, Deserialize)]
struct ProblemJson {
    /// 1 for the first (most important) problem.
    rank: u32,
    /// What kind of problem.
    kind: ProblemKind,
    /// How severe.
    severity: Severity,
    /// One line saying what happened.
    title: String,
    /// The problem's identity across runs (what `diff` compares): the kind, then what tells
    /// problems of that kind apart (`cuda_error/CUDA_ERROR_OUT_OF_MEMORY`,
    /// `device_fault/invalid_ordinal/1`, ...).
    key: String,
    /// The CUresult number, for `cuda_error` problems.
    code: Option<u32>,
    /// The CUresult name (or number as a string), for `cuda_error` problems.
    result: Option<String>,
    /// How many times it happened (errors, records, processes, lines: see `title`).
    count: u64,
    /// Processes affected.
    processes: u64,
    /// Host names affected, sorted (`(unknown)` for processes without one).
    hosts: Vec<String>,
    /// Functions involved with their counts, most first (for `cuda_error`).
    functions: Vec<NameCount>,
    /// Argument examples of failing calls, most frequent first (at most 5).
    examples: Vec<ArgExample>,
    /// Facts from the traces that bear on the cause.
    context: Vec<String>,
    /// What to do, most likely fix first.
    remediation: Vec<String>,
    /// The fault kind, for `device_fault` problems (`invalid_ordinal`,
    /// `device_unavailable`, `context_out_of_memory`, ...).
    fault: Option<String>,
    /// The ordinal the programs asked for, for `device_fault` problems.
    requested_ordinal: Option<i32>,
    /// Of `processes`, those where every such fault was repaired by a fallback, for
    /// `device_fault` problems.
    processes_repaired: Option<u64>,
    /// The shim's own explanations (`device_fault`, `launch_fault`, `alloc_fault`
    /// records), distinct, most processes first (at most 5).
    explanations: Vec<String>,
    /// The check that failed, for `launch_fault` and `alloc_fault` problems
    /// (`threads_per_block`, `out_of_memory`, ...).
    check: Option<String>,
    /// The unit of the values' `limit` and `requested` (`threads`, `blocks`, `bytes`), for
    /// `launch_fault` and `alloc_fault` problems whose check has one.
    unit: Option<String>,
    /// The values asked for and the limits broken, for `launch_fault` and `alloc_fault`
    /// problems: distinct, most processes first (at most 10).
    values: Vec<FaultValue>,
    /// The driver's own messages for these failures (`driver_message`), distinct, most
    /// processes first (at most 5).
    driver_messages: Vec<String>,
    /// Of `processes`, those where the shim refused such a call before it reached the
    /// driver (`SEEDANCE_VALIDATE=pre`), for `launch_fault` and `alloc_fault` problems.
    processes_refused: Option<u64>,
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
