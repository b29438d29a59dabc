//! Memory hooks: device frees of dead memory, pinned allocation, registration and release.

use super::dead::{explain_current, explain_dead, skip_dead};
use super::report::{report, Finding};
use super::*;
use crate::faults::alloc;

/// Whether the shim still tracks `addr` as a live allocation in its table (the index's
/// compaction test: [`alloc::published`]).
pub(super) fn still_live(addr: u64) -> bool {
    alloc::published(addr)
}

/// A new device allocation at `addr`: if the driver handed out an address that died with
/// an earlier context, it is alive again. One relaxed load unless some context ended with
/// allocations in it.
#[inline(always)]
pub fn note_device_alloc(addr: CUdeviceptr) {
    if any_dead() {
        revived(addr);
    }
}

/// An allocation at `addr` made in context `ctx` entered the live table (published by its
/// thread's next allocation: [`seedance_hotpath::held`]): filed on the thread's ring.
#[inline]
pub fn file_published(ctx: u64, addr: CUdeviceptr) {
    if on() && !work::file_alloc(ctx, addr) {
        ring_full(ctx, addr);
    }
}

/// The calling thread's ring of allocations is full (or its thread-local storage is being
/// torn down): files that ring's entries ([`work::file_own_ring`]: no other thread's), then
/// this allocation.
#[cold]
#[inline(never)]
fn ring_full(ctx: u64, addr: CUdeviceptr) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut index = OWNERS.lock();
        if !work::file_own_ring(&mut index, ctx, addr, &still_live) {
            index.file(ctx, addr, &still_live);
        }
    }));
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
    if !any_dead() {
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
    crate::faults::hazard::pinned_added(id, lo, bytes);
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

/// After a successful `cuMemHostAlloc` or `cuMemAllocHost_v2`.
///
/// # Safety
/// `pp` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_mem_host_alloc(id: HookId, pp: *mut *mut c_void, bytes: usize) {
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
pub unsafe fn ok_host_register(id: HookId, p: *mut c_void, bytes: usize) {
    if on() {
        cold(|| pinned_added(id, p as u64, bytes as u64, PinnedKind::Registered));
    }
}

/// A release of pinned memory that asynchronous copies were still using when the program
/// called it, kept on its thread from the call's `pre` hook to its `ok` hook, where what
/// the driver did is judged ([`after_host_release`]).
struct Release {
    id: HookId,
    /// The call's effect, "freeing" or "unregistering".
    what: &'static str,
    pinned: Pinned,
    /// The streams with copies touching the range that the driver called busy.
    running: Vec<Pending>,
    started: std::time::Instant,
}

thread_local! {
    /// The release in flight on this thread ([`Release`]).
    static RELEASE: RefCell<Option<Release>> = const { RefCell::new(None) };
}

/// Host memory `[lo, lo + bytes)` is about to be freed or unregistered: a range that died
/// with its context is already released (fix mode); copies still running that read or
/// write it are noted, and judged after the call ([`after_host_release`]).
///
/// No repair is made before the call: driver 580 itself waits for the copies before it
/// releases the memory (docs/design.md, "Releases with work pending": `cuMemFreeHost`
/// 1.017 s and `cuMemHostUnregister` 1.013 s behind a 1 s kernel, data intact; driver
/// 580.159, H100, 2026-12-06), so the shim asks the driver afterwards whether the streams
/// are idle instead of assuming either outcome.
fn before_host_release(id: HookId, what: &'static str, lo: u64) -> Option<CUresult> {
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
    let pending = {
        let mut t = TRACKER.lock();
        learn_keys(&mut t, &shards);
        let mut pending = t.pending(&shards, |_| true);
        for q in &mut pending {
            q.copies.retain(|c| c.touches_host(lo, hi));
        }
        pending.retain(|q| !q.copies.is_empty());
        pending
    };
    // Copies on streams already destroyed (orphans) cannot be asked about after the call:
    // unknown, so not judged.
    let running: Vec<Pending> = pending.into_iter().filter(still_running).collect();
    if !running.is_empty() {
        RELEASE.with(|r| {
            *r.borrow_mut() = Some(Release {
                id,
                what,
                pinned: p,
                running,
                started: std::time::Instant::now(),
            })
        });
    }
    None
}

/// After a successful free or unregister that [`before_host_release`] found copies
/// running under: the driver is asked whether those streams are idle now. Idle: the
/// driver waited for them (a hidden synchronisation, reported with how long the call
/// blocked); still busy: the memory was released under copies that are still running
/// (the error). A release that failed, or one with nothing running, says nothing.
fn after_host_release(ok: bool) {
    let Some(rel) = RELEASE.with(|r| r.borrow_mut().take()) else {
        return;
    };
    if !ok {
        return;
    }
    let blocked = rel.started.elapsed();
    let (idle, busy): (Vec<Pending>, Vec<Pending>) =
        rel.running.into_iter().partition(|q| !still_running(q));
    let shards = work::shards();
    let t = TRACKER.lock();
    let described = |q: &Pending| {
        let mut w = stream_work(&t, q);
        // Only the copies that touch the range matter here.
        w.counts = Counts {
            launches: 0,
            copies: q.copies.len() as u64,
            ops: 0,
        };
        w
    };
    let waited: Vec<StreamWork> = idle.iter().map(described).collect();
    let running: Vec<StreamWork> = busy.iter().map(described).collect();
    // What the driver waited for has completed.
    let keys: HashSet<u64> = idle.iter().map(|q| q.key).collect();
    t.retire(&shards, |k| keys.contains(&k));
    let ctx = rel.pinned.ctx.and_then(|c| t.context(c).cloned());
    drop(t);
    let range = (rel.pinned.lo, rel.pinned.bytes);
    let (kind, streams, explanation) = if running.is_empty() {
        let text = explain_pinned_release_waited(
            rel.id.name(),
            rel.what,
            range,
            Some(&rel.pinned),
            &waited,
            blocked,
        );
        ("pinned_release_waited", waited, text)
    } else {
        let text = explain_pinned_in_use(rel.what, range, Some(&rel.pinned), &running);
        ("pinned_memory_in_use", running, text)
    };
    report(Finding {
        id: rel.id,
        kind,
        result: None,
        ctx: ctx.as_ref(),
        handle: None,
        streams,
        range: Some(range),
        repair: None,
        explanation,
    });
}

/// Before `cuMemFreeHost`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn pre_mem_free_host(id: HookId, p: *mut c_void) -> Option<CUresult> {
    if !on() {
        return None;
    }
    crate::faults::hostguard::release_pinned(p as u64);
    cold(|| before_host_release(id, "freeing", p as u64))
}

