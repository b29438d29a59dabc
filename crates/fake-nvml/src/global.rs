//! Process-wide state: the initialisation reference count and the devices read at the
//! first init, the static device handles, and the guard every entry point runs through.
//!
//! The guard ([`call`], [`call_init`]) turns a panic into `NVML_ERROR_UNKNOWN` instead of
//! unwinding into C, returns `NVML_ERROR_UNINITIALIZED` before a successful init (for
//! [`call_init`]) and records the call ([`crate::log`]). A poisoned mutex is recovered.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::config::{delay_ms, flag_enabled, Gpu, Host, MAX_DEVICE_COUNT};
use crate::log;

/// `nvmlReturn_t` values used here (`nvml.h`).
pub mod ret {
    /// `NVML_SUCCESS`.
    pub const SUCCESS: u32 = 0;
    /// `NVML_ERROR_UNINITIALIZED`.
    pub const UNINITIALIZED: u32 = 1;
    /// `NVML_ERROR_INVALID_ARGUMENT`.
    pub const INVALID_ARGUMENT: u32 = 2;
    /// `NVML_ERROR_NOT_FOUND`.
    pub const NOT_FOUND: u32 = 6;
    /// `NVML_ERROR_INSUFFICIENT_SIZE`.
    pub const INSUFFICIENT_SIZE: u32 = 7;
    /// `NVML_ERROR_DRIVER_NOT_LOADED`.
    pub const DRIVER_NOT_LOADED: u32 = 9;
    /// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
    pub const ARGUMENT_VERSION_MISMATCH: u32 = 25;
    /// `NVML_ERROR_UNKNOWN`.
    pub const UNKNOWN: u32 = 999;
}

/// `NVML_INIT_FLAG_NO_GPUS`: initialise even when no device is found.
pub const INIT_FLAG_NO_GPUS: u32 = 1;
/// Variable that makes every init fail with `NVML_ERROR_DRIVER_NOT_LOADED`.
pub const ABSENT_ENV: &str = "FAKE_NVML_ABSENT";
/// Milliseconds every `nvmlInit*` sleeps, holding the library's lock (a wedged driver).
pub const INIT_DELAY_ENV: &str = "FAKE_NVML_INIT_DELAY_MS";
/// Milliseconds every per-device query sleeps, holding the library's lock.
pub const QUERY_DELAY_ENV: &str = "FAKE_NVML_QUERY_DELAY_MS";

/// The opaque device a `nvmlDevice_t` points to: one static slot per possible device, so
/// handles have stable addresses and are never freed. C never reads or writes through it.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct nvmlDevice_st {
    index: u32,
}

/// `nvmlDevice_t`.
#[allow(non_camel_case_types)]
pub type nvmlDevice_t = *mut nvmlDevice_st;

const SLOTS: usize = MAX_DEVICE_COUNT as usize;

static HANDLES: [nvmlDevice_st; SLOTS] = {
    let mut a = [const { nvmlDevice_st { index: 0 } }; SLOTS];
    let mut i = 0;
    while i < SLOTS {
        a[i].index = i as u32;
        i += 1;
    }
    a
};

/// The handle of the device at NVML index `i` (`i < 64`).
pub fn handle(i: usize) -> nvmlDevice_t {
    std::ptr::from_ref(&HANDLES[i]).cast_mut()
}

/// The slot index a handle points to, `None` for a pointer that is not one of ours.
pub fn slot_of(h: nvmlDevice_t) -> Option<usize> {
    let base = HANDLES.as_ptr() as usize;
    let size = std::mem::size_of::<nvmlDevice_st>();
    let off = (h as usize).checked_sub(base)?;
    (off % size == 0 && off / size < SLOTS).then_some(off / size)
}

/// The device behind a handle, `NVML_ERROR_INVALID_ARGUMENT` for anything else.
pub fn resolve(gpus: &[Gpu], h: nvmlDevice_t) -> Result<&Gpu, u32> {
    slot_of(h)
        .and_then(|i| gpus.get(i))
        .ok_or(ret::INVALID_ARGUMENT)
}

/// `dev=<index>` for one of our handles, `dev=0xHEX` otherwise (the log's spelling).
pub fn dev_arg(h: nvmlDevice_t) -> String {
    match slot_of(h) {
        Some(i) => format!("dev={i}"),
        None => format!("dev={:#x}", h as usize),
    }
}

struct State {
    refcount: u32,
    gpus: Vec<Gpu>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refcount: 0,
    gpus: Vec::new(),
});

