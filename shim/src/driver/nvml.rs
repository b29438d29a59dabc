//! Every NVML call the shim makes, bounded in time (fail open when NVML
//! hangs).
//!
//! `nvmlInit` and NVML's queries talk to the kernel driver; with a wedged GPU or a driver in
//! recovery they can block for minutes, or for good. The shim uses NVML only on cold paths
//! (the topology, taken at the first device fault or for the session record; the other
//! devices' free memory after an out-of-memory failure), but those are waited for: by the
//! failing call, and at exit by `crate::exit::settle`. So each use runs on a helper thread
//! (`seedance-nvml`) and the caller waits at most `SEEDANCE_NVML_TIMEOUT` (default 2 s).
//! Past that, the caller goes on as with NVML absent (the driver's own queries), one line
//! says so on stderr, the topology in the trace records `nvml.present: false` with the
//! reason, and NVML is not called again in this process. The stuck helper is left behind,
//! detached: nothing waits for it or for a lock it holds inside NVML (no later NVML call,
//! no `nvmlShutdown` at exit; the exit summary and the metrics file never touch NVML).
//!
//! The dynamic loader's lock: loading NVML (`dlopen`, `dlsym`) needs it, and a thread
//! running the constructor of a library being `dlopen`ed holds it until the constructor
//! returns, so a helper started from there could not even load NVML. Hence the caller loads
//! the library itself first (the lock is recursive; a missing library is known at once and
//! reported as before, without a helper), and the helper, before any NVML call, takes the
//! loader's lock once (`dlopen(RTLD_NOLOAD)`) and says so. A helper that has not said so
//! within [`READY_WAIT`] (or the timeout, if shorter) means the loader's lock is held,
//! most likely by the caller: then the work runs on the calling thread, as it did before
//! this module, without a bound.
//!
//! Cost: nothing on any driver call that succeeds; one thread start per NVML use (once
//! per process for the topology, once per distinct out-of-memory explanation).

use crate::rt::{config, stderr};
use parking_lot::Mutex;
use seedance_topology::nvml::NVML_LIBRARY_NAMES;
use seedance_topology::{Nvml, NvmlSnapshot};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Longest wait for the helper to show that it got past the dynamic loader's lock.
const READY_WAIT: Duration = Duration::from_millis(250);
/// How often a waiting caller checks whether another caller gave NVML up meanwhile.
const SLICE: Duration = Duration::from_millis(10);

/// Why NVML is no longer used, once a call did not answer in time.
static GAVE_UP: OnceLock<String> = OnceLock::new();
/// Held while giving up, so the stderr line is out before anyone sees [`GAVE_UP`] set.
static GIVING_UP: Mutex<()> = Mutex::new(());

/// The reason NVML is not used any more, if it was given up.
pub fn gave_up() -> Option<String> {
    GAVE_UP.get().cloned()
}

/// Gives NVML up for the process (first time: one line on stderr) and returns the reason.
fn give_up(library: &str, timeout_ms: u64) -> String {
    let _held = GIVING_UP.lock();
    if let Some(r) = GAVE_UP.get() {
        return r.clone();
    }
    stderr::say(&format!(
        "NVML ({library}) did not answer within {timeout_ms} ms; continuing without it: \
         explanations and fallback choices use the driver's own queries, and NVML is not \
         called again in this process (SEEDANCE_NVML_TIMEOUT sets the wait)"
    ));
    let reason = format!("NVML ({library}) did not answer within {timeout_ms} ms");
    let _ = GAVE_UP.set(reason.clone());
    reason
}

/// The NVML library, loaded by the caller (see the module notes).
struct Loaded {
    name: CString,
    handle: *mut libc::c_void,
}

impl Loaded {
    /// Loads the first of `path` or [`NVML_LIBRARY_NAMES`] that the loader finds, with the
    /// flags `nvml-wrapper` uses; `None` when none loads.
    fn load(path: Option<&Path>) -> Option<Loaded> {
        let names: Vec<CString> = match path {
            Some(p) => vec![CString::new(p.as_os_str().as_bytes()).ok()?],
            None => NVML_LIBRARY_NAMES
                .iter()
                .filter_map(|n| CString::new(*n).ok())
                .collect(),
        };
        names.into_iter().find_map(|name| {
            // SAFETY: a valid C string; dlopen has no other precondition.
            let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
            (!handle.is_null()).then_some(Loaded { name, handle })
        })
    }

    fn shown(&self) -> String {
        seedance_core::text::clip(&self.name.to_string_lossy())
    }

    /// Drops this reference, unless NVML was given up: then a helper may still be running
    /// inside the library, which stays loaded for good.
    fn release(self) {
        if GAVE_UP.get().is_none() {
            // SAFETY: a handle from our own successful dlopen, closed once.
            unsafe { libc::dlclose(self.handle) };
        }
    }
}

