//! Event types of the trace, version [`SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version written in every record's `v` field.
///
/// History: 1 = session_start, call_failed, exit_summary. 2 = device_fault, device_fallback,
/// session_start.topology, exit_summary.repairs and .fallbacks.
pub const SCHEMA_VERSION: u32 = 2;

/// One line of the trace: the envelope fields and one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Schema version of this record ([`SCHEMA_VERSION`] when written by this build).
    pub v: u32,
    /// Sequence number of the record within its process, from 0, without gaps unless
    /// records were dropped (the exit summary counts those).
    pub seq: u64,
    /// Wall-clock time of the record, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Kernel thread id (`gettid`) of the thread the event happened on.
    pub tid: u64,
    /// The event itself; its kind is the `event` field.
    #[serde(flatten)]
    pub event: Event,
}

/// Every kind of event. Serialized with an `event` field naming the kind in snake_case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// First record of every trace: who the process is and what the driver shows (boxed:
    /// it is written once and is much larger than the other events).
    SessionStart(Box<SessionStart>),
    /// A hooked driver call returned something other than `CUDA_SUCCESS`.
    CallFailed(CallFailed),
    /// Last record of a trace at normal exit: per-function call and error counts.
    ExitSummary(ExitSummary),
    /// A request for a device the process cannot have, explained (schema 2).
    DeviceFault(DeviceFault),
    /// A request moved to another device by the fix mode (schema 2).
    DeviceFallback(DeviceFallback),
}

/// The `device_fault` event: a call asked for a device it cannot have. Written once per
/// distinct (function, requested ordinal, result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFault {
    /// Exported symbol of the call (`cuDeviceGet`, `cudaSetDevice`, `cuCtxCreate_v4`, ...).
    pub function: String,
    /// The ordinal the program asked for (for context creation: the ordinal of the
    /// `CUdevice` it passed).
    pub requested_ordinal: i32,
    /// What the driver (or runtime) returned, as a number.
    pub result: u32,
    /// The CUresult name, when known.
    pub result_name: Option<String>,
    /// `invalid_ordinal`, `device_unavailable`, `context_out_of_memory` or `excluded`.
    pub fault: String,
    /// Devices visible to the process (after `CUDA_VISIBLE_DEVICES`).
    pub visible_devices: u32,
    /// The explanation, as printed on stderr.
    pub explanation: String,
}

/// The `device_fallback` event: in fix mode, a request was sent to another device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFallback {
    /// Exported symbol of the call that was repaired.
    pub function: String,
    /// The ordinal the program asked for.
    pub requested_ordinal: i32,
    /// The ordinal the call was sent to instead.
    pub chosen_ordinal: i32,
    /// PCI bus id of the chosen device, when known.
    pub chosen_pci_bus_id: Option<String>,
    /// Why the requested device could not be used (same words as the device_fault).
    pub reason: String,
    /// What the repaired call returned (0 = success).
    pub result: u32,
    /// The announcement, as printed on stderr.
    pub explanation: String,
}

/// The `session_start` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStart {
    /// Version of libseedance_fix that wrote the trace (Cargo package version).
    pub shim_version: String,
    /// Mode in force: `observe` or `fix` (`off` writes no trace).
    pub mode: String,
    /// Path of the executable (`/proc/self/exe`), if readable.
    pub executable: Option<String>,
    /// Command line, arguments included (`/proc/self/cmdline`), if readable.
    pub argv: Vec<String>,
    /// Host name (`uname`), for traces gathered from a fleet.
    pub hostname: Option<String>,
    /// Driver version as `cuDriverGetVersion` reports it (e.g. 13000 for CUDA 13.0), if the
    /// call succeeded.
    pub driver_version: Option<i32>,
    /// File the real driver was loaded from (from `dladdr`), if known.
    pub libcuda_path: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` as set in the environment (`None` when unset).
    pub cuda_visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER` as set in the environment (`None` when unset).
    pub cuda_device_order: Option<String>,
    /// Every device the driver reports, by CUDA ordinal.
    pub devices: Vec<DeviceInfo>,
    /// The joined topology: each visible device with its physical identity (NVML index,
    /// UUID, PCI bus id, memory, compute mode), what `CUDA_VISIBLE_DEVICES` did to the
    /// numbering, the device order, and whether NVML was present (schema 2; `None` when the
    /// driver was not initialised).
    #[serde(default)]
    pub topology: Option<seedance_topology::Topology>,
}

