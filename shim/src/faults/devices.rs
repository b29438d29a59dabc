//! Device faults: explain a request for a device the process cannot have and, in `fix`
//! mode, send it to the next available device (docs/reliability.md).
//!
//! The wrappers of `cuDeviceGet`, `cudaSetDevice`, `cuDevicePrimaryCtxRetain` and
//! `cuCtxCreate_v2/_v3/_v4` forward first and come here only after a failure, so a healthy
//! program pays nothing. Here the facts are gathered and `seedance_core::fallback` decides:
//! the failure is classified ([`Fault::classify`]: `CUDA_ERROR_INVALID_DEVICE` 101,
//! `CUDA_ERROR_DEVICE_UNAVAILABLE` 46, and for context creation `CUDA_ERROR_OUT_OF_MEMORY`
//! 2), explained with the topology, and in `fix` mode repeated by the core's retry loop
//! ([`OrdinalMap::fall_back`]) on the devices it chooses among those usable
//! ([`unusable`]). The choice is remembered per requested ordinal, so every entry point and
//! every thread agree.
//!
//! Before any of that, `seedance_core::probe` decides whether the failure is a mistake or a
//! question (a negative value, one no driver can report, the end of an enumeration): a
//! question keeps the driver's answer, prints nothing, and is only counted
//! (`exit_summary.device_questions`). For it, each thread's last `cuDeviceGet` or
//! `cuDeviceGetCount` is remembered ([`count_device_get`], [`count_device_count`]).

use crate::hooks::ids::HookId;
use crate::{driver::query, driver::topo, rt::config, rt::output, rt::stderr};
use libc::c_int;
use once_cell::sync::Lazy;
use seedance_core::fallback::{self, DeviceFacts, Fallback, Fault, OrdinalMap, Request, Unusable};
use seedance_core::once::ExplainOnce;
use seedance_core::probe::{self, Decisions, Entry, Last, Question, Verdict};
use seedance_cuda::{CUdevice, CUresult};
use seedance_trace::{DeviceFallback, DeviceFault, Event};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The device argument of a call: an ordinal (`cuDeviceGet`, `cudaSetDevice`) or a
/// `CUdevice` handle (context creation).
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// A CUDA ordinal.
    Ordinal(i32),
    /// A `CUdevice` handle.
    Handle(CUdevice),
}

impl Target {
    /// The raw argument value.
    pub fn value(self) -> i32 {
        match self {
            Target::Ordinal(v) | Target::Handle(v) => v,
        }
    }
}

static MAP: Lazy<OrdinalMap> = Lazy::new(OrdinalMap::new);
/// The verdict (question or mistake) kept for each requested ordinal.
static DECISIONS: Lazy<Decisions> = Lazy::new(Decisions::new);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);
static SEEN: ExplainOnce<(usize, i32, u32)> = ExplainOnce::unbounded();
/// Failed requests taken as questions, calls by [`HookId`] and kind ([`Question::index`]):
/// atomics, so that counting one takes no lock.
static QUESTIONS: [[AtomicU64; Question::ALL.len()]; HookId::ALL.len()] =
    [const { [const { AtomicU64::new(0) }; Question::ALL.len()] }; HookId::ALL.len()];

thread_local! {
    /// This thread's last `cuDeviceGet` or `cuDeviceGetCount` ([`Last::to_bits`]).
    static LAST: Cell<u64> = const { Cell::new(0) };
}

fn last() -> Last {
    Last::from_bits(LAST.try_with(Cell::get).unwrap_or(0))
}

fn set_last(l: Last) {
    let _ = LAST.try_with(|c| c.set(l.to_bits()));
}

/// Counts a `cuDeviceGet` and, when the driver found the device, remembers the ordinal as
/// this thread's last look-up (a failure is remembered by [`on_failure`]).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline]
pub unsafe fn count_device_get(id: HookId, r: CUresult, ordinal: c_int) {
    output::count(id, r);
    if r.is_success() {
        set_last(Last::Found(ordinal));
    }
}

/// Counts a `cuDeviceGetCount` and, on success, remembers the count as this thread's last
/// look-up.
///
/// # Safety
/// `count` is the program's out-pointer, which the driver filled when `r` is success.
#[inline]
pub unsafe fn count_device_count(id: HookId, r: CUresult, count: *mut c_int) {
    output::count(id, r);
    if r.is_success() && !count.is_null() {
        // SAFETY: non-null, and the driver just wrote the count there.
        set_last(Last::Count(unsafe { count.read() }));
    }
}

