//! Context lifetime and asynchronous safety (issue 5): destroy or reset with work still
//! pending, handles used after their context ended, and pinned (or stream-ordered device)
//! memory freed while copies still use it.
//!
//! The hooks here are the `pre(..)`, `fault(..)` and `ok(..)` clauses of the hook table.
//! Decisions and records live in `seedance_core::lifetime` (a [`Tracker`] behind a mutex)
//! and `seedance_core::work` (lock-free per-thread counts of launches, copies and other
//! stream operations).
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
use crate::{
    driver::query, driver::topo, faults::alloc, platform, rt::config, rt::output, rt::stderr,
};
use libc::{c_int, c_uint, c_void};
use once_cell::sync::{Lazy, OnceCell};
use parking_lot::Mutex;
use seedance_core::lifetime::{
    describe_end, exit_paragraph, explain_dead_handle, explain_dead_handle_not_forwarded,
    explain_device_in_use, explain_pending_at_end, explain_pinned_in_use, Context, EndKind,
    ExitFindings, HandleKind, Leak, Pending, Pinned, PinnedKind, Site, StreamWork, Tracker,
};
use seedance_core::live::LiveTable;
use seedance_core::once::ExplainOnce;
use seedance_core::owners::Index;
use seedance_core::work::{self, key_kind, CopyKind, Counts, KeyKind, Shard};
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

static TRACKER: Lazy<Mutex<Tracker>> = Lazy::new(|| Mutex::new(Tracker::new()));

/// Device addresses that died with their context, for the lock-free check on `cuMemFree`.
static DEAD: LiveTable<4096> = LiveTable::new();
/// Whether some context ended with device allocations in it: one relaxed load (a bit of
/// the configuration word, which a forked child clears).
#[inline(always)]
fn any_dead() -> bool {
    config::switches_now() & config::sw::ANY_DEAD != 0
}

/// Device allocations by the context they were made in ([`seedance_core::owners`]), filed
/// from the threads' rings at a context's end or when a ring fills.
static OWNERS: Lazy<Mutex<Index>> = Lazy::new(|| Mutex::new(Index::new()));

/// Whether the shim still tracks `addr` as a live allocation (the index's compaction test).
fn still_live(addr: u64) -> bool {
    alloc::live_pointer(addr).is_some()
}

