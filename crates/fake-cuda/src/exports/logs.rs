//! The driver's error log: `cuLogsRegisterCallback`, `cuLogsUnregisterCallback` (CUDA 12.9
//! ABI). Both work before `cuInit`. What is logged: see [`crate::logs`].

use std::ffi::c_void;

use seedance_cuda::CUresult;

use crate::global::call;
use crate::logs::{self, LogsCallback};

/// `cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
/// CUlogsCallbackHandle *callback_out)`: a null callback is `INVALID_VALUE`; the handle is
/// written when `callback_out` is not null.
///
/// # Safety
///
/// `callback` must be a function with the `CUlogsCallback` signature that stays valid until
/// unregistered; `callback_out` null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuLogsRegisterCallback(
    callback: Option<LogsCallback>,
    user_data: *mut c_void,
    callback_out: *mut *mut c_void,
) -> CUresult {
    call("cuLogsRegisterCallback", String::new, || {
        let cb = callback.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let h = logs::register(cb, user_data);
        if !callback_out.is_null() {
            // SAFETY: non-null, and the caller guarantees it points to a writable pointer.
            unsafe { callback_out.write(h as *mut c_void) };
        }
        Ok(())
    })
}

/// `cuLogsUnregisterCallback(CUlogsCallbackHandle callback)`: `INVALID_VALUE` for a handle
/// that is not registered.
///
/// # Safety
///
/// None: the handle is only compared.
#[no_mangle]
pub unsafe extern "C" fn cuLogsUnregisterCallback(callback: *mut c_void) -> CUresult {
    let h = callback as usize;
    call(
        "cuLogsUnregisterCallback",
        || format!("handle={h:#x}"),
        || {
            if logs::unregister(h) {
                Ok(())
            } else {
                Err(CUresult::CUDA_ERROR_INVALID_VALUE)
            }
        },
    )
}
