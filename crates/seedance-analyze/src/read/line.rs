//! A parsed trace line: the envelope ([`Head`]), the borrowed `call_failed` fields
//! ([`CallFailedRef`]) and the classification ([`Line`]) that [`crate::read::parse`] and
//! [`crate::read::fast`] produce and [`crate::aggregate`] consumes.

use crate::read::records::{
    AllocFaultInfo, CallFailedRepeatsInfo, DeviceFallbackInfo, DeviceFaultInfo, ExitInfo,
    LaunchFaultInfo, LifetimeFaultInfo, LifetimeRepairInfo, SessionInfo, StrayInfo, TraceCutInfo,
};
use std::borrow::Cow;

/// The envelope fields every record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Schema version.
    pub v: u32,
    /// Sequence number within the process.
    pub seq: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id (0 when absent).
    pub tid: u64,
}

/// A `call_failed` event, borrowing from the line where it can.
#[derive(Debug, Clone)]
pub struct CallFailedRef<'a> {
    /// Exported symbol called.
    pub function: Cow<'a, str>,
    /// CUresult number.
    pub result: u32,
    /// CUresult name as the shim wrote it, if it did.
    pub result_name: Option<Cow<'a, str>>,
    /// The arguments object, unparsed.
    pub args: Option<RawArgs<'a>>,
}

/// The JSON text of a value, checked to be valid JSON, borrowed from the line (what a
/// `&serde_json::value::RawValue` holds, without building one: the fast path of
/// [`parse_line`] validates the text itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawArgs<'a>(pub(crate) &'a str);

impl<'a> RawArgs<'a> {
    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }
}

/// One classified line.
#[derive(Debug)]
pub enum Line<'a> {
    /// Empty or whitespace only.
    Blank,
    /// Not JSON (or not UTF-8): garbage or a cut line.
    Malformed,
    /// Valid JSON, but not a trace record (no envelope or no `event`).
    NotRecord,
    /// A record of a known kind whose fields do not match the schema.
    BadRecord(Head, &'static str),
    /// A `session_start` record.
    SessionStart(Head, Box<SessionInfo>),
    /// A `call_failed` record.
    CallFailed(Head, CallFailedRef<'a>),
    /// An `exit_summary` record.
    ExitSummary(Head, Box<ExitInfo>),
    /// A `device_fault` record (schema 2).
    DeviceFault(Head, Box<DeviceFaultInfo>),
    /// A `device_fallback` record (schema 2).
    DeviceFallback(Head, Box<DeviceFallbackInfo>),
    /// A `launch_fault` record (schema 3).
    LaunchFault(Head, Box<LaunchFaultInfo>),
    /// An `alloc_fault` record (schema 3).
    AllocFault(Head, Box<AllocFaultInfo>),
    /// A `lifetime_fault` record (schema 4).
    LifetimeFault(Head, Box<LifetimeFaultInfo>),
    /// A `lifetime_repair` record (schema 4).
    LifetimeRepair(Head, Box<LifetimeRepairInfo>),
    /// A `stray_context` record (schema 5).
    StrayContext(Head, Box<StrayInfo>),
    /// A `host_hazard` record (schema 5): read with the fields it shares with a
    /// `lifetime_fault` (`function`, `kind`, `repaired`, `explanation`).
    HostHazard(Head, Box<LifetimeFaultInfo>),
    /// A `call_failed_repeats` record (schema 5).
    CallFailedRepeats(Head, Box<CallFailedRepeatsInfo>),
    /// A `trace_cut` record: the trace's file refused a write.
    TraceCut(Head, Box<TraceCutInfo>),
    /// A record of a kind this analyzer does not know (a later schema version).
    Unknown(Head, Cow<'a, str>),
}

impl Line<'_> {
    /// The envelope, for lines that are trace records.
    pub fn head(&self) -> Option<Head> {
        match self {
            Line::BadRecord(h, _)
            | Line::SessionStart(h, _)
            | Line::CallFailed(h, _)
            | Line::ExitSummary(h, _)
            | Line::DeviceFault(h, _)
            | Line::DeviceFallback(h, _)
            | Line::LaunchFault(h, _)
            | Line::AllocFault(h, _)
            | Line::LifetimeFault(h, _)
            | Line::LifetimeRepair(h, _)
            | Line::StrayContext(h, _)
            | Line::HostHazard(h, _)
            | Line::CallFailedRepeats(h, _)
            | Line::TraceCut(h, _)
            | Line::Unknown(h, _) => Some(*h),
            _ => None,
        }
    }
}

/// Kinds of event this analyzer knows.
pub const KNOWN_KINDS: [&str; 13] = [
    "session_start",
    "call_failed",
    "exit_summary",
    "device_fault",
    "device_fallback",
    "launch_fault",
    "alloc_fault",
    "lifetime_fault",
    "lifetime_repair",
    "stray_context",
    "host_hazard",
    "call_failed_repeats",
    "trace_cut",
];
