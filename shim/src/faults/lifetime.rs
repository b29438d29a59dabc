//! Context lifetime and asynchronous safety (docs/reliability.md): destroy or reset with
//! work still pending, handles used after their context ended, and pinned (or
//! stream-ordered device) memory freed while copies still use it. A pinned free or
//! unregister with copies pending is judged after the call, in every mode, by asking the
//! driver whether their streams are idle (`memory`): driver 580 waits for them itself.
//!
//! The hooks here are the `pre(..)`, `fault(..)`, `ok(..)` and `count(..)` clauses of the hook
//! table (`shim/src/hooks.rs`), by submodule: [`contexts`], [`streams`] (and events),
//! [`memory`], [`launches`] (and copies), [`stray`]; [`dead`] explains a use after destroy,
//! [`report`] reports a finding once, [`exit`] the calls after deinitialisation and the exit
//! report.
//! Decisions and records live in `seedance_core::lifetime` (a [`Tracker`] behind a mutex)
//! and `seedance_hotpath::work` (lock-free per-thread counts of launches, copies and other
//! stream operations).
//!
//! Cost on the success path:
//!
//! * a launch: one thread-local access and a bump of a per-thread counter ([`launches::count_launch`]);
//! * an asynchronous copy: the same plus one record in a per-thread ring;
//! * `cuMemAlloc`/`cuMemFree`: one relaxed load, until some context has ended with
//!   allocations in it (then a lock-free look-up in a table of dead addresses);
//! * an event record: a store in the thread's shard;
//! * a stream or event synchronize: one load (no handle died with its context) before the
//!   call; after it, the baselines raised in the shards that used the stream (for a thread
//!   on its own stream, its own), found through the shard list read without a lock
//!   ([`work::retire_key`], [`work::retire_event`]);
//! * everything else (create, destroy, pinned alloc and free) takes the tracker's lock or
//!   walks the shards; all of it blocks or allocates anyway.
//!
//! At the moments that read the counts (a context destroy, reset or last release, a free
//! or unregister of pinned memory, a stream-ordered free, exit), a stream the counts call
//! busy is confirmed with the driver (`cuStreamQuery`) before anything is reported or
//! repaired, so work the program waited for in a way the shim does not see (an event
//! query, a synchronous copy) is not reported.
//!
//! In `fix` mode: a context is synchronised (`cuCtxSynchronize` with it current) before a
//! destroy, reset or last release that would abandon work; a free or destroy of a handle the
//! driver released with its context returns `CUDA_SUCCESS` without reaching the driver, as
//! does a synchronize of a stream or event whose work all completed before its context
//! ended. Each is explained once on stderr and in the trace, and counted in the exit
//! summary's `repairs`.

use crate::hooks::ids::HookId;
use crate::{driver::query, driver::topo, platform, rt::config, rt::output, rt::stderr};
use libc::{c_uint, c_void};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use seedance_core::lifetime::{
    describe_end, exit_line, explain_dead_handle, explain_dead_handle_not_forwarded,
    explain_device_in_use, explain_pending_at_end, explain_pinned_in_use,
    explain_pinned_release_waited, Context, EndKind, ExitFindings, HandleKind, Leak, Pending,
    Pinned, PinnedKind, Site, StreamWork, Tracker,
};
use seedance_cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUlaunchConfig, CUresult, CUstream,
    CU_STREAM_PER_THREAD,
};
use seedance_hotpath::live::LiveTable;
use seedance_hotpath::owners::Index;
use seedance_hotpath::work::{self, key_kind, CopyKind, Counts, KeyKind, Shard};
use seedance_trace::{Event, LeakedAllocations, LiveContext, UnsynchronizedStream};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};

static TRACKER: Lazy<Mutex<Tracker>> =
    Lazy::new(|| Mutex::new(Tracker::with_dead_handle_mirror(dead_handles())));

/// Streams and events the tracker holds whose context ended ([`Tracker::dead_handles`],
/// published by the tracker on every change): while 0, the checks before a synchronize
/// ([`streams::pre_stream_sync`], [`streams::pre_event_sync`]) have nothing to find and
/// take no lock.
/// With the other hot words ([`crate::rt::hot`]).
#[inline(always)]
pub(crate) fn dead_handles() -> &'static AtomicUsize {
    &crate::rt::hot::hot().dead_handles
}

/// Whether some stream or event handle died with its context: one load.
#[inline(always)]
fn any_dead_handle() -> bool {
    dead_handles().load(Ordering::Acquire) != 0
}

/// Device addresses that died with their context, for the lock-free check on `cuMemFree`.
static DEAD: LiveTable<4096> = LiveTable::new();
/// Whether some context ended with device allocations in it: one relaxed load (a bit of
/// the configuration word, which a forked child clears).
#[inline(always)]
fn any_dead() -> bool {
    config::switches_now() & config::sw::ANY_DEAD != 0
}

/// Device allocations by the context they were made in ([`seedance_hotpath::owners`]), filed
/// from the threads' rings at a context's end or when a ring fills.
static OWNERS: Lazy<Mutex<Index>> = Lazy::new(|| Mutex::new(Index::new()));

/// Calls that got `CUDA_ERROR_DEINITIALIZED`, by function.
static LATE: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
/// Stream keys whose context the driver could not tell.
static UNRESOLVED: Lazy<Mutex<HashSet<u64>>> = Lazy::new(|| Mutex::new(HashSet::new()));
/// Context of each live allocation, asked of the driver at exit (before it shuts down).
static ATTRIBUTION: Lazy<Mutex<HashMap<u64, Option<u32>>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// Most live allocations attributed at exit.
const MAX_ATTRIBUTED: usize = 4096;

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

/// Whether a repair that makes its own synchronisation may run: fix mode, and no stream
/// capture open (one the synchronisation would invalidate: `crate::faults::capture`).
fn fix_sync() -> bool {
    fix() && !crate::faults::capture::open()
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

/// The formatting of lifetime findings, shared with the exit report.
use report::{hex, lifetime_site, stream_pending};

// ---------------------------------------------------------------------------------------
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
/// (another thread's per-thread default stream) count as running; while a stream capture
/// is open nothing is asked and nothing counts as running.
fn still_running(p: &Pending) -> bool {
    // A query while a capture is open could invalidate it: unknown, so not reported.
    if crate::faults::capture::open() {
        return false;
    }
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

fn current_context_id(t: &Tracker) -> Option<u32> {
    let cur = query::ctx_get_current().ok()?;
    work::set_current_context(cur);
    t.live_context(cur as u64).map(|c| c.id)
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

pub mod contexts;
mod dead;
pub mod exit;
pub mod launches;
pub mod memory;
pub mod report;
pub mod stray;
pub mod streams;
