//! Event types of the trace, version [`SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version written in every record's `v` field.
///
/// History: 1 = session_start, call_failed, exit_summary. 2 = device_fault, device_fallback,
/// session_start.topology, exit_summary.repairs and .fallbacks. 3 = launch_fault,
/// alloc_fault. 4 = lifetime_fault, lifetime_repair, exit_summary.live_contexts,
/// .leaked_allocations, .unsynchronized_streams and .calls_after_deinit. 5 =
/// exit_summary.device_questions; stray_context, exit_summary.device_use and
/// .stray_contexts, alloc_fault.processes_on_device; host_hazard; call_failed_repeats,
/// exit_summary.records_over_limit.
pub const SCHEMA_VERSION: u32 = 5;

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
    /// A failed (or refused) kernel launch, explained (schema 3).
    LaunchFault(LaunchFault),
    /// A failed (or refused) allocation, explained (schema 3).
    AllocFault(AllocFault),
    /// A context, stream, event or memory lifetime hazard, explained (schema 4).
    LifetimeFault(LifetimeFault),
    /// A lifetime hazard repaired by the fix mode (schema 4).
    LifetimeRepair(LifetimeRepair),
    /// A context on a device the process does nothing on while it works on another, or the
    /// opt-in repair of one (schema 5).
    StrayContext(StrayContext),
    /// Two asynchronous copies racing on pinned host memory from unordered streams
    /// (schema 5).
    HostHazard(HostHazard),
    /// Failures of one kind past the first [`REPEAT_RECORDS`] `call_failed` records of it,
    /// counted instead of written one by one; written at exit, before `exit_summary`
    /// (schema 5).
    CallFailedRepeats(CallFailedRepeats),
    /// The trace's file refused a write (disk full, a file size limit): nothing after this
    /// record was written. Written by the trace writer itself, where the file still has
    /// room for it (schema 5, later builds).
    TraceCut(TraceCut),
}

/// The `trace_cut` event: why the trace ends here. Its `tid` is 0 (the trace writer's own
/// record, on no thread of the program's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceCut {
    /// The error of the refused write, as the system gave it (`No space left on device
    /// (os error 28)`).
    pub error: String,
    /// Its `errno`, when it has one (28: `ENOSPC`; 27: `EFBIG`, a file size limit).
    pub os_error: Option<i32>,
}

/// What a process did on one device, summed over its contexts there (schema 5).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceUse {
    /// CUDA ordinal.
    pub device: i32,
    /// Contexts the process made there, alive or ended.
    pub contexts: u32,
    /// Kernel launches counted there.
    pub launches: u64,
    /// Asynchronous copies and other stream operations counted there.
    pub other_work: u64,
    /// Bytes of the process's live device allocations there (the largest figure the shim
    /// saw when it looked: at context ends, repairs and exit).
    pub bytes: u64,
    /// Number of those allocations.
    pub allocations: u64,
    /// Whether the process works on the device (a launch, a copy or other stream operation,
    /// or more than 2 MiB of memory).
    pub worked: bool,
    /// NVML's used memory of this process on the device, bytes, when NVML listed it (read
    /// only when a stray context was found).
    #[serde(default)]
    pub nvml_used_bytes: Option<u64>,
}

/// The `stray_context` event (schema 5): written once per device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrayContext {
    /// CUDA ordinal of the stray context's device.
    pub device: i32,
    /// The call that made the context (`cuDevicePrimaryCtxRetain`, `cuCtxCreate_v2`, ...).
    pub function: String,
    /// Kernel thread id of that call (not `tid`: the envelope has that field, the thread
    /// the record was written on).
    pub creating_tid: u64,
    /// `context_end` (found when the context ended), `exit` (found at exit), `redirected`
    /// or `refused` (the opt-in repair, `SEEDANCE_STRAY_CONTEXT`).
    pub decided: String,
    /// For `redirected`: the device whose primary context was retained instead.
    #[serde(default)]
    pub redirected_to: Option<i32>,
    /// What the process did on the device.
    pub there: DeviceUse,
    /// The devices it works on.
    pub working_devices: Vec<DeviceUse>,
    /// NVML's used memory of this process on the device, bytes; `None` when NVML is absent
    /// or does not list the process (another PID namespace).
    pub context_bytes: Option<u64>,
    /// The explanation, as printed on stderr (without the `seedance: ` prefix).
    pub explanation: String,
}

