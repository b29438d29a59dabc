//! The fields of the known event kinds that the analyzer uses, read leniently.
//!
//! These mirror `seedance_trace::{SessionStart, ExitSummary, DeviceFault, DeviceFallback,
//! LaunchFault, AllocFault, LifetimeFault, LifetimeRepair}` (and the `seedance_topology::Topology` of a schema-2 session
//! start) field for field (names and types), but every field has a default: a trace written
//! before a field existed, or by a shim that left one out, still reads, and fields added
//! later are ignored. The exceptions are the fields without which the record says nothing:
//! the ordinals of `device_fault` and `device_fallback`, and the function, result and check
//! of `launch_fault` and `alloc_fault`, the function and kind of `lifetime_fault` and
//! `lifetime_repair`; a record lacking them is malformed. The trace
//! crate's own types stay the definition of what the shim writes; a test checks that records
//! built from them read here.

use serde::{Deserialize, Deserializer};
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
    /// The joined topology (schema 2); `None` when absent or not readable (a topology of
    /// the wrong shape is dropped, the rest of the session start is kept).
    #[serde(deserialize_with = "lenient")]
    pub topology: Option<TopologyInfo>,
}

/// Reads an optional value, giving `None` instead of an error when it has the wrong shape.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

/// The joined topology of a schema-2 `session_start` (see `seedance_topology::Topology`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TopologyInfo {
    /// Visible devices by CUDA ordinal, with their physical identity.
    pub devices: Vec<TopologyDevice>,
    /// What `CUDA_VISIBLE_DEVICES` did.
    pub visibility: VisibilityInfo,
    /// `CUDA_DEVICE_ORDER` in force: `FASTEST_FIRST` or `PCI_BUS_ID`.
    pub device_order: Option<String>,
    /// Warning when CUDA's numbering differs from nvidia-smi's in a way that matters, or
    /// `CUDA_DEVICE_ORDER` has a value the driver does not know.
    pub order_warning: Option<String>,
    /// Whether NVML contributed.
    pub nvml: NvmlInfo,
}

/// One device of the topology (see `seedance_topology::VisibleDevice`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TopologyDevice {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Product name.
    pub name: Option<String>,
    /// PCI bus id, normalized.
    pub pci_bus_id: Option<String>,
    /// UUID, `GPU-...`.
    pub uuid: Option<String>,
    /// nvidia-smi's index; `None` without NVML.
    pub nvml_index: Option<u32>,
    /// The index an integer `CUDA_VISIBLE_DEVICES` entry uses for this device.
    pub physical_index: Option<u32>,
    /// Total memory, bytes.
    pub total_mem_bytes: Option<u64>,
    /// Free memory from NVML, bytes.
    pub free_mem_bytes: Option<u64>,
    /// Compute mode as the trace spells it (`default`, `exclusive_thread`, `prohibited`,
    /// `exclusive_process`), or the number of an unknown mode (`{"unknown": 7}` -> `7`).
    #[serde(deserialize_with = "compute_mode")]
    pub compute_mode: Option<String>,
    /// Processes with a compute context on the device, from NVML.
    pub busy_processes: Option<u32>,
}

fn compute_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(match v {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Object(m)) => m.get("unknown").map(|n| match n {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// What `CUDA_VISIBLE_DEVICES` did (see `seedance_topology::Visibility`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct VisibilityInfo {
    /// `CUDA_VISIBLE_DEVICES` as found.
    pub cuda_visible_devices: Option<String>,
    /// Physical devices the entries were checked against (`None`: inferred from the
    /// driver's count).
    pub physical_count: Option<u32>,
    /// The first invalid entry, where the driver stopped reading the variable.
    pub stopped_at: Option<StopInfo>,
}

/// Where the driver stopped reading `CUDA_VISIBLE_DEVICES` (see `seedance_topology::Stop`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StopInfo {
    /// Position of the invalid entry, from 1.
    pub position: u64,
    /// The entry.
    pub entry: String,
    /// Why it is invalid, as a predicate (`is out of range for 2 GPUs`).
    pub reason: String,
}

/// Whether NVML was available (see `seedance_topology::NvmlStatus`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NvmlInfo {
    /// NVML was loaded and initialized.
    pub present: bool,
    /// Why not, when absent.
    pub reason: Option<String>,
}

/// The `device_fault` event (see `seedance_trace::DeviceFault`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct DeviceFaultInfo {
    /// Exported symbol of the call.
    #[serde(default)]
    pub function: String,
    /// The ordinal the program asked for (required).
    pub requested_ordinal: i32,
    /// The result, as a number.
    #[serde(default)]
    pub result: u32,
    /// The result's name, when known.
    #[serde(default)]
    pub result_name: Option<String>,
    /// `invalid_ordinal`, `device_unavailable`, `context_out_of_memory`, `excluded`, ...
    /// (required).
    pub fault: String,
    /// Devices visible to the process.
    #[serde(default)]
    pub visible_devices: u32,
    /// The shim's explanation, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
}