/// One visible device, as the driver describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// CUDA ordinal (after CUDA_VISIBLE_DEVICES renumbering).
    pub ordinal: i32,
    /// Marketing name (`cuDeviceGetName`), e.g. `NVIDIA H200`.
    pub name: Option<String>,
    /// PCI bus id (`cuDeviceGetPCIBusId`), e.g. `0000:1a:00.0`.
    pub pci_bus_id: Option<String>,
    /// Total device memory in bytes (`cuDeviceTotalMem_v2`).
    pub total_mem_bytes: Option<u64>,
}

/// The `call_failed` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFailed {
    /// The exported symbol of the ABI variant called, e.g. `cuMemAlloc_v2`,
    /// `cuLaunchKernel_ptsz`.
    pub function: String,
    /// The CUresult returned, as a number.
    pub result: u32,
    /// The CUresult's `cuda.h` name, `None` for codes newer than the shim's table.
    pub result_name: Option<String>,
    /// The arguments that matter, by their `cuda.h` parameter names. Integers are numbers;
    /// pointers and handles are `0x`-prefixed hex strings (never the memory they point to).
    pub args: BTreeMap<String, serde_json::Value>,
}

/// The `exit_summary` event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExitSummary {
    /// Time from the session start to this record, nanoseconds.
    pub duration_ns: u64,
    /// Per exported symbol (ABI variant): calls and errors. Functions never called are
    /// left out.
    pub functions: BTreeMap<String, FunctionStats>,
    /// Records that could not be written (writer queue full or I/O error), counted at the
    /// moment this summary was built.
    pub dropped_records: u64,
    /// Base names for which the shim hooks some ABI variant but `cuGetProcAddress` returned
    /// a pointer matching none of them, so the call was passed through uninstrumented.
    /// Empty on a healthy run; non-empty means a driver newer than the shim's table.
    #[serde(default)]
    pub procaddr_unmatched: Vec<String>,
    /// Repairs made in fix mode, by kind (`device_fallback`), with how many calls each
    /// kind repaired (schema 2).
    #[serde(default)]
    pub repairs: BTreeMap<String, u64>,
    /// Fallback choices in force at exit: requested ordinal (as a string key) -> chosen
    /// ordinal (schema 2).
    #[serde(default)]
    pub fallbacks: BTreeMap<String, i32>,
}

/// Call statistics of one function, in the exit summary.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionStats {
    /// Calls that reached the shim's wrapper.
    pub calls: u64,
    /// Calls that returned something other than `CUDA_SUCCESS`.
    pub errors: u64,
    /// Errors by CUresult name (or the number, for codes the table lacks).
    pub errors_by_result: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        let mut args = BTreeMap::new();
        args.insert("bytesize".to_string(), serde_json::json!(0));
        Record {
            v: SCHEMA_VERSION,
            seq: 3,
            ts_ns: 1_700_000_000_000_000_000,
            pid: 42,
            tid: 43,
            event: Event::CallFailed(CallFailed {
                function: "cuMemAlloc_v2".into(),
                result: 1,
                result_name: Some("CUDA_ERROR_INVALID_VALUE".into()),
                args,
            }),
        }
    }

    #[test]
    fn wire_format_is_flat_with_event_tag() {
        let line = serde_json::to_string(&sample()).unwrap();
        assert_eq!(
            line,
            r#"{"v":2,"seq":3,"ts_ns":1700000000000000000,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","args":{"bytesize":0}}"#
        );
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
