//! libseedance_fix: an `LD_PRELOAD` interposer for the CUDA driver API.
//!
//! This crate is FFI glue only. It makes every path a program takes to the driver pass
//! through one wrapper per hooked ABI variant (see `shared/design.md`):
//!
//! * exported symbols, for programs linked with `-lcuda` ([`hooks`]);
//! * an exported `dlsym` that answers `cu[A-Z]*` look-ups on any handle with the wrapper for
//!   that exact symbol and tail-jumps everything else to glibc ([`platform`]);
//! * `cuGetProcAddress(_v2)`, which lets the real driver choose the ABI variant and then
//!   swaps in the matching wrapper ([`procaddr`]);
//! * `cudaSetDevice` for programs linked to the shared libcudart ([`runtime`]).
//!
//! Decisions and counters live in `seedance-core`, the trace format in `seedance-trace`.

mod args;
mod hooks;
mod names;
mod platform;
mod procaddr;
mod real;
mod runtime;
mod session;

/// Writes the exit summary and flushes the trace at normal process exit.
///
/// Registered in `.fini_array`, not with `atexit`: the dynamic loader runs it in `_dl_fini`,
/// after every `atexit` handler and after the destructors of libraries loaded later than us
/// (libcudart, libcuda, PyTorch), so their teardown calls are counted too. An `atexit`
/// handler registered at our load would run before those (measured on an H200: the shared
/// libcudart's final `cuDevicePrimaryCtxRelease` was missed).
extern "C" fn seedance_fini() {
    let _ = std::panic::catch_unwind(session::shutdown);
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
// SAFETY: a `.fini_array` entry must be a pointer to a function taking no arguments, which
// this is; the loader calls it once, during `_dl_fini` or `dlclose`.
static SEEDANCE_FINI: extern "C" fn() = seedance_fini;
