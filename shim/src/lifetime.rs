//! Context lifetime and asynchronous safety (issue 5): destroy or reset with work still
//! pending, handles used after their context ended, and pinned (or stream-ordered device)
//! memory freed while copies still use it.
//!
//! The hooks here are the `pre(..)`, `fault(..)` and `ok(..)` clauses of the hook table.
//! Decisions and records live in `seedance_core::lifetime` (a [`Tracker`] behind a mutex)
//! and `seedance_core::work` (lock-free per-thread counts of launches and copies).
//!
//! Cost on the success path:
//!
//! * a launch: one thread-local access and a bump of a per-thread counter (`ok_launch_*`);
//! * an asynchronous copy: the same plus one record in a per-thread ring;
//! * `cuMemAlloc`/`cuMemFree`: one relaxed load, until some context has ended with
//!   allocations in it (then a lock-free look-up in a table of dead addresses);
//! * everything else (create, destroy, synchronize, pinned alloc and free, event record)
//!   takes the tracker's lock or walks the shards; all of it blocks or allocates anyway.
//!
//! At the moments that read the counts (a context destroy, reset or last release, a free
//! or unregister of pinned memory, a stream-ordered free, exit), a stream the counts call
//! busy is confirmed with the driver (`cuStreamQuery`) before anything is reported or
//! repaired, so work the program waited for in a way the shim does not see (an event
//! query, a synchronous copy) is not reported.
//!
//! In `fix` mode: a context is synchronised (`cuCtxSynchronize` with it current) before a
//! destroy, reset or last release that would abandon work; the streams a pinned free or
//! unregister would race with are synchronised before it; a free or destroy of a handle the
//! driver released with its context returns `CUDA_SUCCESS` without reaching the driver, as
//! does a synchronize of a stream or event whose work all completed before its context
//! ended. Each is explained once on stderr and in the trace, and counted in the exit
//! summary's `repairs`.

use crate::hooks::HookId;
use crate::{alloc, platform, query, session};
use libc::{c_int, c_uint, c_void};
use once_cell::sync::{Lazy, OnceCell};
use parking_lot::Mutex;
use seedance_core::lifetime::{
    exit_paragraph, explain_dead_handle, explain_device_in_use, explain_pending_at_end,
    explain_pinned_in_use, Context, EndKind, ExitFindings, HandleKind, Leak, Pending, Pinned,
    PinnedKind, Site, StreamWork, Tracker,
};
use seedance_core::live::LiveTable;
use seedance_core::work::{self, key_kind, CopyKind, Counts, KeyKind, Shard};
use seedance_core::Mode;
use seedance_cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUlaunchConfig, CUresult, CUstream,
    CU_STREAM_PER_THREAD,
};
use seedance_trace::{
    ContextEnd, Event, LeakedAllocations, LifetimeFault, LifetimeRepair, LifetimeSite, LiveContext,
    MemoryRange, StreamPending, UnsynchronizedStream,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};

static TRACKER: Lazy<Mutex<Tracker>> = Lazy::new(|| Mutex::new(Tracker::new()));

/// Device addresses that died with their context, for the lock-free check on `cuMemFree`.
static DEAD: LiveTable<4096> = LiveTable::new();
/// Set once some context ended with device allocations in it.
static ANY_DEAD: AtomicBool = AtomicBool::new(false);

/// A fault as explained once: (function, kind, context id).
type FaultKey = (usize, &'static str, u32);
/// Faults already explained.
static SEEN: Lazy<Mutex<HashSet<FaultKey>>> = Lazy::new(|| Mutex::new(HashSet::new()));
/// Most distinct faults remembered.
const MAX_SEEN: usize = 4096;
/// Repairs made, by kind.
static REPAIRS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
/// Calls that got `CUDA_ERROR_DEINITIALIZED`, by function.
static LATE: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
/// Stream keys whose context the driver could not tell.
static UNRESOLVED: Lazy<Mutex<HashSet<u64>>> = Lazy::new(|| Mutex::new(HashSet::new()));
/// Context of each live allocation, asked of the driver at exit (before it shuts down).
static ATTRIBUTION: Lazy<Mutex<HashMap<u64, Option<u32>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// Most live allocations attributed at exit.
const MAX_ATTRIBUTED: usize = 4096;
/// The exit report, computed once.
static EXIT: OnceCell<ExitReport> = OnceCell::new();

thread_local! {
    /// Work a destroy on this thread is about to abandon: (context id, counts), from the
    /// `pre` hook to the `ok` hook.
    static ABANDONED: RefCell<Option<(u32, Counts)>> = const { RefCell::new(None) };
}

/// Lifetime tracking in force, set when the configuration is read ([`configure`]).
static ON: AtomicBool = AtomicBool::new(false);

/// Called once with the validated configuration: tracking is on unless the mode is `off`
/// or `SEEDANCE_LIFETIME` is off.
pub fn configure(cfg: &seedance_core::Config) {
    ON.store(cfg.mode != Mode::Off && cfg.lifetime, Ordering::Relaxed);
}

/// Turns tracking off for good (a forked child, which only forwards: a lock another thread
/// of the parent held at the fork would never be released there).
pub fn disable() {
    ON.store(false, Ordering::Relaxed);
    ANY_DEAD.store(false, Ordering::Relaxed);
}

/// Whether lifetime tracking is on: one relaxed load. Every wrapper reads the configuration
/// (`session::active`) before it gets here; a hook that runs before that (a `pre` clause of
/// the very first call) sees "off".
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn fix() -> bool {
    session::config().mode == Mode::Fix
}

/// Runs a cold path, never letting a panic reach the program.
fn cold<T: Default>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_default()
}

fn site(t: &mut Tracker, id: HookId) -> Site {
    t.site(
        id.name(),
        platform::thread_id(),
        seedance_trace::writer::now_ns(),
    )
}

/// Reads what the driver wrote through an out-pointer on success.
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

fn is_per_thread(id: HookId) -> bool {
    id.name().ends_with("_ptsz")
}

// ---------------------------------------------------------------------------------------
// Reports.

