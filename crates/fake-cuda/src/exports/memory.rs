//! Memory: `cuMemAlloc_v2`, `cuMemAllocPitch_v2`, `cuMemAllocAsync(_ptsz)`, `cuMemFree_v2`,
//! `cuMemGetInfo_v2`, `cuMemHostAlloc`, `cuMemFreeHost`.
//!
//! Device memory is accounting only (see [`crate::state`]); host memory is real (`malloc`).

use std::ffi::{c_uint, c_void};

use seedance_cuda::{CUdeviceptr, CUresult, CUstream};

use super::non_null;
use crate::global::{call_driver, current};
use crate::state::Driver;

/// Pitch alignment of `cuMemAllocPitch_v2`, bytes.
pub const PITCH_ALIGN: usize = 512;
/// Flags `cuMemHostAlloc` accepts: PORTABLE (1), DEVICEMAP (2), WRITECOMBINED (4).
pub const HOST_ALLOC_FLAGS: c_uint = 0x7;

/// Allocates for the current context and writes the address.
///
/// # Safety
///
/// `dptr` must be non-null and valid for writing one `CUdeviceptr`.
unsafe fn alloc_into(d: &mut Driver, dptr: *mut CUdeviceptr, bytes: usize) -> Result<(), CUresult> {
    let addr = d.mem_alloc(current(), bytes as u64)?;
    // SAFETY: the caller checked `dptr` non-null; the C caller guarantees it is writable.
    unsafe { dptr.write(addr) };
    Ok(())
}

/// `cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)`: 201 without a current context,
/// `INVALID_VALUE` for 0 bytes, `OUT_OF_MEMORY` above the device's free bytes.
///
/// # Safety
///
/// `dptr` must be null or valid for writing one `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    call_driver(
        "cuMemAlloc_v2",
        || format!("bytes={bytesize}"),
        |d| {
            non_null(&[dptr.cast()])?;
            // SAFETY: non-null; forwarded caller contract.
            unsafe { alloc_into(d, dptr, bytesize) }
        },
    )
}

/// `cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
/// size_t Height, unsigned int ElementSizeBytes)`: pitch is the width rounded up to 512;
/// the element size must be 4, 8 or 16 and both extents non-zero, else `INVALID_VALUE`.
///
/// # Safety
///
/// `dptr` and `p_pitch` must each be null or valid for writing one value.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocPitch_v2(
    dptr: *mut CUdeviceptr,
    p_pitch: *mut usize,
    width_in_bytes: usize,
    height: usize,
    element_size_bytes: c_uint,
) -> CUresult {
    call_driver(
        "cuMemAllocPitch_v2",
        || format!("width={width_in_bytes} height={height} elem={element_size_bytes}"),
        |d| {
            non_null(&[dptr.cast(), p_pitch.cast()])?;
            d.ctx_device(current())?;
            if ![4, 8, 16].contains(&element_size_bytes) || width_in_bytes == 0 || height == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let pitch = width_in_bytes
                .checked_next_multiple_of(PITCH_ALIGN)
                .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
            let bytes = pitch
                .checked_mul(height)
                .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
            // SAFETY: non-null; forwarded caller contract.
            unsafe { alloc_into(d, dptr, bytes)? };
            // SAFETY: non-null, and the caller guarantees it points to a writable size_t.
            unsafe { p_pitch.write(pitch) };
            Ok(())
        },
    )
}

/// Shared body of the two `cuMemAllocAsync` variants.
///
/// # Safety
///
/// `dptr` must be null or valid for writing one `CUdeviceptr`.
unsafe fn alloc_async(
    name: &str,
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    stream: CUstream,
) -> CUresult {
    call_driver(
        name,
        || format!("bytes={bytesize} stream={:#x}", stream as usize),
        |d| {
            non_null(&[dptr.cast()])?;
            // SAFETY: non-null; forwarded caller contract.
            unsafe { alloc_into(d, dptr, bytesize) }
        },
    )
}

/// `cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)`: as
/// `cuMemAlloc_v2`; the stream is not checked.
///
/// # Safety
///
/// `dptr` must be null or valid for writing one `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    h_stream: CUstream,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { alloc_async("cuMemAllocAsync", dptr, bytesize, h_stream) }
}

/// `cuMemAllocAsync_ptsz`: the per-thread-default-stream variant of `cuMemAllocAsync`.
///
/// # Safety
///
/// `dptr` must be null or valid for writing one `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    h_stream: CUstream,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { alloc_async("cuMemAllocAsync_ptsz", dptr, bytesize, h_stream) }
}

/// `cuMemFree_v2(CUdeviceptr dptr)`: 0 succeeds; otherwise 201 without a current context
/// and `INVALID_VALUE` for an address that is not a live allocation.
///
/// # Safety
///
/// None: the address is only looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    call_driver(
        "cuMemFree_v2",
        || format!("ptr={dptr:#x}"),
        |d| d.mem_free(current(), dptr),
    )
}

/// `cuMemGetInfo_v2(size_t *free, size_t *total)`: the current context's device.
///
/// # Safety
///
/// `free` and `total` must each be null or valid for writing one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    call_driver("cuMemGetInfo_v2", String::new, |d| {
        non_null(&[free.cast(), total.cast()])?;
        let (f, t) = d.mem_info(current())?;
        // SAFETY: both non-null, and the caller guarantees they point to writable size_ts.
        unsafe {
            free.write(usize::try_from(f).unwrap_or(usize::MAX));
            total.write(usize::try_from(t).unwrap_or(usize::MAX));
        }
        Ok(())
    })
}

/// `cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)`: really allocates with
/// `malloc`. Needs a current context (201); 0 bytes or unknown flags are `INVALID_VALUE`;
/// `malloc` failure is `OUT_OF_MEMORY`.
///
/// # Safety
///
/// `pp` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    call_driver(
        "cuMemHostAlloc",
        || format!("bytes={bytesize} flags={flags}"),
        |d| {
            non_null(&[pp.cast()])?;
            d.ctx_device(current())?;
            if bytesize == 0 || flags & !HOST_ALLOC_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            // SAFETY: malloc has no preconditions; a null result is handled below.
            let p = unsafe { libc::malloc(bytesize) };
            if p.is_null() {
                return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
            }
            d.host_insert(p as usize);
            // SAFETY: non-null, and the caller guarantees it points to a writable pointer.
            unsafe { pp.write(p) };
            Ok(())
        },
    )
}

/// `cuMemFreeHost(void *p)`: frees a `cuMemHostAlloc` block; any other pointer (null
/// included) is `INVALID_VALUE` and left alone.
///
/// # Safety
///
/// `p`, if it came from `cuMemHostAlloc`, must not be used after this call.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    call_driver(
        "cuMemFreeHost",
        || format!("ptr={:#x}", p as usize),
        |d| {
            if !d.host_remove(p as usize) {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            // SAFETY: `p` was returned by `malloc` in `cuMemHostAlloc` and was still recorded as
            // live, so it has not been freed yet; the record is gone now, so it cannot be freed
            // twice through us.
            unsafe { libc::free(p) };
            Ok(())
        },
    )
}