/// A context was made on a device: this thread's next look-up starts a new history. A
/// program that uses a device between two look-ups walks its list of devices rather than
/// enumerating them (ordinals 6 and then 7 of an 8-GPU program on a 1-GPU host are two
/// mistakes, not a probe).
#[inline]
pub fn used_a_device() {
    set_last(Last::Nothing);
}

fn creates_context(id: HookId) -> bool {
    matches!(
        id,
        HookId::cuCtxCreate_v2
            | HookId::cuCtxCreate_v3
            | HookId::cuCtxCreate_v4
            | HookId::cuDevicePrimaryCtxRetain
    )
}

/// Explains a failed device-taking call and, in `fix` mode, repeats it on another device
/// through `retry`. Returns the result the caller should get, or `None` when the failure is
/// not a device fault (the caller then reports it as a plain failure).
pub fn on_failure(
    id: HookId,
    r: CUresult,
    target: Target,
    retry: &mut dyn FnMut(Target) -> CUresult,
) -> Option<CUresult> {
    let fault = Fault::classify(r.0, creates_context(id))?;
    // Not for cudaSetDevice: its retry goes through the runtime, whose own driver calls
    // must reach the wrappers' work as any other.
    let _inside = if id == HookId::cudaSetDevice {
        None
    } else {
        Some(crate::rt::guard::enter()?)
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("device_fault");
        handle(id, r, fault, target, retry)
    }));
    Some(outcome.unwrap_or(r))
}

fn handle(
    id: HookId,
    r: CUresult,
    fault: Fault,
    target: Target,
    retry: &mut dyn FnMut(Target) -> CUresult,
) -> CUresult {
    let requested = match target {
        Target::Ordinal(o) => o,
        Target::Handle(h) => query::ordinal_of(h).unwrap_or(h),
    };
    let entry = if id == HookId::cuDeviceGet {
        Entry::Lookup
    } else {
        Entry::Use
    };
    let verdict = decide(entry, requested);
    if entry == Entry::Lookup {
        set_last(verdict.then(requested));
    }
    if let Some(q) = verdict.question() {
        QUESTIONS[id as usize][q.index()].fetch_add(1, Ordering::Relaxed);
        if let Verdict::Explained(_) = verdict {
            explain_question(id, r, requested);
        }
        return r;
    }
    output::tally_error(id, r);
    let topology = topo::get();
    let explanation = match fault {
        Fault::InvalidOrdinal => topo::explain_invalid(requested, topology),
        Fault::Unavailable => topo::explain_unavailable(requested, topology),
        Fault::ContextOutOfMemory => topo::explain_oom(requested, topology),
    };
    say_fault(id, r, requested, fault, explanation, topology);
    let w = config::switches();
    if w & config::sw::FIX == 0 || w & config::sw::FALLBACK == 0 {
        return r;
    }
    let req = Request {
        requested,
        code: r.0,
        fault,
        creates_context: creates_context(id),
    };
    let candidates = topo::candidates(topology, unusable);
    let outcome = MAP.fall_back(&req, &candidates, |chosen| {
        let new_target = match target {
            Target::Ordinal(_) => Target::Ordinal(chosen),
            Target::Handle(_) => Target::Handle(query::device_handle(chosen)?),
        };
        let r2 = retry(new_target);
        Some((r2, r2.0))
    });
    match outcome {
        Fallback::Repaired { chosen, result } => {
            announce(id, requested, chosen, fault, topology);
            result
        }
        Fallback::Failed { result, .. } => result,
        Fallback::NoDevice => {
            stderr::say_once(
                &format!("nofallback:{requested}"),
                &format!(
                    "fix: no other device can take ordinal {requested}'s work; returning the original error"
                ),
            );
            r
        }
        Fallback::GaveUp => r,
    }
}

/// The process's verdict for `requested`: the one kept from its first failed request, or
/// this request's own ([`probe::classify`], with this thread's history), which is then kept.
/// The topology is taken only for a question from an enumeration's shape while
/// `CUDA_VISIBLE_DEVICES` is set, to learn whether the variable renumbered that ordinal.
fn decide(entry: Entry, requested: i32) -> Verdict {
    if let Some(v) = DECISIONS.get(requested) {
        return v;
    }
    let count = query::device_count();
    let mut verdict = probe::classify(entry, requested, count, last(), false);
    if verdict.question().is_some_and(Question::from_enumeration)
        && std::env::var_os("CUDA_VISIBLE_DEVICES").is_some()
        && topo::renumbered(requested, topo::get())
    {
        verdict = probe::classify(entry, requested, count, last(), true);
    }
    DECISIONS.decide(requested, verdict).0
}

