//! `cudaSetDevice`, exported for programs that link the shared libcudart (PyTorch does).
//!
//! A program that links cudart statically resolves `cudaSetDevice` inside its own
//! executable and never reaches this export (docs/design.md, fact 9). When we do receive the
//! call, the real function is libcudart's: first `dlsym(RTLD_NEXT)`, which finds it when
//! libcudart is in the global scope; otherwise a libcudart already loaded with
//! `RTLD_LOCAL` (as under Python), found by walking the loaded objects.

use crate::hooks::HookId;
use crate::platform;
use crate::rt::args::ArgVal;
use crate::rt::{config, output, stderr};
use libc::{c_int, c_void};
use once_cell::sync::OnceCell;
use seedance_cuda::CUresult;

/// `cudaErrorInitializationError` (`driver_types.h`): returned when no libcudart is found.
const CUDA_ERROR_INITIALIZATION_ERROR: c_int = 3;

fn real_cuda_set_device() -> *mut c_void {
    static REAL: OnceCell<usize> = OnceCell::new();
    // dlsym and dlopen wait for the loader's lock: looked up outside the cell's initialiser.
    *crate::driver::real::once_outside_loader_lock(&REAL, find_cuda_set_device) as *mut c_void
}

fn find_cuda_set_device() -> usize {
    let name = c"cudaSetDevice";
    let p = platform::lookup(platform::RTLD_NEXT, name);
    if !p.is_null() && !platform::is_ours(p) {
        return p as usize;
    }
    for path in platform::loaded_objects_matching("libcudart") {
        let h = platform::open(&path, libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if h.is_null() {
            continue;
        }
        let p = platform::lookup(h, name);
        if !p.is_null() && !platform::is_ours(p) {
            return p as usize;
        }
    }
    0
}

/// After a repaired `cudaSetDevice`, resets the runtime's per-thread last error, which the
/// failed first attempt set to `cudaErrorInvalidDevice`: programs that check
/// `cudaGetLastError()` afterwards (PyTorch's caching allocator does; measured on an H200,
/// PyTorch 2.11) would otherwise fail on an error that was repaired. Nothing else is lost:
/// the failed attempt had already overwritten any earlier non-sticky error.
fn clear_last_error(real_set_device: *mut c_void) {
    let p = crate::driver::real::sibling(real_set_device, c"cudaGetLastError");
    if p.is_null() {
        return;
    }
    type F = unsafe extern "C" fn() -> c_int;
    // SAFETY: p is libcudart's cudaGetLastError, which takes no arguments.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    // SAFETY: no preconditions.
    let _ = unsafe { f() };
}

/// Wrapper exported as `cudaSetDevice`: forwards to libcudart's own and counts the call.
/// Returns the runtime's `cudaError_t` unchanged, or `cudaErrorInitializationError` (3)
/// when no libcudart can be found.
///
/// # Safety
/// Same contract as `cudaSetDevice`.
#[no_mangle]
pub unsafe extern "C" fn cudaSetDevice(device: c_int) -> c_int {
    let real = real_cuda_set_device();
    if real.is_null() {
        stderr::say("cudaSetDevice was called but no libcudart is loaded");
        return CUDA_ERROR_INITIALIZATION_ERROR;
    }
    type F = unsafe extern "C" fn(c_int) -> c_int;
    // SAFETY: real is libcudart's cudaSetDevice.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(real) };
    // SAFETY: argument forwarded unchanged.
    let mut r = unsafe { f(device) };
    if config::active() {
        let code = CUresult(r as u32);
        output::count(HookId::cudaSetDevice, code);
        if r != 0 {
            // cudaErrorInvalidDevice (101) and cudaErrorDevicesUnavailable (46) have the
            // driver's numbers (driver_types.h), so the device-fault path applies as is.
            let repaired = crate::faults::devices::on_failure(
                HookId::cudaSetDevice,
                code,
                crate::faults::devices::Target::Ordinal(device),
                // SAFETY: the same runtime function, with another valid ordinal.
                &mut |t| CUresult(unsafe { f(t.value()) } as u32),
            );
            match repaired {
                Some(r2) => {
                    r = r2.0 as c_int;
                    if r == 0 {
                        clear_last_error(real);
                    }
                }
                None => output::failed(
                    HookId::cudaSetDevice,
                    code,
                    &[("device", ArgVal::from(device))],
                ),
            }
        }
    }
    r
}
