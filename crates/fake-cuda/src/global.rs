//! Process-wide state: the initialised driver behind a `std::sync::Mutex`, the calling
//! thread's current context, stub mode, and the guard every entry point runs through.
//!
//! The guard ([`call`], [`call_driver`]) returns `CUDA_ERROR_STUB_LIBRARY` in stub mode,
//! `CUDA_ERROR_NOT_INITIALIZED` before a successful `cuInit` (for [`call_driver`]), turns a
//! panic into `CUDA_ERROR_UNKNOWN` instead of unwinding into C, and records the call
//! ([`crate::log`]). A poisoned mutex is recovered with `into_inner`.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
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
}

static DRIVER: Mutex<Init> = Mutex::new(Init::Pending);
static STUB: OnceLock<bool> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
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

/// Whether `FAKE_CUDA_STUB` turned stub mode on (read once).
pub fn stub() -> bool {
    *STUB.get_or_init(|| {
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
            r
        }
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
    let r = if stub() {
        CUresult::CUDA_ERROR_STUB_LIBRARY
    } else {
        guarded(body)
    };
    log::record(name, args, r);
    r
}

/// Runs an entry point that needs `cuInit`, with the driver locked, then records it.
pub fn call_driver(
    name: &str,
    args: impl FnOnce() -> String,
    body: impl FnOnce(&mut Driver) -> Result<(), CUresult>,
) -> CUresult {
    call(name, args, || match &mut *lock() {
        Init::Ready(d) => body(d),
        _ => Err(CUresult::CUDA_ERROR_NOT_INITIALIZED),
    })
}
