//! The runtime's entry-point probes through `cuGetProcAddress` (counted by
//! `shim/src/interpose/procaddr.rs`), for the exit summary's `runtime_probes`: bookkeeping
//! only, below the wrappers, so that the summary (`shim/src/exit/summary.rs`) reads it
//! without depending on the look-up wrappers.

use parking_lot::Mutex;
use seedance_trace::RuntimeProbes;
use std::collections::BTreeSet;
use std::ffi::CStr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Look-ups made, and the highest `cudaVersion` asked for.
static LOOKUPS: AtomicU64 = AtomicU64::new(0);
static MAX_VERSION: AtomicI32 = AtomicI32::new(i32::MIN);
/// Look-ups answered `CUDA_ERROR_NOT_FOUND`, by `symbolStatus`.
static VERSION_NOT_SUFFICIENT: AtomicU64 = AtomicU64::new(0);
static SYMBOL_NOT_FOUND: AtomicU64 = AtomicU64::new(0);
/// Look-ups of a `cudaVersion` above the driver's, answered `CUDA_ERROR_INVALID_VALUE`.
static ABOVE_DRIVER: AtomicU64 = AtomicU64::new(0);
/// The first distinct symbols answered version-not-sufficient.
static UNAVAILABLE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
/// Most names kept in [`UNAVAILABLE`].
const MAX_UNAVAILABLE: usize = 32;
/// The distinct driver entry points handed out through `cuGetProcAddress` that no hook
/// wraps (passed through untouched), at most [`MAX_UNTOUCHED`].
static UNTOUCHED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
/// Most names kept in [`UNTOUCHED`] (the CUDA 13.0 runtime asks for about 440 entry
/// points: docs/model-coverage.md).
const MAX_UNTOUCHED: usize = 1024;

/// The look-ups so far, for the exit summary; `None` when none was made.
pub fn probes() -> Option<RuntimeProbes> {
    let lookups = LOOKUPS.load(Ordering::Relaxed);
    if lookups == 0 {
        return None;
    }
    let max = MAX_VERSION.load(Ordering::Relaxed);
    Some(RuntimeProbes {
        lookups,
        max_cuda_version: (max != i32::MIN).then_some(max),
        version_not_sufficient: VERSION_NOT_SUFFICIENT.load(Ordering::Relaxed),
        symbol_not_found: SYMBOL_NOT_FOUND.load(Ordering::Relaxed),
        above_driver_version: ABOVE_DRIVER.load(Ordering::Relaxed),
        unavailable: UNAVAILABLE.lock().iter().cloned().collect(),
    })
}

/// A look-up answered `CUDA_ERROR_NOT_FOUND`: how the runtime probes for entry points
/// (for one newer than the driver, `symbolStatus` says version-not-sufficient). Counted as
/// a call that succeeded, kept in [`probes`], never a `call_failed` record or a stderr
/// line.
pub fn probed(name: Option<&CStr>, version_not_sufficient: bool) {
    if version_not_sufficient {
        VERSION_NOT_SUFFICIENT.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = name {
            unavailable(n);
        }
    } else {
        SYMBOL_NOT_FOUND.fetch_add(1, Ordering::Relaxed);
    }
}

/// A look-up of `name` at a `cudaVersion` above the driver's own, which driver 580 answers
/// `CUDA_ERROR_INVALID_VALUE` with `pfn` and `symbolStatus` untouched (docs/design.md, fact
/// 11): a version probe, counted as one and `name` listed as unavailable; never a
/// `call_failed` record or a stderr line.
pub fn above_driver(name: &CStr) {
    ABOVE_DRIVER.fetch_add(1, Ordering::Relaxed);
    unavailable(name);
}

fn unavailable(name: &CStr) {
    let mut u = UNAVAILABLE.lock();
    if u.len() < MAX_UNAVAILABLE {
        u.insert(name.to_string_lossy().into_owned());
    }
}

/// `cuGetProcAddress` handed out the driver's own `name`, unwrapped: no hook implements it.
/// Kept for the exit summary (`untouched_entry_points`), so a run shows which entry points
/// the model never sees (docs/model-coverage.md). Look-ups are made at start-up, not on a
/// hot path.
pub fn untouched(name: &CStr) {
    let mut u = UNTOUCHED.lock();
    if u.len() < MAX_UNTOUCHED {
        u.insert(name.to_string_lossy().into_owned());
    }
}

/// The untouched entry points so far, sorted ([`untouched`]).
pub fn untouched_names() -> Vec<String> {
    UNTOUCHED.lock().iter().cloned().collect()
}

/// Counts one look-up asking for `cudaVersion` `version`.
pub fn lookup(version: i32) {
    LOOKUPS.fetch_add(1, Ordering::Relaxed);
    MAX_VERSION.fetch_max(version, Ordering::Relaxed);
}
