//! Context hooks: creation, destroy, primary retain/release/reset, current, synchronize;
//! and a context's end: the work it would abandon (explained, and in `fix` mode
//! synchronised first) and what dies with it.

use super::dead::{explain_current, explain_dead};
use super::memory::still_live;
use super::report::{report, Finding};
use super::*;
use crate::faults::alloc;

fn created_context(id: HookId, pctx: *mut CUcontext) {
    // SAFETY: the driver wrote *pctx on success.
    let handle = unsafe { written(pctx) } as u64;
    work::set_current_context(handle as usize);
    let device = query::ctx_get_device().ok();
    stray::note_context(device);
    let mut t = TRACKER.lock();
    let s = site(&mut t, id);
    t.context_created(handle, device, s);
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
    super::stray::at_context_end(ctx.device);
    let running = running_in_context(ctx.id);
    if running.is_empty() {
        return;
    }
    let total = sum(&running);
    let repaired = fix_sync()
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
    // Allocations still held by their threads ([`seedance_hotpath::held`]) were never filed:
    // those made in this context (or in none known) are asked of the driver too. One
    // alive stays held, to be filed when its thread publishes it.
    for a in work::held_all() {
        if (a.ctx == handle || a.ctx == 0)
            && !matches!(
                query::pointer_context(a.addr),
                Ok(_) | Err(CUresult::CUDA_ERROR_NOT_FOUND)
            )
        {
            died.push((a.addr, a.bytes));
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

/// After a successful `cuCtxCreate_v2`, `_v3` or `_v4`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_ctx_create(id: HookId, pctx: *mut CUcontext) {
    crate::faults::devices::used_a_device();
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
    crate::faults::devices::used_a_device();
    if on() {
        cold(|| {
            // SAFETY: the driver wrote *pctx on success.
            let handle = unsafe { written(pctx) } as u64;
            stray::note_context(Some(dev));
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
        if let Some(r) = cold(|| stray::redirected_release(id, dev)) {
            return Some(r);
        }
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
pub unsafe fn ok_ctx_current(ctx: CUcontext) {
    if on() {
        work::set_current_context(ctx as usize);
    }
}

/// After a successful `cuCtxPopCurrent(_v2)`.
///
/// # Safety
/// None: the out-pointer is not read.
pub unsafe fn ok_ctx_pop() {
    if on() {
        cold(refresh_current);
    }
}

fn synchronized_context(handle: u64) {
    crate::faults::hazard::context_completed(handle);
    let mut t = TRACKER.lock();
    if let Some(cid) = t.live_context(handle).map(|c| c.id) {
        retire_context(&mut t, cid);
    }
}

/// After a successful `cuCtxSynchronize`: the current context's work is done.
///
/// # Safety
/// None.
pub unsafe fn ok_ctx_synchronize() {
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
pub unsafe fn ok_ctx_synchronize_v2(ctx: CUcontext) {
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