/// One process NVML lists on a device, in `alloc_fault` (schema 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceProcess {
    /// Process id as NVML reports it (the host's PID namespace).
    pub pid: u32,
    /// Used device memory, bytes; `None` when NVML does not report it.
    pub used_bytes: Option<u64>,
    /// Whether it is the failing process itself (its pid matched).
    pub this_process: bool,
}

/// How many `call_failed` records of one kind (same function, result and argument
/// names) are written one by one; the later ones are counted in one
/// [`CallFailedRepeats`] record at exit.
pub const REPEAT_RECORDS: u64 = 10;

/// The `call_failed_repeats` event (schema 5): a failure that kept repeating. Its first
/// [`REPEAT_RECORDS`] occurrences are `call_failed` records; this counts the rest and keeps
/// the first and last of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFailedRepeats {
    /// The exported symbol, as in `call_failed`.
    pub function: String,
    /// The CUresult returned, as a number.
    pub result: u32,
    /// The CUresult's `cuda.h` name, as in `call_failed`.
    pub result_name: Option<String>,
    /// Calls of this kind not written as `call_failed` records (after the first
    /// [`REPEAT_RECORDS`]).
    pub count: u64,
    /// When the first of them failed, nanoseconds since the Unix epoch.
    pub first_ts_ns: u64,
    /// When the last of them failed.
    pub last_ts_ns: u64,
    /// Thread id of the last of them.
    pub last_tid: u64,
    /// Arguments of the first of them, as `call_failed.args`.
    pub first_args: BTreeMap<String, serde_json::Value>,
    /// Arguments of the last of them.
    pub last_args: BTreeMap<String, serde_json::Value>,
}

/// Where and when a lifetime call happened (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifetimeSite {
    /// Exported symbol of the call (`cuCtxCreate_v2`, `cuStreamCreate`, ...).
    pub function: String,
    /// Kernel thread id of the caller.
    pub tid: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Sequence number among the lifetime calls the shim recorded in the process, from 1.
    pub seq: u64,
}

/// How and where a context ended (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextEnd {
    /// `destroyed` (`cuCtxDestroy`), `reset` (`cuDevicePrimaryCtxReset`) or `released` (the
    /// last `cuDevicePrimaryCtxRelease`).
    pub how: String,
    /// The call that ended it.
    pub site: LifetimeSite,
    /// Launches still unfinished when it ended (lost); 0 when everything was synchronised.
    pub lost_launches: u64,
    /// Asynchronous copies still unfinished when it ended (lost).
    pub lost_copies: u64,
    /// Other stream operations (asynchronous memsets, graph launches, host functions)
    /// still unfinished when it ended (lost). Added during schema 4: 0 when absent.
    #[serde(default)]
    pub lost_ops: u64,
}

/// Work pending on one stream (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPending {
    /// The stream handle (hex), `None` for a default stream.
    pub stream: Option<String>,
    /// For a default stream: `legacy` or `per_thread`.
    pub default_stream: Option<String>,
    /// Kernel launches submitted since the stream was last synchronised.
    pub launches: u64,
    /// Asynchronous copies submitted since then.
    pub copies: u64,
    /// Other stream operations (asynchronous memsets, graph launches, host functions)
    /// submitted since then. Added during schema 4: 0 when absent.
    #[serde(default)]
    pub ops: u64,
    /// Where the stream was created, when the shim saw it.
    pub created: Option<LifetimeSite>,
}

/// A range of memory (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRange {
    /// First byte (hex).
    pub address: String,
    /// Length, bytes.
    pub bytes: u64,
}

