//! libseedance_fix: an `LD_PRELOAD` interposer for the CUDA driver API.
//!
//! This crate is FFI glue only. It makes every path a program takes to the driver pass
//! through one wrapper per hooked ABI variant (see docs/design.md):
//!
//! * exported symbols, for programs linked with `-lcuda` ([`hooks`]);
//! * an exported `dlsym` that answers `cu[A-Z]*` look-ups on any handle with the wrapper for
//!   that exact symbol and tail-jumps everything else to glibc ([`interpose::dlsym`]);
//! * `cuGetProcAddress(_v2)`, which lets the real driver choose the ABI variant and then
//!   swaps in the matching wrapper ([`interpose::procaddr`]);
//! * `cudaSetDevice` for programs linked to the shared libcudart ([`interpose::runtime`]).
//!
//! Decisions and counters live in `seedance-core`, the trace format in `seedance-trace`.

// Every unsafe operation sits in its own `unsafe` block with a `// SAFETY:` line saying why it
// holds, also inside `unsafe fn` (as in the fake drivers).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

// Layers, top to bottom (docs/design.md): `hooks` (the table and the wrappers it generates)
// and `interpose` (dlsym, cuGetProcAddress, cudaSetDevice) call `faults` (gather facts, ask
// seedance-core, act), which calls `rt` (configuration, output, guard) and `driver` (real
// symbols, the shim's own driver queries, driver log, NVML, topology); `platform` is the OS.
mod driver;
mod exit;
mod faults;
mod hooks;
mod interpose;
mod platform;
mod rt;

/// Writes the exit summary and flushes the trace at normal process exit, as late as possible.
///
/// Libraries tear CUDA down in their own destructors (the shared libcudart calls
/// `cuDevicePrimaryCtxRelease` from its destructor; measured on an H200, driver 580.159),
/// and a preloaded library's destructor runs *before* those of libraries loaded after it.
/// So our `.fini_array` entry only registers the real work with `__cxa_atexit` (no DSO
/// handle): glibc's exit loop notices a handler registered while `_dl_fini` was running and
/// runs it after `_dl_fini` returns, when every other destructor is done. If registration
/// fails the summary is written at once. (macOS: [`seedance_term`].)
#[cfg(target_os = "linux")]
extern "C" fn seedance_fini() {
    // The session record is built on a thread started by the first cuInit; finish it now,
    // while the driver and NVML libraries have not yet run their own destructors (on the
    // exit's own thread, waited for while it makes progress: `exit::settle`).
    exit::settle();
    extern "C" {
        fn __cxa_atexit(
            f: extern "C" fn(*mut libc::c_void),
            arg: *mut libc::c_void,
            dso: *mut libc::c_void,
        ) -> libc::c_int;
    }
    extern "C" fn last(_: *mut libc::c_void) {
        let _ = std::panic::catch_unwind(exit::shutdown);
    }
    // SAFETY: `last` is a valid handler for the whole process lifetime (this library is
    // never unloaded: preloaded objects cannot be dlclosed); a null DSO handle keeps
    // __cxa_finalize of this library from running it early.
    let r = unsafe { __cxa_atexit(last, std::ptr::null_mut(), std::ptr::null_mut()) };
    if r != 0 {
        last(std::ptr::null_mut());
    }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
// SAFETY: a `.fini_array` entry must be a pointer to a function taking no arguments, which
// this is; the loader calls it once, during `_dl_fini` or `dlclose`.
static SEEDANCE_FINI: extern "C" fn() = seedance_fini;

/// Finishes the session record and the lifetime exit checks, then writes the exit summary,
/// at normal exit (macOS). dyld registers `__mod_term_func` entries with `__cxa_atexit` when
/// it initialises the image; an inserted library is initialised before the libraries it sees
/// loaded later (the CUDA runtime's), so this runs after their terminators, when CUDA
/// teardown is done. (Linux splits this in two, `.fini_array` then a late `__cxa_atexit`
/// handler, because there the order is the other way round; see [`seedance_fini`].)
#[cfg(target_os = "macos")]
extern "C" fn seedance_term() {
    let _ = std::panic::catch_unwind(|| {
        exit::settle();
        exit::shutdown();
    });
}

#[cfg(target_os = "macos")]
#[used]
#[link_section = "__DATA,__mod_term_func"]
// SAFETY: a `__mod_term_func` entry is a pointer to a function without arguments.
static SEEDANCE_TERM: extern "C" fn() = seedance_term;
