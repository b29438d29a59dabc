//! macOS/dyld: the trampoline and tuple for the interposed `dlsym`, the real `dlsym`,
//! images, thread ids and cancellation.
//!
//! **Compiled, never run.** No macOS machine is available; the module is compiled only for
//! `target_os = "macos"` (see `mod.rs`), checked with clippy for x86_64 and aarch64 Apple
//! targets in CI, and its object code generated (not linked: no Apple SDK here).
//! docs/macos.md says what is missing before it can work.
//!
//! How it differs from Linux:
//!
//! * Injection is `DYLD_INSERT_LIBRARIES=libseedance_fix.dylib`, and interposition is by
//!   `__DATA,__interpose` tuples, not by exporting a symbol of the same name: with the
//!   two-level namespace every import is bound to a named library (`dlsym` to
//!   libSystem, `cuLaunchKernel` to libcuda), so an export of ours is never consulted.
//!   dyld rebinds every image's imports of a tuple's `replacee` to its `replacement`,
//!   except in the image that holds the tuple (us). See [`Interpose`].
//! * dyld's `dlsym` answers `RTLD_NEXT` and `RTLD_SELF` relative to the image of its
//!   return address (`__builtin_return_address(0)` in dyld's `APIs::dlsym`), exactly as
//!   glibc does. A replacement that *calls* the real `dlsym` therefore answers for the shim
//!   instead of the caller. So the tuple's replacement is a naked trampoline, as on Linux:
//!   it asks a decision function (`crate::interpose::dlsym`), and otherwise tail-jumps to
//!   the real `dlsym` with the caller's return address untouched ([`dlsym_trampoline`]).
//!   The real `dlsym` is our own import of it: dyld binds our imports, and our own tuple's
//!   `replacee`, to the real function, because the interposing image is never interposed.
//! * dyld also passes every `dlsym` *result* through the interposing tuples (with no
//!   image exemption), so once the CUDA wrappers have tuples, `dlsym(libcuda, "cuX")`
//!   answers our wrapper even to us. [`lookup`] undoes that with our own tuple table.

use super::posix::{is_ours, object_of};
use libc::{c_char, c_int, c_ulong, c_void};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Signature of `dlsym`.
pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// `RTLD_NEXT` as a handle value (`(void *)-1` on macOS).
pub const RTLD_NEXT: *mut c_void = libc::RTLD_NEXT;

/// `RTLD_SELF` (`(void *)-3`): like `RTLD_NEXT`, resolved relative to the caller's image.
pub const RTLD_SELF: *mut c_void = -3isize as *mut c_void;

/// Returned by the trampoline's decision function to mean "forward to the real dlsym".
pub const FORWARD: usize = 1;

extern "C" {
    fn _dyld_image_count() -> u32;
    fn _dyld_get_image_name(image_index: u32) -> *const c_char;
    fn getsectiondata(
        mhp: *const c_void,
        segname: *const c_char,
        sectname: *const c_char,
        size: *mut c_ulong,
    ) -> *mut u8;
    // pthread_t is a pointer on macOS; null means the calling thread.
    fn pthread_threadid_np(thread: *mut c_void, thread_id: *mut u64) -> c_int;
}

/// One dyld interposing tuple, the layout of the `__DATA,__interpose` section:
/// calls to `replacee` from any other image go to `replacement`.
///
/// The exported CUDA wrappers need one each on macOS (the hook table would emit them; see
/// docs/macos.md): a static of this type with `#[used]` and
/// `#[link_section = "__DATA,__interpose"]`, whose `replacee` is the libcuda import.
#[repr(C)]
pub struct Interpose {
    /// Our function.
    pub replacement: *const c_void,
    /// The function it replaces, as imported (bound by dyld to the real one).
    pub replacee: *const c_void,
}

// SAFETY: the tuple is written by the static linker and by dyld's binding before any code
// of ours runs, and only read afterwards.
unsafe impl Sync for Interpose {}

/// The real `dlsym`: inside the interposing image, imports are not interposed, so our own
/// import of `dlsym` is libSystem's (the same address dyld binds into the `replacee` of the
/// `dlsym` tuple that [`dlsym_trampoline`] defines).
#[inline]
pub fn real_dlsym() -> Option<DlsymFn> {
    Some(libc::dlsym)
}