/// The `lifetime_fault` event: a context, stream, event or memory lifetime hazard. Written
/// once per distinct (function, kind, context).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifetimeFault {
    /// Exported symbol of the call (`cuCtxDestroy_v2`, `cuStreamSynchronize`,
    /// `cuMemFreeHost`, ...).
    pub function: String,
    /// `pending_work_at_destroy`, `use_after_destroy`, `pinned_memory_in_use` or
    /// `device_memory_in_use`.
    pub kind: String,
    /// What the program got, as a number; `None` when the hazard was found before the call
    /// reached the driver (a destroy or free with pending work).
    pub result: Option<u32>,
    /// The CUresult name, when known.
    pub result_name: Option<String>,
    /// The context concerned (hex).
    pub context: Option<String>,
    /// The `CUdevice` of that context, when known.
    pub device: Option<i32>,
    /// The context's generation: 1 + earlier contexts the driver gave the same handle.
    pub generation: Option<u32>,
    /// The handle the call used (hex), for `use_after_destroy`.
    pub handle: Option<String>,
    /// `context`, `stream`, `event`, `device_memory` or `pinned_memory`.
    pub handle_kind: Option<String>,
    /// Where that handle was created, when the shim saw it.
    pub created: Option<LifetimeSite>,
    /// How and where the context ended, for `use_after_destroy`.
    pub ended: Option<ContextEnd>,
    /// Streams with unfinished work (`pending_work_at_destroy`, `*_memory_in_use`).
    pub streams: Vec<StreamPending>,
    /// The memory freed, for `*_memory_in_use`.
    pub range: Option<MemoryRange>,
    /// `true` when the fix mode repaired it (a `lifetime_repair` follows).
    pub repaired: bool,
    /// The explanation, as printed on stderr (after `seedance: <function>: `).
    pub explanation: String,
}

/// The `lifetime_repair` event: what the fix mode did about a lifetime hazard. Written once
/// per distinct (function, kind); every repair is counted in the exit summary's `repairs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifetimeRepair {
    /// Exported symbol of the call repaired.
    pub function: String,
    /// `synchronize_before_destroy` (the context was synchronised before it was destroyed
    /// or reset), `synchronize_before_free` (the streams using the memory were
    /// synchronised before the free), `already_released` (a free or destroy of a handle the
    /// driver released with its context returned success without reaching the driver) or
    /// `already_complete` (a synchronize of a handle whose work all completed before its
    /// context ended returned success without reaching the driver).
    pub kind: String,
    /// The context concerned (hex).
    pub context: Option<String>,
    /// The streams synchronised (hex; `default` for a default stream).
    pub streams: Vec<String>,
    /// What the program got (0 = success).
    pub result: u32,
    /// The announcement, as printed on stderr.
    pub explanation: String,
}

/// One asynchronous copy's access to pinned host memory (schema 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostAccess {
    /// Exported symbol of the copy (`cuMemcpyHtoDAsync_v2`, `cuMemcpyDtoHAsync_v2`,
    /// `cuMemcpyAsync`, their `_ptsz` variants).
    pub function: String,
    /// The created stream (hex); `None` for a default stream.
    pub stream: Option<String>,
    /// For a default stream: `legacy` or `per_thread`.
    pub default_stream: Option<String>,
    /// Kernel thread id of the caller.
    pub tid: u64,
    /// `read` (the copy reads the host memory: host to device) or `write` (device to host).
    pub access: String,
    /// Offset of the first byte touched from the start of the pinned range, bytes.
    pub offset: u64,
    /// Bytes touched.
    pub bytes: u64,
}

/// The `host_hazard` event (schema 5): an asynchronous copy overlapping a pending one on
/// pinned host memory, one of them writing it, on a stream nothing orders after the first
/// one's. Written once per distinct pair of call sites (both entry points and directions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostHazard {
    /// Exported symbol of the second (new) copy.
    pub function: String,
    /// `pinned_copy_race` (two copies), or `host_write_race` (a host write into the source
    /// of a pending host-to-device copy, caught by `SEEDANCE_HOST_GUARD`).
    pub kind: String,
    /// The pinned or registered range both copies touch.
    pub range: MemoryRange,
    /// The call that pinned it (`cuMemHostAlloc`, `cuMemAllocHost_v2`,
    /// `cuMemHostRegister_v2`).
    pub made_by: String,
    /// The earlier copy, still pending.
    pub first: HostAccess,
    /// The new copy.
    pub second: HostAccess,
    /// Whether fix mode ordered the second after the first.
    pub repaired: bool,
    /// The repair: `event_wait` (the shim recorded its own event on the first stream and
    /// made the second wait for it); `None` when not repaired.
    pub repair: Option<String>,
    /// The explanation, as printed on stderr.
    pub explanation: String,
    /// For a `host_write_race` (`SEEDANCE_HOST_GUARD`): the writing thread's stack,
    /// innermost frame first, symbolized (`address symbol (file:line)` where known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<Vec<String>>,
}

