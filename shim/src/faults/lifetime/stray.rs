//! Stray contexts: a context on a device the process does nothing on while it works on
//! another (the rule and its timing: `seedance_core::stray`).
//!
//! Nothing here is on a hot path. What a process did on each device is put together only
//! when a context ends, before an opt-in repair, and at exit: contexts by device from the
//! tracker, launches, copies and other stream operations from the per-thread work shards
//! (cumulative counts, attributed to a context through their stream key), and live device
//! memory by device from the allocation table (`cuPointerGetAttribute` per address, cold).
//! The largest memory figure seen per device is kept, so memory freed with an ended context
//! still counts at exit.

use super::*;
use crate::faults::alloc;
use seedance_core::stray::{
    explain_stray, judged_at_exit, repair_target, working_elsewhere, ContextMemory, DeviceUse,
    StrayFacts,
};
use seedance_core::StrayRepair;
use seedance_trace::{DeviceUse as TraceUse, StrayContext};
use std::sync::atomic::Ordering;

/// Largest (allocations, bytes) seen per device at an evaluation.
static PEAK: Mutex<BTreeMap<i32, (u64, u64)>> = Mutex::new(BTreeMap::new());
/// The stray contexts reported, by device (once per device).
static REPORTED: Mutex<BTreeMap<i32, StrayContext>> = Mutex::new(BTreeMap::new());
/// Retains of device 0 redirected to another device and not yet released: (device, count).
static REDIRECTED: Mutex<Option<(i32, u64)>> = Mutex::new(None);
/// The final per-device figures, computed at exit.
static FINAL: Mutex<Vec<TraceUse>> = Mutex::new(Vec::new());
/// Devices (ordinals 0 to 63) the process ever made a context on, one bit each: a context
/// end on a process's only device is not judged (only its memory noted).
static DEVICES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Notes a context made on `device` (from the context hooks).
pub(super) fn note_context(device: Option<i32>) {
    if let Some(d) = device.filter(|d| (0..64).contains(d)) {
        DEVICES.fetch_or(1 << d, Ordering::Relaxed);
    }
}

/// Whether the process made contexts on more than one device (ordinals above 63 count as
/// "maybe").
fn several_devices(device: i32) -> bool {
    !(0..64).contains(&device) || DEVICES.load(Ordering::Relaxed) & !(1u64 << device) != 0
}

/// Keeps the largest live device memory seen per device (memory freed with an ended
/// context still counts at exit). One `cuPointerGetAttribute` per live allocation, at most
/// 4096.
fn note_peak() {
    let live = alloc::live_by_device();
    let mut peak = PEAK.lock();
    for (&d, &(n, b)) in &live {
        let p = peak.entry(d).or_default();
        if b > p.1 {
            *p = (n, b);
        }
    }
}

/// What the process did on each device it made a context on or allocated on, by device.
fn usage() -> Vec<DeviceUse> {
    note_peak();
    let shards = work::shards();
    let mut by: BTreeMap<i32, DeviceUse> = BTreeMap::new();
    let t = TRACKER.lock();
    // Counted as contexts are made and end (a primary context retained again keeps its
    // incarnation: one context), not by walking every context seen.
    for (&d, c) in t.device_contexts() {
        let u = by.entry(d).or_insert(DeviceUse {
            device: d,
            ..DeviceUse::default()
        });
        u.contexts += c.contexts;
        u.live += c.live;
    }
    for shard in &shards {
        for (key, counts) in shard.keys() {
            let owner = match key_kind(key) {
                KeyKind::Stream(h) => t.stream(h).and_then(|o| o.ctx).or(t.key_owner(key)),
                _ => t.key_owner(key),
            };
            let Some(d) = owner.and_then(|c| t.context(c)).and_then(|c| c.device) else {
                continue;
            };
            let u = by.entry(d).or_insert(DeviceUse {
                device: d,
                ..DeviceUse::default()
            });
            u.launches += counts.launches;
            u.other_work += counts.copies + counts.ops;
        }
    }
    drop(t);
    for (&d, &(n, b)) in PEAK.lock().iter() {
        let u = by.entry(d).or_insert(DeviceUse {
            device: d,
            ..DeviceUse::default()
        });
        u.allocations = n;
        u.bytes = b;
    }
    by.into_values().collect()
}

