//! Failures the program may recover from: the stderr line of a failed allocation or
//! creation call waits for what the calling thread does next (docs/configuration.md,
//! "Failures the program recovers from").
//!
//! A failure of one of the [`DEFERS`] entry points that the generic failure path reports
//! (`crate::rt::output::failed`: no fault module explained it) is written to the trace at
//! once, as every failure is (`call_failed`), but its stderr line is held. Then, on the
//! same thread:
//!
//! * the same entry point (its base name: `cuMemAllocAsync` and `cuMemAllocAsync_ptsz` are
//!   one) succeeding, with the same or other arguments, after at most [`WINDOW`] set-up
//!   calls ([`SETUP`]: making a context current, retaining a primary context, device and
//!   version queries) is a recovery: the line is never said, and the failure is counted in
//!   the exit summary's `recovered_by_result` (the analyzer's info);
//! * the same entry point failing again with the same result keeps the wait (a retry that
//!   failed too; recovered or not with it);
//! * anything else (another hooked call that does work, succeeding or failing, a set-up
//!   call past the window, a failure with another result), the thread's exit, or the
//!   process's exit is the program giving up: the line is said then, exactly as it would
//!   have been at the failure (once per function and result).
//!
//! Hot path: a successful call of a wrapper tests one bit of the configuration word it has
//! already loaded ([`config::sw::DEFERRED`], set while any thread has a failure pending);
//! only then is the thread's own pending failure looked at (a thread-local `Cell`, no lock).
//! Everything else runs after a failure, or once per pending failure.

use crate::hooks::ids::{HookId, TABLE};
use crate::rt::config::{self, sw};
use crate::rt::stderr;
use parking_lot::Mutex;
use seedance_core::once::ExplainOnce;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most set-up calls ([`SETUP`]) between a failure and the retry that recovers it.
pub const WINDOW: u32 = 16;

/// The entry points whose failures wait: calls that obtain memory, a context, a stream or
/// an event, where asking again (after making a context current, with another handle type,
/// a smaller size) is how programs proceed. Launches, copies, frees and synchronisations are
/// not among them: the next such call succeeding says nothing about the failed one.
pub const DEFERS: &[HookId] = &[
    HookId::cuMemAlloc_v2,
    HookId::cuMemAllocPitch_v2,
    HookId::cuMemAllocAsync,
    HookId::cuMemAllocAsync_ptsz,
    HookId::cuMemAllocManaged,
    HookId::cuMemHostAlloc,
    HookId::cuMemAllocHost_v2,
    HookId::cuMemCreate,
    HookId::cuMemHostRegister,
    HookId::cuMemHostRegister_v2,
    HookId::cuCtxCreate_v2,
    HookId::cuCtxCreate_v3,
    HookId::cuCtxCreate_v4,
    HookId::cuStreamCreate,
    HookId::cuStreamCreateWithPriority,
    HookId::cuEventCreate,
];

/// Calls that may come between a failure and its retry without ending the wait: the CUDA
/// runtime makes its primary context current on a thread (retain, set current) before it
/// retries an allocation that got `CUDA_ERROR_INVALID_CONTEXT` there (docs/design.md).
pub const SETUP: &[HookId] = &[
    HookId::cuInit,
    HookId::cuDriverGetVersion,
    HookId::cuDeviceGet,
    HookId::cuDeviceGetCount,
    HookId::cuDevicePrimaryCtxRetain,
    HookId::cuCtxSetCurrent,
    HookId::cuCtxPushCurrent,
    HookId::cuCtxPushCurrent_v2,
    HookId::cuCtxPopCurrent,
    HookId::cuCtxPopCurrent_v2,
];

/// Whether failures of `id` wait ([`DEFERS`]).
pub fn defers(id: HookId) -> bool {
    DEFERS.contains(&id)
}

/// The thread's pending failure.
#[derive(Clone, Copy)]
struct Pending {
    id: HookId,
    code: u32,
    /// Failures of `id` with `code` in a row (retries that failed too).
    failures: u64,
    /// Set-up calls since the last of them.
    between: u32,
    /// Its entry in [`HELD`].
    key: u64,
}

thread_local! {
    static PENDING: Cell<Option<Pending>> = const { Cell::new(None) };
    /// Registered with the first pending failure of a thread: its exit gives up.
    static AT_THREAD_EXIT: ThreadExit = const { ThreadExit };
}

/// A thread's exit gives up its pending failure ([`give_up_here`]).
struct ThreadExit;

impl Drop for ThreadExit {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(give_up_here);
    }
}

/// The line a pending failure says if the program gives up.
struct Held {
    key: u64,
    id: HookId,
    code: u32,
    /// The failure line; `None` when it is not announced (counted only).
    line: Option<String>,
    /// The stub-library line follows it.
    stub: Option<String>,
}

