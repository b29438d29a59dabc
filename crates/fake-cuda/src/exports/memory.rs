//! Memory: `cuMemAlloc_v2`, `cuMemAllocPitch_v2`, `cuMemAllocAsync(_ptsz)`,
//! `cuMemAllocManaged`, `cuMemFree_v2`, `cuMemFreeAsync(_ptsz)`, `cuMemGetInfo_v2`,
//! `cuMemHostAlloc`, `cuMemAllocHost_v2`, `cuMemFreeHost`, `cuMemHostRegister_v2`,
//! `cuMemHostUnregister`, `cuMemCreate`, `cuMemRelease`, `cuMemGetAllocationGranularity`,
//! `cuPointerGetAttribute`.
//!
//! Device memory is accounting, plus the bytes copies put there (see [`crate::state`]);
//! pinned host memory is real (`malloc`), poisoned and kept when freed.
//! A failed `cuMemAlloc_v2` leaves a message for the log callbacks ([`crate::logs`]).

use std::ffi::{c_int, c_uint, c_void};

use seedance_cuda::{
    CUdeviceptr, CUmemAllocationProp, CUmemGenericAllocationHandle, CUresult, CUstream,
    CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_DEVICE, CU_POINTER_ATTRIBUTE_CONTEXT,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
};

use super::non_null;
use crate::global::{call_driver, current};
use crate::logs;
use crate::state::{Driver, PHYSICAL_GRANULARITY, POISON};

/// Flags `cuMemAllocManaged` accepts: `CU_MEM_ATTACH_GLOBAL` (1) or `CU_MEM_ATTACH_HOST` (2).
pub const MANAGED_FLAGS: [c_uint; 2] = [1, 2];

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
    let r = call_driver(
        "cuMemAlloc_v2",
        || format!("bytes={bytesize}"),
        |d| {
            non_null(&[dptr.cast()])?;
            // SAFETY: non-null; forwarded caller contract.
            unsafe { alloc_into(d, dptr, bytesize) }.inspect_err(|e| {
                let what = match *e {
                    CUresult::CUDA_ERROR_OUT_OF_MEMORY => "out of memory",
                    CUresult::CUDA_ERROR_INVALID_VALUE => "invalid size",
                    _ => return,
                };
                logs::set_pending(
                    "cuMemAlloc_v2",
                    &format!("{what}: {bytesize} bytes requested"),
                );
            })
        },
    );
    logs::deliver_pending();
    r
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

/// `cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)`: accounted
/// like `cuMemAlloc_v2` on the current context's device; flags must be
/// `CU_MEM_ATTACH_GLOBAL` or `CU_MEM_ATTACH_HOST`, else `INVALID_VALUE`.
///
/// # Safety
///
/// `dptr` must be null or valid for writing one `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    call_driver(
        "cuMemAllocManaged",
        || format!("bytes={bytesize} flags={flags}"),
        |d| {
            non_null(&[dptr.cast()])?;
            d.ctx_device(current())?;
            if !MANAGED_FLAGS.contains(&flags) {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            // SAFETY: non-null; forwarded caller contract.
            unsafe { alloc_into(d, dptr, bytesize) }
        },
    )
}

/// Shared body of the two `cuMemFreeAsync` variants.
fn free_async(name: &str, dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    call_driver(
        name,
        || format!("ptr={dptr:#x} stream={:#x}", stream as usize),
        |d| d.mem_free(current(), dptr),
    )
}

/// `cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)`: as `cuMemFree_v2`; the stream is
/// not checked.
///
/// # Safety
///
/// None: the address is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, h_stream: CUstream) -> CUresult {
    free_async("cuMemFreeAsync", dptr, h_stream)
}

/// `cuMemFreeAsync_ptsz`: the per-thread-default-stream variant of `cuMemFreeAsync`.
///
/// # Safety
///
/// None: the address is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, h_stream: CUstream) -> CUresult {
    free_async("cuMemFreeAsync_ptsz", dptr, h_stream)
}

