//! The `dlsym` override: which look-ups the shim answers, and with what.
//!
//! PyTorch resolves about 90 driver symbols with `dlsym(handle, "cuLaunchKernel")` and the
//! like, and the CUDA runtime finds `cuGetProcAddress_v2` the same way (docs/design.md,
//! facts 2 and 3). So a look-up of a driver name (`cu` and an upper-case letter, fact 6) on
//! a driver handle is answered with our wrapper for that exact symbol
//! ([`crate::hooks::answer_dlsym`]); everything else goes to the real `dlsym` as if the shim
//! were not there.
//!
//! The exported function itself is a naked trampoline that the OS layer defines around
//! [`decide`] ([`crate::platform::dlsym_trampoline`]): `RTLD_NEXT` (and on macOS
//! `RTLD_SELF`) look-ups are answered relative to the caller's return address, so a
//! forwarded look-up must reach the real `dlsym` by a tail jump, never by a call (fact 5).

use crate::platform::{self, FORWARD};
use libc::{c_char, c_void};
use std::ffi::CStr;

/// Decides what our exported `dlsym` answers (Linux). Returns the address to give the
/// caller, or [`FORWARD`] to let the real `dlsym` answer as if we were not there. `caller`
/// is the return address of the program's call (where glibc looks for the caller's object).
///
/// `RTLD_NEXT` and `RTLD_DEFAULT` look-ups of a name we export could find our own export
/// instead of the driver's: for those the answer is what glibc finds without the shim
/// ([`platform::native_pseudo`]), swapped for our wrapper when interposing
/// ([`crate::hooks::answer_pseudo`]).
///
/// # Safety
/// Called only by the trampoline, with `dlsym`'s arguments: `symbol` is null or
/// NUL-terminated.
#[cfg(target_os = "linux")]
unsafe extern "C" fn decide(handle: *mut c_void, symbol: *const c_char, caller: usize) -> usize {
    if platform::real_dlsym().is_none() {
        return 0;
    }
    if symbol.is_null() {
        return FORWARD;
    }
    // SAFETY: dlsym's contract: symbol is a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(symbol) };
    if !crate::rt::names::is_driver_name(name.to_bytes()) {
        // Before any shim state: `RTLD_NEXT` look-ups made from inside the shim (a
        // preloaded allocator's) go straight through.
        return FORWARD;
    }
    if handle == libc::RTLD_NEXT || handle == libc::RTLD_DEFAULT {
        // Only names we export can come back wrong (our own export instead of the driver's).
        let Some(hook) = crate::hooks::by_symbol(name.to_bytes()) else {
            return FORWARD;
        };
        let answer = std::panic::catch_unwind(|| {
            platform::native_pseudo(handle, name, caller)
                .map(|n| crate::hooks::answer_pseudo(hook, n))
        });
        return match answer {
            Ok(Some(p)) if p.is_null() => {
                // As natively: NULL, with dlerror set by a failing look-up of the name.
                platform::lookup(libc::RTLD_NEXT, name);
                0
            }
            Ok(Some(p)) => p as usize,
            _ => FORWARD,
        };
    }
    let answer = std::panic::catch_unwind(|| crate::hooks::answer_dlsym(handle, name));
    match answer {
        Ok(Some(p)) => p as usize,
        _ => FORWARD,
    }
}

/// Decides what our `dlsym` answers (macOS). Returns the address to give the caller, or
/// [`FORWARD`] to let the real `dlsym` answer as if we were not there. Caller-relative
/// handles (`RTLD_NEXT`, `RTLD_SELF`) are always forwarded: only the real `dlsym`, entered
/// with the caller's return address, can answer them.
///
/// # Safety
/// Called only by the trampoline, with `dlsym`'s arguments: `symbol` is null or
/// NUL-terminated.
#[cfg(target_os = "macos")]
unsafe extern "C" fn decide(handle: *mut c_void, symbol: *const c_char) -> usize {
    if platform::real_dlsym().is_none() {
        return 0;
    }
    if handle == platform::RTLD_NEXT || handle == platform::RTLD_SELF || symbol.is_null() {
        return FORWARD;
    }
    // SAFETY: dlsym's contract: symbol is a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(symbol) };
    if !crate::rt::names::is_driver_name(name.to_bytes()) {
        return FORWARD;
    }
    let answer = std::panic::catch_unwind(|| crate::hooks::answer_dlsym(handle, name));
    match answer {
        Ok(Some(p)) => p as usize,
        _ => FORWARD,
    }
}

platform::dlsym_trampoline!(decide);
