//! Streams and events: whether a stream has pending work, waiting for it, and the shim's
//! own events for ordering two streams.

use super::entry::{
    result, typed, EVENT_CREATE, EVENT_RECORD, STREAM_QUERY, STREAM_SYNCHRONIZE, STREAM_WAIT_EVENT,
};
use seedance_cuda::{CUevent, CUresult, CUstream};

/// `cuStreamQuery(stream)`: `Ok(true)` while work is pending (`CUDA_ERROR_NOT_READY`),
/// `Ok(false)` when idle, the driver's code otherwise.
pub fn stream_busy(stream: CUstream) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUstream) -> CUresult;
    let p = STREAM_QUERY.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamQuery.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    match unsafe { f(stream) } {
        CUresult::CUDA_SUCCESS => Ok(false),
        CUresult::CUDA_ERROR_NOT_READY => Ok(true),
        r => Err(r),
    }
}

/// `cuStreamSynchronize(stream)` (the legacy-default-stream variant).
pub fn stream_synchronize(stream: CUstream) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUstream) -> CUresult;
    let p = STREAM_SYNCHRONIZE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamSynchronize.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    result(unsafe { f(stream) })
}

/// `cuEventCreate(&e, flags)` in the calling thread's current context: the shim's own
/// event for ordering two streams ([`crate::faults::hazard`]).
pub fn event_create(flags: u32) -> Result<CUevent, CUresult> {
    type F = unsafe extern "C" fn(*mut CUevent, u32) -> CUresult;
    let p = EVENT_CREATE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventCreate.
    let f: F = unsafe { typed(p) };
    let mut e: CUevent = std::ptr::null_mut();
    // SAFETY: e is a valid out-pointer.
    result(unsafe { f(&mut e, flags) }).map(|()| e)
}

/// `cuEventRecord(event, stream)` (the legacy-default-stream variant).
pub fn event_record(event: CUevent, stream: CUstream) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUevent, CUstream) -> CUresult;
    let p = EVENT_RECORD.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventRecord.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handles are only passed on.
    result(unsafe { f(event, stream) })
}

/// `cuStreamWaitEvent(stream, event, 0)` (the legacy-default-stream variant).
pub fn stream_wait_event(stream: CUstream, event: CUevent) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUstream, CUevent, u32) -> CUresult;
    let p = STREAM_WAIT_EVENT
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamWaitEvent.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handles are only passed on.
    result(unsafe { f(stream, event, 0) })
}

/// Looks up, now, the entry points the host-write guard's signal handler calls
/// (`cuStreamQuery`, `cuStreamSynchronize`, `cuCtxGetCurrent`, `cuCtxPushCurrent_v2`,
/// `cuCtxPopCurrent_v2`), so that the handler never runs the look-up (`dlsym`) itself.
/// Linux only, as the guard is (`shim/src/faults/hostguard.rs`).
#[cfg(target_os = "linux")]
pub fn resolve_for_signal_handler() {
    for f in [
        &STREAM_QUERY,
        &STREAM_SYNCHRONIZE,
        &super::entry::CTX_GET_CURRENT,
        &super::entry::CTX_PUSH,
        &super::entry::CTX_POP,
    ] {
        let _ = f.get();
    }
}