/// `FAKE_NVML_QUERY_DELAY_MS` as read by the init that started the library, in ms.
static QUERY_DELAY_MS: AtomicU64 = AtomicU64::new(0);

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `FAKE_NVML_*_DELAY_MS` variable from the environment (a bad value warns on stderr).
fn delay_from_env(name: &str) -> Duration {
    let raw = std::env::var_os(name);
    let (delay, warning) = delay_ms(name, raw.as_deref().map(|v| v.to_str().unwrap_or("?")));
    if let Some(w) = warning {
        // Nothing sensible to do when stderr is closed.
        let _ = writeln!(std::io::stderr().lock(), "{w}");
    }
    delay
}

/// How long a per-device query sleeps (`FAKE_NVML_QUERY_DELAY_MS`); zero until an init
/// read it. Called by the queries with the library's lock held.
pub fn query_delay() -> Duration {
    Duration::from_millis(QUERY_DELAY_MS.load(Ordering::Relaxed))
}

/// `nvmlInit_v2` / `nvmlInitWithFlags`: sleeps `FAKE_NVML_INIT_DELAY_MS` first, holding the
/// library's lock, so every other call waits too (a wedged driver); the first init
/// (reference count 0) reads the host and `FAKE_NVML_QUERY_DELAY_MS`; every success adds
/// one reference. `NVML_ERROR_DRIVER_NOT_LOADED` with `FAKE_NVML_ABSENT`, or with no
/// devices unless `flags` has `NVML_INIT_FLAG_NO_GPUS`.
pub fn init(flags: u32) -> Result<(), u32> {
    let delay = delay_from_env(INIT_DELAY_ENV);
    let mut g = lock();
    std::thread::sleep(delay);
    let absent = std::env::var_os(ABSENT_ENV);
    if flag_enabled(absent.as_deref().and_then(|v| v.to_str())) {
        return Err(ret::DRIVER_NOT_LOADED);
    }
    if g.refcount == 0 {
        let host = Host::from_env();
        if host.gpus.is_empty() && flags & INIT_FLAG_NO_GPUS == 0 {
            return Err(ret::DRIVER_NOT_LOADED);
        }
        g.gpus = host.gpus;
        let query = delay_from_env(QUERY_DELAY_ENV);
        let ms = u64::try_from(query.as_millis()).unwrap_or(u64::MAX);
        QUERY_DELAY_MS.store(ms, Ordering::Relaxed);
    }
    g.refcount = g.refcount.saturating_add(1);
    Ok(())
}

/// `nvmlShutdown`: drops one reference; `NVML_ERROR_UNINITIALIZED` when there is none.
pub fn shutdown() -> Result<(), u32> {
    let mut g = lock();
    if g.refcount == 0 {
        return Err(ret::UNINITIALIZED);
    }
    g.refcount -= 1;
    Ok(())
}

fn guarded(body: impl FnOnce() -> Result<(), u32>) -> u32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ret::SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => ret::UNKNOWN,
    }
}

/// Runs an entry point that works without init, then records it as `name args`.
pub fn call(
    name: &str,
    args: impl FnOnce() -> String,
    body: impl FnOnce() -> Result<(), u32>,
) -> u32 {
    let r = guarded(body);
    log::record(name, args, r);
    r
}

/// Runs an entry point that needs init, with the devices locked, then records it.
pub fn call_init(
    name: &str,
    args: impl FnOnce() -> String,
    body: impl FnOnce(&[Gpu]) -> Result<(), u32>,
) -> u32 {
    call(name, args, || {
        let g = lock();
        if g.refcount == 0 {
            return Err(ret::UNINITIALIZED);
        }
        body(&g.gpus)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_stable_and_checked() {
        assert_eq!(slot_of(handle(0)), Some(0));
        assert_eq!(slot_of(handle(63)), Some(63));
        assert_eq!(handle(5), handle(5));
        assert_ne!(handle(5), handle(6));
        assert_eq!(slot_of(std::ptr::null_mut()), None);
        assert_eq!(slot_of(handle(63).wrapping_add(1)), None);
        assert_eq!(slot_of(handle(1).cast::<u8>().wrapping_add(1).cast()), None);
        assert_eq!(dev_arg(handle(3)), "dev=3");
        assert_eq!(dev_arg(std::ptr::null_mut()), "dev=0x0");
        let gpus = Host::from_vars(&Default::default()).gpus;
        assert_eq!(resolve(&gpus, handle(0)).map(|g| g.index), Ok(0));
        assert_eq!(resolve(&gpus, handle(1)).err(), Some(ret::INVALID_ARGUMENT));
    }
}