/// Defines the replacement `dlsym` and its interposing tuple: a naked trampoline that calls
/// `$decide(handle, symbol)` and returns its answer, or, when it returns [`FORWARD`],
/// tail-jumps to the real `dlsym` (through the tuple's `replacee`, offset 8) with the
/// arguments and the caller's return address as they came in.
///
/// `$decide` must be an `unsafe extern "C" fn(*mut c_void, *const c_char) -> usize` that
/// never unwinds. Used once, by `crate::interpose::dlsym`, where the decision lives; the
/// machine code and the tuple stay here, with the OS. x86-64 (System V) and arm64 (Apple's
/// AAPCS64 variant; not arm64e).
macro_rules! dlsym_trampoline {
    ($decide:path) => {
        /// The tuple for `dlsym`: libSystem's `dlsym`, everywhere but here, is our
        /// trampoline. The trampoline jumps through `replacee` (offset 8).
        #[used]
        #[link_section = "__DATA,__interpose"]
        static INTERPOSE_DLSYM: $crate::platform::Interpose = $crate::platform::Interpose {
            replacement: seedance_dlsym as *const ::libc::c_void,
            replacee: ::libc::dlsym as *const ::libc::c_void,
        };

        /// The replacement `dlsym` (x86-64 System V): see `crate::platform::dlsym_trampoline`.
        ///
        /// # Safety
        /// Same contract as `dlsym`.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn seedance_dlsym(
            handle: *mut ::libc::c_void,
            symbol: *const ::libc::c_char,
        ) -> *mut ::libc::c_void {
            // At entry rsp % 16 == 8; two pushes and 8 bytes re-align it for the call.
            core::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "sub rsp, 8",
                "call {hook}",
                "add rsp, 8",
                "pop rsi",
                "pop rdi",
                "cmp rax, 1",
                "je 2f",
                "ret",
                "2:",
                "jmp qword ptr [rip + {tuple} + 8]",
                hook = sym $decide,
                tuple = sym INTERPOSE_DLSYM,
            )
        }

        /// The replacement `dlsym` (arm64, Apple's AAPCS64 variant; not arm64e): see
        /// `crate::platform::dlsym_trampoline`.
        ///
        /// # Safety
        /// Same contract as `dlsym`.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn seedance_dlsym(
            handle: *mut ::libc::c_void,
            symbol: *const ::libc::c_char,
        ) -> *mut ::libc::c_void {
            core::arch::naked_asm!(
                "stp x29, x30, [sp, #-32]!",
                "mov x29, sp",
                "stp x0, x1, [sp, #16]",
                "bl {hook}",
                "mov x9, x0",
                "ldp x0, x1, [sp, #16]",
                "ldp x29, x30, [sp], #32",
                "cmp x9, #1",
                "b.eq 2f",
                "mov x0, x9",
                "ret",
                "2:",
                "adrp x16, {tuple}@PAGE",
                "add x16, x16, {tuple}@PAGEOFF",
                "ldr x16, [x16, #8]",
                "br x16",
                hook = sym $decide,
                tuple = sym INTERPOSE_DLSYM,
            )
        }
    };
}
pub(crate) use dlsym_trampoline;

/// Looks `name` up in `handle` with the real `dlsym` (null if absent). A result that dyld
/// interposed to one of our own functions is mapped back to the function it replaces.
pub fn lookup(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let p = match real_dlsym() {
        // SAFETY: handle is a dlopen handle or pseudo-handle; name is NUL-terminated.
        Some(f) => unsafe { f(handle, name.as_ptr()) },
        None => return std::ptr::null_mut(),
    };
    if !p.is_null() && is_ours(p) {
        if let Some(real) = replacee_of(p) {
            return real as *mut c_void;
        }
    }
    p
}