fn lifetime_site(s: &Site) -> LifetimeSite {
    LifetimeSite {
        function: s.function.to_string(),
        tid: s.tid,
        ts_ns: s.ts_ns,
        seq: s.seq,
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn stream_pending(w: &StreamWork) -> StreamPending {
    StreamPending {
        stream: w.stream.map(hex),
        default_stream: w
            .stream
            .is_none()
            .then(|| if w.per_thread { "per_thread" } else { "legacy" }.to_string()),
        launches: w.counts.launches,
        copies: w.counts.copies,
        created: w.created.as_ref().map(lifetime_site),
    }
}

/// One lifetime finding, as reported.
struct Finding<'a> {
    id: HookId,
    kind: &'static str,
    result: Option<CUresult>,
    ctx: Option<&'a Context>,
    handle: Option<(HandleKind, u64, Option<Site>)>,
    streams: Vec<StreamWork>,
    range: Option<(u64, u64)>,
    /// The repair made, by kind, with the streams it synchronised.
    repair: Option<(&'static str, Vec<String>)>,
    explanation: String,
}

fn report(f: Finding<'_>) {
    if let Some(r) = f.result.filter(|r| !r.is_success()) {
        session::tally_error(f.id, r);
    }
    if let Some((kind, _)) = &f.repair {
        *REPAIRS.lock().entry(kind).or_insert(0) += 1;
    }
    let key = (f.id as usize, f.kind, f.ctx.map_or(u32::MAX, |c| c.id));
    let first = {
        let mut seen = SEEN.lock();
        seen.len() < MAX_SEEN && seen.insert(key)
    };
    if !first {
        return;
    }
    let line = match f.result {
        Some(r) if !r.is_success() => format!(
            "{}: {} ({}): {}",
            f.id.name(),
            r.name().unwrap_or("error"),
            r.0,
            f.explanation
        ),
        _ => format!("{}: {}", f.id.name(), f.explanation),
    };
    session::say(&line);
    let end = f.ctx.and_then(|c| c.end.as_ref());
    session::emit(Event::LifetimeFault(LifetimeFault {
        function: f.id.name().to_string(),
        kind: f.kind.to_string(),
        result: f.result.map(|r| r.0),
        result_name: f.result.and_then(|r| r.name()).map(str::to_string),
        context: f.ctx.map(|c| hex(c.handle)),
        device: f.ctx.and_then(|c| c.device),
        generation: f.ctx.map(|c| c.generation),
        handle: f.handle.as_ref().map(|h| hex(h.1)),
        handle_kind: f.handle.as_ref().map(|h| h.0.as_str().replace(' ', "_")),
        created: f
            .handle
            .as_ref()
            .and_then(|h| h.2.as_ref())
            .map(lifetime_site),
        ended: end.map(|e| ContextEnd {
            how: e.how.as_str().to_string(),
            site: lifetime_site(&e.site),
            lost_launches: e.lost.launches,
            lost_copies: e.lost.copies,
        }),
        streams: f.streams.iter().map(stream_pending).collect(),
        range: f.range.map(|(lo, bytes)| MemoryRange {
            address: hex(lo),
            bytes,
        }),
        repaired: f.repair.is_some(),
        explanation: f.explanation.clone(),
    }));
    if let Some((kind, streams)) = f.repair {
        session::emit(Event::LifetimeRepair(LifetimeRepair {
            function: f.id.name().to_string(),
            kind: kind.to_string(),
            context: f.ctx.map(|c| hex(c.handle)),
            streams,
            result: match f.result {
                Some(r) => r.0,
                None => 0,
            },
            explanation: line,
        }));
    }
}

/// Repairs made, by kind, for the exit summary.
pub fn repairs() -> BTreeMap<String, u64> {
    REPAIRS
        .lock()
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Pending work.

/// Resolves the context of stream keys the tracker does not know (streams made before the
/// shim saw them, or through an entry point it does not hook) by asking the driver.
fn learn_keys(t: &mut Tracker, shards: &[&'static Shard]) {
    let mut tried = UNRESOLVED.lock();
    // Only streams with pending work matter.
    let unknown = t.pending(shards, |k| {
        matches!(key_kind(k), KeyKind::Stream(_)) && t.key_owner(k).is_none() && !tried.contains(&k)
    });
    for p in unknown {
        let KeyKind::Stream(h) = key_kind(p.key) else {
            continue;
        };
        let owner = query::stream_get_ctx(h as CUstream)
            .ok()
            .and_then(|c| t.live_context(c as u64).map(|c| c.id));
        match owner {
            Some(id) => t.learn_key(p.key, id),
            None => {
                tried.insert(p.key);
            }
        }
    }
}

/// Whether the driver says the work on `p` is still running. Streams it cannot ask about
/// (another thread's per-thread default stream) count as running.
fn still_running(p: &Pending) -> bool {
    let ask = |r: Result<bool, CUresult>| match r {
        Ok(b) => b,
        Err(CUresult::CUDA_ERROR_NOT_FOUND) => true,
        Err(_) => false,
    };
    match key_kind(p.key) {
        KeyKind::Stream(h) => ask(query::stream_busy(h as CUstream)),
        KeyKind::Legacy(c) => {
            ask(
                query::with_context(c as usize, || query::stream_busy(std::ptr::null_mut()))
                    .and_then(|r| r),
            )
        }
        KeyKind::PerThread(c) => {
            if p.shards.len() == 1 && Some(p.shards[0]) == work::own_shard_id() {
                ask(query::with_context(c as usize, || {
                    query::stream_busy(CU_STREAM_PER_THREAD as CUstream)
                })
                .and_then(|r| r))
            } else {
                true
            }
        }
    }
}

fn stream_work(t: &Tracker, p: &Pending) -> StreamWork {
    let (stream, per_thread) = match key_kind(p.key) {
        KeyKind::Stream(h) => (Some(h), false),
        KeyKind::Legacy(_) => (None, false),
        KeyKind::PerThread(_) => (None, true),
    };
    StreamWork {
        stream,
        per_thread,
        counts: p.counts,
        created: stream.and_then(|h| t.stream(h)).map(|o| o.created.clone()),
    }
}

fn sum(p: &[Pending]) -> Counts {
    p.iter().fold(Counts::default(), |a, p| Counts {
        launches: a.launches + p.counts.launches,
        copies: a.copies + p.counts.copies,
    })
}

/// The pending work of context `cid` that the driver confirms is still running.
fn running_in_context(cid: u32) -> Vec<Pending> {
    let shards = work::shards();
    let pending = {
        let mut t = TRACKER.lock();
        learn_keys(&mut t, &shards);
        t.pending(&shards, |k| t.key_owner(k) == Some(cid))
    };
    pending.into_iter().filter(still_running).collect()
}

/// Retires every key of context `cid` (after it was synchronised or ended).
fn retire_context(t: &mut Tracker, cid: u32) {
    let shards = work::shards();
    t.retire_context(&shards, cid);
}

/// Before a destroy, reset or last release of context `handle`: explains work it would
/// abandon and, in `fix` mode, synchronises the context first.
fn before_end(id: HookId, how: EndKind, handle: u64) {
    let Some(ctx) = TRACKER.lock().live_context(handle).cloned() else {
        return;
    };
    let running = running_in_context(ctx.id);
    if running.is_empty() {
        return;
    }
    let total = sum(&running);
    let repaired = fix()
        && query::with_context(handle as usize, query::ctx_synchronize).is_ok_and(|r| r.is_ok());
    let mut t = TRACKER.lock();
    let streams: Vec<StreamWork> = running.iter().map(|p| stream_work(&t, p)).collect();
    let explanation = explain_pending_at_end(how, &ctx, &streams, repaired);
    if repaired {
        retire_context(&mut t, ctx.id);
    } else {
        ABANDONED.with(|a| *a.borrow_mut() = Some((ctx.id, total)));
    }
    drop(t);
    let synced = if repaired { vec![hex(handle)] } else { vec![] };
    report(Finding {
        id,
        kind: "pending_work_at_destroy",
        result: None,
        ctx: Some(&ctx),
        handle: None,
        streams,
        range: None,
        repair: repaired.then_some(("synchronize_before_destroy", synced)),
        explanation,
    });
}

/// After a successful destroy, reset or last release of context `handle`: it, its streams,
/// events and pinned memory are dead, and so are the device allocations the driver no
/// longer knows.
fn after_end(id: HookId, how: EndKind, handle: u64) {
    let Some(cid) = TRACKER.lock().live_context(handle).map(|c| c.id) else {
        return;
    };
    let lost = ABANDONED
        .with(|a| a.borrow_mut().take())
        .filter(|(c, _)| *c == cid)
        .map(|(_, n)| n)
        .unwrap_or_default();
    // The driver released the context's allocations: they are the tracked addresses it
    // no longer knows.
    let mut died = Vec::new();
    for e in alloc::live_pointers() {
        match query::pointer_context(e.key) {
            Ok(_) | Err(CUresult::CUDA_ERROR_NOT_FOUND) => {}
            Err(_) => died.push((e.key, e.bytes)),
        }
    }
    for &(addr, bytes) in &died {
        alloc::forget_pointer(addr);
        if DEAD.insert(addr, bytes, None) {
            ANY_DEAD.store(true, Ordering::Relaxed);
        }
    }
    let mut t = TRACKER.lock();
    let s = site(&mut t, id);
    retire_context(&mut t, cid);
    t.context_ended(cid, how, s, lost, &died);
}

/// Records the calling thread's current context as the driver has it now.
fn refresh_current() {
    if let Ok(c) = query::ctx_get_current() {
        work::set_current_context(c);
    }
}

// ---------------------------------------------------------------------------------------
// Use after destroy.

/// Explains a failed call on a handle whose context ended; `true` when explained.
fn explain_dead(
    id: HookId,
    r: CUresult,
    kind: HandleKind,
    handle: u64,
    ctx_id: Option<u32>,
    created: Option<Site>,
    repaired: Option<&'static str>,
) -> bool {
    let t = TRACKER.lock();
    let Some(ctx) = t.ended(ctx_id).cloned() else {
        return false;
    };
    drop(t);
    let what = match repaired {
        Some("already_released") => Some(
            "the driver already released it with its context; returned CUDA_SUCCESS without \
             calling the driver",
        ),
        Some(_) => Some(
            "all its work completed before the context ended; returned CUDA_SUCCESS without \
             calling the driver",
        ),
        None => None,
    };
    let explanation = explain_dead_handle(kind, handle, created.as_ref(), &ctx, what);
    report(Finding {
        id,
        kind: "use_after_destroy",
        result: Some(r),
        ctx: Some(&ctx),
        handle: Some((kind, handle, created)),
        streams: Vec::new(),
        range: None,
        repair: repaired.map(|k| (k, Vec::new())),
        explanation,
    });
    true
}

/// A failed call that ran in the calling thread's current context: explained when that
/// context ended.
fn explain_current(id: HookId, r: CUresult) -> bool {
    if !matches!(r.0, 201 | 709) {
        return false;
    }
    let cur = work::current_context() as u64;
    let ended = TRACKER
        .lock()
        .latest_context(cur)
        .filter(|c| c.end.is_some())
        .map(|c| c.id);
    explain_dead(id, r, HandleKind::Context, cur, ended, None, None)
}

/// A failed call on stream `stream`: explained when its context ended.
fn explain_stream(id: HookId, r: CUresult, stream: CUstream) -> bool {
    if !matches!(r.0, 201 | 400 | 709) {
        return false;
    }
    let h = stream as u64;
    if h <= 2 {
        return explain_current(id, r);
    }
    let owned = TRACKER.lock().stream(h).cloned();
    match owned {
        Some(o) => explain_dead(id, r, HandleKind::Stream, h, o.ctx, Some(o.created), None),
        None => explain_current(id, r),
    }
}

fn explain_event(id: HookId, r: CUresult, event: CUevent) -> bool {
    if !matches!(r.0, 201 | 400 | 709) {
        return false;
    }
    let h = event as u64;
    let owned = TRACKER.lock().event(h).cloned();
    match owned {
        Some(o) => explain_dead(id, r, HandleKind::Event, h, o.ctx, Some(o.created), None),
        None => false,
    }
}

// ---------------------------------------------------------------------------------------
// Contexts.

fn created_context(id: HookId, pctx: *mut CUcontext) {
    // SAFETY: the driver wrote *pctx on success.
    let handle = unsafe { written(pctx) } as u64;
    work::set_current_context(handle as usize);
    let device = query::ctx_get_device().ok();
    let mut t = TRACKER.lock();
    let s = site(&mut t, id);
    t.context_created(handle, device, s);
}

/// After a successful `cuCtxCreate_v2`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_ctx_create_v2(id: HookId, pctx: *mut CUcontext, _flags: c_uint, _dev: CUdevice) {
    if on() {
        cold(|| created_context(id, pctx));
    }
}

/// After a successful `cuCtxCreate_v3`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_ctx_create_v3(
    id: HookId,
    pctx: *mut CUcontext,
    _params: *mut c_void,
    _n: c_int,
    _flags: c_uint,
    _dev: CUdevice,
) {
    if on() {
        cold(|| created_context(id, pctx));
    }
}

/// After a successful `cuCtxCreate_v4`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_ctx_create_v4(
    id: HookId,
    pctx: *mut CUcontext,
    _params: *mut c_void,
    _flags: c_uint,
    _dev: CUdevice,
) {
    if on() {
        cold(|| created_context(id, pctx));
    }
}

/// Before `cuCtxDestroy(_v2)`: pending work explained (and in fix mode synchronised).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_ctx_destroy(id: HookId, ctx: CUcontext) -> Option<CUresult> {
    if on() {
        cold(|| before_end(id, EndKind::Destroyed, ctx as u64));
    }
    None
}

