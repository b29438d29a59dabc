//! Allocation faults (issue 4): a failed `cuMemAlloc_v2`, `cuMemAllocPitch_v2`,
//! `cuMemAllocAsync(_ptsz)`, `cuMemAllocManaged`, `cuMemHostAlloc` or `cuMemCreate` is
//! explained: a zero size, a size larger than the device (shown signed too: a negative size
//! that wrapped), a `cuMemCreate` size off the granularity, or, for
//! `CUDA_ERROR_OUT_OF_MEMORY`, the device's free and total memory at that moment, whether the
//! request was larger than the free memory, what this process itself holds there, and which
//! other devices have room (NVML).
//!
//! Success path: one insert into (or removal from) a lock-free table of live allocations
//! ([`seedance_core::live::LiveTable`]; about 30 ns per alloc+free pair, measured with
//! `cargo test -p seedance-core --release -- --ignored live_table_cost`). The device of each
//! live address is asked of the driver (`cuPointerGetAttribute`) only when an explanation
//! needs it; addresses the driver no longer knows (freed with their context) are dropped
//! then. Everything else runs after a failure, or before the call with
//! `SEEDANCE_VALIDATE=pre` (then a zero size, a size over the device's total memory, or a
//! `cuMemCreate` size off the granularity is refused with the driver's own code).

use crate::driver::driverlog;
use crate::faults::launch::pre_enabled;
use crate::hooks::HookId;
use crate::{driver::query, driver::topo, rt::config, rt::output, rt::stderr};
use libc::{c_uint, c_void};
use once_cell::sync::OnceCell;
use seedance_core::alloc::{
    check_request, explain_oom, signed, AllocCheck, AllocFinding, AllocKind, LiveOnDevice,
    OomFacts, OtherDevice,
};
use seedance_core::live::LiveTable;
use seedance_core::once::ExplainOnce;
use seedance_core::stray::{explain_holders, Holder};
use seedance_core::Validate;
use seedance_cuda::{
    CUdevice, CUdeviceptr, CUmemAllocationProp, CUmemGenericAllocationHandle, CUresult, CUstream,
    CU_MEM_LOCATION_TYPE_DEVICE,
};
use seedance_topology::Nvml;
use seedance_trace::{AllocFault, DeviceRoom, Event};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

/// Live device allocations by address (`cuMemAlloc*`), 65536 slots (1 MiB of `.bss`,
/// touched only as used).
static POINTERS: LiveTable<65536> = LiveTable::new();
/// Live `cuMemCreate` allocations by handle, with their device.
static HANDLES: LiveTable<4096> = LiveTable::new();

/// Devices whose total memory is cached.
const MAX_CACHED: usize = 64;
static TOTALS: [OnceLock<u64>; MAX_CACHED] = [const { OnceLock::new() }; MAX_CACHED];

/// Most live addresses whose device is asked of the driver for one explanation.
const MAX_ATTRIBUTED: usize = 4096;

/// Most distinct faults remembered for the once-per-fault stderr line and event.
const MAX_SEEN: usize = 4096;
static SEEN: ExplainOnce<(usize, AllocCheck, u64)> = ExplainOnce::bounded(MAX_SEEN);

/// The tracked live allocation at `addr` (for the lifetime checks).
pub fn live_pointer(addr: CUdeviceptr) -> Option<seedance_core::live::Entry> {
    POINTERS.get(addr)
}

/// Every tracked live allocation (cold: walks the whole table).
pub fn live_pointers() -> Vec<seedance_core::live::Entry> {
    POINTERS.entries()
}

/// Forgets an allocation the driver released implicitly (with its context).
pub fn forget_pointer(addr: CUdeviceptr) {
    POINTERS.forget(addr);
}

/// Records a new live allocation; an address the driver hands out again is no longer dead.
#[inline(always)]
fn record(addr: CUdeviceptr, bytes: u64) {
    POINTERS.insert(addr, bytes, None);
    crate::faults::lifetime::note_device_alloc(addr);
}

fn total_mem(dev: CUdevice) -> Option<u64> {
    let Some(cell) = usize::try_from(dev).ok().and_then(|i| TOTALS.get(i)) else {
        return query::device_total_mem(dev);
    };
    if let Some(t) = cell.get() {
        return Some(*t);
    }
    let t = query::device_total_mem(dev)?;
    let _ = cell.set(t);
    Some(t)
}

/// NVML, opened at the first explanation that needs it; `None` without NVML, or when it
/// did not answer in time ([`crate::driver::nvml`]).
pub fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceCell<Option<Nvml>> = OnceCell::new();
    // dlopen waits for the loader's lock: opened outside the cell's initialiser.
    crate::driver::real::once_outside_loader_lock(&NVML, crate::driver::nvml::open).as_ref()
}