/// The device ordinal a `CUmemAllocationProp` names: pinned memory on a device, else
/// `INVALID_VALUE`.
///
/// # Safety
///
/// `prop` must be null or point to a valid `CUmemAllocationProp`.
unsafe fn prop_device(prop: *const CUmemAllocationProp) -> Result<i32, CUresult> {
    // SAFETY: null or valid, per the caller's contract.
    let p = unsafe { prop.as_ref() }.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if p.type_ != CU_MEM_ALLOCATION_TYPE_PINNED || p.location.type_ != CU_MEM_LOCATION_TYPE_DEVICE {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(p.location.id)
}

/// `CU_MEM_HANDLE_TYPE_FABRIC`, a bit of `CUmemAllocationProp::requestedHandleTypes`.
const CU_MEM_HANDLE_TYPE_FABRIC: i32 = 0x8;

/// `cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
/// const CUmemAllocationProp *prop, unsigned long long flags)`: pinned memory on the
/// device `prop->location.id`; the size must be a non-zero multiple of 2 MiB and `flags`
/// 0, else `INVALID_VALUE`; `OUT_OF_MEMORY` above the device's free bytes. A fabric handle
/// requested (`CU_MEM_HANDLE_TYPE_FABRIC` in `requestedHandleTypes`) is refused with
/// `CUDA_ERROR_NOT_PERMITTED`, as driver 580 refuses it on a host without the IMEX daemon
/// (H200, PyTorch 2.11's `expandable_segments:True` asks for one first, then falls back to a
/// POSIX file-descriptor handle).
///
/// # Safety
///
/// `handle` must be null or valid for writing one handle; `prop` null or valid.
#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: u64,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    let dev = unsafe { prop_device(prop) };
    call_driver(
        "cuMemCreate",
        || {
            let dev = dev.map_or_else(|_| "?".to_string(), |d| d.to_string());
            format!("bytes={size} dev={dev} flags={flags}")
        },
        |d| {
            non_null(&[handle.cast()])?;
            if flags != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let dev = dev?;
            // SAFETY: `prop_device` just read it: non-null and valid.
            let types = unsafe { (*prop).requested_handle_types };
            if types & CU_MEM_HANDLE_TYPE_FABRIC != 0 {
                // A fabric handle needs the IMEX daemon, which this host (like most, and the
                // H200 host of docs/design.md, driver 580.159) does not run.
                return Err(CUresult::CUDA_ERROR_NOT_PERMITTED);
            }
            let h = d.physical_create(dev, size as u64)?;
            // SAFETY: non-null, and the caller guarantees it is writable.
            unsafe { handle.write(h) };
            Ok(())
        },
    )
}

/// `cuMemRelease(CUmemGenericAllocationHandle handle)`: `INVALID_VALUE` for a handle that
/// is not live.
///
/// # Safety
///
/// None: the handle is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
    call_driver(
        "cuMemRelease",
        || format!("handle={handle:#x}"),
        |d| d.physical_release(handle),
    )
}

/// `cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
/// CUmemAllocationGranularity_flags option)`: 2 MiB for options 0 (minimum) and 1
/// (recommended) on a valid device; `INVALID_DEVICE` for another ordinal.
///
/// # Safety
///
/// `granularity` must be null or valid for writing one `size_t`; `prop` null or valid.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const CUmemAllocationProp,
    option: c_int,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    let dev = unsafe { prop_device(prop) };
    call_driver(
        "cuMemGetAllocationGranularity",
        || {
            let dev = dev.map_or_else(|_| "?".to_string(), |d| d.to_string());
            format!("option={option} dev={dev}")
        },
        |d| {
            non_null(&[granularity.cast()])?;
            if option != 0 && option != 1 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.ordinal(dev?)?;
            // SAFETY: non-null, and the caller guarantees it is writable.
            unsafe { granularity.write(PHYSICAL_GRANULARITY as usize) };
            Ok(())
        },
    )
}

/// `cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)`:
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (an `int`) and `CU_POINTER_ATTRIBUTE_CONTEXT`
/// (a `CUcontext`) of the live device allocation containing `ptr`; `INVALID_VALUE` for an
/// address in no live allocation or another attribute.
///
/// # Safety
///
/// `data` must be null or valid for writing the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    call_driver(
        "cuPointerGetAttribute",
        || format!("attrib={attribute} ptr={ptr:#x}"),
        |d| {
            non_null(&[data.cast_const()])?;
            let (device, ctx) = d
                .alloc_containing(ptr)
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            match attribute {
                // SAFETY: non-null; the caller passes an int for this attribute.
                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL => unsafe {
                    data.cast::<c_int>().write(device as c_int)
                },
                // SAFETY: non-null; the caller passes a CUcontext for this attribute.
                CU_POINTER_ATTRIBUTE_CONTEXT => unsafe { data.cast::<usize>().write(ctx) },
                _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
            }
            Ok(())
        },
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

