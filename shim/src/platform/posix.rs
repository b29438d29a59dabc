//! What Linux and macOS share: `dladdr`, `dlopen` and `dlerror` behave alike under glibc and
//! dyld (an "object" is an ELF shared object or a Mach-O image), and thread cancellation
//! works alike (only the value of `PTHREAD_CANCEL_DISABLE` differs).

use libc::{c_int, c_void};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What `dladdr` says about an address: the object's path and load base (ELF) or mach
/// header (Mach-O).
pub struct ObjectInfo {
    /// Path of the shared object containing the address.
    pub path: Option<String>,
    /// Load base of that object.
    pub base: usize,
}

/// The shared object that contains `addr`, if any.
pub fn object_of(addr: *const c_void) -> Option<ObjectInfo> {
    // SAFETY: Dl_info is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads addr and writes info.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 {
        return None;
    }
    let path = if info.dli_fname.is_null() {
        None
    } else {
        // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
        Some(
            unsafe { CStr::from_ptr(info.dli_fname) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    Some(ObjectInfo {
        path,
        base: info.dli_fbase as usize,
    })
}

/// `true` if `addr` lies in libseedance_fix itself.
pub fn is_ours(addr: *const c_void) -> bool {
    static OUR_BASE: AtomicUsize = AtomicUsize::new(0);
    let mut base = OUR_BASE.load(Ordering::Relaxed);
    if base == 0 {
        base = object_of(is_ours as *const c_void).map_or(usize::MAX, |o| o.base);
        OUR_BASE.store(base, Ordering::Relaxed);
    }
    object_of(addr).is_some_and(|o| o.base == base)
}

/// `dlopen(path, flags)`; null on failure.
pub fn open(path: &str, flags: c_int) -> *mut c_void {
    let Ok(c) = CString::new(path) else {
        return std::ptr::null_mut();
    };
    // SAFETY: c is NUL-terminated; dlopen has no other preconditions.
    unsafe { libc::dlopen(c.as_ptr(), flags) }
}

/// A handle to the already-loaded object containing `addr` (`RTLD_NOLOAD`: a reference the
/// caller gives back with `dlclose`), or null. The object is looked for in the default
/// link-map namespace only: a driver the program opened with `dlmopen` in a namespace of
/// its own is not found, so the shim never calls into it from a thread of its own (on the
/// H200, driver 580.159, such calls crashed the program: `scripts/gpu/reopen.sh`,
/// docs/validation.md).
pub fn handle_of(addr: *const c_void) -> *mut c_void {
    match object_of(addr).and_then(|o| o.path) {
        Some(p) => open(&p, libc::RTLD_NOW | libc::RTLD_NOLOAD),
        None => std::ptr::null_mut(),
    }
}

/// The last `dlerror()` message, if any.
pub fn last_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated thread-local string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        String::from("unknown error")
    } else {
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

#[cfg(target_os = "linux")]
use super::linux::CANCEL_DISABLE;
#[cfg(target_os = "macos")]
use super::macos::CANCEL_DISABLE;

extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
}

/// Disables cancellation of the calling thread (pthread_setcancelstate(3)) and returns the
/// previous state for [`restore_cancellation`]. A pending cancel then waits for the next
/// cancellation point after the restore, as if the shim's own work had not been there.
/// `PTHREAD_CANCEL_DISABLE` differs by C library (glibc 1, macOS 0): each OS file defines
/// `CANCEL_DISABLE`.
pub fn disable_cancellation() -> c_int {
    let mut old: c_int = CANCEL_DISABLE;
    // SAFETY: a valid state and a valid out-pointer; never fails with those.
    unsafe { pthread_setcancelstate(CANCEL_DISABLE, &mut old) };
    old
}

/// Puts back the state [`disable_cancellation`] returned.
pub fn restore_cancellation(old: c_int) {
    let mut ignored: c_int = 0;
    // SAFETY: as above; `old` is a state pthread_setcancelstate returned.
    unsafe { pthread_setcancelstate(old, &mut ignored) };
}

/// Registers fork handlers (pthread_atfork(3)): `prepare` runs in the forking thread before
/// `fork()`, `parent` in the parent after it, `child` in the child.
pub fn on_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: registering plain function pointers that live as long as the process (the
    // shim is never unloaded).
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// What a file descriptor refers to: the device and inode of its open file (`fstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// The identity of descriptor `fd`, `None` when it is not open.
pub fn fd_identity(fd: c_int) -> Option<FdIdentity> {
    // SAFETY: stat is plain data; zeroed is a valid initial value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only writes st; a closed fd gives EBADF.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(FdIdentity {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
    })
}

