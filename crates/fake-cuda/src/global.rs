//! Process-wide state: the initialised driver behind a `std::sync::Mutex`, the calling
//! thread's current context, stub mode, and the guard every entry point runs through.
//!
//! The guard ([`call`], [`call_driver`]) returns `CUDA_ERROR_STUB_LIBRARY` in stub mode,
//! `CUDA_ERROR_NOT_INITIALIZED` before a successful `cuInit` (for [`call_driver`]), turns a
//! panic into `CUDA_ERROR_UNKNOWN` instead of unwinding into C, and records the call
//! ([`crate::log`]). A poisoned mutex is recovered with `into_inner`.
//!
//! A child `fork()`ed after a successful `cuInit` gets `CUDA_ERROR_NOT_INITIALIZED` (3) from
//! `cuInit` and from every call that needs the driver, as the real driver does (driver
//! 580.159, H200: docs/design.md, fact 15): the first successful `cuInit` registers a
//! `pthread_atfork` child handler that marks the copy ([`forked_after_init`]). The child
//! still takes the driver's lock first, so a child forked while another thread held it
//! waits, as before (the deadlock the shim's fork gate prevents stays visible).
//!
//! With `FAKE_CUDA_DEINIT_AT_EXIT=1` the first successful `cuInit` registers an `atexit`
//! handler that deinitialises the driver, as the real one does at process exit: atexit
//! handlers registered before that `cuInit`, and library destructors, then get
//! `CUDA_ERROR_DEINITIALIZED` (4) from every call that needs the driver.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use seedance_cuda::CUresult;

use crate::config::{stub_enabled, Topology};
use crate::log;
use crate::state::Driver;

/// What `cuInit` has done so far.
enum Init {
    /// Not called successfully yet (or only with bad flags).
    Pending,
    /// Failed with this code (e.g. `CUDA_ERROR_NO_DEVICE`); later calls return it again.
    Failed(CUresult),
    /// Initialised.
    Ready(Box<Driver>),
    /// Shut down at exit (`FAKE_CUDA_DEINIT_AT_EXIT`).
    Deinitialized,
}

static DRIVER: Mutex<Init> = Mutex::new(Init::Pending);
/// Set in a child forked after a successful `cuInit` (and inherited by its own children).
static FORKED_AFTER_INIT: AtomicBool = AtomicBool::new(false);
static STUB: OnceLock<bool> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// Contexts below the current one on the calling thread's stack (`cuCtxPushCurrent`).
    static BELOW: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn lock() -> MutexGuard<'static, Init> {
    DRIVER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calling thread's current context handle, 0 for none.
pub fn current() -> usize {
    CURRENT.try_with(Cell::get).unwrap_or(0)
}

/// Sets the calling thread's current context handle (0 clears it).
pub fn set_current(ctx: usize) {
    let _ = CURRENT.try_with(|c| c.set(ctx));
}

/// `cuCtxPushCurrent`: `ctx` becomes current, the previous one goes on the stack.
pub fn push_current(ctx: usize) {
    let prev = current();
    let _ = BELOW.try_with(|b| b.borrow_mut().push(prev));
    set_current(ctx);
}

