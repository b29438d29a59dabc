//! Contexts: `cuCtxCreate_v2/_v3/_v4`, `cuCtxDestroy(_v2)`, the primary-context calls
//! (with `cuDevicePrimaryCtxGetState`), `cuCtxSetCurrent`, `cuCtxGetCurrent`,
//! `cuCtxPushCurrent_v2`, `cuCtxPopCurrent_v2`, `cuCtxGetDevice`, `cuCtxSynchronize(_v2)`
//! (which runs the context's queued work).
//!
//! The current context is per thread, the top of a per-thread stack. Creating a context makes it current on the calling
//! thread; destroying the calling thread's current context clears it. Other threads that
//! still have a destroyed context current get `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
//!
//! Creating a context and retaining a primary context that does not exist yet fail with
//! `CUDA_ERROR_DEVICE_UNAVAILABLE` (46) on a prohibited or busy exclusive device and with
//! `CUDA_ERROR_OUT_OF_MEMORY` (2) on a full one (`FAKE_CUDA_BUSY`, `FAKE_CUDA_ATTR_20`,
//! `FAKE_CUDA_CTX_OOM`); the current context is then left unchanged.

use std::ffi::{c_int, c_uint};
use std::ptr::NonNull;

use seedance_cuda::{CUcontext, CUdevice, CUresult, Opaque};

use super::non_null;
use crate::global::{call_driver, current, pop_current, push_current, set_current};
use crate::state::Driver;

/// Context creation flags the driver accepts (`CU_CTX_FLAGS_MASK`).
pub const CTX_FLAGS_MASK: c_uint = 0xff;

/// Shared body of the `cuCtxCreate` variants.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
unsafe fn create(
    d: &mut Driver,
    pctx: *mut CUcontext,
    flags: c_uint,
    dev: CUdevice,
) -> Result<(), CUresult> {
    non_null(&[pctx.cast()])?;
    if flags & !CTX_FLAGS_MASK != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let h = d.ctx_create(dev)?;
    // SAFETY: non-null, and the caller guarantees it points to a writable CUcontext.
    unsafe { pctx.write(h as CUcontext) };
    set_current(h);
    Ok(())
}

/// `cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)`.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    call_driver(
        "cuCtxCreate_v2",
        || format!("flags={flags} dev={dev}"),
        |d| {
            // SAFETY: forwarded caller contract.
            unsafe { create(d, pctx, flags, dev) }
        },
    )
}

/// `cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
/// unsigned int flags, CUdevice dev)`: the affinity parameters are not read;
/// `numParams < 0`, or `> 0` with a null array, is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    params: Opaque,
    num_params: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    call_driver(
        "cuCtxCreate_v3",
        || format!("nparams={num_params} flags={flags} dev={dev}"),
        |d| {
            if num_params < 0 || (num_params > 0 && params.is_null()) {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            // SAFETY: forwarded caller contract.
            unsafe { create(d, pctx, flags, dev) }
        },
    )
}

/// `cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
/// CUdevice dev)`: the parameters (may be null) are not read.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v4(
    pctx: *mut CUcontext,
    params: Opaque,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    call_driver(
        "cuCtxCreate_v4",
        || format!("params={:#x} flags={flags} dev={dev}", params as usize),
        |d| {
            // SAFETY: forwarded caller contract.
            unsafe { create(d, pctx, flags, dev) }
        },
    )
}

/// Shared body of the `cuCtxDestroy` variants.
fn destroy(name: &str, ctx: CUcontext) -> CUresult {
    let h = ctx as usize;
    call_driver(
        name,
        || format!("ctx={h:#x}"),
        |d| {
            if h == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.ctx_destroy(h)?;
            if current() == h {
                set_current(0);
            }
            Ok(())
        },
    )
}

/// `cuCtxDestroy(CUcontext ctx)`: see [`cuCtxDestroy_v2`].
///
/// # Safety
///
/// None: the handle is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy(ctx: CUcontext) -> CUresult {
    destroy("cuCtxDestroy", ctx)
}

