//! Direct calls to the real driver for the launch and allocation explanations (never
//! through our wrappers, so they are not counted). Used on the failure path, before a call
//! only with `SEEDANCE_VALIDATE=pre`, and once at initialisation (`cuLogsRegisterCallback`).
//!
//! Each entry point is looked up once, by name, in the library that holds the real
//! `cuInit` (as [`crate::driver`] does), and remembered; an entry point the driver lacks
//! (an older driver) makes its query return `None`, so the explanation leaves that fact out.

use crate::hooks::slots;
use libc::{c_int, c_void};
use seedance_cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUfunction, CUmemAllocationProp, CUresult, CUstream,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A real driver entry point, looked up on first use: 0 = not yet, 1 = missing.
struct RealFn {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl RealFn {
    const fn new(name: &'static CStr) -> RealFn {
        RealFn {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    fn get(&self) -> Option<*mut c_void> {
        match self.addr.load(Ordering::Acquire) {
            0 => {
                let anchor = slots::cuInit.get();
                if anchor.is_null() {
                    return None;
                }
                let p = crate::real::sibling(anchor, self.name);
                let v = if p.is_null() { 1 } else { p as usize };
                self.addr.store(v, Ordering::Release);
                (v > 1).then_some(p)
            }
            1 => None,
            p => Some(p as *mut c_void),
        }
    }
}

macro_rules! real_fns {
    ($($id:ident = $name:literal;)*) => {
        $( static $id: RealFn = RealFn::new($name); )*
    };
}

real_fns! {
    CTX_GET_DEVICE = c"cuCtxGetDevice";
    CTX_GET_CURRENT = c"cuCtxGetCurrent";
    STREAM_GET_CTX = c"cuStreamGetCtx";
    DEVICE_GET_ATTRIBUTE = c"cuDeviceGetAttribute";
    DEVICE_TOTAL_MEM = c"cuDeviceTotalMem_v2";
    FUNC_GET_ATTRIBUTE = c"cuFuncGetAttribute";
    OCCUPANCY = c"cuOccupancyMaxActiveBlocksPerMultiprocessor";
    MEM_GET_INFO = c"cuMemGetInfo_v2";
    POINTER_GET_ATTRIBUTE = c"cuPointerGetAttribute";
    GRANULARITY = c"cuMemGetAllocationGranularity";
    LOGS_REGISTER = c"cuLogsRegisterCallback";
}

/// Reinterprets a looked-up address as the function type `F`.
///
/// # Safety
/// `p` must be the driver function whose C signature `F` spells.
unsafe fn typed<F: Copy>(p: *mut c_void) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: F is a function-pointer type of pointer size, per the caller's contract.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn result(r: CUresult) -> Result<(), CUresult> {
    if r.is_success() {
        Ok(())
    } else {
        Err(r)
    }
}

/// `cuCtxGetDevice`: the current context's device; the driver's code when there is no
/// usable current context (201 none, 709 destroyed), `CUDA_ERROR_NOT_FOUND` without the
/// entry point.
pub fn ctx_get_device() -> Result<CUdevice, CUresult> {
    type F = unsafe extern "C" fn(*mut CUdevice) -> CUresult;
    let p = CTX_GET_DEVICE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxGetDevice.
    let f: F = unsafe { typed(p) };
    let mut d: CUdevice = -1;
    // SAFETY: d is a valid out-pointer.
    result(unsafe { f(&mut d) }).map(|()| d)
}

/// `cuCtxGetCurrent`: the calling thread's current context handle, 0 for none.
pub fn ctx_get_current() -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
    let p = CTX_GET_CURRENT
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxGetCurrent.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a valid out-pointer.
    result(unsafe { f(&mut c) }).map(|()| c as usize)
}

/// `cuStreamGetCtx`: the context a stream belongs to.
pub fn stream_get_ctx(stream: CUstream) -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult;
    let p = STREAM_GET_CTX.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamGetCtx.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a valid out-pointer; the stream handle is only passed on.
    result(unsafe { f(stream, &mut c) }).map(|()| c as usize)
}

/// `cuDeviceGetAttribute(attrib, dev)`, `None` if it fails.
pub fn device_attribute(attrib: i32, dev: CUdevice) -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    let p = DEVICE_GET_ATTRIBUTE.get()?;
    // SAFETY: p is cuDeviceGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, attrib, dev) }.is_success().then_some(v)
}