/// `cuCtxPopCurrent`: the current context comes off; the one below becomes current.
/// Returns the context popped.
pub fn pop_current() -> usize {
    let popped = current();
    let below = BELOW
        .try_with(|b| b.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or(0);
    set_current(below);
    popped
}

/// Whether `FAKE_CUDA_DEINIT_AT_EXIT` asks for deinitialisation at exit.
fn deinit_at_exit() -> bool {
    std::env::var("FAKE_CUDA_DEINIT_AT_EXIT").is_ok_and(|v| !v.is_empty() && v != "0")
}

extern "C" fn deinitialize() {
    *lock() = Init::Deinitialized;
}

/// `pthread_atfork` child handler, registered by the first successful `cuInit`.
extern "C" fn mark_forked_child() {
    FORKED_AFTER_INIT.store(true, Ordering::Relaxed);
}

/// Whether this process is a child forked after its parent initialised the driver: then
/// every call that needs the driver, `cuInit` included, returns `CUDA_ERROR_NOT_INITIALIZED`.
pub fn forked_after_init() -> bool {
    FORKED_AFTER_INIT.load(Ordering::Relaxed)
}

/// Whether `FAKE_CUDA_STUB` turned stub mode on (read once).
pub fn stub() -> bool {
    *STUB.get_or_init(|| {
        if let Some(v) = crate::config::for_this_copy("FAKE_CUDA_STUB_IN") {
            return stub_enabled(Some(&v));
        }
        let raw = std::env::var_os("FAKE_CUDA_STUB");
        stub_enabled(raw.as_deref().and_then(|v| v.to_str()))
    })
}

/// `cuInit`: reads the topology on the first call with `flags == 0` and remembers the
/// outcome.
pub fn init(flags: u32) -> Result<(), CUresult> {
    if flags != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let mut g = lock();
    if forked_after_init() {
        return Err(CUresult::CUDA_ERROR_NOT_INITIALIZED);
    }
    match &*g {
        Init::Ready(_) => Ok(()),
        Init::Failed(e) => Err(*e),
        Init::Pending => {
            let topo = Topology::from_env();
            let (state, r) = match Driver::from_topology(&topo) {
                Ok(d) => (Init::Ready(Box::new(d)), Ok(())),
                Err(e) => (Init::Failed(e), Err(e)),
            };
            *g = state;
            if r.is_ok() {
                // SAFETY: the handler only stores to an atomic, which is async-signal-safe
                // and valid in the child; this library is not unloaded while a process forks.
                unsafe { libc::pthread_atfork(None, None, Some(mark_forked_child)) };
            }
            if r.is_ok() && deinit_at_exit() {
                // SAFETY: `deinitialize` is a valid handler for the life of the process (this
                // library is not unloaded while the process exits).
                unsafe { libc::atexit(deinitialize) };
            }
            r
        }
        Init::Deinitialized => Err(CUresult::CUDA_ERROR_DEINITIALIZED),
    }
}

fn guarded(body: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUresult::CUDA_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => CUresult::CUDA_ERROR_UNKNOWN,
    }
}

/// Runs an entry point that works without `cuInit`, then records it as `name args`.
pub fn call(
    name: &str,
    args: impl FnOnce() -> String,
    body: impl FnOnce() -> Result<(), CUresult>,
) -> CUresult {
    raise_if_asked(name);
    let r = if stub() {
        CUresult::CUDA_ERROR_STUB_LIBRARY
    } else {
        guarded(body)
    };
    log::record(name, args, r);
    r
}

/// Runs `f` on the initialised driver without recording a call; `None` before `cuInit`
/// (and in a child forked after it).
pub fn with_driver<T>(f: impl FnOnce(&Driver) -> T) -> Option<T> {
    match &*lock() {
        Init::Ready(_) if forked_after_init() => None,
        Init::Ready(d) => Some(f(d)),
        _ => None,
    }
}

/// Runs an entry point that needs `cuInit`, with the driver locked, then records it.
pub fn call_driver(
    name: &str,
    args: impl FnOnce() -> String,
    body: impl FnOnce(&mut Driver) -> Result<(), CUresult>,
) -> CUresult {
    call(name, args, || match &mut *lock() {
        Init::Ready(_) if forked_after_init() => Err(CUresult::CUDA_ERROR_NOT_INITIALIZED),
        Init::Ready(d) => body(d),
        Init::Deinitialized => Err(CUresult::CUDA_ERROR_DEINITIALIZED),
        _ => Err(CUresult::CUDA_ERROR_NOT_INITIALIZED),
    })
}