/// Pending failures' lines, every thread's (cold: one push and one removal per failure).
static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);
/// Threads with a pending failure; [`sw::DEFERRED`] is set while it is above zero.
static OPEN: AtomicU64 = AtomicU64::new(0);
/// Failures recovered from, by (function index, result).
static RECOVERED: Mutex<BTreeMap<(usize, u32), u64>> = Mutex::new(BTreeMap::new());
/// The (function, result) pairs whose line was said: once per process.
static SAID: ExplainOnce<(usize, u32)> = ExplainOnce::unbounded();

fn open() {
    OPEN.fetch_add(1, Ordering::SeqCst);
    if !config::forked() {
        config::word().fetch_or(sw::DEFERRED, Ordering::SeqCst);
    }
}

fn close() {
    if OPEN.fetch_sub(1, Ordering::SeqCst) == 1 {
        config::word().fetch_and(!sw::DEFERRED, Ordering::SeqCst);
        // A thread that opened between the two steps above set the bit before or after
        // the clear: if before, set it again for it.
        if OPEN.load(Ordering::SeqCst) > 0 && !config::forked() {
            config::word().fetch_or(sw::DEFERRED, Ordering::SeqCst);
        }
    }
}

/// The base name of `id` (`cuMemAllocAsync` for `cuMemAllocAsync_ptsz`).
fn base(id: HookId) -> &'static str {
    TABLE
        .iter()
        .find(|h| h.id == id)
        .map_or(id.name(), |h| h.base)
}

/// Whether `a` and `b` are one entry point (ABI variants of one base name).
fn same_entry(a: HookId, b: HookId) -> bool {
    a == b || base(a) == base(b)
}

fn take() -> Option<Pending> {
    PENDING.try_with(Cell::take).ok().flatten()
}

fn put(p: Pending) {
    let _ = PENDING.try_with(|c| c.set(Some(p)));
}

/// A failure of `id` ([`defers`]) with result `code`, whose stderr lines (`line`, then
/// `stub`) wait: said when the program gives up, never when it recovers.
pub fn failed(id: HookId, code: u32, line: Option<String>, stub: Option<String>) {
    if let Some(mut p) = take() {
        if same_entry(p.id, id) && p.code == code {
            p.failures += 1;
            p.between = 0;
            put(p);
            return;
        }
        give_up(p);
    }
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    HELD.lock().push(Held {
        key,
        id,
        code,
        line,
        stub,
    });
    let _ = AT_THREAD_EXIT.try_with(|_| {});
    put(Pending {
        id,
        code,
        failures: 1,
        between: 0,
        key,
    });
    open();
}

/// Before another failure of `id` on this thread is handled: a pending failure of another
/// entry point, or of this one with another result, is given up.
#[cold]
#[inline(never)]
pub fn before_failure(id: HookId, code: u32) {
    if let Some(p) = take() {
        if same_entry(p.id, id) && p.code == code {
            put(p);
        } else {
            give_up(p);
        }
    }
}

/// A successful call of `id` on a thread while some thread has a pending failure: the
/// recovery, a set-up call inside the window, or the end of the wait.
#[cold]
#[inline(never)]
pub fn after_success(id: HookId) {
    let Some(mut p) = take() else {
        return;
    };
    if same_entry(p.id, id) {
        recovered(p);
    } else if SETUP.contains(&id) && p.between < WINDOW {
        p.between += 1;
        put(p);
    } else {
        give_up(p);
    }
}

fn recovered(p: Pending) {
    HELD.lock().retain(|h| h.key != p.key);
    *RECOVERED.lock().entry((p.id as usize, p.code)).or_insert(0) += p.failures;
    close();
}

fn say(h: Held) {
    if config::forked() {
        return;
    }
    if let Some(line) = h.line {
        if SAID.first((h.id as usize, h.code)) {
            stderr::say(&line);
        }
    }
    if let Some(stub) = h.stub {
        stderr::say_once("stub", &stub);
    }
}

fn give_up(p: Pending) {
    let held = {
        let mut all = HELD.lock();
        all.iter()
            .position(|h| h.key == p.key)
            .map(|i| all.remove(i))
    };
    if let Some(h) = held {
        say(h);
    }
    close();
}

/// This thread's pending failure, given up (at its exit).
fn give_up_here() {
    if let Some(p) = take() {
        give_up(p);
    }
}

/// Every thread's pending failure, given up: at process exit, before the exit report.
pub fn give_up_all() {
    let held = std::mem::take(&mut *HELD.lock());
    for h in held {
        say(h);
    }
}

/// Failures recovered from so far, by (function index, result), for the exit summary.
pub fn recovered_counts() -> Vec<((usize, u32), u64)> {
    RECOVERED.lock().iter().map(|(k, v)| (*k, *v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_found_by_base_name() {
        assert_eq!(base(HookId::cuMemAllocAsync_ptsz), "cuMemAllocAsync");
        assert_eq!(base(HookId::cuMemAllocAsync), "cuMemAllocAsync");
        assert!(defers(HookId::cuMemCreate));
        assert!(!defers(HookId::cuLaunchKernel));
        assert!(!defers(HookId::cuMemFree_v2));
    }
}