/// The `device_fallback` event (see `seedance_trace::DeviceFallback`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct DeviceFallbackInfo {
    /// Exported symbol of the repaired call.
    #[serde(default)]
    pub function: String,
    /// The ordinal the program asked for (required).
    pub requested_ordinal: i32,
    /// The ordinal the call was sent to (required).
    pub chosen_ordinal: i32,
    /// PCI bus id of the chosen device.
    #[serde(default)]
    pub chosen_pci_bus_id: Option<String>,
    /// Why the requested device could not be used.
    #[serde(default)]
    pub reason: String,
    /// What the repaired call returned (0 = success).
    #[serde(default)]
    pub result: u32,
    /// The shim's announcement, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
}

/// The `launch_fault` event (schema 3, see `seedance_trace::LaunchFault`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LaunchFaultInfo {
    /// Exported symbol of the call (required).
    pub function: String,
    /// What the program got, as a number (required).
    pub result: u32,
    /// The result's name, when known.
    #[serde(default)]
    pub result_name: Option<String>,
    /// Which limit: `block_dim`, `threads_per_block`, `func_max_threads`, `launch_bounds`,
    /// `grid_dim`, `zero_dim`, `shared_memory`, `cluster_dim`, `cooperative_grid`,
    /// `no_context`, `stream_context`, `destroyed_context`, `unknown`, ... (required).
    pub check: String,
    /// The limit in force, in the check's unit (threads, blocks or bytes).
    #[serde(default)]
    pub limit: Option<u64>,
    /// The value the launch asked for, in the same unit.
    #[serde(default)]
    pub requested: Option<u64>,
    /// Ordinal of the current context's device.
    #[serde(default)]
    pub device: Option<i32>,
    /// Grid dimensions, blocks (`None` when absent or not three numbers).
    #[serde(default, deserialize_with = "lenient")]
    pub grid: Option<[u32; 3]>,
    /// Block dimensions, threads (`None` when absent or not three numbers).
    #[serde(default, deserialize_with = "lenient")]
    pub block: Option<[u32; 3]>,
    /// Dynamic shared memory per block, bytes.
    #[serde(default)]
    pub shared_mem_bytes: Option<u32>,
    /// The shim refused the launch before the driver saw it (`SEEDANCE_VALIDATE=pre`).
    #[serde(default)]
    pub refused_before_driver: bool,
    /// The shim's explanation, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
    /// The driver's own message for the failure, when it logged one.
    #[serde(default)]
    pub driver_message: Option<String>,
}

/// The `alloc_fault` event (schema 3, see `seedance_trace::AllocFault`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AllocFaultInfo {
    /// Exported symbol of the call (required).
    pub function: String,
    /// What the program got, as a number (required).
    pub result: u32,
    /// The result's name, when known.
    #[serde(default)]
    pub result_name: Option<String>,
    /// `zero_size`, `exceeds_total`, `granularity`, `out_of_memory`, `unknown`, ...
    /// (required).
    pub check: String,
    /// Bytes requested.
    #[serde(default)]
    pub requested_bytes: Option<u64>,
    /// The same size read as signed (negative when a negative size wrapped).
    #[serde(default)]
    pub requested_signed: Option<i64>,
    /// The limit broken, bytes: total memory, granularity or free memory.
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// Ordinal of the device (`None` for pinned host memory).
    #[serde(default)]
    pub device: Option<i32>,
    /// Free bytes at the moment of the failure.
    #[serde(default)]
    pub free_bytes: Option<u64>,
    /// Total bytes of the device (host: `MemTotal`).
    #[serde(default)]
    pub total_bytes: Option<u64>,
    /// Bytes in the process's own live allocations on the device.
    #[serde(default)]
    pub process_live_bytes: Option<u64>,
    /// Number of those allocations.
    #[serde(default)]
    pub process_live_allocations: Option<u64>,
    /// Other visible devices with room (NVML); `None` when unknown or not readable.
    #[serde(default, deserialize_with = "lenient")]
    pub other_devices_with_room: Option<Vec<DeviceRoomInfo>>,
    /// The shim refused the allocation before the driver saw it (`SEEDANCE_VALIDATE=pre`).
    #[serde(default)]
    pub refused_before_driver: bool,
    /// The shim's explanation, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
    /// The driver's own message for the failure, when it logged one.
    #[serde(default)]
    pub driver_message: Option<String>,
    /// The processes NVML listed on the device (schema 5); `None` when unknown.
    #[serde(default, deserialize_with = "lenient")]
    pub processes_on_device: Option<Vec<DeviceProcessInfo>>,
}