/// `FAKE_CUDA_NAME_DELAY_MS=<ms>` (read at each call): `cuDeviceGetName` sleeps that long
/// holding the driver's lock, so that a test can fork while another thread is inside the
/// driver. Unset, empty or not a number: no delay.
pub fn name_delay() {
    let ms = std::env::var("FAKE_CUDA_NAME_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Whether `cuMemFreeHost` and `cuMemHostUnregister` wait for the queued copies of their
/// range, as driver 580 does (the default). `FAKE_CUDA_RELEASE_NO_WAIT=1` (read at each
/// call) plays a driver that releases the memory at once, with the copies still queued:
/// not seen on a real driver, it lets a test show what the shim says if one did.
pub fn release_waits() -> bool {
    !std::env::var("FAKE_CUDA_RELEASE_NO_WAIT").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `FAKE_CUDA_DEAD_HANDLE_CRASH=1` (read at each use): a synchronize or destroy of a stream
/// or event whose context was destroyed dies with `SIGSEGV` inside the call, as the real
/// driver did for `cuStreamSynchronize` and `cuStreamDestroy` of such a stream (H200, driver
/// 580.159: 4 of 4 runs; docs/validation.md). Without it those calls return
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`, as the same driver did in other runs. Nothing is
/// recorded for the crashing call (the process is gone).
pub fn crash_if_dead(dead: impl FnOnce(&Driver) -> bool) {
    let on = std::env::var("FAKE_CUDA_DEAD_HANDLE_CRASH").is_ok_and(|v| !v.is_empty() && v != "0");
    if !on || with_driver(dead) != Some(true) {
        return;
    }
    // SAFETY: raising a signal has no memory-safety preconditions; SIGSEGV's default action
    // ends the process, as the real driver's fault does.
    unsafe { libc::raise(libc::SIGSEGV) };
}

/// `FAKE_CUDA_RAISE=<signal number>:<entry point>[:<times>]` (read once): the first `times`
/// calls (default 1) of that entry point raise the signal on the calling thread before
/// doing anything else, so that the program's handler runs exactly there, inside whatever
/// the caller (a preloaded interposer's own work) was doing. A bad value is ignored with
/// one warning.
fn raise_if_asked(name: &str) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static ASKED: OnceLock<Option<(i32, String, u32)>> = OnceLock::new();
    static RAISED: AtomicU32 = AtomicU32::new(0);
    let asked = ASKED.get_or_init(|| {
        let raw = std::env::var("FAKE_CUDA_RAISE").ok()?;
        let mut parts = raw.split(':');
        let parsed = (|| {
            let sig = parts.next()?.trim().parse::<i32>().ok()?;
            let entry = parts.next()?.trim().to_string();
            let times = match parts.next() {
                Some(t) => t.trim().parse::<u32>().ok()?,
                None => 1,
            };
            (!entry.is_empty() && parts.next().is_none()).then_some((sig, entry, times))
        })();
        if parsed.is_none() {
            fake_support::env::print_warnings(&[fake_support::env::bad_value(
                "fake-cuda",
                "FAKE_CUDA_RAISE",
                &raw,
            )]);
        }
        parsed
    });
    let Some((sig, entry, times)) = asked else {
        return;
    };
    if entry != name {
        return;
    }
    if RAISED
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < *times).then_some(n + 1)
        })
        .is_ok()
    {
        // SAFETY: raise has no memory-safety preconditions; the program chose the signal
        // and installed its handler.
        unsafe { libc::raise(*sig) };
    }
}

/// `FAKE_CUDA_CANCEL_POINTS=<entry point>,..` (read once): those entry points are
/// cancellation points, as a driver call that waits in the kernel can be: they call
/// `pthread_testcancel` first, so a thread with a pending deferred cancel ends there (its
/// cleanup runs as glibc's forced unwind passes through the caller's frames). Only entry
/// points declared `extern "C-unwind"` call this.
pub fn cancellation_point(name: &str) {
    static POINTS: OnceLock<Vec<String>> = OnceLock::new();
    let points = POINTS.get_or_init(|| {
        std::env::var("FAKE_CUDA_CANCEL_POINTS")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    });
    if points.iter().any(|p| p == name) {
        extern "C-unwind" {
            fn pthread_testcancel();
        }
        // SAFETY: no preconditions; a pending cancel unwinds from here through `C-unwind`
        // frames only (this function and the entry point that called it).
        unsafe { pthread_testcancel() };
    }
}

/// Path of this copy of the library (`dladdr` on one of its functions).
pub fn own_path() -> Option<String> {
    // SAFETY: Dl_info is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and writes info.
    if unsafe { libc::dladdr(own_path as *const () as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    Some(name.to_string_lossy().into_owned())
}
