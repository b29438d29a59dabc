//! Contexts and what belongs to them: the current context and its device, a stream's or an
//! allocation's context, the primary context's state, retain and release, and running work
//! with a given context current.

use super::entry::{
    result, typed, CTX_GET_CURRENT, CTX_GET_DEVICE, CTX_POP, CTX_PUSH, CTX_SYNCHRONIZE,
    POINTER_GET_ATTRIBUTE, PRIMARY_RELEASE, PRIMARY_RETAIN, PRIMARY_STATE, STREAM_GET_CTX,
};
use libc::{c_int, c_void};
use seedance_cuda::{CUcontext, CUdevice, CUdeviceptr, CUresult, CUstream};

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

/// `cuCtxSynchronize()`: waits for the calling thread's current context.
pub fn ctx_synchronize() -> Result<(), CUresult> {
    type F = unsafe extern "C" fn() -> CUresult;
    let p = CTX_SYNCHRONIZE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxSynchronize, which takes no arguments.
    let f: F = unsafe { typed(p) };
    // SAFETY: no arguments.
    result(unsafe { f() })
}

/// Runs `f` with `ctx` current on the calling thread (`cuCtxPushCurrent_v2` and
/// `cuCtxPopCurrent_v2` around it unless it is current already); the push's code if it
/// fails.
pub fn with_context<T>(ctx: usize, f: impl FnOnce() -> T) -> Result<T, CUresult> {
    if ctx_get_current() == Ok(ctx) {
        return Ok(f());
    }
    type Push = unsafe extern "C" fn(CUcontext) -> CUresult;
    type Pop = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
    let push = CTX_PUSH.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    let pop = CTX_POP.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: push and pop are cuCtxPushCurrent_v2 and cuCtxPopCurrent_v2.
    let (push, pop): (Push, Pop) = unsafe { (typed(push), typed(pop)) };
    // SAFETY: the handle is only passed on.
    result(unsafe { push(ctx as CUcontext) })?;
    let out = f();
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: popped is a valid out-pointer.
    let _ = unsafe { pop(&mut popped) };
    Ok(out)
}

/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_CONTEXT, ptr)`: the context of a live
/// allocation; the driver's code for an address it no longer knows.
pub fn pointer_context(ptr: CUdeviceptr) -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
    let p = POINTER_GET_ATTRIBUTE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuPointerGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a CUcontext, the type of this attribute.
    let r = unsafe {
        f(
            (&mut c as *mut CUcontext).cast(),
            seedance_cuda::CU_POINTER_ATTRIBUTE_CONTEXT,
            ptr,
        )
    };
    result(r).map(|()| c as usize)
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

/// `cuDevicePrimaryCtxGetState(dev)`: whether the device's primary context is active.
pub fn primary_active(dev: CUdevice) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUdevice, *mut libc::c_uint, *mut c_int) -> CUresult;
    let p = PRIMARY_STATE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuDevicePrimaryCtxGetState.
    let f: F = unsafe { typed(p) };
    let (mut flags, mut active): (libc::c_uint, c_int) = (0, 0);
    // SAFETY: both are valid out-pointers.
    result(unsafe { f(dev, &mut flags, &mut active) }).map(|()| active != 0)
}

/// `cuDevicePrimaryCtxRetain(pctx, dev)` on the real driver, uncounted; `None` when the
/// driver lacks it.
pub fn primary_retain(pctx: *mut seedance_cuda::CUcontext, dev: CUdevice) -> Option<CUresult> {
    type F = unsafe extern "C" fn(*mut seedance_cuda::CUcontext, CUdevice) -> CUresult;
    let p = PRIMARY_RETAIN.get()?;
    // SAFETY: p is cuDevicePrimaryCtxRetain.
    let f: F = unsafe { typed(p) };
    // SAFETY: pctx is the program's own out-pointer, under the same contract.
    Some(unsafe { f(pctx, dev) })
}

/// `cuDevicePrimaryCtxRelease_v2(dev)` on the real driver, uncounted; `None` when the
/// driver lacks it.
pub fn primary_release(dev: CUdevice) -> Option<CUresult> {
    type F = unsafe extern "C" fn(CUdevice) -> CUresult;
    let p = PRIMARY_RELEASE.get()?;
    // SAFETY: p is cuDevicePrimaryCtxRelease_v2.
    let f: F = unsafe { typed(p) };
    // SAFETY: no pointer argument.
    Some(unsafe { f(dev) })
}
