//! The explanation of an allocation fault: the request checked against the device's limits
//! ([`seedance_core::alloc::check_request`]), and for `CUDA_ERROR_OUT_OF_MEMORY` the
//! device's free and total memory, what this process holds there, the other devices with
//! room and the processes on the device (NVML), reported once per (function, check, size).
//! Cold: runs after a failure, or before the call with `SEEDANCE_VALIDATE=pre`.

use super::{nvml, HANDLES, MAX_ATTRIBUTED, POINTERS};
use crate::driver::driverlog;
use crate::hooks::ids::HookId;
use crate::{driver::query, driver::topo, rt::config, rt::output};
use seedance_core::alloc::{
    check_request, explain_oom, signed, AllocCheck, AllocFinding, AllocKind, LiveOnDevice,
    OomFacts, OtherDevice,
};
use seedance_core::holders::Holding;
use seedance_core::once::ExplainOnce;
use seedance_core::stray::{explain_holders, Holder};
use seedance_core::Validate;
use seedance_cuda::{CUdevice, CUmemAllocationProp, CUresult, CU_MEM_LOCATION_TYPE_DEVICE};
use seedance_trace::{AllocFault, DeviceRoom, Event};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

/// Devices whose total memory is cached.
const MAX_CACHED: usize = 64;
static TOTALS: [OnceLock<u64>; MAX_CACHED] = [const { OnceLock::new() }; MAX_CACHED];

/// Most distinct faults remembered for the once-per-fault stderr line and event.
const MAX_SEEN: usize = 4096;
static SEEN: ExplainOnce<(usize, AllocCheck, u64)> = ExplainOnce::bounded(MAX_SEEN);

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

/// One allocation request as the program made it.
pub(super) struct Request {
    pub(super) kind: AllocKind,
    pub(super) bytes: u64,
    /// For `cuMemCreate`: the properties (device and granularity come from them).
    pub(super) prop: Option<CUmemAllocationProp>,
}

impl Request {
    pub(super) fn new(kind: AllocKind, bytes: u64) -> Request {
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
/// and `cuMemCreate` handles made there, in all and by the library that asked for them
/// ([`super::holder`]). Addresses the driver no longer knows are dropped.
fn live_on(device: i32) -> (LiveOnDevice, Vec<Holding>) {
    let mut live = LiveOnDevice {
        untracked: POINTERS.untracked() + HANDLES.untracked(),
        ..LiveOnDevice::default()
    };
    let mut by: std::collections::BTreeMap<u8, (u64, u64)> = std::collections::BTreeMap::new();
    let mut add = |live: &mut LiveOnDevice, e: &seedance_hotpath::live::Entry| {
        live.bytes += e.bytes;
        live.count += 1;
        let h = by.entry(e.holder).or_default();
        h.0 += 1;
        h.1 += e.bytes;
    };
    for (i, e) in super::live_pointers().into_iter().enumerate() {
        if i >= MAX_ATTRIBUTED {
            live.untracked += 1;
            continue;
        }
        match query::pointer_device(e.key) {
            Ok(d) if d == device => add(&mut live, &e),
            Ok(_) => {}
            Err(CUresult::CUDA_ERROR_NOT_FOUND) => live.untracked += 1,
            Err(_) => {
                POINTERS.remove(e.key);
            }
        }
    }
    for e in HANDLES.entries() {
        if e.device.map(i32::from) == Some(device) {
            add(&mut live, &e);
        }
    }
    let holders = by
        .into_iter()
        .filter_map(|(i, (count, bytes))| {
            let (file, known) = super::holder::named(i)?;
            Some(Holding {
                file,
                known,
                count,
                bytes,
            })
        })
        .collect();
    (live, holders)
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
    output::say_checked_fault(
        id,
        r,
        &finding.explanation,
        refused,
        driver_message.as_deref(),
    );
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
pub(super) fn fault(id: HookId, r: CUresult, req: Request) -> bool {
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
    let (live, by_library) = match live {
        Some((l, h)) => (Some(l), h),
        None => (None, Vec::new()),
    };
    let facts = OomFacts {
        kind: req.kind,
        requested: req.bytes,
        device,
        free,
        total,
        live,
        holders: by_library,
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
pub(super) fn pre(id: HookId, req: Request) -> Option<CUresult> {
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