/// This process's used memory on CUDA ordinal `device` as NVML lists it.
fn context_memory(device: i32) -> ContextMemory {
    let Some(nvml) = alloc::nvml() else {
        return ContextMemory::Unknown;
    };
    let Some(index) = topo::get()
        .devices
        .iter()
        .find(|d| d.ordinal == device)
        .and_then(|d| d.nvml_index)
    else {
        return ContextMemory::Unknown;
    };
    let me = std::process::id();
    match crate::driver::nvml::running_processes(nvml, vec![index]) {
        Some(mut v) => match v.pop().flatten() {
            Some(procs) => procs
                .iter()
                .find(|&&(pid, _)| pid == me)
                .and_then(|&(_, used)| used)
                .map_or(ContextMemory::NotListed, ContextMemory::Nvml),
            None => ContextMemory::Unknown,
        },
        None => ContextMemory::Unknown,
    }
}

fn trace_use(u: &DeviceUse, nvml: Option<u64>) -> TraceUse {
    TraceUse {
        device: u.device,
        contexts: u.contexts,
        launches: u.launches,
        other_work: u.other_work,
        bytes: u.bytes,
        allocations: u.allocations,
        worked: u.worked(),
        nvml_used_bytes: nvml,
    }
}

/// The first context the process made on `device`: (creating call, thread).
fn creator(device: i32) -> Option<(&'static str, u64)> {
    let t = TRACKER.lock();
    t.device_contexts()
        .get(&device)
        .map(|c| (c.first_function, c.first_tid))
}

/// Reports a stray context on `device` once: one stderr line and a `stray_context` event.
fn report(uses: &[DeviceUse], device: i32, decided: &str, redirected_to: Option<i32>) {
    if REPORTED.lock().contains_key(&device) {
        return;
    }
    let elsewhere = match redirected_to {
        Some(k) => uses.iter().filter(|u| u.device == k).copied().collect(),
        None => working_elsewhere(uses, device),
    };
    if elsewhere.is_empty() {
        return;
    }
    let there = uses
        .iter()
        .find(|u| u.device == device)
        .copied()
        .unwrap_or(DeviceUse {
            device,
            ..DeviceUse::default()
        });
    let (function, tid) = creator(device).unwrap_or((
        HookId::cuDevicePrimaryCtxRetain.name(),
        platform::thread_id(),
    ));
    let memory = if redirected_to.is_some() {
        ContextMemory::Unknown
    } else {
        context_memory(device)
    };
    let mut explanation = explain_stray(&StrayFacts {
        device,
        function,
        tid,
        there,
        elsewhere: &elsewhere,
        memory,
    });
    match (decided, redirected_to) {
        ("redirected", Some(k)) => {
            explanation = format!(
                "{explanation} [repaired: SEEDANCE_STRAY_CONTEXT=redirect retained device {k}'s \
                 primary context instead; device 0 was not touched]"
            )
        }
        ("refused", _) => {
            explanation = format!(
                "{explanation} [refused: SEEDANCE_STRAY_CONTEXT=refuse returned \
                 CUDA_ERROR_DEVICE_UNAVAILABLE (46) without reaching the driver]"
            )
        }
        _ => {}
    }
    let bytes = match memory {
        ContextMemory::Nvml(b) => Some(b),
        _ => None,
    };
    let event = StrayContext {
        device,
        function: function.to_string(),
        creating_tid: tid,
        decided: decided.to_string(),
        redirected_to,
        there: trace_use(&there, bytes),
        working_devices: elsewhere.iter().map(|u| trace_use(u, None)).collect(),
        context_bytes: bytes,
        explanation: explanation.clone(),
    };
    {
        let mut r = REPORTED.lock();
        if r.contains_key(&device) {
            return;
        }
        r.insert(device, event.clone());
    }
    stderr::say(&explanation);
    output::emit(Event::StrayContext(event));
}

/// Before a context on `device` ends (destroy, reset, last primary release): reported now
/// when another device is already worked on; otherwise decided at exit.
pub(super) fn at_context_end(device: Option<i32>) {
    let Some(device) = device else { return };
    if !several_devices(device) || REPORTED.lock().contains_key(&device) {
        // Still remembered for the exit summary's figures: the memory dies with the context.
        note_peak();
        return;
    }
    let uses = usage();
    report(&uses, device, "context_end", None);
}