/// After a successful `cuCtxDestroy(_v2)`.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_ctx_destroy(id: HookId, ctx: CUcontext) {
    if on() {
        cold(|| {
            after_end(id, EndKind::Destroyed, ctx as u64);
            refresh_current();
        });
    }
}

/// After a failed call that takes a context (`cuCtxDestroy`, `cuCtxSetCurrent`,
/// `cuCtxPushCurrent`, `cuCtxSynchronize_v2`): explained when the context ended.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn fault_ctx(id: HookId, r: CUresult, ctx: CUcontext) -> bool {
    if !on() || !matches!(r.0, 201 | 709) {
        return false;
    }
    cold(|| {
        if ctx.is_null() {
            return explain_current(id, r);
        }
        let h = ctx as u64;
        let ended = TRACKER
            .lock()
            .latest_context(h)
            .filter(|c| c.end.is_some())
            .map(|c| c.id);
        explain_dead(id, r, HandleKind::Context, h, ended, None, None)
    })
}

/// After a successful `cuDevicePrimaryCtxRetain`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_primary_retain(id: HookId, pctx: *mut CUcontext, dev: CUdevice) {
    if on() {
        cold(|| {
            // SAFETY: the driver wrote *pctx on success.
            let handle = unsafe { written(pctx) } as u64;
            let mut t = TRACKER.lock();
            let s = site(&mut t, id);
            t.primary_retained(handle, Some(dev), s);
        });
    }
}