/// Explains, once, a question that `CUDA_VISIBLE_DEVICES` accounts for, leaving the
/// driver's answer.
fn explain_question(id: HookId, r: CUresult, requested: i32) {
    let topology = topo::get();
    let explanation = format!(
        "{}; not repaired: the request continues an enumeration of the devices",
        topo::explain_invalid(requested, topology)
    );
    say_fault(
        id,
        r,
        requested,
        Fault::InvalidOrdinal,
        explanation,
        topology,
    );
}

/// The stderr line and `device_fault` record of a device fault, once per (function,
/// ordinal, code).
fn say_fault(
    id: HookId,
    r: CUresult,
    requested: i32,
    fault: Fault,
    explanation: String,
    topology: &seedance_topology::Topology,
) {
    if !SEEN.first((id as usize, requested, r.0)) {
        return;
    }
    let code_name = result_name(id, r);
    stderr::say(&output::fault_line(id, code_name, r, &explanation));
    output::emit(Event::DeviceFault(DeviceFault {
        function: id.name().to_string(),
        requested_ordinal: requested,
        result: r.0,
        result_name: code_name.map(str::to_string),
        fault: fault.as_str().to_string(),
        visible_devices: topology.devices.len() as u32,
        explanation,
    }));
}

/// The name of `r` as the caller knows it: `cudaError_t` names for the runtime's
/// `cudaSetDevice` (driver_types.h: 101 cudaErrorInvalidDevice, 46
/// cudaErrorDevicesUnavailable), `CUresult` names for driver calls.
fn result_name(id: HookId, r: CUresult) -> Option<&'static str> {
    match (id, r.0) {
        (HookId::cudaSetDevice, 101) => Some("cudaErrorInvalidDevice"),
        (HookId::cudaSetDevice, 46) => Some("cudaErrorDevicesUnavailable"),
        (HookId::cudaSetDevice, _) => None,
        _ => r.name(),
    }
}

fn announce(
    id: HookId,
    requested: i32,
    chosen: i32,
    fault: Fault,
    topology: &seedance_topology::Topology,
) {
    FALLBACKS.fetch_add(1, Ordering::Relaxed);
    let reason = fault.reason(requested);
    let text = format!(
        "{}: {}",
        id.name(),
        topo::explain_fallback(requested, chosen, &reason, topology)
    );
    stderr::say_once(&format!("fallback:{requested}:{chosen}"), &text);
    let key = (usize::MAX - id as usize, requested, chosen as u32);
    if SEEN.first(key) {
        output::emit(Event::DeviceFallback(DeviceFallback {
            function: id.name().to_string(),
            requested_ordinal: requested,
            chosen_ordinal: chosen,
            chosen_pci_bus_id: topo::pci_bus_id(chosen, topology),
            reason,
            result: 0,
            explanation: text,
        }));
    }
}

/// Repairs made, by kind, for the exit summary.
pub fn repairs() -> BTreeMap<String, u64> {
    let n = FALLBACKS.load(Ordering::Relaxed);
    if n == 0 {
        BTreeMap::new()
    } else {
        BTreeMap::from([("device_fallback".to_string(), n)])
    }
}

/// Failed requests taken as questions, function -> kind -> calls, for the exit summary.
pub fn questions() -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for id in HookId::ALL {
        for q in Question::ALL {
            let n = QUESTIONS[*id as usize][q.index()].load(Ordering::Relaxed);
            if n > 0 {
                out.entry(id.name().to_string())
                    .or_default()
                    .insert(q.as_str().to_string(), n);
            }
        }
    }
    out
}

/// Fallback choices in force, requested -> chosen, for the exit summary.
pub fn fallbacks() -> BTreeMap<String, i32> {
    if FALLBACKS.load(Ordering::Relaxed) == 0 {
        return BTreeMap::new();
    }
    MAP.choices()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Why the visible device `d` cannot take work ([`fallback::unusable`] decides), from the
/// topology's facts about it; `excluded`: it matches `SEEDANCE_EXCLUDE_DEVICES`.
pub fn unusable(
    d: &seedance_topology::VisibleDevice,
    excluded: bool,
    min_free: Option<u64>,
) -> Option<Unusable> {
    use seedance_topology::ComputeMode;
    let facts = DeviceFacts {
        ordinal: d.ordinal,
        excluded,
        prohibited: d.compute_mode == ComputeMode::Prohibited,
        exclusive_process: d.compute_mode == ComputeMode::ExclusiveProcess,
        busy_processes: d.busy_processes,
        free_mem_bytes: d.free_mem_bytes,
    };
    fallback::unusable(&facts, min_free)
}
