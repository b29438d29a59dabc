//! Copies: `cuMemcpyHtoDAsync_v2(_ptsz)`, `cuMemcpyDtoHAsync_v2(_ptsz)`,
//! `cuMemcpyAsync(_ptsz)` queue a copy on a stream (it runs, reading its source, when the
//! stream is synchronised: see [`crate::queue`]); `cuMemcpyHtoD_v2` and `cuMemcpyDtoH_v2`
//! run on the legacy default stream: they first run what it and the current context's
//! blocking streams queued (not its non-blocking streams'), then copy at once.
//!
//! `cuMemcpy2DAsync_v2(_ptsz)` queues one copy per row (host, device and unified sides; an
//! array is `INVALID_VALUE`).
//!
//! A device side must lie inside one live allocation (`INVALID_VALUE` otherwise); a host
//! side must be non-null. Device memory keeps the bytes copied into it.

use std::ffi::c_void;

use seedance_cuda::{
    CUdeviceptr, CUresult, CUstream, CUDA_MEMCPY2D, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
};

use crate::global::{call_driver, current};
use crate::queue::{Op, Side};

fn copy_async(name: &str, dst: Side, src: Side, bytes: usize, stream: CUstream) -> CUresult {
    let show = |s: Side| match s {
        Side::Host(p) => format!("{p:#x}"),
        Side::Device(a) => format!("{a:#x}"),
    };
    call_driver(
        name,
        || {
            format!(
                "dst={} src={} bytes={bytes} stream={:#x}",
                show(dst),
                show(src),
                stream as usize
            )
        },
        |d| {
            let key = d.submit_queue(stream as usize, current())?;
            d.check_copy(dst, src, bytes)?;
            if bytes > 0 {
                d.enqueue(key, Op::Copy { dst, src, bytes });
            }
            Ok(())
        },
    )
}

/// `cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
/// CUstream hStream)`.
///
/// # Safety
///
/// `src_host` must stay valid for reading `byte_count` bytes until the copy runs.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst_device: CUdeviceptr,
    src_host: *const c_void,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    let (dst, src) = (Side::Device(dst_device), Side::Host(src_host as usize));
    copy_async("cuMemcpyHtoDAsync_v2", dst, src, byte_count, h_stream)
}

/// `cuMemcpyHtoDAsync_v2_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// As [`cuMemcpyHtoDAsync_v2`].
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2_ptsz(
    dst_device: CUdeviceptr,
    src_host: *const c_void,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    let (dst, src) = (Side::Device(dst_device), Side::Host(src_host as usize));
    copy_async("cuMemcpyHtoDAsync_v2_ptsz", dst, src, byte_count, h_stream)
}

/// `cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
/// CUstream hStream)`.
///
/// # Safety
///
/// `dst_host` must stay valid for writing `byte_count` bytes until the copy runs.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst_host: *mut c_void,
    src_device: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    let (dst, src) = (Side::Host(dst_host as usize), Side::Device(src_device));
    copy_async("cuMemcpyDtoHAsync_v2", dst, src, byte_count, h_stream)
}

/// `cuMemcpyDtoHAsync_v2_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// As [`cuMemcpyDtoHAsync_v2`].
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2_ptsz(
    dst_host: *mut c_void,
    src_device: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    let (dst, src) = (Side::Host(dst_host as usize), Side::Device(src_device));
    copy_async("cuMemcpyDtoHAsync_v2_ptsz", dst, src, byte_count, h_stream)
}

fn unified(name: &str, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, s: CUstream) -> CUresult {
    // Which side is device memory is decided against the live allocations now.
    let sides = crate::global::with_driver(|d| (d.side(dst), d.side(src)));
    let (dst, src) = sides.unwrap_or((Side::Host(dst as usize), Side::Host(src as usize)));
    copy_async(name, dst, src, bytes, s)
}

/// `cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)`:
/// unified addressing; an address inside a live allocation is device memory, anything else
/// host memory.
///
/// # Safety
///
/// Host addresses must stay valid for `byte_count` bytes until the copy runs.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyAsync(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    unified("cuMemcpyAsync", dst, src, byte_count, h_stream)
}

/// `cuMemcpyAsync_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// As [`cuMemcpyAsync`].
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyAsync_ptsz(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    unified("cuMemcpyAsync_ptsz", dst, src, byte_count, h_stream)
}

