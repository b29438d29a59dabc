//! Races between asynchronous copies on pinned host memory: the checks of
//! `seedance_core::hazard` wired to the copy, stream and event hooks.
//!
//! Cost on the success path of an asynchronous copy: two relaxed loads and two compares
//! (the host pointer against the bounding box of every pinned range the shim saw made,
//! [`maybe_pinned`]), before and after the call. A copy inside the box from bytes the
//! thread's last look-up found in no range (the same pageable buffer again, while no range
//! was made or freed) costs one thread-local access more on each side. Only the others go
//! to the table (`seedance_core::hazard::shared`): the range is found in the
//! thread's cached snapshot of the ranges without a lock, and only that range's lock is taken (a scan of its pending
//! accesses, one push) and its stream's shard; threads copying from their own pinned
//! buffers on their own streams take no lock another thread takes. The stream and event
//! hooks that complete or order accesses go to the table only while accesses are pending
//! (two loads otherwise), and then lock the shards of the streams and ranges
//! concerned; the list of orderings between different streams only when one exists.
//!
//! The legacy default stream's implicit synchronisation with the blocking streams
//! (docs/design.md, "The legacy default stream") is followed through the copy and record
//! hooks (work on stream 0 is a barrier), the synchronous copies and memsets
//! (`hazard/legacy.rs`) and the synchronisations; a stream's flags come from its creation,
//! or from the driver once (`cuStreamGetFlags`) for a stream the shim did not see made.
//!
//! In `fix` mode a hazard is repaired before the second copy reaches the driver: the shim
//! records its own event (one per context, made with `CU_EVENT_DISABLE_TIMING`) on the
//! first copy's stream and makes the second copy's stream wait for it
//! (`cuStreamWaitEvent`), which orders the second copy after everything queued on the first
//! stream so far: what the program gets is what it would get had it synchronised the first
//! stream before the second copy. Announced once per pair of call sites, counted every
//! time (`repairs.order_pinned_copies` in the exit summary).

mod copy2d;
mod entry;
mod legacy;
mod local;
mod order;
mod report;
mod who;

pub use copy2d::{ok_copy_2d, pre_copy_2d};
pub use entry::{pre_copy, pre_copy_dtoh, pre_copy_htod};
pub use legacy::{sync_device, sync_host, sync_memset};

use crate::hooks::ids::HookId;
use crate::rt::config;
use local::{unless_known_miss, Local, NEXT};
use once_cell::sync::Lazy;
use order::order;
use report::report;
use seedance_core::hazard::shared::Shared;
use seedance_core::hazard::{Access, Direction, Range};
use seedance_cuda::{CUevent, CUstream};
use seedance_hotpath::work;
use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use who::{caller, Who};

static TABLE: Lazy<Shared> = Lazy::new(|| {
    let t = Shared::new();
    t.set_flags_source(ask_flags);
    t
});

/// The flags of a stream the shim did not see made, asked of the driver
/// (`cuStreamGetFlags`); `None` when it cannot answer (the stream then counts as blocking,
/// which only orders more: unknown means silent).
fn ask_flags(handle: u64) -> Option<u32> {
    crate::driver::query::stream_flags(handle as CUstream).ok()
}

/// Lowest first byte and highest end of the pinned ranges ever made (a range freed later
/// leaves the box as it was; an empty table resets it).
/// With the other hot words ([`crate::rt::hot`]): every copy reads them ([`maybe_pinned`]).
#[inline(always)]
pub(crate) fn box_lo() -> &'static AtomicU64 {
    &crate::rt::hot::hot().box_lo
}

/// The box's end, beside [`box_lo`].
#[inline(always)]
pub(crate) fn box_hi() -> &'static AtomicU64 {
    &crate::rt::hot::hot().box_hi
}

/// Whether lifetime tracking is on: the same switch as `crate::faults::lifetime::on` (one
/// relaxed load of the configuration word).
#[inline(always)]
fn on() -> bool {
    config::switches_now() & config::sw::LIFETIME != 0
}

/// Fix mode, and no stream capture open: a repair's event record and wait could join the
/// capture or invalidate it (`crate::faults::capture`).
fn fix() -> bool {
    config::switches() & config::sw::FIX != 0 && !crate::faults::capture::open()
}

fn cold<T: Default>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("hazard");
        f()
    }))
    .unwrap_or_default()
}

