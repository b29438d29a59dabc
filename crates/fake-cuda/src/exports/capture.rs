//! Stream capture and stream memory operations, kept minimal: `cuStreamBeginCapture_v2`,
//! `cuStreamEndCapture` (each with `_ptsz`): work queued on a capturing stream is dropped
//! (it would go into a graph, and this driver has no graphs) and the end hands back a
//! non-null graph handle, or `STREAM_CAPTURE_INVALIDATED` (901) after a synchronisation of
//! the capturing stream was refused (900, as the real driver does); `cuStreamWaitValue32_v2`
//! and `cuStreamWriteValue32_v2` (each with `_ptsz`, and the CUDA 8.0 ABIs without `_v2` that
//! `cuGetProcAddress` hands out below 11070) are queued as one launch, the value neither
//! waited for nor written.

use std::ffi::{c_uint, c_void};

use seedance_cuda::{CUdeviceptr, CUresult, CUstream};

use super::non_null;
use crate::global::{call_driver, current};
use crate::queue::Op;

fn begin(name: &str, stream: CUstream, mode: c_uint) -> CUresult {
    call_driver(
        name,
        || format!("stream={:#x} mode={mode}", stream as usize),
        |d| {
            let key = d.submit_queue(stream as usize, current())?;
            if mode > 2 || stream as usize == 0 || stream as usize == 1 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.capture_begin(key)
        },
    )
}

fn end(name: &str, stream: CUstream, ph_graph: *mut *mut c_void) -> CUresult {
    call_driver(
        name,
        || format!("stream={:#x}", stream as usize),
        |d| {
            non_null(&[ph_graph.cast()])?;
            let key = d.submit_queue(stream as usize, current())?;
            let g = d.capture_end(key)?;
            // SAFETY: non-null, and the caller guarantees it points to a writable CUgraph.
            unsafe { ph_graph.write(g as *mut c_void) };
            Ok(())
        },
    )
}

/// `cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)`: work queued on
/// the stream from now on is captured (dropped here); the legacy default stream cannot be
/// captured (`INVALID_VALUE`), nor a stream already capturing (`ILLEGAL_STATE`).
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2(h_stream: CUstream, mode: c_uint) -> CUresult {
    begin("cuStreamBeginCapture_v2", h_stream, mode)
}

/// `cuStreamBeginCapture_v2_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuStreamBeginCapture_v2_ptsz(
    h_stream: CUstream,
    mode: c_uint,
) -> CUresult {
    begin("cuStreamBeginCapture_v2_ptsz", h_stream, mode)
}

/// `cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)`: ends the capture and writes a
/// graph handle; a stream not capturing is `ILLEGAL_STATE`.
///
/// # Safety
///
/// `ph_graph` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture(
    h_stream: CUstream,
    ph_graph: *mut *mut c_void,
) -> CUresult {
    end("cuStreamEndCapture", h_stream, ph_graph)
}

/// `cuStreamEndCapture_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// `ph_graph` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture_ptsz(
    h_stream: CUstream,
    ph_graph: *mut *mut c_void,
) -> CUresult {
    end("cuStreamEndCapture_ptsz", h_stream, ph_graph)
}

fn value_op(
    name: &str,
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    call_driver(
        name,
        || {
            format!(
                "stream={:#x} addr={addr:#x} value={value} flags={flags}",
                stream as usize
            )
        },
        |d| {
            let key = d.submit_queue(stream as usize, current())?;
            d.enqueue(key, Op::Launches(1));
            Ok(())
        },
    )
}

/// `cuStreamWaitValue32_v2(CUstream, CUdeviceptr addr, cuuint32_t value, unsigned flags)`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitValue32_v2(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWaitValue32_v2", stream, addr, value, flags)
}

/// `cuStreamWaitValue32_v2_ptsz`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitValue32_v2_ptsz(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWaitValue32_v2_ptsz", stream, addr, value, flags)
}

/// `cuStreamWriteValue32_v2(CUstream, CUdeviceptr addr, cuuint32_t value, unsigned flags)`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWriteValue32_v2(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWriteValue32_v2", stream, addr, value, flags)
}

/// `cuStreamWriteValue32_v2_ptsz`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWriteValue32_v2_ptsz(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWriteValue32_v2_ptsz", stream, addr, value, flags)
}

/// `cuStreamWaitValue32`: the CUDA 8.0 ABI of `cuStreamWaitValue32`, the same arguments as `cuStreamWaitValue32_v2`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitValue32(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWaitValue32", stream, addr, value, flags)
}

/// `cuStreamWaitValue32_ptsz`: the CUDA 8.0 ABI of `cuStreamWaitValue32`, the same arguments as `cuStreamWaitValue32_v2`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitValue32_ptsz(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWaitValue32_ptsz", stream, addr, value, flags)
}

/// `cuStreamWriteValue32`: the CUDA 8.0 ABI of `cuStreamWriteValue32`, the same arguments as `cuStreamWriteValue32_v2`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWriteValue32(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWriteValue32", stream, addr, value, flags)
}

/// `cuStreamWriteValue32_ptsz`: the CUDA 8.0 ABI of `cuStreamWriteValue32`, the same arguments as `cuStreamWriteValue32_v2`.
///
/// # Safety
///
/// None: nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWriteValue32_ptsz(
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult {
    value_op("cuStreamWriteValue32_ptsz", stream, addr, value, flags)
}
