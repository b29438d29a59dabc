//! The calling thread's state, in one thread-local so that a hooked call pays for one
//! thread-local access however many per-thread records it updates: its call-counter shard
//! ([`crate::counters`]), its pending-work shard ([`crate::work`]), its current context as
//! the shim last saw it set and its thread id ([`tid_of`]).
//!
//! Shards are taken on a thread's first use and handed back (counts intact) when it exits;
//! while its thread-local storage is being torn down a thread gets `None` and the callers
//! fall back (a shared counter shard, or an untracked count).

use std::cell::Cell;

pub(crate) struct ThreadState {
    pub(crate) counters: Cell<Option<&'static crate::counters::Shard>>,
    pub(crate) work: Cell<Option<&'static crate::work::Shard>>,
    pub(crate) ctx: Cell<usize>,
    /// The stream keys of handles 0, 1 and 2 in the current context (see
    /// [`crate::work::stream_key`]), kept with `ctx` so a launch looks its key up.
    pub(crate) default_keys: [Cell<u64>; 3],
    /// The thread's id as [`tid_of`]'s query gave it, 0 until first asked.
    pub(crate) tid: Cell<u64>,
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        if let Some(s) = self.counters.take() {
            crate::counters::release(s);
        }
        if let Some(s) = self.work.take() {
            crate::work::release(s);
        }
    }
}

thread_local! {
    pub(crate) static STATE: ThreadState = const {
        ThreadState {
            counters: Cell::new(None),
            work: Cell::new(None),
            ctx: Cell::new(0),
            default_keys: [Cell::new(1), Cell::new(1), Cell::new(2)],
            tid: Cell::new(0),
        }
    };
}

/// The calling thread's state, borrowed for as long as `scope`, a local of the caller (the
/// thread cannot exit while its caller runs); `None` while its thread-local storage is
/// being torn down.
///
/// `LocalKey::try_with` is only asked for the address: with a closure that small it is
/// inlined (the thread-local access is a few instructions), where a closure holding the
/// caller's work was not, which cost a call, a stack frame and spilled captures on every
/// launch.
#[inline(always)]
pub(crate) fn state(scope: &()) -> Option<&ThreadState> {
    let _ = scope;
    let p: *const ThreadState = STATE.try_with(|s| s as *const ThreadState).ok()?;
    // SAFETY: `p` is the address of the calling thread's own `ThreadState`, which stays
    // valid until this thread's local storage is torn down; that cannot happen while the
    // caller (which owns `scope`) is running on this thread, and the borrow ends with it.
    Some(unsafe { &*p })
}

/// Runs `f` with the calling thread's state (see [`state`]).
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    let scope = ();
    state(&scope).map(f)
}

/// The thread's id from its state: `query`'s answer (the shim's cached `gettid`, or
/// `pthread_threadid_np` on macOS), asked on the thread's first call and kept with the
/// other per-thread records, so a hook that needs the id and a stream key pays one
/// thread-local access ([`crate::work::caller`]).
#[inline(always)]
pub(crate) fn tid_of(l: &ThreadState, query: impl FnOnce() -> u64) -> u64 {
    match l.tid.get() {
        0 => {
            let t = query();
            l.tid.set(t);
            t
        }
        t => t,
    }
}