/// What this process holds on each device now: `device -> (allocations, bytes)`, from the
/// tracked live addresses (device asked of the driver, at most 4096) and `cuMemCreate`
/// handles. Cold: a driver query per address.
pub fn live_by_device() -> std::collections::BTreeMap<i32, (u64, u64)> {
    let mut out: std::collections::BTreeMap<i32, (u64, u64)> = std::collections::BTreeMap::new();
    for e in POINTERS.entries().into_iter().take(MAX_ATTRIBUTED) {
        if let Ok(d) = query::pointer_device(e.key) {
            let g = out.entry(d).or_default();
            g.0 += 1;
            g.1 += e.bytes;
        }
    }
    for e in HANDLES.entries() {
        if let Some(d) = e.device {
            let g = out.entry(i32::from(d)).or_default();
            g.0 += 1;
            g.1 += e.bytes;
        }
    }
    out
}

/// One allocation request as the program made it.
struct Request {
    kind: AllocKind,
    bytes: u64,
    /// For `cuMemCreate`: the properties (device and granularity come from them).
    prop: Option<CUmemAllocationProp>,
}

impl Request {
    fn new(kind: AllocKind, bytes: u64) -> Request {
        Request {
            kind,
            bytes,
            prop: None,
        }
    }

    /// The device the request is for: the properties' device for `cuMemCreate`, none for
    /// host memory, else the current context's.
    fn device(&self) -> Option<i32> {
        match self.kind {
            AllocKind::Host => None,
            AllocKind::Physical => self
                .prop
                .filter(|p| p.location.type_ == CU_MEM_LOCATION_TYPE_DEVICE)
                .map(|p| p.location.id),
            _ => query::ctx_get_device().ok(),
        }
    }

    fn granularity(&self) -> Option<u64> {
        self.prop.as_ref().and_then(query::allocation_granularity)
    }
}

/// What this process holds on `device`: tracked addresses whose device the driver reports,
/// and `cuMemCreate` handles made there. Addresses the driver no longer knows are dropped.
fn live_on(device: i32) -> LiveOnDevice {
    let mut live = LiveOnDevice {
        untracked: POINTERS.untracked() + HANDLES.untracked(),
        ..LiveOnDevice::default()
    };
    for (i, e) in POINTERS.entries().into_iter().enumerate() {
        if i >= MAX_ATTRIBUTED {
            live.untracked += 1;
            continue;
        }
        match query::pointer_device(e.key) {
            Ok(d) if d == device => {
                live.bytes += e.bytes;
                live.count += 1;
            }
            Ok(_) => {}
            Err(CUresult::CUDA_ERROR_NOT_FOUND) => live.untracked += 1,
            Err(_) => {
                POINTERS.remove(e.key);
            }
        }
    }
    for e in HANDLES.entries() {
        if e.device.map(i32::from) == Some(device) {
            live.bytes += e.bytes;
            live.count += 1;
        }
    }
    live
}

/// The other visible devices and their free memory now (NVML), `None` without NVML or
/// when it did not answer in time.
fn others(device: Option<i32>) -> Option<Vec<OtherDevice>> {
    let nvml = nvml()?;
    let t = topo::get();
    let wanted: Vec<(i32, u32)> = t
        .devices
        .iter()
        .filter(|d| Some(d.ordinal) != device)
        .filter_map(|d| Some((d.ordinal, d.nvml_index?)))
        .collect();
    let free = crate::driver::nvml::free_memory(nvml, wanted.iter().map(|&(_, i)| i).collect())?;
    let out = wanted
        .iter()
        .zip(free)
        .filter_map(|(&(ordinal, _), free)| {
            Some(OtherDevice {
                ordinal,
                free: free?,
            })
        })
        .collect();
    Some(out)
}

/// The compute processes NVML lists on CUDA ordinal `device`, with their used memory;
/// `None` without NVML (or when it failed or did not answer in time).
fn holders(device: i32) -> Option<Vec<seedance_trace::DeviceProcess>> {
    let nvml = nvml()?;
    let index = topo::get()
        .devices
        .iter()
        .find(|d| d.ordinal == device)
        .and_then(|d| d.nvml_index)?;
    let me = std::process::id();
    let list = crate::driver::nvml::running_processes(nvml, vec![index])?
        .pop()
        .flatten()?;
    Some(
        list.into_iter()
            .map(|(pid, used)| seedance_trace::DeviceProcess {
                pid,
                used_bytes: used,
                this_process: pid == me,
            })
            .collect(),
    )
}