/// Writes all of `buf` to `fd` (retrying after a signal or a short write); gives up on any
/// other error.
pub fn write_fd(fd: c_int, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: buf is a valid slice for its length; write only reads it.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            return;
        }
    }
}

/// Writes `buf` to `fd` as [`write_fd`] does, with SIGPIPE held off the calling thread: a
/// reader that went away (stderr a pipe whose reader exited) costs the line, never the
/// program, which natively would not have written there. The signal the kernel raised for
/// the failed write is taken back, unless one was pending before.
pub fn write_fd_no_sigpipe(fd: c_int, buf: &[u8]) {
    // SAFETY: sigset_t values are plain data, each initialised by sigemptyset / sigpending /
    // pthread_sigmask before it is read; every pointer is to a local.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old) != 0 {
            return;
        }
        libc::sigpending(&mut pending);
        let was_pending = libc::sigismember(&pending, libc::SIGPIPE) == 1;
        write_fd(fd, buf);
        libc::sigpending(&mut pending);
        if !was_pending && libc::sigismember(&pending, libc::SIGPIPE) == 1 {
            let mut sig: c_int = 0;
            // Returns at once: the signal is pending and blocked.
            libc::sigwait(&pipe, &mut sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Every signal blocked in the calling thread until dropped, then its mask put back as it
/// was. A thread created meanwhile inherits the full mask (pthread_create(3)), so it blocks
/// every signal from its first instruction: the program's handlers never run on a thread of
/// the shim's, and a signal sent to the process goes to one of the program's own threads,
/// as without the shim. (glibc keeps its own internal signals, cancellation and `setxid`,
/// deliverable whatever the mask asks.)
pub struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    /// Blocks every signal in the calling thread.
    pub fn new() -> SignalsBlocked {
        // SAFETY: sigset_t is plain data; both sets are initialised by sigfillset /
        // pthread_sigmask before use.
        let (mut all, mut old): (libc::sigset_t, libc::sigset_t) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        // SAFETY: valid pointers to sigset_t values owned here.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        SignalsBlocked(old)
    }
}

impl Default for SignalsBlocked {
    fn default() -> SignalsBlocked {
        SignalsBlocked::new()
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: self.0 is the mask pthread_sigmask returned in new().
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Starts a thread of the shim's own, named `name`, that blocks every signal from its first
/// instruction ([`SignalsBlocked`] around the spawn). Every thread the shim starts goes
/// through here (the trace writer's, started by a library, under [`SignalsBlocked`]).
pub fn spawn_quiet<F>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let _blocked = SignalsBlocked::new();
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// An unwinder's frame context (`struct _Unwind_Context`), opaque.
#[repr(C)]
pub struct UnwindContext {
    _opaque: [u8; 0],
}

extern "C" {
    // libgcc_s's unwinder (LLVM libunwind's on macOS), which Rust's standard library already
    // links for panics: using it loads nothing. glibc's backtrace() would dlopen libgcc_s
    // on first use, which the shim must not cause (a library loaded under the program).
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

/// `_URC_NO_REASON`: go on to the next frame.
const URC_NO_REASON: c_int = 0;
/// `_URC_NORMAL_STOP`: the walk was stopped by its callback.
const URC_NORMAL_STOP: c_int = 4;

extern "C" fn each_frame(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: arg is the `&mut dyn FnMut` that walk_stack passed, alive for the walk.
    let f = unsafe { &mut *(arg as *mut &mut dyn FnMut(usize) -> bool) };
    // SAFETY: ctx is the unwinder's context for this frame.
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if ip == 0 || !f(ip) {
        URC_NORMAL_STOP
    } else {
        URC_NO_REASON
    }
}

/// Walks the calling thread's stack from the caller of this function outwards, handing
/// `f` each frame's return address until it answers `false` or the unwinder finds no more
/// frames (code without unwind tables ends the walk). Takes no lock of its own; the
/// unwinder finds each frame's tables through the loader (`_dl_find_object` or
/// `dl_iterate_phdr`), never loads a library.
#[inline(never)]
pub fn walk_stack(f: &mut dyn FnMut(usize) -> bool) {
    let mut f = f;
    // SAFETY: each_frame casts the argument back to the same type, used only during the
    // call.
    unsafe {
        _Unwind_Backtrace(
            each_frame,
            &mut f as *mut &mut dyn FnMut(usize) -> bool as *mut c_void,
        )
    };
}
