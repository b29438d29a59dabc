//! `cuGetProcAddress` (CUDA 11.3 ABI) and `cuGetProcAddress_v2` (CUDA 12.0 ABI).
//! Both work before `cuInit`; the variant rules are in [`crate::procaddr`].

use std::ffi::{c_char, c_int, c_void, CStr};

use seedance_cuda::{
    CUdriverProcAddressQueryResult, CUresult, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_SUCCESS,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
};

use super::{address_of, non_null};
use crate::global::call;
use crate::log::token;
use crate::procaddr::{select, Lookup};

/// The flag bits `cuGetProcAddress` accepts.
pub const PROC_ADDRESS_FLAGS: u64 =
    CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

/// Shared body of both ABIs.
///
/// # Safety
///
/// `symbol` must be null or a NUL-terminated string; `pfn` null or valid for writing one
/// pointer; `status` null or valid for writing one `CUdriverProcAddressQueryResult`.
unsafe fn get_proc_address(
    name: &str,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut CUdriverProcAddressQueryResult,
) -> CUresult {
    // SAFETY: non-null `symbol` is a NUL-terminated string per the caller's contract.
    let sym = (!symbol.is_null()).then(|| unsafe { CStr::from_ptr(symbol) });
    let shown = || sym.map_or_else(|| "(null)".to_string(), |s| token(&s.to_string_lossy()));
    call(
        name,
        || format!("symbol={} version={cuda_version} flags={flags}", shown()),
        || {
            non_null(&[pfn.cast()])?;
            let sym = sym.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            if flags & !PROC_ADDRESS_FLAGS != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let driver = super::init::driver_version();
            // Driver 580.159's answers (docs/design.md, fact 11): a version above its own is
            // CUDA_ERROR_INVALID_VALUE with `pfn` and `symbolStatus` untouched, whatever the
            // name; an unknown name at a version up to its own is CUDA_SUCCESS with `pfn`
            // NULL and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND. Measured for the `_v2` ABI
            // only, so the CUDA 11.3 ABI keeps its older answer (CUDA_ERROR_NOT_FOUND).
            let v2 = name == "cuGetProcAddress_v2";
            if v2 && cuda_version > driver {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let lookup = sym
                .to_str()
                .map_or(Lookup::NotFound, |s| select(s, cuda_version, flags));
            let (address, query) = match lookup {
                Lookup::Found(exported) => match address_of(exported) {
                    Some(p) => (p, CU_GET_PROC_ADDRESS_SUCCESS),
                    None => (std::ptr::null_mut(), CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND),
                },
                // A name this driver lacks, asked for by a newer runtime: an entry point
                // of that newer CUDA.
                Lookup::NotFound if cuda_version > driver => (
                    std::ptr::null_mut(),
                    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
                ),
                Lookup::NotFound => (std::ptr::null_mut(), CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND),
                Lookup::VersionNotSufficient => (
                    std::ptr::null_mut(),
                    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
                ),
            };
            // SAFETY: `pfn` is non-null and writable per the caller's contract; `status` is
            // written only when non-null, and is then writable per the same contract.
            unsafe {
                pfn.write(address);
                if !status.is_null() {
                    status.write(query);
                }
            }
            if query == CU_GET_PROC_ADDRESS_SUCCESS
                || (v2 && query == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
            {
                Ok(())
            } else {
                Err(CUresult::CUDA_ERROR_NOT_FOUND)
            }
        },
    )
}

/// `cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)`
/// (CUDA 11.3 ABI): `*pfn` is this library's export for the variant the driver would pick
/// (see [`crate::procaddr`]); unknown names and too-old versions give `*pfn = NULL` and
/// `CUDA_ERROR_NOT_FOUND`.
///
/// # Safety
///
/// `symbol` must be null or a NUL-terminated string; `pfn` null or valid for writing one
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: forwarded caller contract; no status pointer.
    unsafe {
        get_proc_address(
            "cuGetProcAddress",
            symbol,
            pfn,
            cuda_version,
            flags,
            std::ptr::null_mut(),
        )
    }
}

/// `cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
/// CUdriverProcAddressQueryResult *symbolStatus)` (CUDA 12.0 ABI): as
/// [`cuGetProcAddress`], also writing `*symbolStatus` when non-null.
///
/// # Safety
///
/// As [`cuGetProcAddress`]; `symbol_status` must be null or valid for writing one value.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut CUdriverProcAddressQueryResult,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe {
        get_proc_address(
            "cuGetProcAddress_v2",
            symbol,
            pfn,
            cuda_version,
            flags,
            symbol_status,
        )
    }
}