/// A process NVML listed on a device at an out-of-memory failure (schema 5, see
/// `seedance_trace::DeviceProcess`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceProcessInfo {
    /// Pid as NVML reports it (the host's).
    pub pid: u32,
    /// Used memory, bytes, when NVML reports it.
    pub used_bytes: Option<u64>,
    /// The failing process itself.
    pub this_process: bool,
}

/// A device with room for a failed allocation (see `seedance_trace::DeviceRoom`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceRoomInfo {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Free memory, bytes.
    pub free_bytes: u64,
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
    /// Calls repaired in fix mode, by kind (schema 2).
    pub repairs: BTreeMap<String, u64>,
    /// Fallback choices at exit: requested ordinal (string) -> chosen ordinal (schema 2).
    pub fallbacks: BTreeMap<String, i32>,
    /// Contexts alive at exit (schema 4; empty when absent or not readable).
    #[serde(deserialize_with = "lenient_vec")]
    pub live_contexts: Vec<LiveContextInfo>,
    /// Memory never freed, per context (schema 4).
    #[serde(deserialize_with = "lenient_vec")]
    pub leaked_allocations: Vec<LeakedAllocationsInfo>,
    /// Streams with work never synchronised (schema 4).
    #[serde(deserialize_with = "lenient_vec")]
    pub unsynchronized_streams: Vec<UnsynchronizedStreamInfo>,
    /// Calls that got `CUDA_ERROR_DEINITIALIZED`, by function (schema 4).
    #[serde(deserialize_with = "lenient_map")]
    pub calls_after_deinit: BTreeMap<String, u64>,
    /// What the process did on each device it made a context on (schema 5).
    #[serde(deserialize_with = "lenient_vec")]
    pub device_use: Vec<DeviceUseInfo>,
    /// The stray contexts it reported, with the final figures (schema 5).
    #[serde(deserialize_with = "lenient_vec")]
    pub stray_contexts: Vec<StrayInfo>,
    /// The runtime's entry-point look-ups (schema 5; `None` when absent or not readable).
    #[serde(deserialize_with = "lenient")]
    pub runtime_probes: Option<RuntimeProbesInfo>,
    /// CUDA libraries loaded at exit (schema 5).
    #[serde(deserialize_with = "lenient_vec")]
    pub cuda_libraries: Vec<CudaLibraryInfo>,
}

/// What a process did on one device (schema 5, see `seedance_trace::DeviceUse`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceUseInfo {
    /// CUDA ordinal.
    pub device: i32,
    /// Contexts made there.
    pub contexts: u32,
    /// Kernel launches there.
    pub launches: u64,
    /// Copies and other stream operations there.
    pub other_work: u64,
    /// Live device memory there, bytes (largest seen).
    pub bytes: u64,
    /// Whether the process works on the device.
    pub worked: bool,
    /// NVML's used memory of the process there, when known.
    pub nvml_used_bytes: Option<u64>,
}

/// The `stray_context` event and the exit summary's `stray_contexts` entries (schema 5,
/// see `seedance_trace::StrayContext`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StrayInfo {
    /// CUDA ordinal of the stray context's device.
    pub device: i32,
    /// The call that made it.
    pub function: String,
    /// `context_end`, `exit`, `redirected` or `refused`.
    pub decided: String,
    /// What the process did there.
    pub there: DeviceUseInfo,
    /// The devices the process works on.
    #[serde(deserialize_with = "lenient_vec")]
    pub working_devices: Vec<DeviceUseInfo>,
    /// NVML's used memory of the process there, bytes, when known.
    pub context_bytes: Option<u64>,
    /// The shim's explanation.
    pub explanation: String,
}

/// The runtime's `cuGetProcAddress` look-ups (schema 5, see `seedance_trace::RuntimeProbes`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct RuntimeProbesInfo {
    /// Look-ups made.
    pub lookups: u64,
    /// Highest `cudaVersion` asked for.
    pub max_cuda_version: Option<i32>,
    /// Look-ups answered version-not-sufficient.
    pub version_not_sufficient: u64,
    /// Other look-ups answered not-found.
    pub symbol_not_found: u64,
    /// Look-ups above the driver's version answered `CUDA_ERROR_INVALID_VALUE`.
    pub above_driver_version: u64,
    /// Some of the symbols answered version-not-sufficient.
    #[serde(deserialize_with = "lenient_vec")]
    pub unavailable: Vec<String>,
}

/// A CUDA library loaded at exit (schema 5, see `seedance_trace::CudaLibrary`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CudaLibraryInfo {
    /// `cudart`, `cublas`, ...
    pub name: String,
    /// The mapped file.
    pub path: String,
    /// The version in the file name.
    pub version: Option<String>,
}

/// Reads a list, giving an empty one instead of an error when it has the wrong shape.
fn lenient_vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    Ok(lenient(d)?.unwrap_or_default())
}

