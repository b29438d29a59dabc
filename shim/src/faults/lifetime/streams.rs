//! Stream and event hooks: create, destroy, synchronize, record, wait.

use super::dead::{explain_dead, explain_event, explain_stream, refuse_dead, skip_dead};
use super::*;

fn created_stream(id: HookId, ph: *mut CUstream, flags: c_uint) {
    // SAFETY: the driver wrote *ph on success.
    let h = unsafe { written(ph) } as u64;
    crate::faults::hazard::stream_created(h, flags);
    let mut t = TRACKER.lock();
    let ctx = current_context_id(&t);
    let s = site(&mut t, id);
    // A handle the driver hands out again starts from nothing.
    let shards = work::shards();
    t.retire(&shards, |k| k == h);
    t.stream_created(h, ctx, s);
}

/// After a successful `cuStreamCreate` or `cuStreamCreateWithPriority`.
///
/// # Safety
/// `ph` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_stream_create(id: HookId, ph: *mut CUstream, flags: c_uint) {
    if on() {
        cold(|| created_stream(id, ph, flags));
    }
}

/// Before `cuStreamDestroy(_v2)`: a stream of an ended context is already gone (fix mode
/// answers for the driver; observe returns `CUDA_ERROR_CONTEXT_IS_DESTROYED` without the
/// undefined call, [`refuse_dead`]); copies still running on a live stream are remembered with its
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
            let r = skip_dead(id, HandleKind::Stream, h, owned.ctx, Some(owned.created))
                .or_else(|| refuse_dead(id, HandleKind::Stream, h));
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
pub unsafe fn ok_stream_destroy(stream: CUstream) {
    if on() {
        cold(|| {
            let h = stream as u64;
            crate::faults::hazard::stream_destroyed(h);
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
/// all its work completed is synchronised already; any other stream of an ended context
/// is not sent to the driver ([`refuse_dead`]).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_stream_sync(id: HookId, stream: CUstream) -> Option<CUresult> {
    // No handle of an ended context held: nothing to refuse or answer (no lock).
    if !on() || (stream as usize) <= 2 || !any_dead_handle() {
        return None;
    }
    cold(|| {
        complete_already(id, HandleKind::Stream, stream as u64)
            .or_else(|| refuse_dead(id, HandleKind::Stream, stream as u64))
    })
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

/// The stream's work is done: its baselines raised in the shards (the calling thread's own
/// alone for its per-thread default stream), no lock ([`work::retire_key`]).
fn synchronized_stream(id: HookId, stream: CUstream) {
    let key = work::key_for(stream as usize, id.per_thread());
    match key_kind(key) {
        KeyKind::PerThread(_) => work::retire_own(key),
        _ => work::retire_key(key),
    }
}

/// After a successful `cuStreamSynchronize(_ptsz)`: the stream's work is done (no lock
/// another thread synchronising its own stream takes).
///
/// # Safety
/// None: the handle is only a key.
#[inline(always)]
pub unsafe fn ok_stream_sync(id: HookId, stream: CUstream) {
    if on() {
        crate::faults::hazard::stream_completed(id, stream);
        cold(|| synchronized_stream(id, stream));
    }
}

/// After `cuStreamQuery(_ptsz)` reported the stream idle: its work is done (for the
/// pinned-copy checks; the lifetime counts keep asking the driver themselves).
///
/// # Safety
/// None: the handle is only a key.
#[inline(always)]
pub unsafe fn ok_stream_query(id: HookId, stream: CUstream) {
    if on() {
        crate::faults::hazard::stream_completed(id, stream);
    }
}

/// After a failed `cuStreamQuery(_ptsz)`: `CUDA_ERROR_NOT_READY` is the answer of a poll,
/// counted and never reported; other codes as any call on a stream.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn fault_stream_query(id: HookId, r: CUresult, stream: CUstream) -> bool {
    r == CUresult::CUDA_ERROR_NOT_READY || (on() && cold(|| explain_stream(id, r, stream)))
}

/// After `cuEventQuery` reported the event complete.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_event_query(event: CUevent) {
    if on() {
        crate::faults::hazard::event_completed(event);
    }
}

/// After a failed `cuEventQuery`: `CUDA_ERROR_NOT_READY` is the answer of a poll.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn fault_event_query(id: HookId, r: CUresult, event: CUevent) -> bool {
    r == CUresult::CUDA_ERROR_NOT_READY || (on() && cold(|| explain_event(id, r, event)))
}

/// After a successful `cuStreamWaitEvent(_ptsz)`: the stream is ordered after the event's
/// record (for the pinned-copy checks).
///
/// # Safety
/// None: the handles are only keys.
#[inline(always)]
pub unsafe fn ok_stream_wait_event(id: HookId, stream: CUstream, event: CUevent) {
    if on() {
        crate::faults::hazard::stream_waited(id, stream, event);
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
) -> bool {
    on() && cold(|| explain_event(id, r, event) || explain_stream(id, r, stream))
}

/// After a successful `cuEventCreate`.
///
/// # Safety
/// `ph` is null or the out-pointer the driver just wrote.
pub unsafe fn ok_event_create(id: HookId, ph: *mut CUevent) {
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

/// Before `cuEventDestroy(_v2)`: an event of an ended context is already gone (fix mode
/// answers success, observe the driver's code without the call: [`refuse_dead`]).
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
        let r = skip_dead(id, HandleKind::Event, h, owned.ctx, Some(owned.created))
            .or_else(|| refuse_dead(id, HandleKind::Event, h));
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
pub unsafe fn ok_event_destroy(event: CUevent) {
    if on() {
        crate::faults::hazard::event_destroyed(event);
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
#[inline(always)]
pub unsafe fn ok_event_record(id: HookId, event: CUevent, stream: CUstream) {
    if on() {
        work::note_event_record(event as u64, stream as usize, id.per_thread());
        crate::faults::hazard::event_recorded(id, event, stream);
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
/// work completed is complete already; any other event of an ended context is not sent to
/// the driver ([`refuse_dead`]).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn pre_event_sync(id: HookId, event: CUevent) -> Option<CUresult> {
    // No handle of an ended context held: nothing to refuse or answer (no lock).
    if !on() || !any_dead_handle() {
        return None;
    }
    cold(|| {
        complete_already(id, HandleKind::Event, event as u64)
            .or_else(|| refuse_dead(id, HandleKind::Event, event as u64))
    })
}

/// After a successful `cuEventSynchronize`: the work the event covered is done (its
/// latest record's baseline raised in the shard that recorded it, no lock:
/// [`work::retire_event`]).
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_event_sync(event: CUevent) {
    if on() {
        crate::faults::hazard::event_completed(event);
        cold(|| work::retire_event(event as u64));
    }
}

// ---------------------------------------------------------------------------------------
// Launches and copies (hot paths).

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A thread synchronising its own stream and event (before and after the call, as the
    /// wrappers do) while another thread holds the tracker's lock: it must not wait for it.
    #[test]
    fn synchronize_takes_no_tracker_lock() {
        // The default configuration: fix mode, lifetime tracking on.
        crate::rt::config::switches();
        assert!(on() && fix(), "the test needs the default configuration");
        let held = TRACKER.lock();
        let (tx, rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let stream = 0x5eed_5000_0100usize as CUstream;
            let event = 0x5eed_e000_0100usize as CUevent;
            for _ in 0..100 {
                work::note_launch(stream as usize, false);
                // SAFETY: the handles are only keys; no driver is called.
                unsafe {
                    assert!(pre_stream_sync(HookId::cuStreamSynchronize, stream).is_none());
                    ok_stream_sync(HookId::cuStreamSynchronize, stream);
                    assert!(pre_stream_sync(
                        HookId::cuStreamSynchronize_ptsz,
                        std::ptr::null_mut()
                    )
                    .is_none());
                    ok_stream_sync(HookId::cuStreamSynchronize_ptsz, std::ptr::null_mut());
                    ok_event_record(HookId::cuEventRecord, event, stream);
                    assert!(pre_event_sync(HookId::cuEventSynchronize, event).is_none());
                    ok_event_sync(event);
                }
            }
            let key = stream as u64;
            let mut pending = Counts::default();
            work::for_each_shard(|s| {
                pending = pending.plus(s.counts(key).unwrap_or_default().since(s.baseline(key)))
            });
            tx.send(pending).unwrap();
        });
        let got = rx.recv_timeout(Duration::from_secs(30));
        drop(held);
        t.join().unwrap();
        let pending = got.expect("a synchronize waited for the tracker's lock");
        assert!(pending.is_zero(), "{pending:?}");
    }
}