/// `MemAvailable` and `MemTotal` from `/proc/meminfo`, bytes.
fn host_memory() -> (Option<u64>, Option<u64>) {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return (None, None);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
    };
    (field("MemAvailable:"), field("MemTotal:"))
}

/// Everything an `alloc_fault` event carries beyond the finding.
#[derive(Default)]
struct Facts {
    device: Option<i32>,
    free: Option<u64>,
    total: Option<u64>,
    live: Option<LiveOnDevice>,
    room: Option<Vec<OtherDevice>>,
    processes: Option<Vec<seedance_trace::DeviceProcess>>,
}

fn report(
    id: HookId,
    r: CUresult,
    req: &Request,
    finding: &AllocFinding,
    facts: Facts,
    refused: bool,
    driver_message: Option<String>,
) {
    let name = r.name();
    let mut line = output::fault_line(id, name, r, &finding.explanation);
    if refused {
        line.push_str(" [refused before reaching the driver: SEEDANCE_VALIDATE=pre]");
    }
    if let Some(m) = &driver_message {
        line.push_str(&format!(" [driver: {m}]"));
    }
    stderr::say(&line);
    output::emit(Event::AllocFault(AllocFault {
        function: id.name().to_string(),
        result: r.0,
        result_name: name.map(str::to_string),
        check: finding.check.as_str().to_string(),
        requested_bytes: req.bytes,
        requested_signed: signed(req.bytes),
        limit_bytes: finding.limit,
        device: facts.device,
        free_bytes: facts.free,
        total_bytes: facts.total,
        process_live_bytes: facts.live.map(|l| l.bytes),
        process_live_allocations: facts.live.map(|l| l.count),
        other_devices_with_room: facts.room.map(|r| {
            r.into_iter()
                .map(|d| DeviceRoom {
                    ordinal: d.ordinal,
                    free_bytes: d.free,
                })
                .collect()
        }),
        refused_before_driver: refused,
        processes_on_device: facts.processes,
        explanation: finding.explanation.clone(),
        driver_message,
    }));
}

/// Counts the failure; `true` the first time this (function, check, size) is seen.
fn first_time(id: HookId, r: CUresult, check: AllocCheck, bytes: u64) -> bool {
    output::tally_error(id, r);
    SEEN.first((id as usize, check, bytes))
}

#[cold]
#[inline(never)]
fn fault(id: HookId, r: CUresult, req: Request) -> bool {
    if config::get().validate == Validate::Off || !matches!(r.0, 1 | 2) {
        return false;
    }
    let Some(_inside) = crate::rt::guard::enter() else {
        return false;
    };
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("alloc_fault");
        let message = driverlog::take_recent();
        let handled = handle(id, r, &req, message);
        driverlog::discard();
        handled
    }))
    .unwrap_or(false)
}

fn handle(id: HookId, r: CUresult, req: &Request, message: Option<String>) -> bool {
    let device = req.device();
    let total = device.and_then(total_mem);
    let granularity = if req.kind == AllocKind::Physical {
        req.granularity()
    } else {
        None
    };
    if let Some(finding) = check_request(req.kind, req.bytes, device, total, granularity) {
        if first_time(id, r, finding.check, req.bytes) {
            let facts = Facts {
                device,
                total,
                ..Facts::default()
            };
            report(id, r, req, &finding, facts, false, message);
        }
        return true;
    }
    if r != CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        let Some(m) = message else { return false };
        if first_time(id, r, AllocCheck::Unknown, req.bytes) {
            let finding = AllocFinding {
                check: AllocCheck::Unknown,
                limit: None,
                explanation: format!(
                    "the size is within every limit the shim checks; the driver says: {m}"
                ),
            };
            let facts = Facts {
                device,
                total,
                ..Facts::default()
            };
            report(id, r, req, &finding, facts, false, Some(m));
        }
        return true;
    }
    if !first_time(id, r, AllocCheck::OutOfMemory, req.bytes) {
        return true;
    }
    let (free, total, live, room) = if req.kind == AllocKind::Host {
        let (free, total) = host_memory();
        (free, total, None, None)
    } else {
        let current = if req.kind == AllocKind::Physical {
            query::ctx_get_device().ok()
        } else {
            device
        };
        let (free, total) = match (device, current) {
            (Some(d), Some(c)) if d == c => {
                query::mem_get_info().map_or((None, total), |(f, t)| (Some(f), Some(t)))
            }
            _ => (None, total),
        };
        (free, total, device.map(live_on), others(device))
    };
    let facts = OomFacts {
        kind: req.kind,
        requested: req.bytes,
        device,
        free,
        total,
        live,
        others: room,
    };
    let mut finding = explain_oom(&facts);
    let processes = device.filter(|_| req.kind != AllocKind::Host).map(holders);
    let mut listed = None;
    if let Some(p) = &processes {
        let list: Option<Vec<Holder>> = p.as_ref().map(|v| {
            v.iter()
                .map(|p| Holder {
                    pid: p.pid,
                    used: p.used_bytes,
                })
                .collect()
        });
        if let Some(d) = device {
            finding
                .explanation
                .push_str(&explain_holders(d, list.as_deref(), std::process::id()));
        }
        listed = p.clone();
    }
    let facts = Facts {
        device,
        free,
        total,
        live,
        room: facts.with_room(),
        processes: listed,
    };
    report(id, r, req, &finding, facts, false, message);
    true
}

