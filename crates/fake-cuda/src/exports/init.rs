//! `cuInit`, `cuDriverGetVersion`, `cuGetErrorName`, `cuGetErrorString`.

use std::ffi::{c_char, c_int, c_uint};

use seedance_cuda::CUresult;

use super::non_null;
use crate::errstr;
use crate::global::{call, init};

/// The version `cuDriverGetVersion` reports by default: CUDA 13.0.
pub const DRIVER_VERSION: c_int = 13000;

/// The driver version: `FAKE_CUDA_DRIVER_VERSION` (`1000 * major + 10 * minor`, 1000 to
/// 99990), else [`DRIVER_VERSION`]; read once, a bad value warns on stderr and keeps the
/// default. `cuGetProcAddress` answers a look-up for a symbol it does not export with a
/// `cudaVersion` above it as version-not-sufficient (a runtime newer than the driver).
pub fn driver_version() -> c_int {
    static V: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();
    *V.get_or_init(|| match std::env::var("FAKE_CUDA_DRIVER_VERSION") {
        Err(_) => DRIVER_VERSION,
        Ok(v) => match v.trim().parse::<c_int>() {
            Ok(n) if (1000..=99990).contains(&n) => n,
            _ => {
                eprintln!("fake-cuda: ignoring bad FAKE_CUDA_DRIVER_VERSION={v:?}");
                DRIVER_VERSION
            }
        },
    })
}

/// `cuInit(unsigned int Flags)`: `flags` must be 0; reads the topology on first success.
/// `CUDA_ERROR_NO_DEVICE` when no device is visible.
///
/// # Safety
///
/// None beyond the C ABI; takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    call("cuInit", || format!("flags={flags}"), || init(flags))
}

/// `cuDriverGetVersion(int *driverVersion)`: writes [`driver_version`]; works before `cuInit`.
///
/// # Safety
///
/// `version` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    call("cuDriverGetVersion", String::new, || {
        non_null(&[version.cast()])?;
        // SAFETY: non-null, and the caller guarantees it points to a writable int.
        unsafe { version.write(driver_version()) };
        Ok(())
    })
}

/// Shared body of the two error-string entry points.
///
/// # Safety
///
/// `out` must be null or valid for writing one pointer.
unsafe fn error_text(
    name: &str,
    error: CUresult,
    out: *mut *const c_char,
    lookup: fn(CUresult) -> Option<*const c_char>,
) -> CUresult {
    call(
        name,
        || format!("error={}", error.0),
        || {
            non_null(&[out.cast()])?;
            let text = lookup(error);
            // SAFETY: non-null, and the caller guarantees it points to a writable pointer.
            unsafe { out.write(text.unwrap_or(std::ptr::null())) };
            text.map(|_| ()).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
        },
    )
}

/// `cuGetErrorName(CUresult error, const char **pStr)`: the enumerator name as a static
/// string; for an unknown code `*pStr = NULL` and `CUDA_ERROR_INVALID_VALUE`. Works before
/// `cuInit`.
///
/// # Safety
///
/// `p_str` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, p_str: *mut *const c_char) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { error_text("cuGetErrorName", error, p_str, errstr::name) }
}

/// `cuGetErrorString(CUresult error, const char **pStr)`: a static description; for an
/// unknown code `*pStr = NULL` and `CUDA_ERROR_INVALID_VALUE`. Works before `cuInit`.
///
/// # Safety
///
/// `p_str` must be null or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, p_str: *mut *const c_char) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { error_text("cuGetErrorString", error, p_str, errstr::description) }
}
