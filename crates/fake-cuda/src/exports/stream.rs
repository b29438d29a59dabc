//! Streams: `cuStreamCreate`, `cuStreamDestroy_v2`, `cuStreamGetCtx`. A stream belongs to
//! the context current when it was created (see [`crate::state`]).

use std::ffi::c_uint;

use seedance_cuda::{CUcontext, CUresult, CUstream};

use super::non_null;
use crate::global::{call_driver, current};

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
            // SAFETY: non-null, and the caller guarantees it points to a writable CUstream.
            unsafe { ph_stream.write(h as CUstream) };
            Ok(())
        },
    )
}

/// `cuStreamDestroy_v2(CUstream hStream)`: `INVALID_HANDLE` for a stream that is not live.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(h_stream: CUstream) -> CUresult {
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