/// Whether a release of `dev`'s primary context would end it (the shim's count of retains).
fn release_ends(dev: CUdevice) -> Option<u64> {
    let t = TRACKER.lock();
    let c = t.live_primary(dev)?;
    (c.retained <= 1).then_some(c.handle)
}

/// Before `cuDevicePrimaryCtxRelease(_v2)`: when it is the last release, as a destroy.
///
/// # Safety
/// None beyond the C ABI.
pub unsafe fn pre_primary_release(id: HookId, dev: CUdevice) -> Option<CUresult> {
    if on() {
        cold(|| {
            if let Some(h) = release_ends(dev) {
                before_end(id, EndKind::Released, h);
            }
        });
    }
    None
}

/// After a successful `cuDevicePrimaryCtxRelease(_v2)`.
///
/// # Safety
/// None beyond the C ABI.
pub unsafe fn ok_primary_release(id: HookId, dev: CUdevice) {
    if !on() {
        return;
    }
    cold(|| {
        let Some(c) = TRACKER.lock().live_primary(dev).cloned() else {
            return;
        };
        let ended = match query::primary_active(dev) {
            Ok(active) => !active,
            Err(_) => c.retained <= 1,
        };
        if ended {
            after_end(id, EndKind::Released, c.handle);
        } else {
            TRACKER.lock().primary_released(c.id);
        }
    });
}

/// Before `cuDevicePrimaryCtxReset(_v2)`.
///
/// # Safety
/// None beyond the C ABI.
pub unsafe fn pre_primary_reset(id: HookId, dev: CUdevice) -> Option<CUresult> {
    if on() {
        cold(|| {
            let h = TRACKER.lock().live_primary(dev).map(|c| c.handle);
            if let Some(h) = h {
                before_end(id, EndKind::Reset, h);
            }
        });
    }
    None
}

/// After a successful `cuDevicePrimaryCtxReset(_v2)`: the primary context, its streams,
/// events and memory are gone; the next retain starts a new generation.
///
/// # Safety
/// None beyond the C ABI.
pub unsafe fn ok_primary_reset(id: HookId, dev: CUdevice) {
    if on() {
        cold(|| {
            let h = TRACKER.lock().live_primary(dev).map(|c| c.handle);
            if let Some(h) = h {
                after_end(id, EndKind::Reset, h);
            }
        });
    }
}

/// After a successful `cuCtxSetCurrent` or `cuCtxPushCurrent(_v2)`.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_ctx_current(_id: HookId, ctx: CUcontext) {
    if on() {
        work::set_current_context(ctx as usize);
    }
}

/// After a successful `cuCtxPopCurrent(_v2)`.
///
/// # Safety
/// None: the out-pointer is not read.
pub unsafe fn ok_ctx_pop(_id: HookId, _pctx: *mut CUcontext) {
    if on() {
        cold(refresh_current);
    }
}

fn synchronized_context(handle: u64) {
    let mut t = TRACKER.lock();
    if let Some(cid) = t.live_context(handle).map(|c| c.id) {
        retire_context(&mut t, cid);
    }
}

/// After a successful `cuCtxSynchronize`: the current context's work is done.
///
/// # Safety
/// None.
pub unsafe fn ok_ctx_synchronize(_id: HookId) {
    if on() {
        cold(|| {
            refresh_current();
            synchronized_context(work::current_context() as u64);
        });
    }
}

/// After a failed `cuCtxSynchronize`.
///
/// # Safety
/// None.
pub unsafe fn fault_ctx_synchronize(id: HookId, r: CUresult) -> bool {
    on() && cold(|| explain_current(id, r))
}

/// After a successful `cuCtxSynchronize_v2(ctx)` (null: the current context).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_ctx_synchronize_v2(_id: HookId, ctx: CUcontext) {
    if on() {
        cold(|| {
            let h = if ctx.is_null() {
                refresh_current();
                work::current_context() as u64
            } else {
                ctx as u64
            };
            synchronized_context(h);
        });
    }
}

// ---------------------------------------------------------------------------------------
// Streams and events.

fn current_context_id(t: &Tracker) -> Option<u32> {
    let cur = query::ctx_get_current().ok()?;
    work::set_current_context(cur);
    t.live_context(cur as u64).map(|c| c.id)
}

fn created_stream(id: HookId, ph: *mut CUstream) {
    // SAFETY: the driver wrote *ph on success.
    let h = unsafe { written(ph) } as u64;
    let mut t = TRACKER.lock();
    let ctx = current_context_id(&t);
    let s = site(&mut t, id);
    // A handle the driver hands out again starts from nothing.
    let shards = work::shards();
    t.retire(&shards, |k| k == h);
    t.stream_created(h, ctx, s);
}

/// After a successful `cuStreamCreate`.
///
/// # Safety
/// `ph` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_stream_create(id: HookId, ph: *mut CUstream, _flags: c_uint) {
    if on() {
        cold(|| created_stream(id, ph));
    }
}

/// After a successful `cuStreamCreateWithPriority`.
///
/// # Safety
/// `ph` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_stream_create_priority(
    id: HookId,
    ph: *mut CUstream,
    _flags: c_uint,
    _priority: c_int,
) {
    if on() {
        cold(|| created_stream(id, ph));
    }
}

/// Answers a free or destroy of a dead handle in fix mode: `Some(CUDA_SUCCESS)` with the
/// explanation, `None` to forward.
fn skip_dead(
    id: HookId,
    kind: HandleKind,
    h: u64,
    ctx: Option<u32>,
    created: Option<Site>,
) -> Option<CUresult> {
    if !fix() {
        return None;
    }
    explain_dead(
        id,
        CUresult::CUDA_SUCCESS,
        kind,
        h,
        ctx,
        created,
        Some("already_released"),
    )
    .then_some(CUresult::CUDA_SUCCESS)
}

/// Before `cuStreamDestroy(_v2)`: a stream of an ended context is already gone (fix mode
/// answers for the driver); copies still running on a live stream are remembered with its
/// context (the driver finishes them after the destroy).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_stream_destroy(id: HookId, stream: CUstream) -> Option<CUresult> {
    if !on() {
        return None;
    }
    cold(|| {
        let h = stream as u64;
        let owned = TRACKER.lock().stream(h).cloned()?;
        if TRACKER.lock().ended(owned.ctx).is_some() {
            let r = skip_dead(id, HandleKind::Stream, h, owned.ctx, Some(owned.created));
            if r.is_some() {
                TRACKER.lock().stream_forgotten(h);
            }
            return r;
        }
        let shards = work::shards();
        let pending = TRACKER.lock().pending(&shards, |k| k == h);
        let copies: Vec<_> = pending
            .into_iter()
            .filter(|p| !p.copies.is_empty() && still_running(p))
            .flat_map(|p| p.copies)
            .collect();
        if let (Some(ctx), false) = (owned.ctx, copies.is_empty()) {
            TRACKER.lock().orphan(ctx, &copies);
        }
        None
    })
}