/// At the shim's `.fini_array` entry (the driver still up): every device with a context
/// alive is judged (one whose contexts all ended was judged at each end), new stray
/// contexts reported, and the final figures kept for the exit summary.
pub fn at_exit() {
    if !on() {
        return;
    }
    cold(|| {
        let uses = usage();
        for u in uses.iter().filter(|u| judged_at_exit(u)) {
            report(&uses, u.device, "exit", None);
        }
        let mut reported = REPORTED.lock();
        for (d, ev) in reported.iter_mut() {
            if let Some(u) = uses.iter().find(|u| u.device == *d) {
                ev.there = trace_use(u, ev.context_bytes);
            }
        }
        let nvml: BTreeMap<i32, Option<u64>> = reported
            .iter()
            .map(|(d, ev)| (*d, ev.context_bytes))
            .collect();
        *FINAL.lock() = uses
            .iter()
            .map(|u| trace_use(u, nvml.get(&u.device).copied().flatten()))
            .collect();
    });
}

/// For the exit summary: every device with what the process did there, and the stray
/// contexts with their final figures.
pub fn stray_summary() -> (Vec<TraceUse>, Vec<StrayContext>) {
    (
        FINAL.lock().clone(),
        REPORTED.lock().values().cloned().collect(),
    )
}

/// The opt-in repair, before `cuDevicePrimaryCtxRetain(pctx, dev)`: in `fix` mode with
/// `SEEDANCE_STRAY_CONTEXT=redirect` or `refuse`, a retain of device 0 by a process that
/// works on exactly one other device and never had a context on device 0 is sent to that
/// device's primary context (`redirect`) or answered `CUDA_ERROR_DEVICE_UNAVAILABLE` (46)
/// (`refuse`). `None`: the call goes to the driver unchanged.
///
/// # Safety
/// `pctx` is null or valid for one write (the driver's contract).
pub unsafe fn pre_primary_retain(
    id: HookId,
    pctx: *mut CUcontext,
    dev: CUdevice,
) -> Option<CUresult> {
    let cfg = config::get();
    if cfg.stray_context == StrayRepair::Off || config::switches() & config::sw::FIX == 0 || !on() {
        return None;
    }
    cold(|| {
        let device = query::ordinal_of(dev).unwrap_or(dev);
        let uses = usage();
        let k = repair_target(&uses, device)?;
        match cfg.stray_context {
            StrayRepair::Off => None,
            StrayRepair::Refuse => {
                output::tally_error(id, CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE);
                report(&uses, device, "refused", None);
                Some(CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE)
            }
            StrayRepair::Redirect => {
                let target = query::device_handle(k)?;
                let r = query::primary_retain(pctx, target)?;
                if r.is_success() {
                    {
                        let mut red = REDIRECTED.lock();
                        let n = red.map_or(0, |(_, n)| n);
                        *red = Some((k, n + 1));
                    }
                    // SAFETY: the driver wrote *pctx on success.
                    unsafe { super::contexts::ok_primary_retain(id, pctx, target) };
                    report(&uses, device, "redirected", Some(k));
                    super::report::count_repair("stray_context_redirect");
                }
                Some(r)
            }
        }
    })
}

/// Before `cuDevicePrimaryCtxRelease(_v2)(dev)`: a release of device 0 that balances a
/// redirected retain releases the device the retain went to. `Some(result)`: handled.
pub(super) fn redirected_release(id: HookId, dev: CUdevice) -> Option<CUresult> {
    if REDIRECTED.lock().is_none() {
        return None;
    }
    let device = query::ordinal_of(dev).unwrap_or(dev);
    if device != 0 {
        return None;
    }
    let k = {
        let mut red = REDIRECTED.lock();
        let (k, n) = (*red)?;
        *red = (n > 1).then_some((k, n - 1));
        k
    };
    let target = query::device_handle(k)?;
    let r = query::primary_release(target)?;
    if r.is_success() {
        // SAFETY: no pointer is involved.
        unsafe { super::contexts::ok_primary_release(id, target) };
    }
    Some(r)
}