/// `cuCtxDestroy_v2(CUcontext ctx)`: null is `CUDA_ERROR_INVALID_VALUE`, an unknown handle
/// or a primary context `CUDA_ERROR_INVALID_CONTEXT`, a destroyed one
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`. Frees the context's allocations.
///
/// # Safety
///
/// None: the handle is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    destroy("cuCtxDestroy_v2", ctx)
}

/// `cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)`: the same handle until the
/// primary context is released to zero or reset. Does not change the current context.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    call_driver(
        "cuDevicePrimaryCtxRetain",
        || format!("dev={dev}"),
        |d| {
            non_null(&[pctx.cast()])?;
            let h = d.primary_retain(dev)?;
            // SAFETY: non-null, and the caller guarantees it points to a writable CUcontext.
            unsafe { pctx.write(h as CUcontext) };
            Ok(())
        },
    )
}

fn primary_release(name: &str, dev: CUdevice) -> CUresult {
    call_driver(name, || format!("dev={dev}"), |d| d.primary_release(dev))
}

fn primary_reset(name: &str, dev: CUdevice) -> CUresult {
    call_driver(name, || format!("dev={dev}"), |d| d.primary_reset(dev))
}

/// `cuDevicePrimaryCtxRelease(CUdevice dev)`: see [`cuDevicePrimaryCtxRelease_v2`].
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult {
    primary_release("cuDevicePrimaryCtxRelease", dev)
}

/// `cuDevicePrimaryCtxRelease_v2(CUdevice dev)`: refcount down by one, destroying the
/// context at zero; `CUDA_ERROR_INVALID_CONTEXT` when not retained.
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    primary_release("cuDevicePrimaryCtxRelease_v2", dev)
}

/// `cuDevicePrimaryCtxReset(CUdevice dev)`: see [`cuDevicePrimaryCtxReset_v2`].
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset(dev: CUdevice) -> CUresult {
    primary_reset("cuDevicePrimaryCtxReset", dev)
}

/// `cuDevicePrimaryCtxReset_v2(CUdevice dev)`: destroys the primary context and its
/// allocations whatever the refcount; the next retain creates a new handle.
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CUresult {
    primary_reset("cuDevicePrimaryCtxReset_v2", dev)
}

/// `cuCtxSetCurrent(CUcontext ctx)`: null clears the calling thread's current context; a
/// non-null handle must be a live context (201 unknown, 709 destroyed).
///
/// # Safety
///
/// None: the handle is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    let h = ctx as usize;
    call_driver(
        "cuCtxSetCurrent",
        || format!("ctx={h:#x}"),
        |d| {
            if h != 0 {
                d.ctx_device(h)?;
            }
            set_current(h);
            Ok(())
        },
    )
}

/// `cuCtxGetCurrent(CUcontext *pctx)`: the calling thread's current context, null if none.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    call_driver("cuCtxGetCurrent", String::new, |_| {
        non_null(&[pctx.cast()])?;
        // SAFETY: non-null, and the caller guarantees it points to a writable CUcontext.
        unsafe { pctx.write(current() as CUcontext) };
        Ok(())
    })
}

/// `cuCtxGetDevice(CUdevice *device)`: the current context's device; 201 without one; a
/// reset primary context still names its device ([`crate::state::Driver::get_device_answer`]).
///
/// # Safety
///
/// `device` must be null or valid for writing one `CUdevice`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    call_driver("cuCtxGetDevice", String::new, |d| {
        let ordinal = d.get_device_answer(current())?;
        non_null(&[device.cast()])?;
        // SAFETY: non-null, and the caller guarantees it points to a writable CUdevice.
        unsafe { device.write(ordinal as CUdevice) };
        Ok(())
    })
}

/// `cuCtxSynchronize(void)`: runs the current context's queued work; 201/709 without a
/// live current context.
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C-unwind" fn cuCtxSynchronize() -> CUresult {
    crate::global::cancellation_point("cuCtxSynchronize");
    call_driver("cuCtxSynchronize", String::new, |d| {
        let ctx = current();
        d.ctx_device(ctx)?;
        d.sync_context(ctx);
        Ok(())
    })
}

/// `cuCtxSynchronize_v2(CUcontext ctx)` (CUDA 13.0): a non-null `ctx` must be a live
/// context; null means the current one.
///
/// # Safety
///
/// None: the handle is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize_v2(ctx: CUcontext) -> CUresult {
    let h = ctx as usize;
    call_driver(
        "cuCtxSynchronize_v2",
        || format!("ctx={h:#x}"),
        |d| {
            let target = if h == 0 { current() } else { h };
            d.ctx_device(target)?;
            d.sync_context(target);
            Ok(())
        },
    )
}

/// `cuCtxPushCurrent_v2(CUcontext ctx)`: `ctx` becomes current on the calling thread, above
/// the previous one; null is `INVALID_VALUE`, an unknown handle 201, a destroyed one 709.
///
/// # Safety
///
/// None: the handle is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    let h = ctx as usize;
    call_driver(
        "cuCtxPushCurrent_v2",
        || format!("ctx={h:#x}"),
        |d| {
            if h == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            d.ctx_device(h)?;
            push_current(h);
            Ok(())
        },
    )
}

/// `cuCtxPopCurrent_v2(CUcontext *pctx)`: takes the current context off the calling
/// thread's stack (written to `pctx` unless null); the one below becomes current. 201 when
/// none is current.
///
/// # Safety
///
/// `pctx` must be null or valid for writing one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CUresult {
    call_driver("cuCtxPopCurrent_v2", String::new, |_| {
        if current() == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
        }
        let popped = pop_current();
        if let Some(p) = NonNull::new(pctx) {
            // SAFETY: non-null, and the caller guarantees it points to a writable CUcontext.
            unsafe { p.as_ptr().write(popped as CUcontext) };
        }
        Ok(())
    })
}

/// `cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)`: flags 0;
/// active 1 while the primary context exists (retained and not reset).
///
/// # Safety
///
/// `flags` and `active` must each be null or valid for writing one value.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CUresult {
    call_driver(
        "cuDevicePrimaryCtxGetState",
        || format!("dev={dev}"),
        |d| {
            non_null(&[flags.cast(), active.cast()])?;
            d.ordinal(dev)?;
            let on = d.primary_state(dev).is_some();
            // SAFETY: both non-null, and the caller guarantees they are writable.
            unsafe {
                flags.write(0);
                active.write(c_int::from(on));
            }
            Ok(())
        },
    )
}