/// A fault as explained once: (function, kind, context id).
type FaultKey = (usize, &'static str, u32);
/// Faults already explained.
static SEEN: ExplainOnce<FaultKey> = ExplainOnce::bounded(MAX_SEEN);
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

/// Whether lifetime tracking is on (the mode is not `off`, `SEEDANCE_LIFETIME` is on, and
/// this is not a forked child): one relaxed load of the configuration word. Every wrapper
/// reads the configuration (`config::active`) before it gets here; a hook that runs
/// before that (a `pre` clause of the very first call) sees "off".
#[inline(always)]
pub fn on() -> bool {
    config::switches_now() & config::sw::LIFETIME != 0
}

fn fix() -> bool {
    config::switches() & config::sw::FIX != 0
}

/// Runs a cold path, never letting a panic reach the program.
/// Takes the tracker's and the reports' locks: a hook called from a signal handler that
/// interrupted this on the same thread does nothing (`crate::rt::guard::enter`).
fn cold<T: Default>(f: impl FnOnce() -> T) -> T {
    let Some(_inside) = crate::rt::guard::enter() else {
        return T::default();
    };
    within(f)
}

/// [`cold`] for what other parts of the shim's own work call (launch explanations), which
/// already hold the guard.
fn within<T: Default>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("lifetime");
        f()
    }))
    .unwrap_or_default()
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
        ops: w.counts.ops,
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
        output::tally_error(f.id, r);
    }
    if let Some((kind, _)) = &f.repair {
        *REPAIRS.lock().entry(kind).or_insert(0) += 1;
    }
    let key = (f.id as usize, f.kind, f.ctx.map_or(u32::MAX, |c| c.id));
    if !SEEN.first(key) {
        return;
    }
    let line = match f.result {
        Some(r) if !r.is_success() => output::fault_line(f.id, r.name(), r, &f.explanation),
        _ => format!("{}: {}", f.id.name(), f.explanation),
    };
    stderr::say(&line);
    let end = f.ctx.and_then(|c| c.end.as_ref());
    output::emit(Event::LifetimeFault(LifetimeFault {
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
            lost_ops: e.lost.ops,
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
        output::emit(Event::LifetimeRepair(LifetimeRepair {
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

/// Counts one repair of `kind` made elsewhere (the pinned-copy ordering of
/// [`crate::faults::hazard`]) in the exit summary's `repairs`.
pub(crate) fn count_repair(kind: &'static str) {
    *REPAIRS.lock().entry(kind).or_insert(0) += 1;
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
    p.iter().fold(Counts::default(), |a, p| a.plus(p.counts))
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
    stray::at_context_end(ctx.device);
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
    // no longer knows, among those made while this context was current (and those made
    // with no context known, which are filed under their context now).
    let died = owned_allocations_that_died(handle);
    for &(addr, bytes) in &died {
        alloc::forget_pointer(addr);
        if DEAD.insert(addr, bytes, None) {
            config::set_switch(config::sw::ANY_DEAD);
        }
    }
    crate::faults::hazard::context_ended(handle);
    let mut t = TRACKER.lock();
    let s = site(&mut t, id);
    retire_context(&mut t, cid);
    t.context_ended(cid, how, s, lost, &died);
}

/// The tracked allocations filed under context `handle` (and under no context) that the
/// driver no longer knows, as (address, bytes): the cost is what the context owned, not
/// what the process holds (docs/performance.md, "Context create and destroy").
fn owned_allocations_that_died(handle: u64) -> Vec<(u64, u64)> {
    let shards = work::shards();
    let (mine, unknown) = {
        let mut index = OWNERS.lock();
        index.drain(shards.iter().map(|s| s.allocs()), &still_live);
        (index.take(handle), index.take(0))
    };
    let mut died = Vec::new();
    let mut refile = Vec::new();
    for (addr, from_unknown) in mine
        .into_iter()
        .map(|a| (a, false))
        .chain(unknown.into_iter().map(|a| (a, true)))
    {
        let Some(e) = alloc::live_pointer(addr) else {
            continue;
        };
        match query::pointer_context(addr) {
            // Alive in another context (made there with a context the shim did not see
            // made current, or an address handed out again): filed under that one.
            Ok(c) if from_unknown || c as u64 != handle => refile.push((c as u64, addr)),
            Ok(_) => {}
            // The driver cannot be asked: kept as live, under no context.
            Err(CUresult::CUDA_ERROR_NOT_FOUND) => refile.push((0, addr)),
            Err(_) => died.push((addr, e.bytes)),
        }
    }
    if !refile.is_empty() {
        let mut index = OWNERS.lock();
        for (c, addr) in refile {
            index.file(c, addr, &still_live);
        }
    }
    died.sort_unstable();
    died.dedup();
    died
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
        Some(NOT_FORWARDED) => None,
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
    let explanation = if repaired == Some(NOT_FORWARDED) {
        explain_dead_handle_not_forwarded(
            kind,
            handle,
            created.as_ref(),
            &ctx,
            r.name().unwrap_or("an error"),
        )
    } else {
        explain_dead_handle(kind, handle, created.as_ref(), &ctx, what)
    };
    report(Finding {
        id,
        kind: "use_after_destroy",
        result: Some(r),
        ctx: Some(&ctx),
        handle: Some((kind, handle, created)),
        streams: Vec::new(),
        range: None,
        repair: repaired
            .filter(|k| *k != NOT_FORWARDED)
            .map(|k| (k, Vec::new())),
        explanation,
    });
    true
}

/// Passed to [`explain_dead`] as the "repair" of a call the shim did not forward: not a
/// repair (the program gets an error, nothing is counted as repaired).
const NOT_FORWARDED: &str = "not_forwarded";

/// What a stream or event call whose handle died with its context returns instead of
/// reaching the driver, in every mode but `off`: the code the driver itself returned for
/// `cuStreamSynchronize` and `cuStreamDestroy` of such a stream when it did not crash
/// (H200, driver 580.159: docs/validation.md), and what `cuCtxDestroy`'s documentation
/// says a later access to a destroyed context gets. (`CUDA_ERROR_INVALID_HANDLE` would tell
/// the program its handle was never valid.)
const DEAD_HANDLE_CODE: CUresult = CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED;

/// Before a call that makes the driver dereference a stream or event handle (synchronize,
/// destroy): when the tracker knows the handle died with its context, the call is not
/// made (the driver crashed on it: [`DEAD_HANDLE_CODE`]); the program gets
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`, explained once. `None` to forward.
fn refuse_dead(id: HookId, kind: HandleKind, h: u64) -> Option<CUresult> {
    let owned = {
        let t = TRACKER.lock();
        let o = match kind {
            HandleKind::Stream => t.stream(h).cloned(),
            _ => t.event(h).cloned(),
        }?;
        t.ended(o.ctx)?;
        o
    };
    explain_dead(
        id,
        DEAD_HANDLE_CODE,
        kind,
        h,
        owned.ctx,
        Some(owned.created),
        Some(NOT_FORWARDED),
    )
    .then_some(DEAD_HANDLE_CODE)
}

/// How the context `handle` ended (its latest incarnation), for a launch explanation; `None`
/// when tracking is off, the context is alive or the tracker never saw it.
pub fn context_end(handle: u64) -> Option<String> {
    if !on() {
        return None;
    }
    within(|| {
        let t = TRACKER.lock();
        t.latest_context(handle).and_then(describe_end)
    })
}

/// How the context that stream `stream` was made in ended, for a launch explanation; `None`
/// when tracking is off, the stream is unknown or its context is alive.
pub fn stream_context_end(stream: u64) -> Option<String> {
    if !on() {
        return None;
    }
    within(|| {
        let t = TRACKER.lock();
        let id = t.stream(stream)?.ctx?;
        t.context(id).and_then(describe_end)
    })
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

fn current_context_id(t: &Tracker) -> Option<u32> {
    let cur = query::ctx_get_current().ok()?;
    work::set_current_context(cur);
    t.live_context(cur as u64).map(|c| c.id)
}

mod contexts;
mod exit;
mod launches;
mod memory;
mod stray;
mod streams;

pub use contexts::*;
pub use exit::*;
pub use launches::*;
pub use memory::*;
pub use stray::{pre_primary_retain, stray_summary};
pub use streams::*;