/// A context alive at exit (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveContext {
    /// The context handle (hex).
    pub context: String,
    /// Its `CUdevice`, when known.
    pub device: Option<i32>,
    /// A device's primary context.
    pub primary: bool,
    /// 1 + earlier contexts with the same handle.
    pub generation: u32,
    /// For a primary context, retains not released; 1 for a created context.
    pub retained: u32,
    /// The call that made it.
    pub created: LifetimeSite,
}

/// Memory never freed, per context (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakedAllocations {
    /// The `CUdevice` (`None` for pinned host memory or when unknown).
    pub device: Option<i32>,
    /// The owning context (hex), when known.
    pub context: Option<String>,
    /// The owning context is a primary context still retained at exit (the CUDA runtime
    /// keeps those until after the driver shut down: not a problem).
    pub primary_retained: bool,
    /// Pinned host memory (`cuMemHostAlloc`, `cuMemAllocHost`, `cuMemHostRegister`).
    pub host: bool,
    /// Allocations.
    pub allocations: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A stream with work never synchronised at exit (schema 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsynchronizedStream {
    /// The owning context (hex), when known.
    pub context: Option<String>,
    /// The owning context is a primary context still retained at exit.
    pub primary_retained: bool,
    /// The work.
    #[serde(flatten)]
    pub work: StreamPending,
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

/// The `launch_fault` event: a kernel launch failed (or, with `SEEDANCE_VALIDATE=pre`, was
/// refused before reaching the driver) and the shim named the limit it broke. Written once
/// per distinct (function, check, requested value); later repeats are counted in the exit
/// summary only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchFault {
    /// Exported symbol of the call (`cuLaunchKernel`, `cuLaunchKernelEx_ptsz`,
    /// `cuLaunchCooperativeKernel`, ...).
    pub function: String,
    /// What the program got, as a number (the driver's code; for a refused launch, the code
    /// the driver returns for that fault).
    pub result: u32,
    /// The CUresult name, when known.
    pub result_name: Option<String>,
    /// Which limit: `block_dim`, `threads_per_block`, `func_max_threads`, `grid_dim`,
    /// `zero_dim`, `shared_memory`, `cluster_dim`, `cooperative_grid`, `no_context`,
    /// `stream_context`, `destroyed_context` or `unknown`.
    pub check: String,
    /// The limit in force, in the check's unit (threads, blocks or bytes); `None` for the
    /// context checks and `unknown`.
    pub limit: Option<u64>,
    /// The value the launch asked for, in the same unit.
    pub requested: Option<u64>,
    /// CUDA ordinal of the current context's device, when one is current.
    pub device: Option<i32>,
    /// Grid dimensions in blocks, as passed.
    pub grid: [u32; 3],
    /// Block dimensions in threads, as passed.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes, as passed.
    pub shared_mem_bytes: u32,
    /// `true` when the shim refused the launch before the driver saw it
    /// (`SEEDANCE_VALIDATE=pre`).
    pub refused_before_driver: bool,
    /// The explanation, as printed on stderr (without the function and code prefix).
    pub explanation: String,
    /// The driver's own message for this failure (`cuLogsRegisterCallback`, drivers of CUDA
    /// 12.9 and later), when it logged one on the calling thread.
    pub driver_message: Option<String>,
}

/// The `alloc_fault` event: an allocation failed (or was refused before reaching the driver)
/// and the shim explained why. Written once per distinct (function, check, requested size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocFault {
    /// Exported symbol of the call (`cuMemAlloc_v2`, `cuMemAllocPitch_v2`,
    /// `cuMemAllocAsync`, `cuMemAllocManaged`, `cuMemHostAlloc`, `cuMemCreate`).
    pub function: String,
    /// What the program got, as a number.
    pub result: u32,
    /// The CUresult name, when known.
    pub result_name: Option<String>,
    /// `zero_size`, `exceeds_total`, `granularity`, `out_of_memory` or `unknown`.
    pub check: String,
    /// Bytes requested (for `cuMemAllocPitch_v2`, `WidthInBytes x Height`).
    pub requested_bytes: u64,
    /// The same size read as a signed 64-bit number: negative when a negative size was
    /// converted to `size_t` (`(size_t)-4096` is -4096).
    pub requested_signed: i64,
    /// The limit broken, bytes: total memory (`exceeds_total`), granularity
    /// (`granularity`), free memory (`out_of_memory`).
    pub limit_bytes: Option<u64>,
    /// CUDA ordinal of the device (`None` for pinned host memory or when unknown).
    pub device: Option<i32>,
    /// Free bytes at the moment of the failure (`cuMemGetInfo_v2`; host: `MemAvailable`).
    pub free_bytes: Option<u64>,
    /// Total bytes (`cuMemGetInfo_v2` or `cuDeviceTotalMem_v2`; host: `MemTotal`).
    pub total_bytes: Option<u64>,
    /// Bytes in this process's own live allocations on the device (a lower bound when some
    /// allocations could not be tracked).
    pub process_live_bytes: Option<u64>,
    /// Number of those allocations.
    pub process_live_allocations: Option<u64>,
    /// Other visible devices with at least `requested_bytes` free (NVML); `None` when
    /// unknown (no NVML), empty when none has room.
    pub other_devices_with_room: Option<Vec<DeviceRoom>>,
    /// `true` when the shim refused the allocation before the driver saw it
    /// (`SEEDANCE_VALIDATE=pre`).
    pub refused_before_driver: bool,
    /// For `out_of_memory` on a device: the processes NVML lists there with their used
    /// memory (`nvmlDeviceGetComputeRunningProcesses`); `None` when unknown (no NVML, or it
    /// failed) (schema 5).
    #[serde(default)]
    pub processes_on_device: Option<Vec<DeviceProcess>>,
    /// The explanation, as printed on stderr (without the function and code prefix).
    pub explanation: String,
    /// The driver's own message for this failure, when it logged one on the calling thread.
    pub driver_message: Option<String>,
}

