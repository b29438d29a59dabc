//! Use after destroy: a failed (or refused, or in `fix` mode answered) call on a handle
//! whose context ended, explained with how and where that context ended.

use super::report::{report, Finding};
use super::*;

/// Explains a failed call on a handle whose context ended; `true` when explained.
pub(super) fn explain_dead(
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
pub(super) const NOT_FORWARDED: &str = "not_forwarded";

/// What a stream or event call whose handle died with its context returns instead of
/// reaching the driver, in every mode but `off`: the code the driver itself returned for
/// `cuStreamSynchronize` and `cuStreamDestroy` of such a stream when it did not crash
/// (H200, driver 580.159: docs/validation.md), and what `cuCtxDestroy`'s documentation
/// says a later access to a destroyed context gets. (`CUDA_ERROR_INVALID_HANDLE` would tell
/// the program its handle was never valid.)
pub(super) const DEAD_HANDLE_CODE: CUresult = CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED;

/// Before a call that makes the driver dereference a stream or event handle (synchronize,
/// destroy): when the tracker knows the handle died with its context, the call is not
/// made (the driver crashed on it: [`DEAD_HANDLE_CODE`]); the program gets
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`, explained once. `None` to forward.
pub(super) fn refuse_dead(id: HookId, kind: HandleKind, h: u64) -> Option<CUresult> {
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

/// A failed call that ran in the calling thread's current context: explained when that
/// context ended.
pub(super) fn explain_current(id: HookId, r: CUresult) -> bool {
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
pub(super) fn explain_stream(id: HookId, r: CUresult, stream: CUstream) -> bool {
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

pub(super) fn explain_event(id: HookId, r: CUresult, event: CUevent) -> bool {
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

/// Answers a free or destroy of a dead handle in fix mode: `Some(CUDA_SUCCESS)` with the
/// explanation, `None` to forward.
pub(super) fn skip_dead(
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