/// After a successful `cuStreamDestroy(_v2)`.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_stream_destroy(_id: HookId, stream: CUstream) {
    if on() {
        cold(|| {
            let h = stream as u64;
            let shards = work::shards();
            let mut t = TRACKER.lock();
            t.retire(&shards, |k| k == h);
            t.stream_forgotten(h);
        });
    }
}

/// After a failed call that takes a stream.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn fault_stream(id: HookId, r: CUresult, stream: CUstream) -> bool {
    on() && cold(|| explain_stream(id, r, stream))
}

/// Before `cuStreamSynchronize(_ptsz)`: in fix mode, a stream whose context ended after
/// all its work completed is synchronised already.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_stream_sync(id: HookId, stream: CUstream) -> Option<CUresult> {
    if !on() || (stream as usize) <= 2 {
        return None;
    }
    cold(|| complete_already(id, HandleKind::Stream, stream as u64))
}

fn complete_already(id: HookId, kind: HandleKind, h: u64) -> Option<CUresult> {
    if !fix() {
        return None;
    }
    let owned = {
        let t = TRACKER.lock();
        match kind {
            HandleKind::Stream => t.stream(h).cloned(),
            _ => t.event(h).cloned(),
        }
    }?;
    let drained = TRACKER
        .lock()
        .ended(owned.ctx)
        .and_then(|c| c.end.as_ref())
        .is_some_and(|e| e.lost.is_zero());
    if !drained {
        return None;
    }
    explain_dead(
        id,
        CUresult::CUDA_SUCCESS,
        kind,
        h,
        owned.ctx,
        Some(owned.created),
        Some("already_complete"),
    )
    .then_some(CUresult::CUDA_SUCCESS)
}

fn synchronized_stream(id: HookId, stream: CUstream) {
    let s = stream as usize;
    let key = work::key_for(s, is_per_thread(id));
    let shards = work::shards();
    let mut t = TRACKER.lock();
    match key_kind(key) {
        KeyKind::PerThread(_) => {
            let own = work::own_shard_id();
            if let Some(sh) = shards.iter().find(|x| Some(x.id()) == own) {
                t.retire_in(sh, key);
            }
        }
        _ => t.retire(&shards, |k| k == key),
    }
}

/// After a successful `cuStreamSynchronize(_ptsz)`: the stream's work is done.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_stream_sync(id: HookId, stream: CUstream) {
    if on() {
        cold(|| synchronized_stream(id, stream));
    }
}

/// After a failed `cuStreamWaitEvent(_ptsz)`.
///
/// # Safety
/// None: the handles are only keys.
pub unsafe fn fault_stream_wait_event(
    id: HookId,
    r: CUresult,
    stream: CUstream,
    event: CUevent,
    _flags: c_uint,
) -> bool {
    on() && cold(|| explain_event(id, r, event) || explain_stream(id, r, stream))
}

/// After a successful `cuEventCreate`.
///
/// # Safety
/// `ph` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_event_create(id: HookId, ph: *mut CUevent, _flags: c_uint) {
    if on() {
        cold(|| {
            // SAFETY: the driver wrote *ph on success.
            let h = unsafe { written(ph) } as u64;
            let mut t = TRACKER.lock();
            let ctx = current_context_id(&t);
            let s = site(&mut t, id);
            t.event_created(h, ctx, s);
        });
    }
}

/// Before `cuEventDestroy(_v2)`: an event of an ended context is already gone.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_event_destroy(id: HookId, event: CUevent) -> Option<CUresult> {
    if !on() {
        return None;
    }
    cold(|| {
        let h = event as u64;
        let owned = TRACKER.lock().event(h).cloned()?;
        TRACKER.lock().ended(owned.ctx)?;
        let r = skip_dead(id, HandleKind::Event, h, owned.ctx, Some(owned.created));
        if r.is_some() {
            TRACKER.lock().event_forgotten(h);
        }
        r
    })
}

/// After a successful `cuEventDestroy(_v2)`.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_event_destroy(_id: HookId, event: CUevent) {
    if on() {
        cold(|| {
            TRACKER.lock().event_forgotten(event as u64);
        });
    }
}

/// After a failed call that takes an event.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn fault_event(id: HookId, r: CUresult, event: CUevent) -> bool {
    on() && cold(|| explain_event(id, r, event))
}

/// After a successful `cuEventRecord(_ptsz)`: remembers what the event covers (lock-free).
///
/// # Safety
/// None: the handles are only keys.
pub unsafe fn ok_event_record(id: HookId, event: CUevent, stream: CUstream) {
    if on() {
        work::note_event_record(event as u64, stream as usize, is_per_thread(id));
    }
}

/// After a failed `cuEventRecord(_ptsz)`.
///
/// # Safety
/// None: the handles are only keys.
pub unsafe fn fault_event_record(
    id: HookId,
    r: CUresult,
    event: CUevent,
    stream: CUstream,
) -> bool {
    on() && cold(|| explain_event(id, r, event) || explain_stream(id, r, stream))
}

/// Before `cuEventSynchronize`: in fix mode, an event whose context ended after all its
/// work completed is complete already.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_event_sync(id: HookId, event: CUevent) -> Option<CUresult> {
    if !on() {
        return None;
    }
    cold(|| complete_already(id, HandleKind::Event, event as u64))
}

/// After a successful `cuEventSynchronize`: the work the event covered is done.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_event_sync(_id: HookId, event: CUevent) {
    if on() {
        cold(|| {
            let shards = work::shards();
            TRACKER.lock().retire_event(&shards, event as u64);
        });
    }
}

// ---------------------------------------------------------------------------------------
// Launches and copies (hot paths).

/// Counts a `cuLaunchKernel(_ptsz)` call and, when it succeeded, one launch on its stream,
/// in one thread-local access.
///
/// # Safety
/// None: the arguments are not dereferenced.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn count_launch_kernel(
    id: HookId,
    r: CUresult,
    _f: CUfunction,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _shmem: c_uint,
    stream: CUstream,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) {
    work::count_launch(
        id as usize,
        r.0 != 0,
        stream as usize,
        is_per_thread(id),
        on(),
    );
}

/// Counts a `cuLaunchCooperativeKernel(_ptsz)` call (and the launch).
///
/// # Safety
/// None: the arguments are not dereferenced.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn count_launch_cooperative(
    id: HookId,
    r: CUresult,
    _f: CUfunction,
    _gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    _bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _shmem: c_uint,
    stream: CUstream,
    _params: *mut *mut c_void,
) {
    work::count_launch(
        id as usize,
        r.0 != 0,
        stream as usize,
        is_per_thread(id),
        on(),
    );
}