/// Shared body of `cuMemHostAlloc` and `cuMemAllocHost_v2`.
///
/// # Safety
///
/// `pp` must be null or valid for writing one pointer.
unsafe fn host_alloc(
    d: &mut Driver,
    pp: *mut *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> Result<(), CUresult> {
    non_null(&[pp.cast()])?;
    let ctx = current();
    d.ctx_device(ctx)?;
    if bytesize == 0 || flags & !HOST_ALLOC_FLAGS != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: malloc has no preconditions; a null result is handled below.
    let p = unsafe { libc::malloc(bytesize) };
    if p.is_null() {
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    }
    d.host_insert(p as usize, bytesize, ctx);
    // SAFETY: non-null, and the caller guarantees it points to a writable pointer.
    unsafe { pp.write(p) };
    Ok(())
}

/// `cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)`: really allocates with
/// `malloc`, owned by the current context. Needs a current context (201); 0 bytes or
/// unknown flags are `INVALID_VALUE`; `malloc` failure is `OUT_OF_MEMORY`.
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
        // SAFETY: forwarded caller contract.
        |d| unsafe { host_alloc(d, pp, bytesize, flags) },
    )
}

/// `cuMemAllocHost_v2(void **pp, size_t bytesize)`: `cuMemHostAlloc` with flags 0.
///
/// # Safety
///
/// `pp` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    call_driver(
        "cuMemAllocHost_v2",
        || format!("bytes={bytesize}"),
        // SAFETY: forwarded caller contract.
        |d| unsafe { host_alloc(d, pp, bytesize, 0) },
    )
}

/// Flags `cuMemHostRegister_v2` accepts: PORTABLE (1), DEVICEMAP (2), IOMEMORY (4),
/// READ_ONLY (8).
pub const HOST_REGISTER_FLAGS: c_uint = 0xf;

/// `cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)`: registers the
/// program's range in the current context (201/709 without one); null, 0 bytes or unknown
/// flags are `INVALID_VALUE`, an overlap with a registration
/// `HOST_MEMORY_ALREADY_REGISTERED` (712).
///
/// # Safety
///
/// None: the range is only recorded (read by copies later).
#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    call_driver(
        "cuMemHostRegister_v2",
        || format!("ptr={:#x} bytes={bytesize} flags={flags}", p as usize),
        |d| {
            if flags & !HOST_REGISTER_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.host_register(p as usize, bytesize, current())
        },
    )
}

/// `cuMemHostUnregister(void *p)`: `HOST_MEMORY_NOT_REGISTERED` (713) unless `p` starts a
/// registration. Queued copies that read or write the range run first, as driver 580
/// waits for them (`FAKE_CUDA_RELEASE_NO_WAIT=1`: not).
///
/// # Safety
///
/// None: the address is only looked up.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    call_driver(
        "cuMemHostUnregister",
        || format!("ptr={:#x}", p as usize),
        |d| d.host_unregister(p as usize),
    )
}

/// `cuMemFreeHost(void *p)`: frees a `cuMemHostAlloc` block: it is filled with
/// [`POISON`] at once and never released, so copies still queued that read it get the
/// poison (as a real DMA engine would read freed memory). Queued copies that read or write
/// the block run first, as driver 580 waits for them (`FAKE_CUDA_RELEASE_NO_WAIT=1`: not,
/// and those copies read the poison).
/// Any other pointer fails like `cuMemFree`: 201/709 without a live current context, else
/// `INVALID_VALUE`.
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
            let bytes = d.host_free(p as usize, current())?;
            // SAFETY: `p` is a live `malloc` block of `bytes` bytes from `host_alloc`, just
            // forgotten; it is never passed to `free`, so it stays writable.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), POISON, bytes) };
            Ok(())
        },
    )
}
