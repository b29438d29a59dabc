//! Streams: `cuStreamCreate`, `cuStreamCreateWithPriority`, `cuStreamDestroy_v2`,
//! `cuStreamGetCtx`, `cuStreamQuery(_ptsz)`, `cuStreamWaitEvent(_ptsz)`. A stream belongs to
//! the context current when it was created; work queued on it runs when it is synchronised
//! (see [`crate::state`] and [`crate::queue`]).

use std::ffi::{c_int, c_uint};

use seedance_cuda::{CUcontext, CUevent, CUresult, CUstream};

use super::non_null;
use crate::global::{call_driver, crash_if_dead, current};

/// Flags `cuStreamCreate` accepts: `CU_STREAM_DEFAULT` (0), `CU_STREAM_NON_BLOCKING` (1).
pub const STREAM_FLAGS: c_uint = 0x1;

/// `cuStreamCreate(CUstream *phStream, unsigned int Flags)`: a stream of the current
/// context (201/709 without a live one); unknown flags are `INVALID_VALUE`.
///
/// # Safety
///
/// `ph_stream` must be null or valid for writing one `CUstream`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(ph_stream: *mut CUstream, flags: c_uint) -> CUresult {
    call_driver(
        "cuStreamCreate",
        || format!("flags={flags}"),
        |d| {
            non_null(&[ph_stream.cast()])?;
            if flags & !STREAM_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let h = d.stream_create(current())?;
            d.set_stream_flags(h, flags);
            // SAFETY: non-null, and the caller guarantees it points to a writable CUstream.
            unsafe { ph_stream.write(h as CUstream) };
            Ok(())
        },
    )
}

/// `cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)`: as
/// `cuStreamCreate`; the priority is accepted and ignored.
///
/// # Safety
///
/// `ph_stream` must be null or valid for writing one `CUstream`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    ph_stream: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    call_driver(
        "cuStreamCreateWithPriority",
        || format!("flags={flags} priority={priority}"),
        |d| {
            non_null(&[ph_stream.cast()])?;
            if flags & !STREAM_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let h = d.stream_create(current())?;
            d.set_stream_flags(h, flags);
            // SAFETY: non-null, and the caller guarantees it points to a writable CUstream.
            unsafe { ph_stream.write(h as CUstream) };
            Ok(())
        },
    )
}

/// `cuStreamGetFlags(CUstream hStream, unsigned int *flags)`: the flags the stream was made
/// with (0 for a default stream); `INVALID_HANDLE` for a stream that is not live,
/// `INVALID_VALUE` for a null `flags`.
///
/// # Safety
///
/// `flags` must be null or valid for writing one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamGetFlags(h_stream: CUstream, flags: *mut c_uint) -> CUresult {
    call_driver(
        "cuStreamGetFlags",
        || format!("stream={:#x}", h_stream as usize),
        |d| {
            non_null(&[flags.cast()])?;
            let f = d.stream_flags(h_stream as usize, current())?;
            // SAFETY: non-null, and the caller guarantees it points to a writable uint.
            unsafe { flags.write(f) };
            Ok(())
        },
    )
}

/// `cuStreamDestroy_v2(CUstream hStream)`: `INVALID_HANDLE` for a stream that is not live,
/// `CONTEXT_IS_DESTROYED` for one whose context was destroyed. Queued work runs first.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(h_stream: CUstream) -> CUresult {
    crash_if_dead(|d| d.stream_of_dead_context(h_stream as usize));
    call_driver(
        "cuStreamDestroy_v2",
        || format!("stream={:#x}", h_stream as usize),
        |d| d.stream_destroy(h_stream as usize),
    )
}

/// `cuStreamGetCtx(CUstream hStream, CUcontext *pctx)`: the stream's context; for the
/// default streams (0, 0x1, 0x2) the current context (201/709 without a live one); an
/// unknown stream is `INVALID_HANDLE`, one whose context was destroyed
/// `CONTEXT_IS_DESTROYED`.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamGetCtx(h_stream: CUstream, pctx: *mut CUcontext) -> CUresult {
    call_driver(
        "cuStreamGetCtx",
        || format!("stream={:#x}", h_stream as usize),
        |d| {
            non_null(&[pctx.cast()])?;
            let ctx = d.stream_ctx(h_stream as usize, current())?;
            // SAFETY: non-null, and the caller guarantees it points to a writable CUcontext.
            unsafe { pctx.write(ctx as CUcontext) };
            Ok(())
        },
    )
}

fn stream_query(name: &str, stream: CUstream) -> CUresult {
    call_driver(
        name,
        || format!("stream={:#x}", stream as usize),
        |d| {
            let (key, _) = d.target_queue(stream as usize, current())?;
            if d.queue_busy(key) {
                Err(CUresult::CUDA_ERROR_NOT_READY)
            } else {
                Ok(())
            }
        },
    )
}

/// `cuStreamQuery(CUstream hStream)`: `CUDA_ERROR_NOT_READY` (600) while work is queued,
/// else success; the handle checks of `cuStreamSynchronize`.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(h_stream: CUstream) -> CUresult {
    stream_query("cuStreamQuery", h_stream)
}

/// `cuStreamQuery_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery_ptsz(h_stream: CUstream) -> CUresult {
    stream_query("cuStreamQuery_ptsz", h_stream)
}

fn stream_wait_event(name: &str, stream: CUstream, event: CUevent, flags: c_uint) -> CUresult {
    call_driver(
        name,
        || {
            format!(
                "stream={:#x} event={:#x} flags={flags}",
                stream as usize, event as usize
            )
        },
        |d| {
            if flags > 1 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.stream_wait_event(stream as usize, event as usize, current())
        },
    )
}

/// `cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)`: work queued
/// on the stream afterwards runs after the work the event marks. Flags 0 or 1
/// (`CU_EVENT_WAIT_EXTERNAL`), else `INVALID_VALUE`.
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(
    h_stream: CUstream,
    h_event: CUevent,
    flags: c_uint,
) -> CUresult {
    stream_wait_event("cuStreamWaitEvent", h_stream, h_event, flags)
}

/// `cuStreamWaitEvent_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent_ptsz(
    h_stream: CUstream,
    h_event: CUevent,
    flags: c_uint,
) -> CUresult {
    stream_wait_event("cuStreamWaitEvent_ptsz", h_stream, h_event, flags)
}