/// Counts a `cuLaunchKernelEx(_ptsz)` call (and the launch).
///
/// # Safety
/// `config` is null or valid when the launch succeeded (the driver accepted it).
#[inline(always)]
pub unsafe fn count_launch_kernel_ex(
    id: HookId,
    r: CUresult,
    config: *const CUlaunchConfig,
    _f: CUfunction,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) {
    let stream = if r.0 == 0 {
        // SAFETY: the driver accepted the config, so it is null or valid.
        unsafe { config.as_ref() }.map_or(0, |c| c.h_stream as usize)
    } else {
        0
    };
    work::count_launch(id as usize, r.0 != 0, stream, is_per_thread(id), on());
}

/// After a successful `cuMemcpyHtoDAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are only recorded.
#[inline]
pub unsafe fn ok_copy_htod(
    id: HookId,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) {
    if on() {
        let k = CopyKind::HostToDevice;
        work::note_copy(
            stream as usize,
            is_per_thread(id),
            dst,
            src as u64,
            bytes as u64,
            k,
        );
    }
}

/// After a successful `cuMemcpyDtoHAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are only recorded.
#[inline]
pub unsafe fn ok_copy_dtoh(
    id: HookId,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) {
    if on() {
        let k = CopyKind::DeviceToHost;
        work::note_copy(
            stream as usize,
            is_per_thread(id),
            dst as u64,
            src,
            bytes as u64,
            k,
        );
    }
}

/// After a successful `cuMemcpyAsync(_ptsz)` (unified addresses: either side may be host
/// memory).
///
/// # Safety
/// None: the addresses are only recorded.
#[inline]
pub unsafe fn ok_copy(
    id: HookId,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) {
    if on() {
        let k = CopyKind::Unified;
        work::note_copy(
            stream as usize,
            is_per_thread(id),
            dst,
            src,
            bytes as u64,
            k,
        );
    }
}

/// After a failed `cuMemcpyHtoDAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are not dereferenced.
pub unsafe fn fault_copy_htod(
    id: HookId,
    r: CUresult,
    _dst: CUdeviceptr,
    _src: *const c_void,
    _bytes: usize,
    stream: CUstream,
) -> bool {
    on() && cold(|| explain_stream(id, r, stream))
}

/// After a failed `cuMemcpyDtoHAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are not dereferenced.
pub unsafe fn fault_copy_dtoh(
    id: HookId,
    r: CUresult,
    _dst: *mut c_void,
    _src: CUdeviceptr,
    _bytes: usize,
    stream: CUstream,
) -> bool {
    on() && cold(|| explain_stream(id, r, stream))
}

/// After a failed `cuMemcpyAsync(_ptsz)`.
///
/// # Safety
/// None: the addresses are not dereferenced.
pub unsafe fn fault_copy(
    id: HookId,
    r: CUresult,
    _dst: CUdeviceptr,
    _src: CUdeviceptr,
    _bytes: usize,
    stream: CUstream,
) -> bool {
    on() && cold(|| explain_stream(id, r, stream))
}

// ---------------------------------------------------------------------------------------
// Memory.

/// A new device allocation at `addr`: if the driver handed out an address that died with
/// an earlier context, it is alive again. One relaxed load unless some context ended with
/// allocations in it.
#[inline(always)]
pub fn note_device_alloc(addr: CUdeviceptr) {
    if ANY_DEAD.load(Ordering::Relaxed) {
        revived(addr);
    }
}

#[cold]
#[inline(never)]
fn revived(addr: CUdeviceptr) {
    if on() && DEAD.remove(addr).is_some() {
        cold(|| {
            TRACKER.lock().forget_dead_device(addr);
        });
    }
}

/// Before `cuMemFree_v2`: in fix mode, memory that died with its context is already
/// released. One relaxed load unless some context ended with allocations in it.
///
/// # Safety
/// None: the address is only a key.
#[inline(always)]
pub unsafe fn pre_mem_free(id: HookId, dptr: CUdeviceptr) -> Option<CUresult> {
    if !ANY_DEAD.load(Ordering::Relaxed) {
        return None;
    }
    dead_free(id, dptr)
}

#[cold]
#[inline(never)]
fn dead_free(id: HookId, dptr: CUdeviceptr) -> Option<CUresult> {
    if !on() {
        return None;
    }
    DEAD.get(dptr)?;
    cold(|| {
        let dead = TRACKER.lock().dead_device(dptr).cloned()?;
        let r = skip_dead(id, HandleKind::DeviceMemory, dptr, Some(dead.ctx), None);
        if r.is_some() {
            DEAD.forget(dptr);
            TRACKER.lock().forget_dead_device(dptr);
        }
        r
    })
}

/// After a failed `cuMemFree_v2`: memory of an ended context, or an ended current context.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn fault_mem_free(id: HookId, r: CUresult, dptr: CUdeviceptr) -> bool {
    if !on() || !matches!(r.0, 1 | 201 | 709) {
        return false;
    }
    cold(|| {
        let dead = TRACKER.lock().dead_device(dptr).cloned();
        match dead {
            Some(d) => explain_dead(
                id,
                r,
                HandleKind::DeviceMemory,
                dptr,
                Some(d.ctx),
                None,
                None,
            ),
            None => explain_current(id, r),
        }
    })
}

fn pinned_added(id: HookId, lo: u64, bytes: u64, kind: PinnedKind) {
    if lo == 0 || bytes == 0 {
        return;
    }
    let mut t = TRACKER.lock();
    let ctx = current_context_id(&t);
    let created = site(&mut t, id);
    t.pinned_added(Pinned {
        lo,
        bytes,
        kind,
        ctx,
        created,
    });
}

/// After a successful `cuMemHostAlloc`.
///
/// # Safety
/// `pp` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_mem_host_alloc(id: HookId, pp: *mut *mut c_void, bytes: usize, _flags: c_uint) {
    if on() {
        // SAFETY: the driver wrote *pp on success.
        let p = unsafe { written(pp) } as u64;
        cold(|| pinned_added(id, p, bytes as u64, PinnedKind::Allocated));
    }
}

/// After a successful `cuMemAllocHost_v2`.
///
/// # Safety
/// `pp` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_mem_alloc_host(id: HookId, pp: *mut *mut c_void, bytes: usize) {
    if on() {
        // SAFETY: the driver wrote *pp on success.
        let p = unsafe { written(pp) } as u64;
        cold(|| pinned_added(id, p, bytes as u64, PinnedKind::Allocated));
    }
}

/// After a successful `cuMemHostRegister(_v2)`.
///
/// # Safety
/// None: the range is only recorded.
pub unsafe fn ok_host_register(id: HookId, p: *mut c_void, bytes: usize, _flags: c_uint) {
    if on() {
        cold(|| pinned_added(id, p as u64, bytes as u64, PinnedKind::Registered));
    }
}

