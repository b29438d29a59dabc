//! Events: `cuEventCreate`, `cuEventDestroy_v2`, `cuEventRecord(_ptsz)`,
//! `cuEventRecordWithFlags(_ptsz)` (what the CUDA 13 runtime records with),
//! `cuEventSynchronize`, `cuEventQuery`, and the context-wide `cuCtxRecordEvent` and
//! `cuCtxWaitEvent`. An event belongs to the context current when it
//! was created and marks a position in a stream's queue when recorded (see
//! [`crate::state`]).

use std::ffi::c_uint;

use seedance_cuda::{CUcontext, CUevent, CUresult, CUstream};

use super::non_null;
use crate::global::{call_driver, crash_if_dead, current};

/// Flags `cuEventCreate` accepts: BLOCKING_SYNC (1), DISABLE_TIMING (2), INTERPROCESS (4).
pub const EVENT_FLAGS: c_uint = 0x7;

/// `cuEventCreate(CUevent *phEvent, unsigned int Flags)`: an event of the current context
/// (201/709 without a live one); unknown flags are `INVALID_VALUE`.
///
/// # Safety
///
/// `ph_event` must be null or valid for writing one `CUevent`.
#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(ph_event: *mut CUevent, flags: c_uint) -> CUresult {
    call_driver(
        "cuEventCreate",
        || format!("flags={flags}"),
        |d| {
            non_null(&[ph_event.cast()])?;
            if flags & !EVENT_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let h = d.event_create(current())?;
            // SAFETY: non-null, and the caller guarantees it points to a writable CUevent.
            unsafe { ph_event.write(h as CUevent) };
            Ok(())
        },
    )
}

/// `cuEventDestroy_v2(CUevent hEvent)`: `INVALID_HANDLE` for an unknown event,
/// `CONTEXT_IS_DESTROYED` for one whose context was destroyed.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(h_event: CUevent) -> CUresult {
    crash_if_dead(|d| d.event_of_dead_context(h_event as usize));
    call_driver(
        "cuEventDestroy_v2",
        || format!("event={:#x}", h_event as usize),
        |d| d.event_destroy(h_event as usize),
    )
}

fn event_record(name: &str, event: CUevent, stream: CUstream) -> CUresult {
    call_driver(
        name,
        || format!("event={:#x} stream={:#x}", event as usize, stream as usize),
        |d| d.event_record(event as usize, stream as usize, current()),
    )
}

/// `cuEventRecord(CUevent hEvent, CUstream hStream)`: the event marks the work queued on
/// the stream so far; the stream must belong to the event's context (`INVALID_HANDLE`).
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(h_event: CUevent, h_stream: CUstream) -> CUresult {
    event_record("cuEventRecord", h_event, h_stream)
}

/// `cuEventRecord_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecord_ptsz(h_event: CUevent, h_stream: CUstream) -> CUresult {
    event_record("cuEventRecord_ptsz", h_event, h_stream)
}

/// Flags `cuEventRecordWithFlags` accepts: `CU_EVENT_RECORD_DEFAULT` (0) and
/// `CU_EVENT_RECORD_EXTERNAL` (1).
pub const EVENT_RECORD_FLAGS: c_uint = 0x1;

fn event_record_with_flags(
    name: &str,
    event: CUevent,
    stream: CUstream,
    flags: c_uint,
) -> CUresult {
    call_driver(
        name,
        || {
            format!(
                "event={:#x} stream={:#x} flags={flags}",
                event as usize, stream as usize
            )
        },
        |d| {
            if flags & !EVENT_RECORD_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.event_record(event as usize, stream as usize, current())
        },
    )
}

/// `cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)`: as
/// `cuEventRecord`; unknown flags are `INVALID_VALUE`. The CUDA 13 runtime's
/// `cudaEventRecord` ends here (docs/design.md, fact 12).
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecordWithFlags(
    h_event: CUevent,
    h_stream: CUstream,
    flags: c_uint,
) -> CUresult {
    event_record_with_flags("cuEventRecordWithFlags", h_event, h_stream, flags)
}

/// `cuEventRecordWithFlags_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecordWithFlags_ptsz(
    h_event: CUevent,
    h_stream: CUstream,
    flags: c_uint,
) -> CUresult {
    event_record_with_flags("cuEventRecordWithFlags_ptsz", h_event, h_stream, flags)
}

/// `fakeEventRecordUnseen(CUevent hEvent, CUstream hStream)`: `cuEventRecord` under a name
/// that is no driver entry point, so no interposer sees it: for tests of what a shim does
/// with a record it cannot see (an IPC event's, one made through an entry point it does not
/// hook).
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn fakeEventRecordUnseen(h_event: CUevent, h_stream: CUstream) -> CUresult {
    event_record("fakeEventRecordUnseen", h_event, h_stream)
}

/// `cuEventSynchronize(CUevent hEvent)`: runs the marked work.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(h_event: CUevent) -> CUresult {
    crash_if_dead(|d| d.event_of_dead_context(h_event as usize));
    call_driver(
        "cuEventSynchronize",
        || format!("event={:#x}", h_event as usize),
        |d| d.event_sync(h_event as usize),
    )
}

/// `cuEventQuery(CUevent hEvent)`: `CUDA_ERROR_NOT_READY` (600) until the marked work ran.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(h_event: CUevent) -> CUresult {
    call_driver(
        "cuEventQuery",
        || format!("event={:#x}", h_event as usize),
        |d| d.event_query(h_event as usize),
    )
}

/// `cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)` (CUDA 12.5+): the event marks the work
/// queued so far on every stream of the context; the event must belong to it
/// (`INVALID_HANDLE`).
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuCtxRecordEvent(h_ctx: CUcontext, h_event: CUevent) -> CUresult {
    call_driver(
        "cuCtxRecordEvent",
        || format!("ctx={:#x} event={:#x}", h_ctx as usize, h_event as usize),
        |d| d.ctx_record_event(h_ctx as usize, h_event as usize),
    )
}

/// `cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)` (CUDA 12.5+): work queued afterwards on
/// the context's streams runs after the event's work.
///
/// # Safety
///
/// None: the handles are only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuCtxWaitEvent(h_ctx: CUcontext, h_event: CUevent) -> CUresult {
    call_driver(
        "cuCtxWaitEvent",
        || format!("ctx={:#x} event={:#x}", h_ctx as usize, h_event as usize),
        |d| d.ctx_wait_event(h_ctx as usize, h_event as usize),
    )
}
