//! The fields of the known event kinds that the analyzer uses, read leniently.
//!
//! These mirror `seedance_trace::{SessionStart, ExitSummary}` field for field (names and
//! types), but every field has a default: a trace written before a field existed, or by a
//! shim that left one out, still reads, and fields added later are ignored. The trace
//! crate's own types stay the definition of what the shim writes; a test checks that
//! records built from them read here.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The `session_start` event (see `seedance_trace::SessionStart`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionInfo {
    /// Version of the shim that wrote the trace.
    pub shim_version: String,
    /// `observe` or `fix`.
    pub mode: String,
    /// Executable path.
    pub executable: Option<String>,
    /// Command line.
    pub argv: Vec<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// Driver version (`13000` for CUDA 13.0).
    pub driver_version: Option<i32>,
    /// File libcuda was loaded from.
    pub libcuda_path: Option<String>,
    /// `CUDA_VISIBLE_DEVICES`, `None` when unset.
    pub cuda_visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER`, `None` when unset.
    pub cuda_device_order: Option<String>,
    /// Visible devices by ordinal.
    pub devices: Vec<DeviceEntry>,
}

/// One device of a `session_start` (see `seedance_trace::DeviceInfo`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceEntry {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Name.
    pub name: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Total memory, bytes.
    pub total_mem_bytes: Option<u64>,
}

/// The `exit_summary` event (see `seedance_trace::ExitSummary`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ExitInfo {
    /// Nanoseconds from session start to exit.
    pub duration_ns: u64,
    /// Per function: calls and errors.
    pub functions: BTreeMap<String, FunctionCounts>,
    /// Records the shim could not write.
    pub dropped_records: u64,
    /// Entry points passed through uninstrumented (driver newer than the shim).
    pub procaddr_unmatched: Vec<String>,
}

/// Calls and errors of one function (see `seedance_trace::FunctionStats`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct FunctionCounts {
    /// Calls.
    pub calls: u64,
    /// Errors.
    pub errors: u64,
    /// Errors by CUresult name (or number).
    pub errors_by_result: BTreeMap<String, u64>,
}