/// After a successful `cuMemFreeHost`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn ok_mem_free_host(p: *mut c_void) {
    if on() {
        cold(|| {
            after_host_release(true);
            crate::faults::hazard::pinned_removed(p as u64);
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
    after_host_release(false);
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
    crate::faults::hostguard::release_pinned(p as u64);
    cold(|| before_host_release(id, "unregistering", p as u64))
}

/// After a successful `cuMemHostUnregister`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn ok_host_unregister(p: *mut c_void) {
    if on() {
        cold(|| {
            after_host_release(true);
            crate::faults::hazard::pinned_removed(p as u64);
            TRACKER.lock().pinned_removed(p as u64);
        });
    }
}

/// After a failed `cuMemHostUnregister`.
///
/// # Safety
/// None: the address is only a key.
pub unsafe fn fault_host_unregister(id: HookId, r: CUresult, p: *mut c_void) -> bool {
    after_host_release(false);
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
    let own = work::key_for(stream as usize, id.per_thread());
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
    let repaired = fix_sync() && synchronize(&running, &mut synced);
    let t = TRACKER.lock();
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

/// Synchronizes each stream (or, for a default stream, its context) that `running` names,
/// and appends what it synchronized to `synced`: the stream's handle in hex, or "default".
/// `true` when every synchronize returned `CUDA_SUCCESS`.
fn synchronize(running: &[Pending], synced: &mut Vec<String>) -> bool {
    let mut ok = true;
    for q in running {
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
    ok
}

// ---------------------------------------------------------------------------------------
// Exit.