/// Takes and releases the dynamic loader's lock: looks `name` up without loading it.
fn pass_the_loader_lock(name: &CStr) {
    // SAFETY: a valid C string; RTLD_NOLOAD only looks an already loaded library up.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if !handle.is_null() {
        // SAFETY: the reference the dlopen above just took.
        unsafe { libc::dlclose(handle) };
    }
}

enum Message<T> {
    /// The helper got past the loader's lock and is about to call NVML.
    Ready,
    Done(T),
}

/// Runs `work` on a helper thread and waits for its answer at most the configured
/// timeout; `Err` with the reason when NVML was given up (now, or by an earlier or
/// concurrent caller). `probe`: a library name to look up in the helper before `work`
/// (for work that loads NVML, which needs the loader's lock). `work` runs on this thread
/// instead when the helper cannot start, or does not get past the loader's lock in time.
fn bounded<T, F>(library: &str, probe: Option<CString>, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: Fn() -> T + Send + Sync + 'static,
{
    if let Some(r) = gave_up() {
        return Err(r);
    }
    let timeout_ms = config::get().nvml_timeout_ms;
    let timeout = Duration::from_millis(timeout_ms);
    let started = Instant::now();
    let work = Arc::new(work);
    let abandoned = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel::<Message<T>>(2);
    let helper = {
        let work = Arc::clone(&work);
        let abandoned = Arc::clone(&abandoned);
        move || {
            if let Some(name) = &probe {
                pass_the_loader_lock(name);
            }
            if tx.send(Message::Ready).is_err() || abandoned.load(Ordering::Acquire) {
                return;
            }
            if let Ok(answer) = catch_unwind(AssertUnwindSafe(|| work())) {
                let _ = tx.send(Message::Done(answer));
            }
        }
    };
    let spawned = crate::platform::spawn_quiet("seedance-nvml", helper);
    if spawned.is_err() {
        return Ok(work());
    }
    let ready_by = started + timeout.min(READY_WAIT);
    let deadline = started + timeout;
    let mut ready = false;
    loop {
        let until = if ready { deadline } else { ready_by };
        let now = Instant::now();
        if now >= until {
            abandoned.store(true, Ordering::Release);
            if ready {
                return Err(give_up(library, timeout_ms));
            }
            // The loader's lock is held, most likely by this thread.
            return Ok(work());
        }
        match rx.recv_timeout(SLICE.min(until - now)) {
            Ok(Message::Ready) => ready = true,
            Ok(Message::Done(answer)) => return Ok(answer),
            Err(RecvTimeoutError::Timeout) => {
                if let Some(r) = gave_up() {
                    abandoned.store(true, Ordering::Release);
                    return Err(r);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(format!("NVML ({library}): the query panicked"));
            }
        }
    }
}

/// NVML's view of the devices for the topology (NVML opened, read, and shut down again),
/// or why there is none: not installed, failed, or did not answer in time.
pub fn snapshot() -> Result<NvmlSnapshot, String> {
    if let Some(r) = gave_up() {
        return Err(r);
    }
    let path = config::get().nvml_lib.clone();
    let Some(loaded) = Loaded::load(path.as_deref()) else {
        // No library: this fails at once, with the reason naming every attempt.
        return NvmlSnapshot::take(path.as_deref());
    };
    let r = bounded(&loaded.shown(), Some(loaded.name.clone()), move || {
        NvmlSnapshot::take(path.as_deref())
    });
    loaded.release();
    r.and_then(|s| s)
}

/// NVML opened for later queries ([`free_memory`]); `None` without NVML, when it failed,
/// or when it was given up.
pub fn open() -> Option<Nvml> {
    if gave_up().is_some() {
        return None;
    }
    let path = config::get().nvml_lib.clone();
    let loaded = Loaded::load(path.as_deref())?;
    let r = bounded(&loaded.shown(), Some(loaded.name.clone()), move || {
        Nvml::open(path.as_deref()).ok()
    });
    loaded.release();
    r.ok().flatten()
}

/// Free memory now of each NVML index in `indices` (`None` for one whose query failed);
/// `None` for all when NVML was given up.
pub fn free_memory(nvml: &'static Nvml, indices: Vec<u32>) -> Option<Vec<Option<u64>>> {
    if indices.is_empty() {
        return gave_up().is_none().then(Vec::new);
    }
    bounded(nvml.library(), None, move || {
        indices.iter().map(|&i| nvml.free_memory(i)).collect()
    })
    .ok()
}

/// NVML's compute processes on one device: `(pid, used bytes)` each, `None` for an index
/// whose query failed.
pub type Processes = Option<Vec<(u32, Option<u64>)>>;

/// The compute processes NVML lists on each NVML index in `indices`, as `(pid, used
/// bytes)` (`None` for an index whose query failed); `None` for all when NVML was given up
/// or did not answer in time.
pub fn running_processes(nvml: &'static Nvml, indices: Vec<u32>) -> Option<Vec<Processes>> {
    if indices.is_empty() {
        return gave_up().is_none().then(Vec::new);
    }
    bounded(nvml.library(), None, move || {
        indices.iter().map(|&i| nvml.running_processes(i)).collect()
    })
    .ok()
}