/// Whether `addr` may lie in a pinned range: two relaxed loads.
#[inline(always)]
pub fn maybe_pinned(addr: u64) -> bool {
    addr >= box_lo().load(Ordering::Relaxed) && addr < box_hi().load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// Pinned ranges.

/// A pinned or registered range was made (`cuMemHostAlloc`, `cuMemAllocHost_v2`,
/// `cuMemHostRegister(_v2)`).
pub fn pinned_added(id: HookId, lo: u64, bytes: u64) {
    if lo == 0 || bytes == 0 {
        return;
    }
    TABLE.pinned_added(Range {
        lo,
        bytes,
        made_by: id.name(),
    });
    box_lo().fetch_min(lo, Ordering::Relaxed);
    box_hi().fetch_max(lo.saturating_add(bytes), Ordering::Relaxed);
}

/// The pinned range that holds all of `[addr, addr + bytes)`, if one does (for the
/// host-write guard, `crate::faults::hostguard`).
#[cfg(target_os = "linux")]
pub fn pinned_range_at(addr: u64, bytes: u64) -> Option<Range> {
    if !maybe_pinned(addr) {
        return None;
    }
    TABLE
        .pinned_at(addr)
        .filter(|r| addr.saturating_add(bytes) <= r.lo.saturating_add(r.bytes))
}

/// The range starting at `lo` was freed or unregistered.
pub fn pinned_removed(lo: u64) {
    TABLE.pinned_removed(lo);
    if !TABLE.has_ranges() {
        box_lo().store(u64::MAX, Ordering::Relaxed);
        box_hi().store(0, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// Copies.

fn access(who: Who, dir: Direction, addr: u64, bytes: u64, stream: CUstream, lo: u64) -> Access {
    let per_thread = who.per_thread;
    let c = caller(per_thread, stream);
    Access {
        function: who.name,
        key: c.key,
        stream: stream as u64,
        per_thread,
        ctx: c.ctx as u64,
        tid: c.tid,
        dir,
        addr,
        bytes,
        range_lo: lo,
        seq: 0,
        epoch: 0,
    }
}

/// Before an asynchronous copy whose host side `sides` (address, direction) may be pinned:
/// finds the hazards, repairs them in fix mode, and keeps the accesses for the `ok` hook.
fn before_copy(
    n: &RefCell<Local>,
    who: Who,
    sides: &[(u64, Direction)],
    bytes: u64,
    stream: CUstream,
) {
    crate::rt::guard::test_panic("hazard_copy");
    // A copy captured into a graph does not run now (the graph's launch is unknown work).
    let captured = crate::faults::capture::open() && {
        let c = caller(who.per_thread, stream);
        crate::faults::capture::capturing(c.key, c.tid)
    };
    let t: &'static Shared = &TABLE;
    let mut hazards = Vec::new();
    {
        let l = &mut *n.borrow_mut();
        l.next = [None, None];
        l.armed = false;
        if captured {
            return;
        }
        let Local { next, ranges, .. } = l;
        let cache = ranges.get_or_insert_with(|| {
            local::arm_release();
            t.ranges_cache()
        });
        let one_sided = sides.len() == 1;
        for (slot, &(addr, dir)) in next.iter_mut().zip(sides) {
            let Some(r) = t.find_cached_ref(cache, addr) else {
                continue;
            };
            let a = access(who, dir, addr, bytes, stream, r.range().lo);
            if dir == Direction::Write && crate::faults::hostguard::on() {
                crate::faults::hostguard::release_range(addr, addr.saturating_add(bytes));
            }
            // No test of the table's pending count first: the range's own state answers a
            // loop on one buffer or an idle range at once, and the count is a line every
            // thread's first access and completion write.
            hazards.extend(t.check_in(r, &a));
            // A one-sided copy's range stays the cache's last until the `ok` hook (no
            // look-up through the cache between them): no hold of its own to take and drop.
            *slot = Some((a, (!one_sided).then(|| r.clone())));
        }
        l.armed = l.next.iter().any(Option::is_some);
    }
    for h in hazards {
        let repaired = if fix() { order(&h, &TABLE) } else { None };
        report(&h, repaired);
    }
}

/// Before an asynchronous copy with host side(s) `sides` (one or two), at least one of
/// which may be pinned: [`before_copy`] under the panic guard, unless every side lies in
/// the gap the thread's last miss found (one thread-local access then).
#[inline(always)]
fn check_copy(id: HookId, sides: &[(u64, Direction)], bytes: u64, stream: CUstream) {
    let (a, b) = (sides[0].0, sides[sides.len() - 1].0);
    let who = Who::of(id);
    unless_known_miss(a, b, |n| cold(|| before_copy(n, who, sides, bytes, stream)));
}

/// After the copy succeeded: its accesses are pending (in the range its `pre` hook held,
/// or the thread's cache's last one; looked up again if that is not the access's).
fn after_copy(l: &mut Local) {
    let Local {
        next,
        ranges,
        clock,
        ..
    } = l;
    for slot in next.iter_mut() {
        if let Some((a, held)) = slot.take() {
            let last = ranges.as_ref().and_then(|c| c.last());
            match held
                .as_ref()
                .or(last)
                .filter(|h| h.range().lo == a.range_lo)
            {
                Some(h) => TABLE.commit_in_noting(h, a, clock),
                None => TABLE.commit_noting(a, clock),
            };
        }
    }
}

/// After a successful asynchronous copy with host side(s) `a` and `b` (the same address
/// twice for a one-sided copy).
#[inline(always)]
pub fn ok_copy(a: u64, b: u64) {
    if maybe_pinned(a) || maybe_pinned(b) {
        let _ = NEXT.try_with(|n| {
            if let Ok(mut l) = n.try_borrow_mut() {
                if std::mem::take(&mut l.armed) {
                    cold(|| after_copy(&mut l));
                }
            }
        });
    }
}

// ---------------------------------------------------------------------------------------
// Completion and ordering.

/// Runs `f` on the table when accesses are pending (two loads otherwise: the table made,
/// its count of pending accesses).
#[inline(always)]
fn while_pending(f: impl FnOnce(&Shared)) {
    if let Some(t) = Lazy::get(&TABLE) {
        if !t.is_idle() && on() {
            cold(|| f(t));
        }
    }
}

/// A stream was created with `flags` (`CU_STREAM_NON_BLOCKING` matters).
pub fn stream_created(handle: u64, flags: u32) {
    if handle != 0 {
        TABLE.stream_created(handle, flags);
    }
}

/// A stream was destroyed.
pub fn stream_destroyed(handle: u64) {
    TABLE.stream_destroyed(handle);
}

/// `cuStreamSynchronize(_ptsz)` succeeded, or `cuStreamQuery(_ptsz)` found the stream idle.
#[inline(always)]
pub fn stream_completed(id: HookId, stream: CUstream) {
    crate::faults::hostguard::completed();
    let per_thread = id.per_thread();
    while_pending(|t| {
        let c = caller(per_thread, stream);
        t.stream_completed(c.key, c.tid, c.ctx as u64)
    });
}

/// The context `ctx` was synchronised, or ended.
pub fn context_completed(ctx: u64) {
    crate::faults::hostguard::completed();
    while_pending(|t| t.context_completed(ctx));
}

/// The context `ctx` ended: the shim's event in it died with it.
pub fn context_ended(ctx: u64) {
    crate::faults::hostguard::context_ended(ctx);
    context_completed(ctx);
    order::context_ended(ctx);
}

/// `cuEventRecord(_ptsz)` succeeded.
#[inline(always)]
pub fn event_recorded(id: HookId, event: CUevent, stream: CUstream) {
    let per_thread = id.per_thread();
    while_pending(|t| {
        let c = caller(per_thread, stream);
        local::with_last_clock(|last| match last {
            Some(last) => t.event_recorded_after(event as u64, c.key, c.tid, last),
            None => t.event_recorded(event as u64, c.key, c.tid),
        })
    });
}

/// `cuStreamWaitEvent(_ptsz)` succeeded. An event the table has no record of was either
/// recorded before any access was pending (the lifetime shards remember it: it orders
/// nothing pending) or never seen recorded (recorded where the shim cannot see, such as an
/// IPC event): then the pending accesses are forgotten ([`forget`]).
#[inline(always)]
pub fn stream_waited(id: HookId, stream: CUstream, event: CUevent) {
    let per_thread = id.per_thread();
    while_pending(|t| {
        let ev = event as u64;
        let c = caller(per_thread, stream);
        if !t.stream_waited(c.key, c.tid, ev) && work::latest_event_mark_anywhere(ev).is_none() {
            forget(t);
        }
    });
}

/// After stream work whose effect on other streams the model does not follow (a wait on
/// or write of a memory value, a batch of those, an external semaphore, a host function or
/// callback, which may tell the host its stream's work is done, a graph launch): the
/// pending accesses are forgotten (one relaxed load when none is pending).
///
/// # Safety
/// None: the handle is not used.
#[inline]
pub unsafe fn forget_after(_id: HookId, _stream: CUstream) {
    while_pending(forget);
}

/// After a context-wide event record or wait (`cuCtxRecordEvent`, `cuCtxWaitEvent` and
/// their green-context forms, CUDA 12.4/12.5+): the record marks, or the wait orders, the
/// work of every stream of a (green) context, which the model does not follow, so the
/// pending accesses are forgotten (one relaxed load when none is pending).
///
/// # Safety
/// None: the handle is not used.
#[inline]
pub unsafe fn forget_after_context<C>(_id: HookId, _ctx: *mut C) {
    while_pending(forget);
}

/// Times the model met an ordering it could not follow with accesses pending and dropped
/// them (`exit_summary.unknown_orderings`).
static UNKNOWN: AtomicU64 = AtomicU64::new(0);

/// Unknown means forget, never alarm: drops every pending access (counted once).
fn forget(t: &Shared) {
    if t.forget_pending() {
        UNKNOWN.fetch_add(1, Ordering::Relaxed);
    }
}

/// `cuEventDestroy(_v2)` succeeded: the table's record of the event goes.
pub fn event_destroyed(event: CUevent) {
    if let Some(t) = Lazy::get(&TABLE) {
        cold(|| t.event_destroyed(event as u64));
    }
}

/// For the exit summary: how many times pending accesses were forgotten ([`forget`]).
pub fn unknown_orderings() -> u64 {
    UNKNOWN.load(Ordering::Relaxed)
}

/// `cuEventSynchronize` succeeded, or `cuEventQuery` reported the event complete.
pub fn event_completed(event: CUevent) {
    crate::faults::hostguard::completed();
    while_pending(|t| t.event_completed(event as u64));
}
