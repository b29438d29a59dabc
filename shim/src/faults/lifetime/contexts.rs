//! Context hooks: creation, destroy, primary retain/release/reset, current, synchronize.

use super::*;

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

/// After a successful `cuCtxCreate_v2`, `_v3` or `_v4`.
///
/// # Safety
/// `pctx` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_ctx_create(id: HookId, pctx: *mut CUcontext) {
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
