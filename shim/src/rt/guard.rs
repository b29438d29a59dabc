//! Keeping the shim's own failures out of the host program.
//!
//! Every cold path (failure reports, device faults, launch and allocation explanations,
//! lifetime checks, `dlsym`/`cuGetProcAddress` answers, the exit summary) runs under
//! `catch_unwind`, and the release profile keeps `panic = "unwind"` so that it can: a panic
//! there is caught, the call keeps the driver's own result, and the program goes on. The
//! hot path has no panicking operation.
//!
//! Without a hook of our own, Rust's default panic hook would print its multi-line message
//! on the program's stderr. [`install_panic_hook`] replaces it with one line, printed once.
//! The hook belongs to this library's copy of the Rust standard library (a cdylib links its
//! own), so a Rust host program's panics keep its own hook.
//!
//! [`test_panic`] lets the end-to-end tests make a chosen cold path panic
//! (`SEEDANCE_TEST_PANIC=site,site`, debug builds only; release builds compile it away).

use std::sync::atomic::{AtomicBool, Ordering};

static SAID: AtomicBool = AtomicBool::new(false);

/// Installs the one-line panic hook (once per process; later calls do nothing). `quiet`
/// says whether `SEEDANCE_QUIET` silences it; it must not wait for anything (it runs
/// inside the panic).
pub fn install_panic_hook(quiet: fn() -> bool) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        std::panic::set_hook(Box::new(move |info| {
            // Never call into the configuration here: a panic inside its initialisation
            // would deadlock on its once-cell.
            // SEEDANCE_QUIET silences the panic line too (clear until the configuration is
            // read).
            if quiet() || SAID.swap(true, Ordering::Relaxed) {
                return;
            }
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".to_string());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let _cancel = NoCancel::new();
            crate::rt::fd2::write_line(&format!(
                "internal error ({msg}{at}); the call kept the driver's result and the \
                 program goes on; later internal errors are not shown. Please report it"
            ));
        }));
    });
}

/// Panics if `SEEDANCE_TEST_PANIC` (a comma list) names `site`. Debug builds only.
#[cfg(debug_assertions)]
pub fn test_panic(site: &str) {
    static SITES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let sites = SITES.get_or_init(|| {
        std::env::var("SEEDANCE_TEST_PANIC")
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default()
    });
    if sites.iter().any(|s| s == site) {
        panic!("SEEDANCE_TEST_PANIC={site}");
    }
}

/// Release builds: nothing.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn test_panic(_site: &str) {}

thread_local! {
    /// Set while this thread runs the shim's own work around a call (explanations,
    /// repairs, lifetime records): the parts that take the shim's locks.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as inside the shim's own work until the guard is dropped, or
/// `None` when it already is: then this is a hooked call made from a signal handler that
/// interrupted that work (or from a callback it triggered), and the work may hold the
/// shim's locks, which are not re-entrant. The caller then skips its own work (the call
/// was forwarded and counted, lock-free, before), so it never waits for a lock its own
/// thread holds. Every entry point to work that takes a lock (a failure report, a device,
/// launch or allocation check, a lifetime hook) starts with this; the hot path never
/// reaches it (one thread-local access, only there).
///
/// The guard also disables cancellation of the thread ([`NoCancel`]): that work writes to
/// stderr and waits for the driver, and `write` and waits are cancellation points, whose
/// forced unwind the work's `catch_unwind` would swallow ("FATAL: exception not rethrown",
/// SIGABRT). The program's own driver call is never made under the guard, so it stays a
/// cancellation point if the driver's is one.
#[must_use]
pub fn enter() -> Option<Inside> {
    match INSIDE.try_with(|f| f.replace(true)) {
        Ok(false) => Some(Inside {
            _cancel: NoCancel::new(),
            mark: true,
        }),
        // Already inside; or thread-local storage is gone (thread exit): no mark, go on
        // as before (nothing of this thread can be interrupted inside the shim then).
        Ok(true) => None,
        Err(_) => Some(Inside {
            _cancel: NoCancel::new(),
            mark: false,
        }),
    }
}

/// Whether the calling thread is inside the shim's own work ([`enter`]): code that runs at
/// exit asks, because an `exit` called from a signal handler that interrupted that work
/// must not take the locks it may hold. Marks nothing.
pub fn inside() -> bool {
    INSIDE.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// See [`enter`]: clears the mark and restores the cancellation state when dropped.
pub struct Inside {
    _cancel: NoCancel,
    mark: bool,
}

impl Drop for Inside {
    fn drop(&mut self) {
        if self.mark {
            let _ = INSIDE.try_with(|f| f.set(false));
        }
    }
}

/// Cancellation of the calling thread disabled until dropped, then restored as it was (a
/// pending deferred cancel then acts at the thread's next cancellation point, as it would
/// have without the shim). For the shim's own blocking work: its stderr lines, its driver
/// queries and waits.
pub struct NoCancel(libc::c_int);

impl NoCancel {
    /// Disables cancellation (pthread_setcancelstate(3)).
    pub fn new() -> NoCancel {
        NoCancel(crate::platform::disable_cancellation())
    }
}

impl Drop for NoCancel {
    fn drop(&mut self) {
        crate::platform::restore_cancellation(self.0);
    }
}