/// A device with room for a failed allocation, in `alloc_fault`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRoom {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Free memory (NVML), bytes.
    pub free_bytes: u64,
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
    /// `CUDA_VISIBLE_DEVICES` as set in the environment (`None` when unset); since version
    /// 5 at most 200 bytes of it, a longer value cut and ended with `... (N bytes)`.
    pub cuda_visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER` as set in the environment (`None` when unset), cut as
    /// `cuda_visible_devices` is.
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
    /// Records not written because the trace reached its size limit
    /// (`SEEDANCE_TRACE_MAX_BYTES`; schema 5; 0 in earlier traces). The exit summary and
    /// `call_failed_repeats` are written past the limit; the calls are all in `functions`.
    #[serde(default)]
    pub records_over_limit: u64,
    /// Base names for which the shim hooks some ABI variant but `cuGetProcAddress` returned
    /// a pointer matching none of them, so the call was passed through uninstrumented.
    /// Empty on a healthy run; non-empty means a driver newer than the shim's table.
    #[serde(default)]
    pub procaddr_unmatched: Vec<String>,
    /// The distinct driver entry points `cuGetProcAddress` handed out that no hook of the
    /// shim wraps, passed through untouched, sorted (at most 1,024); what the model of work
    /// never sees (docs/model-coverage.md). Absent in earlier traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untouched_entry_points: Vec<String>,
    /// Times the pinned-copy race model met, with accesses pending, an ordering it cannot
    /// follow (a `cuStreamWaitEvent` on an event it never saw recorded, stream work whose
    /// effect on other streams it does not model) and dropped the pending accesses from
    /// its checks rather than risk reporting a race the program ordered (schema 5; 0 in
    /// earlier traces).
    #[serde(default)]
    pub unknown_orderings: u64,
    /// Repairs made in fix mode, by kind (`device_fallback`), with how many calls each
    /// kind repaired (schema 2).
    #[serde(default)]
    pub repairs: BTreeMap<String, u64>,
    /// Fallback choices in force at exit: requested ordinal (as a string key) -> chosen
    /// ordinal (schema 2).
    #[serde(default)]
    pub fallbacks: BTreeMap<String, i32>,
    /// Contexts still alive at exit (schema 4).
    #[serde(default)]
    pub live_contexts: Vec<LiveContext>,
    /// Device and pinned host memory never freed, per context (schema 4).
    #[serde(default)]
    pub leaked_allocations: Vec<LeakedAllocations>,
    /// Streams with work never synchronised (schema 4).
    #[serde(default)]
    pub unsynchronized_streams: Vec<UnsynchronizedStream>,
    /// Calls that got `CUDA_ERROR_DEINITIALIZED` (4), by function: made after the driver
    /// shut down, from static destructors or atexit handlers. The runtime's own final
    /// `cuDevicePrimaryCtxRelease(_v2)`, which gets 4 in every healthy runtime program, is
    /// not listed (schema 4).
    #[serde(default)]
    pub calls_after_deinit: BTreeMap<String, u64>,
    /// Failed device requests taken as questions and left to the driver (a negative
    /// ordinal, one of 32 or more, the ordinal after the last device of an ascending
    /// enumeration, `cuDeviceGet(count)` after `cuDeviceGetCount`): exported symbol ->
    /// kind (`negative`, `above_max_devices`, `past_last_device`, `device_count`) -> calls.
    /// They are in `functions[..].errors` but not in `errors_by_result`, and have no record
    /// of their own (schema 5).
    #[serde(default)]
    pub device_questions: BTreeMap<String, BTreeMap<String, u64>>,
    /// Every device the process made a context on, with what it did there (schema 5;
    /// empty when lifetime tracking is off).
    #[serde(default)]
    pub device_use: Vec<DeviceUse>,
    /// The stray contexts found, each as reported, with the final figures (schema 5).
    #[serde(default)]
    pub stray_contexts: Vec<StrayContext>,
    /// The runtime's `cuGetProcAddress(_v2)` version probes (schema 5): how the CUDA
    /// runtime learns which entry points the driver has. Look-ups answered
    /// `CUDA_ERROR_NOT_FOUND` are counted here, as calls but not as errors, and get no
    /// `call_failed` record. `None` when no look-up was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_probes: Option<RuntimeProbes>,
    /// CUDA libraries mapped into the process at exit, with the version their file name
    /// gives (schema 5). Read from `/proc/self/maps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_libraries: Vec<CudaLibrary>,
    /// The device memory still held at exit, by the library that asked for it (the first
    /// caller outside the driver, the CUDA runtime and the shim: `libxla_extension.so`,
    /// `libc10_cuda.so`, the program's own file), largest first. Absent when the shim
    /// knows of none, and in earlier traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_holders: Vec<MemoryHolder>,
}

