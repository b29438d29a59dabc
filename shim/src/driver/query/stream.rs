//! Streams and events: whether a stream has pending work, waiting for it, and the shim's
//! own events for ordering two streams and for learning when a guarded copy completed;
//! the host-write guard's staging memory.

use super::entry::{
    result, typed, EVENT_CREATE, EVENT_RECORD, STREAM_GET_FLAGS, STREAM_QUERY, STREAM_SYNCHRONIZE,
    STREAM_WAIT_EVENT,
};
// The host-write guard's queries: Linux-only, as the guard (it reads through
// process_vm_readv).
#[cfg(target_os = "linux")]
use super::entry::{EVENT_DESTROY, EVENT_QUERY, MEM_HOST_ALLOC, STREAM_IS_CAPTURING};
#[cfg(target_os = "linux")]
use libc::c_void;
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

/// `cuStreamGetFlags(stream, &flags)`: the flags the stream was made with
/// (`CU_STREAM_NON_BLOCKING` = 1), for a stream the shim did not see made.
pub fn stream_flags(stream: CUstream) -> Result<u32, CUresult> {
    type F = unsafe extern "C" fn(CUstream, *mut u32) -> CUresult;
    let p = STREAM_GET_FLAGS
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamGetFlags.
    let f: F = unsafe { typed(p) };
    let mut flags = 0u32;
    // SAFETY: flags is a valid out-pointer; the handle is only passed on.
    result(unsafe { f(stream, &mut flags) }).map(|()| flags)
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

#[cfg(target_os = "linux")]
/// `cuEventQuery(event)`: `Ok(true)` when the work it marks completed, `Ok(false)` while
/// pending (`CUDA_ERROR_NOT_READY`), the driver's code otherwise.
pub fn event_done(event: CUevent) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUevent) -> CUresult;
    let p = EVENT_QUERY.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventQuery.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    match unsafe { f(event) } {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        r => Err(r),
    }
}

#[cfg(target_os = "linux")]
/// `cuEventDestroy_v2(event)`.
pub fn event_destroy(event: CUevent) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUevent) -> CUresult;
    let p = EVENT_DESTROY.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventDestroy_v2.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    result(unsafe { f(event) })
}

#[cfg(target_os = "linux")]
/// `cuStreamIsCapturing(stream)`: whether work submitted to it now is captured into a graph
/// instead of run (`CU_STREAM_CAPTURE_STATUS_NONE` is 0); the driver's code otherwise
/// (`CUDA_ERROR_NOT_FOUND` on a driver without the entry point).
pub fn stream_capturing(stream: CUstream) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUstream, *mut u32) -> CUresult;
    let p = STREAM_IS_CAPTURING
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamIsCapturing.
    let f: F = unsafe { typed(p) };
    let mut status = 0u32;
    // SAFETY: status is a valid out-pointer for a CUstreamCaptureStatus (a C enum).
    result(unsafe { f(stream, &mut status) }).map(|()| status != 0)
}

#[cfg(target_os = "linux")]
/// `cuMemHostAlloc(&p, bytes, flags)` in the calling thread's current context: the
/// host-write guard's staging memory (`shim/src/faults/hostguard/pool.rs`), never the
/// program's (so never tracked as its pinned memory).
pub fn mem_host_alloc(bytes: usize, flags: u32) -> Result<*mut c_void, CUresult> {
    type F = unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> CUresult;
    let p = MEM_HOST_ALLOC.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuMemHostAlloc.
    let f: F = unsafe { typed(p) };
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: out is a valid out-pointer.
    result(unsafe { f(&mut out, bytes, flags) }).map(|()| out)
}