/// Host memory `[lo, lo + bytes)` is about to be freed or unregistered: copies still
/// running that read or write it are explained and, in fix mode, waited for.
fn before_host_release(id: HookId, what: &str, lo: u64) -> Option<CUresult> {
    let (pinned, dead) = {
        let t = TRACKER.lock();
        (t.pinned(lo).cloned(), t.dead_pinned(lo).cloned())
    };
    if let Some(d) = dead {
        let r = skip_dead(id, HandleKind::PinnedMemory, lo, Some(d.ctx), None);
        if r.is_some() {
            TRACKER.lock().forget_dead_pinned(lo);
        }
        return r;
    }
    let p = pinned?;
    let hi = lo.saturating_add(p.bytes);
    let shards = work::shards();
    let (pending, orphans) = {
        let mut t = TRACKER.lock();
        learn_keys(&mut t, &shards);
        let mut pending = t.pending(&shards, |_| true);
        for q in &mut pending {
            q.copies.retain(|c| c.touches_host(lo, hi));
        }
        pending.retain(|q| !q.copies.is_empty());
        (pending, t.orphans_touching_host(lo, hi))
    };
    let running: Vec<Pending> = pending.into_iter().filter(still_running).collect();
    if running.is_empty() && orphans.is_empty() {
        return None;
    }
    let mut synced = Vec::new();
    let mut ok = true;
    if fix() {
        for q in &running {
            let r = match key_kind(q.key) {
                KeyKind::Stream(h) => query::stream_synchronize(h as CUstream),
                KeyKind::Legacy(c) | KeyKind::PerThread(c) => {
                    query::with_context(c as usize, query::ctx_synchronize).and_then(|r| r)
                }
            };
            ok &= r.is_ok();
            synced.push(match key_kind(q.key) {
                KeyKind::Stream(h) => hex(h),
                _ => "default".to_string(),
            });
        }
        let ctxs: HashSet<u32> = orphans.iter().map(|(c, _)| *c).collect();
        for cid in ctxs {
            let h = TRACKER.lock().context(cid).map(|c| c.handle);
            if let Some(h) = h {
                let r = query::with_context(h as usize, query::ctx_synchronize).and_then(|r| r);
                ok &= r.is_ok();
                synced.push(hex(h));
                TRACKER.lock().context_synchronized(cid);
            }
        }
    }
    let repaired = fix() && ok;
    let mut t = TRACKER.lock();
    let mut streams: Vec<StreamWork> = running
        .iter()
        .map(|q| {
            let mut w = stream_work(&t, q);
            // Only the copies that touch the range matter here.
            w.counts = Counts {
                launches: 0,
                copies: q.copies.len() as u64,
            };
            w
        })
        .collect();
    if !orphans.is_empty() {
        streams.push(StreamWork {
            stream: Some(orphans[0].1.key),
            per_thread: false,
            counts: Counts {
                launches: 0,
                copies: orphans.len() as u64,
            },
            created: None,
        });
    }
    if repaired {
        let keys: HashSet<u64> = running.iter().map(|q| q.key).collect();
        t.retire(&shards, |k| keys.contains(&k));
    }
    let ctx = p.ctx.and_then(|c| t.context(c).cloned());
    drop(t);
    let explanation = explain_pinned_in_use(what, (lo, p.bytes), Some(&p), &streams, repaired);
    report(Finding {
        id,
        kind: "pinned_memory_in_use",
        result: None,
        ctx: ctx.as_ref(),
        handle: None,
        streams,
        range: Some((lo, p.bytes)),
        repair: repaired.then_some(("synchronize_before_free", synced)),
        explanation,
    });
    None
}

/// Before `cuMemFreeHost`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn pre_mem_free_host(id: HookId, p: *mut c_void) -> Option<CUresult> {
    if !on() {
        return None;
    }
    cold(|| before_host_release(id, "freeing", p as u64))
}

/// After a successful `cuMemFreeHost`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn ok_mem_free_host(_id: HookId, p: *mut c_void) {
    if on() {
        cold(|| {
            TRACKER.lock().pinned_removed(p as u64);
        });
    }
}

fn explain_dead_pinned(id: HookId, r: CUresult, p: u64) -> bool {
    let dead = TRACKER.lock().dead_pinned(p).cloned();
    match dead {
        Some(d) => explain_dead(id, r, HandleKind::PinnedMemory, p, Some(d.ctx), None, None),
        None => explain_current(id, r),
    }
}

/// After a failed `cuMemFreeHost`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn fault_mem_free_host(id: HookId, r: CUresult, p: *mut c_void) -> bool {
    on() && matches!(r.0, 1 | 201 | 709) && cold(|| explain_dead_pinned(id, r, p as u64))
}

/// Before `cuMemHostUnregister`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn pre_host_unregister(id: HookId, p: *mut c_void) -> Option<CUresult> {
    if !on() {
        return None;
    }
    cold(|| before_host_release(id, "unregistering", p as u64))
}

/// After a successful `cuMemHostUnregister`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn ok_host_unregister(_id: HookId, p: *mut c_void) {
    if on() {
        cold(|| {
            TRACKER.lock().pinned_removed(p as u64);
        });
    }
}

/// After a failed `cuMemHostUnregister`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn fault_host_unregister(id: HookId, r: CUresult, p: *mut c_void) -> bool {
    on() && matches!(r.0, 201 | 709 | 713) && cold(|| explain_dead_pinned(id, r, p as u64))
}

/// Before `cuMemFreeAsync(_ptsz)`: the free is ordered on its own stream only; copies on
/// other streams that still use the memory are explained and, in fix mode, waited for.
/// Nothing to do (one relaxed load) until copies have been made on two streams.
///
/// # Safety
/// None: the address is only a key.
#[inline]
pub unsafe fn pre_mem_free_async(
    id: HookId,
    dptr: CUdeviceptr,
    stream: CUstream,
) -> Option<CUresult> {
    if !on() || !work::copies_on_several_streams() {
        return None;
    }
    cold(|| before_device_free(id, dptr, stream))
}

fn before_device_free(id: HookId, dptr: CUdeviceptr, stream: CUstream) -> Option<CUresult> {
    let bytes = alloc::live_pointer(dptr).map(|e| e.bytes);
    let hi = dptr.saturating_add(bytes.unwrap_or(1));
    let own = work::key_for(stream as usize, is_per_thread(id));
    let shards = work::shards();
    let pending = {
        let t = TRACKER.lock();
        let mut pending = t.pending(&shards, |k| k != own);
        for q in &mut pending {
            q.copies.retain(|c| c.touches_device(dptr, hi));
        }
        pending.retain(|q| !q.copies.is_empty());
        pending
    };
    let running: Vec<Pending> = pending.into_iter().filter(still_running).collect();
    if running.is_empty() {
        return None;
    }
    let mut synced = Vec::new();
    let mut ok = true;
    if fix() {
        for q in &running {
            let r = match key_kind(q.key) {
                KeyKind::Stream(h) => query::stream_synchronize(h as CUstream),
                KeyKind::Legacy(c) | KeyKind::PerThread(c) => {
                    query::with_context(c as usize, query::ctx_synchronize).and_then(|r| r)
                }
            };
            ok &= r.is_ok();
            synced.push(match key_kind(q.key) {
                KeyKind::Stream(h) => hex(h),
                _ => "default".to_string(),
            });
        }
    }
    let repaired = fix() && ok;
    let mut t = TRACKER.lock();
    let streams: Vec<StreamWork> = running.iter().map(|q| stream_work(&t, q)).collect();
    if repaired {
        let keys: HashSet<u64> = running.iter().map(|q| q.key).collect();
        t.retire(&shards, |k| keys.contains(&k));
    }
    let ctx = t
        .key_owner(running[0].key)
        .and_then(|c| t.context(c).cloned());
    drop(t);
    let explanation = explain_device_in_use(dptr, bytes, &streams, repaired);
    report(Finding {
        id,
        kind: "device_memory_in_use",
        result: None,
        ctx: ctx.as_ref(),
        handle: None,
        streams,
        range: Some((dptr, bytes.unwrap_or(0))),
        repair: repaired.then_some(("synchronize_before_free", synced)),
        explanation,
    });
    None
}