/// Device memory one library held at exit, in the exit summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryHolder {
    /// The library's file name.
    pub library: String,
    /// The device, `None` where the driver no longer placed the addresses.
    pub device: Option<i32>,
    /// Live allocations it asked for.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The runtime's entry-point look-ups (`cuGetProcAddress`, `cuGetProcAddress_v2`), in the
/// exit summary (schema 5).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuntimeProbes {
    /// Look-ups made.
    pub lookups: u64,
    /// Highest `cudaVersion` asked for (`1000 * major + 10 * minor`: 13010 is CUDA 13.1):
    /// the version of the CUDA runtime that made the look-ups.
    pub max_cuda_version: Option<i32>,
    /// Look-ups answered `CUDA_ERROR_NOT_FOUND` with `symbolStatus`
    /// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`: the entry point exists in a newer CUDA
    /// than this driver's (`cuda.h`, CUDA 12.0+).
    pub version_not_sufficient: u64,
    /// Other look-ups answered `CUDA_ERROR_NOT_FOUND` (`CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`,
    /// or `cuGetProcAddress` without a status).
    pub symbol_not_found: u64,
    /// Look-ups of a `cudaVersion` above the driver's own, answered
    /// `CUDA_ERROR_INVALID_VALUE` (driver 580.159 answers so, leaving `pfn` and
    /// `symbolStatus` untouched, even for names it has: docs/design.md, fact 11). Absent in
    /// older traces (read as 0).
    #[serde(default)]
    pub above_driver_version: u64,
    /// The first distinct symbols answered version-not-sufficient or asked above the
    /// driver's version (at most 32).
    #[serde(default)]
    pub unavailable: Vec<String>,
}