#[cold]
#[inline(never)]
fn pre(id: HookId, req: Request) -> Option<CUresult> {
    let _inside = crate::rt::guard::enter()?;
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        // Without a usable context the driver's own answer is the right one.
        let current = query::ctx_get_device().ok()?;
        let device = if req.kind == AllocKind::Physical {
            req.device()?
        } else {
            current
        };
        let total = total_mem(device);
        let granularity = if req.kind == AllocKind::Physical {
            req.granularity()
        } else {
            None
        };
        let finding = check_request(req.kind, req.bytes, Some(device), total, granularity);
        driverlog::discard();
        let finding = finding?;
        let code = CUresult(finding.check.driver_code());
        if first_time(id, code, finding.check, req.bytes) {
            let facts = Facts {
                device: Some(device),
                total,
                ..Facts::default()
            };
            report(id, code, &req, &finding, facts, true, None);
        }
        Some(code)
    }))
    .ok()
    .flatten()
}

/// Reads the address the driver wrote on success.
///
/// # Safety
/// `p` is null or the out-pointer the driver just wrote.
unsafe fn written<T: Copy + Default>(p: *mut T) -> T {
    if p.is_null() {
        T::default()
    } else {
        // SAFETY: non-null, written by the driver that just returned success.
        unsafe { p.read() }
    }
}

/// Before `cuMemAlloc_v2` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_alloc(
    id: HookId,
    _dptr: *mut CUdeviceptr,
    bytesize: usize,
) -> Option<CUresult> {
    if !pre_enabled() {
        return None;
    }
    pre(id, Request::new(AllocKind::Device, bytesize as u64))
}

/// After a failed `cuMemAlloc_v2`: `true` when explained (an `alloc_fault` replaces the
/// plain `call_failed`).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc(
    id: HookId,
    r: CUresult,
    _dptr: *mut CUdeviceptr,
    bytesize: usize,
) -> bool {
    fault(id, r, Request::new(AllocKind::Device, bytesize as u64))
}

/// After a successful `cuMemAlloc_v2`: records the live allocation.
///
/// # Safety
/// `dptr` is null or the out-pointer the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc(_id: HookId, dptr: *mut CUdeviceptr, bytesize: usize) {
    // SAFETY: the driver wrote *dptr on success.
    record(unsafe { written(dptr) }, bytesize as u64);
}

fn pitch_bytes(width: usize, height: usize) -> u64 {
    (width as u64).saturating_mul(height as u64)
}

/// Before `cuMemAllocPitch_v2` with `SEEDANCE_VALIDATE=pre` (size = `WidthInBytes x Height`).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_alloc_pitch(
    id: HookId,
    _dptr: *mut CUdeviceptr,
    _p_pitch: *mut usize,
    width: usize,
    height: usize,
    _element_size: c_uint,
) -> Option<CUresult> {
    if !pre_enabled() {
        return None;
    }
    pre(
        id,
        Request::new(AllocKind::Pitch, pitch_bytes(width, height)),
    )
}

/// After a failed `cuMemAllocPitch_v2`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_pitch(
    id: HookId,
    r: CUresult,
    _dptr: *mut CUdeviceptr,
    _p_pitch: *mut usize,
    width: usize,
    height: usize,
    _element_size: c_uint,
) -> bool {
    fault(
        id,
        r,
        Request::new(AllocKind::Pitch, pitch_bytes(width, height)),
    )
}

/// After a successful `cuMemAllocPitch_v2`: records `pitch x height` bytes.
///
/// # Safety
/// `dptr` and `p_pitch` are null or the out-pointers the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc_pitch(
    _id: HookId,
    dptr: *mut CUdeviceptr,
    p_pitch: *mut usize,
    _width: usize,
    height: usize,
    _element_size: c_uint,
) {
    // SAFETY: the driver wrote both on success.
    let (p, pitch) = unsafe { (written(dptr), written(p_pitch)) };
    record(p, pitch_bytes(pitch, height));
}