fn copy_sync(name: &str, dst: Side, src: Side, bytes: usize) -> CUresult {
    call_driver(
        name,
        || format!("bytes={bytes}"),
        |d| {
            let ctx = current();
            d.ctx_device(ctx)?;
            // It runs on the legacy default stream: after that stream's work and its
            // blocking streams', not the non-blocking streams'.
            d.sync_queue(crate::queue::default_queue(ctx));
            d.check_copy(dst, src, bytes)?;
            d.copy_now(dst, src, bytes);
            Ok(())
        },
    )
}

/// `cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)`:
/// synchronous; runs the legacy default stream's and the blocking streams' work first.
///
/// # Safety
///
/// `src_host` must be valid for reading `byte_count` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst_device: CUdeviceptr,
    src_host: *const c_void,
    byte_count: usize,
) -> CUresult {
    let (dst, src) = (Side::Device(dst_device), Side::Host(src_host as usize));
    copy_sync("cuMemcpyHtoD_v2", dst, src, byte_count)
}

/// `cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)`: synchronous;
/// runs the legacy default stream's and the blocking streams' work first.
///
/// # Safety
///
/// `dst_host` must be valid for writing `byte_count` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst_host: *mut c_void,
    src_device: CUdeviceptr,
    byte_count: usize,
) -> CUresult {
    let (dst, src) = (Side::Host(dst_host as usize), Side::Device(src_device));
    copy_sync("cuMemcpyDtoH_v2", dst, src, byte_count)
}

fn copy_2d(name: &str, p: *const CUDA_MEMCPY2D, stream: CUstream) -> CUresult {
    // SAFETY: null is checked; otherwise the caller guarantees it points to a CUDA_MEMCPY2D.
    let copy = (!p.is_null()).then(|| unsafe { p.read_unaligned() });
    call_driver(
        name,
        || match copy {
            Some(c) => format!(
                "src={:#x} dst={:#x} width={} height={} stream={:#x}",
                c.src_start().map_or(0, |s| s.0),
                c.dst_start().map_or(0, |s| s.0),
                c.WidthInBytes,
                c.Height,
                stream as usize
            ),
            None => format!("copy=0x0 stream={:#x}", stream as usize),
        },
        |d| {
            let Some(c) = copy else {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            };
            let key = d.submit_queue(stream as usize, current())?;
            let side = |(addr, kind): (u64, u32)| match kind {
                CU_MEMORYTYPE_HOST => Side::Host(addr as usize),
                CU_MEMORYTYPE_DEVICE => Side::Device(addr),
                _ => d.side(addr),
            };
            let (Some(src), Some(dst)) = (c.src_start(), c.dst_start()) else {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            };
            let mut rows = Vec::with_capacity(c.Height);
            for r in 0..c.Height as u64 {
                let at = |(a, k): (u64, u32), pitch: usize| (a + r * pitch as u64, k);
                let (s, t) = (side(at(src, c.srcPitch)), side(at(dst, c.dstPitch)));
                d.check_copy(t, s, c.WidthInBytes)?;
                rows.push((t, s));
            }
            for (dst, src) in rows {
                if c.WidthInBytes > 0 {
                    d.enqueue(
                        key,
                        Op::Copy {
                            dst,
                            src,
                            bytes: c.WidthInBytes,
                        },
                    );
                }
            }
            Ok(())
        },
    )
}

/// `cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)`: one queued copy per
/// row.
///
/// # Safety
///
/// `p_copy` must be null or point to a `CUDA_MEMCPY2D`; its host sides must be valid for
/// the rows it names until the copy runs.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpy2DAsync_v2(
    p_copy: *const CUDA_MEMCPY2D,
    h_stream: CUstream,
) -> CUresult {
    copy_2d("cuMemcpy2DAsync_v2", p_copy, h_stream)
}

/// `cuMemcpy2DAsync_v2_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// As [`cuMemcpy2DAsync_v2`].
#[no_mangle]
pub unsafe extern "C" fn cuMemcpy2DAsync_v2_ptsz(
    p_copy: *const CUDA_MEMCPY2D,
    h_stream: CUstream,
) -> CUresult {
    copy_2d("cuMemcpy2DAsync_v2_ptsz", p_copy, h_stream)
}