// ---------------------------------------------------------------------------------------
// Exit.

/// Counts a call that got `CUDA_ERROR_DEINITIALIZED`: made after the driver shut down.
/// The runtime's own final `cuDevicePrimaryCtxRelease`, which gets it in every healthy
/// runtime program (measured on an H200, driver 580.159), is not counted.
#[cold]
pub fn after_deinit(id: HookId) {
    if matches!(
        id,
        HookId::cuDevicePrimaryCtxRelease | HookId::cuDevicePrimaryCtxRelease_v2
    ) || !on()
    {
        return;
    }
    *LATE.lock().entry(id.name()).or_insert(0) += 1;
}

/// At the shim's `.fini_array` entry, while the driver is still up: confirms with the
/// driver which streams still have work, and asks it which context each live allocation
/// belongs to (for the exit report, written after the driver shut down).
pub fn settle() {
    if !on() {
        return;
    }
    cold(|| {
        let shards = work::shards();
        let pending = {
            let mut t = TRACKER.lock();
            if t.live_contexts().is_empty() {
                return;
            }
            learn_keys(&mut t, &shards);
            t.pending(&shards, |_| true)
        };
        let idle: HashSet<u64> = pending
            .iter()
            .filter(|p| !still_running(p))
            .map(|p| p.key)
            .collect();
        {
            let mut t = TRACKER.lock();
            t.retire(&shards, |k| idle.contains(&k));
        }
        let t = TRACKER.lock();
        let mut attribution = ATTRIBUTION.lock();
        for e in alloc::live_pointers().into_iter().take(MAX_ATTRIBUTED) {
            let ctx = query::pointer_context(e.key)
                .ok()
                .and_then(|c| t.live_context(c as u64).map(|c| c.id));
            attribution.insert(e.key, ctx);
        }
    });
}

/// What the exit report found, in trace form.
#[derive(Default)]
pub struct ExitReport {
    /// Contexts alive at exit.
    pub live_contexts: Vec<LiveContext>,
    /// Memory never freed, per context.
    pub leaked_allocations: Vec<LeakedAllocations>,
    /// Streams with work never synchronised.
    pub unsynchronized_streams: Vec<UnsynchronizedStream>,
    /// Calls after the driver shut down, by function.
    pub calls_after_deinit: BTreeMap<String, u64>,
}

/// The exit report (computed once, at the end of the process): prints the one paragraph
/// when something is found. `None` when lifetime tracking is off.
pub fn exit_report() -> Option<&'static ExitReport> {
    if !on() {
        return None;
    }
    Some(EXIT.get_or_init(|| cold(build_exit_report)))
}

/// The report if it was computed already (for the periodic metrics file: nothing then).
pub fn exit_report_if_ready() -> Option<&'static ExitReport> {
    EXIT.get()
}

fn build_exit_report() -> ExitReport {
    let shards = work::shards();
    let t = TRACKER.lock();
    let live: Vec<Context> = t.live_contexts().into_iter().cloned().collect();
    let retained = |id: Option<u32>| {
        id.and_then(|i| t.context(i))
            .is_some_and(|c| c.primary && c.end.is_none())
    };
    // Device memory, grouped by the context the driver named at exit.
    let attribution = ATTRIBUTION.lock();
    let mut by_ctx: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
    for e in alloc::live_pointers() {
        let ctx = attribution.get(&e.key).copied().flatten();
        let g = by_ctx.entry(ctx).or_insert((0, 0));
        g.0 += 1;
        g.1 += e.bytes;
    }
    let mut leaks: Vec<Leak> = by_ctx
        .into_iter()
        .map(|(ctx, (n, b))| Leak {
            ctx,
            host: false,
            allocations: n,
            bytes: b,
        })
        .collect();
    // Pinned host memory, grouped by the context current when it was allocated (a caching
    // host allocator's blocks belong with the runtime's primary context).
    let mut pinned: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
    for p in t.pinned_ranges() {
        if p.kind == PinnedKind::Allocated {
            let g = pinned.entry(p.ctx).or_insert((0, 0));
            g.0 += 1;
            g.1 += p.bytes;
        }
    }
    leaks.extend(pinned.into_iter().map(|(ctx, (n, b))| Leak {
        ctx,
        host: true,
        allocations: n,
        bytes: b,
    }));
    let unsynced: Vec<(Option<u32>, StreamWork)> = t
        .pending(&shards, |k| {
            t.key_owner(k)
                .and_then(|c| t.context(c))
                .is_some_and(|c| c.end.is_none())
        })
        .iter()
        .map(|p| (t.key_owner(p.key), stream_work(&t, p)))
        .collect();
    let after_deinit: BTreeMap<String, u64> = LATE
        .lock()
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    let findings = ExitFindings {
        live: live.clone(),
        leaks: leaks.clone(),
        unsynchronized: unsynced.clone(),
        after_deinit: after_deinit.clone(),
    };
    if let Some(text) = exit_paragraph(&findings, |id| t.context(id).cloned()) {
        session::say(&text);
    }
    let ctx_hex = |id: Option<u32>| id.and_then(|i| t.context(i)).map(|c| hex(c.handle));
    ExitReport {
        live_contexts: live
            .iter()
            .map(|c| LiveContext {
                context: hex(c.handle),
                device: c.device,
                primary: c.primary,
                generation: c.generation,
                retained: c.retained,
                created: lifetime_site(&c.created),
            })
            .collect(),
        leaked_allocations: leaks
            .iter()
            .map(|l| LeakedAllocations {
                device: if l.host {
                    None
                } else {
                    l.ctx.and_then(|i| t.context(i)).and_then(|c| c.device)
                },
                context: ctx_hex(l.ctx),
                primary_retained: retained(l.ctx),
                host: l.host,
                allocations: l.allocations,
                bytes: l.bytes,
            })
            .collect(),
        unsynchronized_streams: unsynced
            .iter()
            .map(|(c, w)| UnsynchronizedStream {
                context: ctx_hex(*c),
                primary_retained: retained(*c),
                work: stream_pending(w),
            })
            .collect(),
        calls_after_deinit: after_deinit,
    }
}
