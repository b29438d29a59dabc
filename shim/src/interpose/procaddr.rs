//! `cuGetProcAddress` and `cuGetProcAddress_v2`: how the CUDA runtime reaches the driver.
//!
//! cudart never calls exported driver symbols (docs/design.md, fact 2). It asks
//! `cuGetProcAddress_v2` for about 440 entry points by (base name, cudaVersion, flags), after
//! first asking it for `"cuGetProcAddress"` itself. Our wrappers call the real function
//! first, so the driver chooses the ABI variant, then swap in our wrapper for exactly that
//! variant ([`crate::hooks::swap_proc_address`]). Asked for `"cuGetProcAddress"`, the swap
//! hands back our own wrapper, so every later look-up comes through here too. Neither
//! wrapper needs `cuInit` to have run.

use crate::hooks::ids::{slots, HookId};
use crate::hooks::swap_proc_address;
use crate::rt::args::ArgVal;
use crate::rt::{config, output, probes};
use libc::{c_char, c_int, c_void};
use seedance_cuda::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
use seedance_cuda::{CUdriverProcAddressQueryResult, CUresult};
use std::ffi::CStr;
use std::sync::atomic::{AtomicI32, Ordering};

type ProcV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type ProcV2 = unsafe extern "C" fn(
    *const c_char,
    *mut *mut c_void,
    c_int,
    u64,
    *mut CUdriverProcAddressQueryResult,
) -> CUresult;

/// Common tail of both wrappers: count, report failure, swap the pointer. `status` is what
/// `cuGetProcAddress_v2` wrote to `symbolStatus` (`None` for `cuGetProcAddress`, or a null
/// `symbolStatus`).
///
/// # Safety
/// `symbol` is null or NUL-terminated; `pfn` is null or valid for reads and writes.
unsafe fn after(
    id: HookId,
    r: CUresult,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: Option<CUdriverProcAddressQueryResult>,
) {
    if !config::active() {
        return;
    }
    probes::lookup(version);
    if r == CUresult::CUDA_ERROR_INVALID_VALUE && !symbol.is_null() && above_driver(version) {
        // A version probe as driver 580 answers it (docs/design.md, fact 11): counted as a
        // call that succeeded, never a failure.
        output::count(id, CUresult::CUDA_SUCCESS);
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: a non-null symbol is a NUL-terminated string (cuGetProcAddress contract).
            probes::above_driver(unsafe { CStr::from_ptr(symbol) });
        });
        return;
    }
    if r == CUresult::CUDA_ERROR_NOT_FOUND {
        output::count(id, CUresult::CUDA_SUCCESS);
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: a non-null symbol is a NUL-terminated string (cuGetProcAddress contract).
            let name = (!symbol.is_null()).then(|| unsafe { CStr::from_ptr(symbol) });
            probes::probed(
                name,
                status == Some(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT),
            );
        });
        return;
    }
    output::count(id, r);
    if r.0 != 0 {
        let name = if symbol.is_null() {
            ArgVal::P(0)
        } else {
            // SAFETY: a non-null symbol is a NUL-terminated string (cuGetProcAddress contract).
            ArgVal::Text(
                unsafe { CStr::from_ptr(symbol) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        output::failed(
            id,
            r,
            &[
                ("symbol", name),
                ("cudaVersion", ArgVal::from(version)),
                ("flags", ArgVal::from(flags)),
            ],
        );
        return;
    }
    if symbol.is_null() || pfn.is_null() || !config::interposing() {
        return;
    }
    // SAFETY: caller guarantees pfn is valid; the driver just wrote it.
    let real = unsafe { *pfn };
    if real.is_null() {
        // Success with no pointer: driver 580's answer for a name it does not have
        // (`CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`, docs/design.md, fact 11).
        probes::probed(None, false);
        return;
    }
    // SAFETY: symbol is NUL-terminated (the driver accepted it).
    let name = unsafe { CStr::from_ptr(symbol) };
    if !crate::rt::names::is_driver_name(name.to_bytes()) {
        return;
    }
    let swapped = std::panic::catch_unwind(|| swap_proc_address(name, real)).unwrap_or(real);
    // SAFETY: as above.
    unsafe { *pfn = swapped };
}

/// The driver's own version (`cuDriverGetVersion`, `1000 * major + 10 * minor`), asked at
/// the first failed look-up and kept; 0 until known.
static DRIVER_VERSION: AtomicI32 = AtomicI32::new(0);

/// Whether `version` is above the driver's own: a look-up the driver cannot answer with an
/// entry point, whatever the name (`false` while the driver's version is unknown).
fn above_driver(version: c_int) -> bool {
    let mut v = DRIVER_VERSION.load(Ordering::Relaxed);
    if v <= 0 {
        v = crate::driver::query::driver_version().unwrap_or(0);
        DRIVER_VERSION.store(v, Ordering::Relaxed);
    }
    v > 0 && version > v
}

/// Wrapper exported as `cuGetProcAddress` (the CUDA 11.3 ABI, four arguments).
///
/// # Safety
/// Same contract as the driver's `cuGetProcAddress`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    let real = slots::ALL.cuGetProcAddress.get();
    if real.is_null() {
        return crate::driver::missing::missing(HookId::cuGetProcAddress, |_| {});
    }
    // SAFETY: the slot holds the driver's cuGetProcAddress, 11.3 ABI.
    let f: ProcV1 = unsafe { std::mem::transmute::<*mut c_void, ProcV1>(real) };
    // SAFETY: arguments forwarded unchanged.
    let r = unsafe { f(symbol, pfn, cuda_version, flags) };
    // SAFETY: same pointers the driver just accepted.
    unsafe {
        after(
            HookId::cuGetProcAddress,
            r,
            symbol,
            pfn,
            cuda_version,
            flags,
            None,
        )
    };
    r
}

/// Wrapper exported as `cuGetProcAddress_v2` (CUDA 12.0+ ABI, with `symbolStatus`).
///
/// # Safety
/// Same contract as the driver's `cuGetProcAddress_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut CUdriverProcAddressQueryResult,
) -> CUresult {
    let real = slots::ALL.cuGetProcAddress_v2.get();
    if real.is_null() {
        return crate::driver::missing::missing(HookId::cuGetProcAddress_v2, |_| {});
    }
    // SAFETY: the slot holds the driver's cuGetProcAddress_v2.
    let f: ProcV2 = unsafe { std::mem::transmute::<*mut c_void, ProcV2>(real) };
    // SAFETY: arguments forwarded unchanged.
    let r = unsafe { f(symbol, pfn, cuda_version, flags, symbol_status) };
    let status = if symbol_status.is_null() {
        None
    } else {
        // SAFETY: non-null, the caller's out-parameter, which the driver just wrote.
        Some(unsafe { symbol_status.read() })
    };
    // SAFETY: same pointers the driver just accepted.
    unsafe {
        after(
            HookId::cuGetProcAddress_v2,
            r,
            symbol,
            pfn,
            cuda_version,
            flags,
            status,
        )
    };
    r
}