/// One CUDA library the process had loaded, in the exit summary (schema 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaLibrary {
    /// Which library: `cudart`, `cublas`, `cublasLt`, `cudnn`, `nccl`, `nvrtc`, `cufft`,
    /// `curand`, `cusparse`, `cusolver`, `torch_cuda`, `cuda` (the driver).
    pub name: String,
    /// The mapped file.
    pub path: String,
    /// The version in the file name (`libcudart.so.13.1.80` -> `13.1.80`), when it has one.
    pub version: Option<String>,
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
    /// Of those, the failures the program recovered from, by the same keys: the same entry
    /// point succeeded on the same thread right after (a retry, with the same or other
    /// arguments; docs/configuration.md, "Failures the program recovers from"). Their
    /// `call_failed` records stay in the trace; the analyzer counts them as info. Absent
    /// when there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recovered_by_result: BTreeMap<String, u64>,
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
            r#"{"v":5,"seq":3,"ts_ns":1700000000000000000,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","args":{"bytesize":0}}"#
        );
    }

    #[test]
    fn fault_events_round_trip() {
        let launch = Event::LaunchFault(LaunchFault {
            function: "cuLaunchKernel".into(),
            result: 1,
            result_name: Some("CUDA_ERROR_INVALID_VALUE".into()),
            check: "threads_per_block".into(),
            limit: Some(1024),
            requested: Some(1056),
            device: Some(0),
            grid: [1, 1, 1],
            block: [32, 33, 1],
            shared_mem_bytes: 0,
            refused_before_driver: false,
            explanation: "block (32,33,1) = 1056 threads".into(),
            driver_message: None,
        });
        let line = serde_json::to_string(&launch).unwrap();
        assert!(line.starts_with(r#"{"event":"launch_fault","function":"cuLaunchKernel""#));
        assert!(line.contains(r#""block":[32,33,1]"#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), launch);
        let alloc = Event::AllocFault(AllocFault {
            function: "cuMemAlloc_v2".into(),
            result: 2,
            result_name: Some("CUDA_ERROR_OUT_OF_MEMORY".into()),
            check: "out_of_memory".into(),
            requested_bytes: u64::MAX - 4095,
            requested_signed: -4096,
            limit_bytes: Some(1),
            device: Some(0),
            free_bytes: Some(1),
            total_bytes: Some(2),
            process_live_bytes: Some(0),
            process_live_allocations: Some(0),
            other_devices_with_room: Some(vec![DeviceRoom {
                ordinal: 1,
                free_bytes: 2,
            }]),
            refused_before_driver: false,
            processes_on_device: Some(vec![DeviceProcess {
                pid: 42,
                used_bytes: Some(3),
                this_process: false,
            }]),
            explanation: "x".into(),
            driver_message: Some("out of memory".into()),
        });
        let line = serde_json::to_string(&alloc).unwrap();
        assert!(line.contains(r#""requested_signed":-4096"#), "{line}");
        assert!(line.contains(r#""other_devices_with_room":[{"ordinal":1,"free_bytes":2}]"#));
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), alloc);
    }

    #[test]
    fn stray_context_round_trips_and_old_summaries_still_parse() {
        let there = DeviceUse {
            device: 0,
            contexts: 1,
            ..DeviceUse::default()
        };
        let stray = Event::StrayContext(StrayContext {
            device: 0,
            function: "cuDevicePrimaryCtxRetain".into(),
            creating_tid: 5,
            decided: "exit".into(),
            redirected_to: None,
            there: there.clone(),
            working_devices: vec![DeviceUse {
                device: 1,
                launches: 3,
                worked: true,
                ..there.clone()
            }],
            context_bytes: Some(7),
            explanation: "stray context on device 0: ...".into(),
        });
        let line = serde_json::to_string(&stray).unwrap();
        assert!(
            line.starts_with(r#"{"event":"stray_context","device":0,"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), stray);
        let old: Event = serde_json::from_str(
            r#"{"event":"exit_summary","duration_ns":1,"functions":{},"dropped_records":0}"#,
        )
        .unwrap();
        let Event::ExitSummary(old) = old else {
            panic!("not a summary")
        };
        assert!(old.device_use.is_empty() && old.stray_contexts.is_empty());
    }

    #[test]
    fn lifetime_events_round_trip() {
        let site = LifetimeSite {
            function: "cuCtxDestroy_v2".into(),
            tid: 7,
            ts_ns: 9,
            seq: 3,
        };
        let fault = Event::LifetimeFault(LifetimeFault {
            function: "cuStreamSynchronize".into(),
            kind: "use_after_destroy".into(),
            result: Some(709),
            result_name: Some("CUDA_ERROR_CONTEXT_IS_DESTROYED".into()),
            context: Some("0x5eedc0000100".into()),
            device: Some(0),
            generation: Some(1),
            handle: Some("0x5eed50000100".into()),
            handle_kind: Some("stream".into()),
            created: None,
            ended: Some(ContextEnd {
                how: "destroyed".into(),
                site: site.clone(),
                lost_launches: 0,
                lost_copies: 0,
                lost_ops: 1,
            }),
            streams: vec![],
            range: None,
            repaired: false,
            explanation: "x".into(),
        });
        let line = serde_json::to_string(&fault).unwrap();
        assert!(line.starts_with(r#"{"event":"lifetime_fault","function":"cuStreamSynchronize""#));
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), fault);
        let repair = Event::LifetimeRepair(LifetimeRepair {
            function: "cuCtxDestroy_v2".into(),
            kind: "synchronize_before_destroy".into(),
            context: Some("0x1".into()),
            streams: vec!["0x5eed50000100".into(), "default".into()],
            result: 0,
            explanation: "fix".into(),
        });
        let line = serde_json::to_string(&repair).unwrap();
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), repair);
        let mut summary = ExitSummary::default();
        summary.unsynchronized_streams.push(UnsynchronizedStream {
            context: Some("0x1".into()),
            primary_retained: false,
            work: StreamPending {
                stream: None,
                default_stream: Some("legacy".into()),
                launches: 2,
                copies: 0,
                ops: 3,
                created: None,
            },
        });
        summary.calls_after_deinit.insert("cuMemFree_v2".into(), 1);
        let line = serde_json::to_string(&Event::ExitSummary(summary.clone())).unwrap();
        assert!(line.contains(r#""unsynchronized_streams":[{"context":"0x1","primary_retained":false,"stream":null,"default_stream":"legacy","launches":2,"copies":0,"ops":3"#), "{line}");
        // Written before `ops` and `lost_ops` were added: they read as 0.
        let old =
            r#"{"stream":"0x5","default_stream":null,"launches":1,"copies":2,"created":null}"#;
        assert_eq!(serde_json::from_str::<StreamPending>(old).unwrap().ops, 0);
        let old = r#"{"how":"destroyed","site":{"function":"cuCtxDestroy_v2","tid":1,"ts_ns":2,"seq":3},"lost_launches":1,"lost_copies":0}"#;
        assert_eq!(serde_json::from_str::<ContextEnd>(old).unwrap().lost_ops, 0);
        assert_eq!(
            serde_json::from_str::<Event>(&line).unwrap(),
            Event::ExitSummary(summary)
        );
        // A schema-3 summary (no lifetime fields) still reads.
        let old = r#"{"event":"exit_summary","duration_ns":1,"functions":{},"dropped_records":0}"#;
        let Event::ExitSummary(s) = serde_json::from_str::<Event>(old).unwrap() else {
            panic!()
        };
        assert!(s.live_contexts.is_empty() && s.calls_after_deinit.is_empty());
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