/// Reads a map of counts, giving an empty one instead of an error when it has the wrong
/// shape.
fn lenient_map<'de, D>(d: D) -> Result<BTreeMap<String, u64>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(lenient(d)?.unwrap_or_default())
}

/// A context alive at exit (schema 4, see `seedance_trace::LiveContext`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct LiveContextInfo {
    /// The context handle (hex).
    pub context: String,
    /// Its device, when known.
    pub device: Option<i32>,
    /// A device's primary context.
    pub primary: bool,
    /// 1 + earlier contexts with the same handle.
    pub generation: u32,
    /// Retains not released (1 for a created context).
    pub retained: u32,
}

/// Memory never freed, per context (schema 4, see `seedance_trace::LeakedAllocations`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct LeakedAllocationsInfo {
    /// The device (`None` for pinned host memory or when unknown).
    pub device: Option<i32>,
    /// The owning context (hex).
    pub context: Option<String>,
    /// The owning context is a primary context still retained at exit (not a leak: the
    /// runtime keeps those until after the driver shut down).
    pub primary_retained: bool,
    /// Pinned host memory.
    pub host: bool,
    /// Allocations.
    pub allocations: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A stream with work never synchronised at exit (schema 4, see
/// `seedance_trace::UnsynchronizedStream`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UnsynchronizedStreamInfo {
    /// The owning context (hex).
    pub context: Option<String>,
    /// The owning context is a primary context still retained at exit.
    pub primary_retained: bool,
    /// The stream handle (hex), `None` for a default stream.
    pub stream: Option<String>,
    /// For a default stream: `legacy` or `per_thread`.
    pub default_stream: Option<String>,
    /// Launches never synchronised.
    pub launches: u64,
    /// Asynchronous copies never synchronised.
    pub copies: u64,
    /// Other stream operations (asynchronous memsets, graph launches, host functions) never
    /// synchronised; 0 in traces of shims that did not count them.
    pub ops: u64,
}

/// The `lifetime_fault` event (schema 4, see `seedance_trace::LifetimeFault`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LifetimeFaultInfo {
    /// Exported symbol of the call (required).
    pub function: String,
    /// `pending_work_at_destroy`, `use_after_destroy`, `pinned_memory_in_use`,
    /// `device_memory_in_use`, ... (required).
    pub kind: String,
    /// What the program got; `None` when found before the call reached the driver.
    #[serde(default)]
    pub result: Option<u32>,
    /// The result's name, when known.
    #[serde(default)]
    pub result_name: Option<String>,
    /// The context concerned (hex).
    #[serde(default)]
    pub context: Option<String>,
    /// The device of that context.
    #[serde(default)]
    pub device: Option<i32>,
    /// `context`, `stream`, `event`, `device_memory` or `pinned_memory`.
    #[serde(default)]
    pub handle_kind: Option<String>,
    /// The fix mode repaired it (a `lifetime_repair` follows).
    #[serde(default)]
    pub repaired: bool,
    /// The shim's explanation, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
}

/// The `trace_cut` event (see `seedance_trace::TraceCut`): the trace's file refused a
/// write; nothing after it was written.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TraceCutInfo {
    /// The refused write's error, as the system gave it.
    pub error: String,
    /// Its `errno` (28: `ENOSPC`, 27: `EFBIG`).
    #[serde(default)]
    pub os_error: Option<i32>,
}

/// The `call_failed_repeats` event (schema 5, see `seedance_trace::CallFailedRepeats`):
/// `count` more failures of one kind, past the `call_failed` records written of it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CallFailedRepeatsInfo {
    /// Exported symbol called (required).
    pub function: String,
    /// CUresult number (required).
    pub result: u32,
    /// CUresult name as the shim wrote it, if it did.
    #[serde(default)]
    pub result_name: Option<String>,
    /// Failures counted here (required).
    pub count: u64,
    /// When the last of them failed.
    #[serde(default)]
    pub last_ts_ns: u64,
    /// The last one's arguments.
    #[serde(default)]
    pub last_args: Option<Box<serde_json::value::RawValue>>,
}

/// The `lifetime_repair` event (schema 4, see `seedance_trace::LifetimeRepair`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LifetimeRepairInfo {
    /// Exported symbol of the call repaired (required).
    pub function: String,
    /// `synchronize_before_destroy`, `synchronize_before_free`, `already_released`,
    /// `already_complete`, ... (required).
    pub kind: String,
    /// The context concerned (hex).
    #[serde(default)]
    pub context: Option<String>,
    /// What the program got (0 = success).
    #[serde(default)]
    pub result: u32,
    /// The shim's announcement, as printed on stderr.
    #[serde(default)]
    pub explanation: String,
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
    /// Of those, the failures the program recovered from (schema 5 traces of shims that
    /// defer them; absent otherwise).
    pub recovered_by_result: BTreeMap<String, u64>,
}