/// The tuples of our own `__DATA,__interpose` section, read from our mapped image.
fn our_tuples() -> &'static [Interpose] {
    static CACHE: AtomicUsize = AtomicUsize::new(0);
    static LEN: AtomicUsize = AtomicUsize::new(0);
    let p = CACHE.load(Ordering::Acquire);
    if p != 0 {
        // SAFETY: stored below from getsectiondata for our own, never unloaded image.
        return unsafe {
            std::slice::from_raw_parts(p as *const Interpose, LEN.load(Ordering::Relaxed))
        };
    }
    let Some(me) = object_of(our_tuples as *const c_void) else {
        return &[];
    };
    let mut size: c_ulong = 0;
    // SAFETY: base is our image's mach header (dladdr's dli_fbase); names are NUL-terminated.
    let data = unsafe {
        getsectiondata(
            me.base as *const c_void,
            c"__DATA".as_ptr(),
            c"__interpose".as_ptr(),
            &mut size,
        )
    };
    if data.is_null() {
        return &[];
    }
    let len = size as usize / std::mem::size_of::<Interpose>();
    LEN.store(len, Ordering::Relaxed);
    CACHE.store(data as usize, Ordering::Release);
    // SAFETY: the section holds `len` tuples and stays mapped for the process lifetime.
    unsafe { std::slice::from_raw_parts(data as *const Interpose, len) }
}

/// The function our `replacement` interposes, if `replacement` is one of our tuples'.
fn replacee_of(replacement: *const c_void) -> Option<*const c_void> {
    our_tuples()
        .iter()
        .find(|t| t.replacement == replacement)
        .map(|t| t.replacee)
        .filter(|r| !r.is_null())
}

/// Paths of loaded images whose path contains `needle` (via `_dyld_image_count` and
/// `_dyld_get_image_name`; another thread may load or unload images meanwhile, in which
/// case a name may be missed or come back null, and is skipped).
pub fn loaded_objects_matching(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    // SAFETY: no preconditions.
    let count = unsafe { _dyld_image_count() };
    for i in 0..count {
        // SAFETY: an index out of range (images unloaded meanwhile) returns null.
        let name = unsafe { _dyld_get_image_name(i) };
        if name.is_null() {
            continue;
        }
        // SAFETY: non-null, NUL-terminated, owned by dyld.
        let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        if s.contains(needle) {
            found.push(s.into_owned());
        }
    }
    found
}

/// The calling thread's thread pointer, as `seedance_hotpath::held_lines` finds a thread's
/// held-allocation line by: not read on macOS (0, which owns no line: every allocation takes
/// the thread-local path).
#[inline(always)]
pub fn thread_pointer() -> usize {
    0
}

/// System-wide thread id of the calling thread (`pthread_threadid_np`, cached per thread).
pub fn thread_id() -> u64 {
    fn query() -> u64 {
        let mut id = 0u64;
        // SAFETY: a null thread means the calling thread; id is a valid out-pointer.
        unsafe { pthread_threadid_np(std::ptr::null_mut(), &mut id) };
        id
    }
    thread_local! {
        static TID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    TID.try_with(|t| {
        if t.get() == 0 {
            t.set(query());
        }
        t.get()
    })
    .unwrap_or_else(|_| query())
}

/// The environment before the C library initialised itself (see the Linux version). macOS
/// has no `.preinit_array`; not needed there as far as known (untested).
pub fn environment_before_libc_init() -> Option<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
    None
}

/// `true` when the process was made setuid or setgid (issetugid(2)): the shim then ignores
/// every `SEEDANCE_*` variable, as on Linux with `AT_SECURE` (dyld itself already refuses
/// `DYLD_INSERT_LIBRARIES` for restricted processes).
pub fn secure_execution() -> bool {
    // SAFETY: issetugid has no preconditions.
    unsafe { libc::issetugid() != 0 }
}

/// `PTHREAD_CANCEL_DISABLE` (macOS <pthread.h>: PTHREAD_CANCEL_ENABLE = 0x01, PTHREAD_CANCEL_DISABLE = 0x00).
pub(super) const CANCEL_DISABLE: c_int = 0;

/// Waits until `word` may no longer hold `expected`, at most `timeout`: macOS has no public
/// wait on an address, so this sleeps at most 1 ms (`nanosleep`: no allocation, no lock)
/// and the caller looks at the word again.
pub fn wait_word(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: std::time::Duration) {
    if word.load(std::sync::atomic::Ordering::Acquire) == expected {
        std::thread::sleep(timeout.min(std::time::Duration::from_millis(1)));
    }
}

/// Nothing to wake: [`wait_word`] sleeps briefly and looks again.
pub fn wake_word(_word: &std::sync::atomic::AtomicU32) {}