/// `cuDeviceTotalMem_v2(dev)`, bytes.
pub fn device_total_mem(dev: CUdevice) -> Option<u64> {
    type F = unsafe extern "C" fn(*mut usize, CUdevice) -> CUresult;
    let p = DEVICE_TOTAL_MEM.get()?;
    // SAFETY: p is cuDeviceTotalMem_v2.
    let f: F = unsafe { typed(p) };
    let mut v: usize = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, dev) }.is_success().then_some(v as u64)
}

/// `cuFuncGetAttribute(attrib, f)`, `None` if it fails.
pub fn func_attribute(attrib: i32, func: CUfunction) -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, CUfunction) -> CUresult;
    if func.is_null() {
        return None;
    }
    let p = FUNC_GET_ATTRIBUTE.get()?;
    // SAFETY: p is cuFuncGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer; the function handle is the program's own.
    unsafe { f(&mut v, attrib, func) }.is_success().then_some(v)
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: blocks of `func` resident per SM with
/// `threads` threads and `dyn_shared` bytes of dynamic shared memory per block.
pub fn occupancy(func: CUfunction, threads: u64, dyn_shared: u32) -> Option<u32> {
    type F = unsafe extern "C" fn(*mut c_int, CUfunction, c_int, usize) -> CUresult;
    let threads = c_int::try_from(threads).ok()?;
    if func.is_null() {
        return None;
    }
    let p = OCCUPANCY.get()?;
    // SAFETY: p is cuOccupancyMaxActiveBlocksPerMultiprocessor.
    let f: F = unsafe { typed(p) };
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-pointer.
    let ok = unsafe { f(&mut n, func, threads, dyn_shared as usize) }.is_success();
    ok.then(|| u32::try_from(n).unwrap_or(0))
}

/// `cuMemGetInfo_v2`: `(free, total)` bytes of the current context's device.
pub fn mem_get_info() -> Option<(u64, u64)> {
    type F = unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult;
    let p = MEM_GET_INFO.get()?;
    // SAFETY: p is cuMemGetInfo_v2.
    let f: F = unsafe { typed(p) };
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both are valid out-pointers.
    unsafe { f(&mut free, &mut total) }
        .is_success()
        .then_some((free as u64, total as u64))
}

/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)`: the device of a live
/// allocation; the driver's code for an address that is not (or no longer) allocated.
pub fn pointer_device(ptr: CUdeviceptr) -> Result<i32, CUresult> {
    type F = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
    let p = POINTER_GET_ATTRIBUTE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuPointerGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut d: c_int = -1;
    // SAFETY: d is an int, the type of this attribute.
    let r = unsafe {
        f(
            (&mut d as *mut c_int).cast(),
            seedance_cuda::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    result(r).map(|()| d)
}

/// `cuMemGetAllocationGranularity(prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)`, bytes.
pub fn allocation_granularity(prop: &CUmemAllocationProp) -> Option<u64> {
    type F = unsafe extern "C" fn(*mut usize, *const CUmemAllocationProp, c_int) -> CUresult;
    let p = GRANULARITY.get()?;
    // SAFETY: p is cuMemGetAllocationGranularity.
    let f: F = unsafe { typed(p) };
    let mut g: usize = 0;
    // SAFETY: g is a valid out-pointer; prop is a valid reference.
    unsafe { f(&mut g, prop, 0) }
        .is_success()
        .then_some(g as u64)
}

/// `CUlogsCallback`: `void (*)(void *data, CUlogLevel logLevel, char *message, size_t length)`.
pub type LogsCallback = unsafe extern "C" fn(*mut c_void, c_int, *mut libc::c_char, usize);

/// `cuLogsRegisterCallback(callback, NULL, &handle)` (CUDA 12.9+); `None` when the driver
/// lacks it, else what it returned.
pub fn logs_register(callback: LogsCallback) -> Option<CUresult> {
    type F = unsafe extern "C" fn(LogsCallback, *mut c_void, *mut *mut c_void) -> CUresult;
    let p = LOGS_REGISTER.get()?;
    // SAFETY: p is cuLogsRegisterCallback.
    let f: F = unsafe { typed(p) };
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: callback is a valid function for the life of the process; handle is a valid
    // out-pointer.
    Some(unsafe { f(callback, std::ptr::null_mut(), &mut handle) })
}
