//! Other stream-ordered work: the asynchronous memsets (`cuMemsetD8Async`,
//! `cuMemsetD16Async`, `cuMemsetD32Async`, `cuMemsetD2D8Async`, `cuMemsetD2D16Async`,
//! `cuMemsetD2D32Async`), `cuGraphLaunch` and `cuLaunchHostFunc`, each with its `_ptsz`
//! variant.
//!
//! Kept minimal: each call checks its stream as a launch does (201/709 without a live
//! current context, `INVALID_HANDLE` for a stream of another context) and is queued on the
//! stream as one launch ([`crate::queue::Op::Launches`]), so `cuStreamQuery` reports it
//! pending until something synchronises the stream, and destroying the context loses it.
//! Nothing else happens when it runs: a memset writes no bytes (its destination is not
//! checked), a graph launch runs no graph (this driver has no graphs: any non-null
//! `CUgraphExec` is accepted, null is `INVALID_VALUE`), and a host function is not called
//! (null is `INVALID_VALUE`).

use std::ffi::{c_uchar, c_uint, c_ushort, c_void};

use seedance_cuda::{CUdeviceptr, CUresult, CUstream};

use crate::global::{call_driver, current};
use crate::queue::Op;

fn queue_op(name: &str, args: impl FnOnce() -> String, stream: CUstream, ok: bool) -> CUresult {
    call_driver(name, args, |d| {
        let key = d.submit_queue(stream as usize, current())?;
        if !ok {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        d.enqueue(key, Op::Launches(1));
        Ok(())
    })
}

fn memset(name: &str, dst: CUdeviceptr, value: u32, n: usize, stream: CUstream) -> CUresult {
    queue_op(
        name,
        || {
            format!(
                "dst={dst:#x} value={value:#x} n={n} stream={:#x}",
                stream as usize
            )
        },
        stream,
        true,
    )
}

fn memset_2d(
    name: &str,
    dst: CUdeviceptr,
    pitch: usize,
    value: u32,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    queue_op(
        name,
        || {
            format!(
                "dst={dst:#x} pitch={pitch} value={value:#x} width={width} height={height} \
                 stream={:#x}",
                stream as usize
            )
        },
        stream,
        true,
    )
}

macro_rules! memset_exports {
    ($($name:ident / $ptsz:ident ($ty:ty) $doc:literal;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(CUdeviceptr dstDevice, ", $doc, " value, size_t N, CUstream hStream)`: queued on the stream as one launch; writes nothing.")]
        ///
        /// # Safety
        ///
        /// None: no pointer is dereferenced.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dst: CUdeviceptr, value: $ty, n: usize, h_stream: CUstream) -> CUresult {
            memset(stringify!($name), dst, u32::from(value), n, h_stream)
        }

        #[doc = concat!("`", stringify!($ptsz), "`: the per-thread-default-stream variant of [`", stringify!($name), "`].")]
        ///
        /// # Safety
        ///
        /// None: no pointer is dereferenced.
        #[no_mangle]
        pub unsafe extern "C" fn $ptsz(dst: CUdeviceptr, value: $ty, n: usize, h_stream: CUstream) -> CUresult {
            memset(stringify!($ptsz), dst, u32::from(value), n, h_stream)
        }
    )*};
}

/// `cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)`: the synchronous
/// memset, queued on the current context's legacy default stream as one launch (a memset
/// of device memory does not block the host: CUDA driver API, "API synchronization
/// behavior"); writes nothing.
///
/// # Safety
///
/// None: no pointer is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, value: c_uchar, n: usize) -> CUresult {
    memset(
        "cuMemsetD8_v2",
        dst,
        u32::from(value),
        n,
        std::ptr::null_mut(),
    )
}

macro_rules! memset_2d_exports {
    ($($name:ident / $ptsz:ident ($ty:ty) $doc:literal;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(CUdeviceptr dstDevice, size_t dstPitch, ", $doc, " value, size_t Width, size_t Height, CUstream hStream)`: queued on the stream as one launch; writes nothing.")]
        ///
        /// # Safety
        ///
        /// None: no pointer is dereferenced.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dst: CUdeviceptr, pitch: usize, value: $ty, width: usize, height: usize, h_stream: CUstream) -> CUresult {
            memset_2d(stringify!($name), dst, pitch, u32::from(value), width, height, h_stream)
        }

        #[doc = concat!("`", stringify!($ptsz), "`: the per-thread-default-stream variant of [`", stringify!($name), "`].")]
        ///
        /// # Safety
        ///
        /// None: no pointer is dereferenced.
        #[no_mangle]
        pub unsafe extern "C" fn $ptsz(dst: CUdeviceptr, pitch: usize, value: $ty, width: usize, height: usize, h_stream: CUstream) -> CUresult {
            memset_2d(stringify!($ptsz), dst, pitch, u32::from(value), width, height, h_stream)
        }
    )*};
}

