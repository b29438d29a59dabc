//! The driver's message callback registration (`cuLogsRegisterCallback`, CUDA 12.9+).

use super::entry::{typed, LOGS_REGISTER};
use libc::{c_int, c_void};
use seedance_cuda::CUresult;

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
