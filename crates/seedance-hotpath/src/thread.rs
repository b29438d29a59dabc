//! The calling thread's state, in one thread-local so that a hooked call pays for one
//! thread-local access however many per-thread records it updates: its call-counter shard
//! ([`crate::counters`]), its pending-work shard ([`crate::work`]), its current context as
//! the shim last saw it set and its thread id ([`tid_of`]).
//!
//! Shards are taken on a thread's first use and handed back (counts intact) when it exits;
//! while its thread-local storage is being torn down a thread gets `None` and the callers
//! fall back (a shared counter shard, or an untracked count).

use std::cell::Cell;

/// On one cache line (61 bytes): every hook reads it, and after the driver's own work each
/// line it spans can be a cache miss (scripts/bench/cachegrind-evicted.sh). No `Drop`: a
/// thread-local with one needs a state word beside it, read on every access and on a line
/// of its own once the value is aligned; the shards are handed back by [`Release`].
#[repr(align(64))]
pub(crate) struct ThreadState {
    pub(crate) counters: Cell<Option<&'static crate::counters::Shard>>,
    pub(crate) work: Cell<Option<&'static crate::work::Shard>>,
    pub(crate) ctx: Cell<usize>,
    /// The stream keys of handles 0, 1 and 2 in the current context (see
    /// [`crate::work::stream_key`]), kept with `ctx` so a launch looks its key up.
    pub(crate) default_keys: [Cell<u64>; 3],
    /// The thread's id as [`tid_of`]'s query gave it, 0 until first asked.
    pub(crate) tid: Cell<u64>,
    /// The held-allocation line the thread claimed ([`crate::held_lines`]): 0 before it
    /// tried, the entry's index + 1, or `u32::MAX` when it holds in its shard.
    pub(crate) line: Cell<u32>,
    /// Set when [`Release`] handed the shards back (the thread's local storage is being
    /// torn down): [`state`] answers `None` from then on.
    torn: Cell<bool>,
}

/// Hands the thread's shards back (counts intact) when its local storage is torn down.
/// Armed by [`arm_release`] when the thread takes its first shard.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let _ = STATE.try_with(|l| {
            l.torn.set(true);
            crate::work::release_line(l);
            if let Some(s) = l.counters.take() {
                crate::counters::release(s);
            }
            if let Some(s) = l.work.take() {
                crate::work::release(s);
            }
        });
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
            line: Cell::new(0),
            torn: Cell::new(false),
        }
    };
    static RELEASE: Release = const { Release };
}

/// Makes sure the calling thread's shards (and held-allocation line) are handed back when
/// it exits: the first access of [`RELEASE`] registers its destructor. Called when the
/// thread takes a shard or claims a line (cold); `false` when the destructor could not be
/// registered. A thread whose first shard is taken while its local storage is already
/// being torn down keeps that shard: it stays listed with its counts, but is not reused.
#[cold]
pub(crate) fn arm_release() -> bool {
    RELEASE.try_with(|_| ()).is_ok()
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
    let l = unsafe { &*p };
    (!l.torn.get()).then_some(l)
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