memset_exports! {
    cuMemsetD8Async / cuMemsetD8Async_ptsz (c_uchar) "unsigned char";
    cuMemsetD16Async / cuMemsetD16Async_ptsz (c_ushort) "unsigned short";
    cuMemsetD32Async / cuMemsetD32Async_ptsz (c_uint) "unsigned int";
}

memset_2d_exports! {
    cuMemsetD2D8Async / cuMemsetD2D8Async_ptsz (c_uchar) "unsigned char";
    cuMemsetD2D16Async / cuMemsetD2D16Async_ptsz (c_ushort) "unsigned short";
    cuMemsetD2D32Async / cuMemsetD2D32Async_ptsz (c_uint) "unsigned int";
}

fn graph_launch(name: &str, exec: *mut c_void, stream: CUstream) -> CUresult {
    queue_op(
        name,
        || format!("exec={:#x} stream={:#x}", exec as usize, stream as usize),
        stream,
        !exec.is_null(),
    )
}

/// `cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)`: any non-null handle is
/// accepted and queued on the stream as one launch; no graph runs.
///
/// # Safety
///
/// None: the handle is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuGraphLaunch(h_graph_exec: *mut c_void, h_stream: CUstream) -> CUresult {
    graph_launch("cuGraphLaunch", h_graph_exec, h_stream)
}

/// `cuGraphLaunch_ptsz`: the per-thread-default-stream variant of [`cuGraphLaunch`].
///
/// # Safety
///
/// None: the handle is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuGraphLaunch_ptsz(
    h_graph_exec: *mut c_void,
    h_stream: CUstream,
) -> CUresult {
    graph_launch("cuGraphLaunch_ptsz", h_graph_exec, h_stream)
}

fn host_func(name: &str, stream: CUstream, f: *mut c_void, data: *mut c_void) -> CUresult {
    queue_op(
        name,
        || {
            // The function's address is left out: it moves between runs (ASLR), and call
            // logs of two runs are compared.
            format!(
                "stream={:#x} fn={} userData={:#x}",
                stream as usize,
                if f.is_null() { "null" } else { "set" },
                data as usize
            )
        },
        stream,
        !f.is_null(),
    )
}

/// `cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)`: queued on the stream
/// as one launch; the function is never called.
///
/// # Safety
///
/// None: neither pointer is dereferenced or called.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchHostFunc(
    h_stream: CUstream,
    f: *mut c_void,
    user_data: *mut c_void,
) -> CUresult {
    host_func("cuLaunchHostFunc", h_stream, f, user_data)
}

/// `cuLaunchHostFunc_ptsz`: the per-thread-default-stream variant of [`cuLaunchHostFunc`].
///
/// # Safety
///
/// None: neither pointer is dereferenced or called.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchHostFunc_ptsz(
    h_stream: CUstream,
    f: *mut c_void,
    user_data: *mut c_void,
) -> CUresult {
    host_func("cuLaunchHostFunc_ptsz", h_stream, f, user_data)
}