/// After a failed `cuMemAllocAsync(_ptsz)`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_async(
    id: HookId,
    r: CUresult,
    _dptr: *mut CUdeviceptr,
    bytesize: usize,
    _stream: CUstream,
) -> bool {
    fault(id, r, Request::new(AllocKind::Async, bytesize as u64))
}

/// After a successful `cuMemAllocAsync(_ptsz)`.
///
/// # Safety
/// `dptr` is null or the out-pointer the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc_async(
    _id: HookId,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    _stream: CUstream,
) {
    // SAFETY: the driver wrote *dptr on success.
    record(unsafe { written(dptr) }, bytesize as u64);
}

/// After a failed `cuMemAllocManaged`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_managed(
    id: HookId,
    r: CUresult,
    _dptr: *mut CUdeviceptr,
    bytesize: usize,
    _flags: c_uint,
) -> bool {
    fault(id, r, Request::new(AllocKind::Managed, bytesize as u64))
}

/// After a successful `cuMemAllocManaged`.
///
/// # Safety
/// `dptr` is null or the out-pointer the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc_managed(
    _id: HookId,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    _flags: c_uint,
) {
    // SAFETY: the driver wrote *dptr on success.
    record(unsafe { written(dptr) }, bytesize as u64);
}

/// After a failed `cuMemHostAlloc` (pinned host memory: zero size and host memory state).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_host_alloc(
    id: HookId,
    r: CUresult,
    _pp: *mut *mut c_void,
    bytesize: usize,
    _flags: c_uint,
) -> bool {
    fault(id, r, Request::new(AllocKind::Host, bytesize as u64))
}

/// The properties a `cuMemCreate` was given.
///
/// # Safety
/// `prop` is null or valid (the driver's contract).
unsafe fn physical(size: usize, prop: *const CUmemAllocationProp) -> Request {
    Request {
        kind: AllocKind::Physical,
        bytes: size as u64,
        // SAFETY: null or valid, per the caller's contract; read unaligned to be safe.
        prop: (!prop.is_null()).then(|| unsafe { prop.read_unaligned() }),
    }
}

/// Before `cuMemCreate` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_create(
    id: HookId,
    _handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    _flags: u64,
) -> Option<CUresult> {
    if !pre_enabled() || prop.is_null() {
        return None;
    }
    // SAFETY: forwarded caller contract.
    pre(id, unsafe { physical(size, prop) })
}

/// After a failed `cuMemCreate`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_create(
    id: HookId,
    r: CUresult,
    _handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    _flags: u64,
) -> bool {
    // SAFETY: forwarded caller contract.
    fault(id, r, unsafe { physical(size, prop) })
}

/// After a successful `cuMemCreate`: records the handle with its device.
///
/// # Safety
/// `handle` is null or the out-pointer the driver just wrote; `prop` null or valid.
#[inline(always)]
pub unsafe fn ok_mem_create(
    _id: HookId,
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    _flags: u64,
) {
    // SAFETY: forwarded caller contract; the driver wrote *handle on success.
    let (h, req) = unsafe { (written(handle), physical(size, prop)) };
    let device = req
        .prop
        .filter(|p| p.location.type_ == CU_MEM_LOCATION_TYPE_DEVICE)
        .and_then(|p| u8::try_from(p.location.id).ok());
    HANDLES.insert(h, size as u64, device);
}

/// After a successful `cuMemFree_v2`: forgets the allocation.
///
/// # Safety
/// None beyond the wrapper's: the address is only a key.
#[inline(always)]
pub unsafe fn ok_mem_free(_id: HookId, dptr: CUdeviceptr) {
    POINTERS.forget(dptr);
    crate::faults::lifetime::note_device_free(dptr);
}

/// After a successful `cuMemFreeAsync(_ptsz)`: forgets the allocation.
///
/// # Safety
/// None beyond the wrapper's: the address is only a key.
#[inline(always)]
pub unsafe fn ok_mem_free_async(_id: HookId, dptr: CUdeviceptr, _stream: CUstream) {
    POINTERS.forget(dptr);
    crate::faults::lifetime::note_device_free(dptr);
}

/// After a successful `cuMemRelease`: forgets the handle.
///
/// # Safety
/// None beyond the wrapper's: the handle is only a key.
#[inline(always)]
pub unsafe fn ok_mem_release(_id: HookId, handle: CUmemGenericAllocationHandle) {
    HANDLES.forget(handle);
}
