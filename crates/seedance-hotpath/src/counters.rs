//! Per-function call and error counters, sharded per thread.
//!
//! The hot path (every hooked driver call) must not contend on a shared cache line, take a
//! lock or allocate. Each thread therefore owns a shard: an array of relaxed atomics that
//! only it writes (a plain load and store, no locked read-modify-write). A thread's first
//! count takes a shard from a free list, or leaks a new one, and registers it; when the
//! thread exits its shard goes back to the free list with its counts intact, so totals never
//! lose a count. Totals are the sum over all shards ever registered. The shard pointer lives
//! in the thread's shared state ([`crate::thread`]), with the pending-work shard, so that a
//! launch counts both with one thread-local access ([`crate::work::count_launch`]).
//!
//! Counts made while a thread's local storage is being torn down go to a shared fallback
//! shard with atomic adds.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most functions (hooked ABI variants) the counters can track; ids are `0..MAX_FUNCTIONS`.
pub const MAX_FUNCTIONS: usize = 192;

pub(crate) struct Shard {
    calls: [AtomicU64; MAX_FUNCTIONS],
    errors: [AtomicU64; MAX_FUNCTIONS],
}

impl Shard {
    const fn new() -> Shard {
        Shard {
            calls: [const { AtomicU64::new(0) }; MAX_FUNCTIONS],
            errors: [const { AtomicU64::new(0) }; MAX_FUNCTIONS],
        }
    }
}

/// Call and error totals of one function id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionCount {
    /// Calls counted.
    pub calls: u64,
    /// Calls that returned an error.
    pub errors: u64,
}

/// The process-wide counters; use [`Counters::global`].
pub struct Counters {
    all: Mutex<Vec<&'static Shard>>,
    free: Mutex<Vec<&'static Shard>>,
    fallback: Shard,
}

static GLOBAL: Counters = Counters {
    all: Mutex::new(Vec::new()),
    free: Mutex::new(Vec::new()),
    fallback: Shard::new(),
};

/// Hands an exited thread's shard back for reuse.
pub(crate) fn release(s: &'static Shard) {
    GLOBAL.free.lock().push(s);
}

#[inline(always)]
fn bump(a: &AtomicU64) {
    // Single writer per shard: a plain load and store is exact and avoids a locked add.
    a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

impl Counters {
    /// The process-wide instance.
    pub fn global() -> &'static Counters {
        &GLOBAL
    }

    #[cold]
    pub(crate) fn register(&'static self) -> &'static Shard {
        let reused = self.free.lock().pop();
        reused.unwrap_or_else(|| {
            let s: &'static Shard = Box::leak(Box::new(Shard::new()));
            self.all.lock().push(s);
            s
        })
    }

    #[inline(always)]
    fn with_shard(&'static self, f: impl Fn(&Shard, bool)) {
        let scope = ();
        match crate::thread::state(&scope) {
            Some(l) => f(self.shard_of(l), true),
            None => f(&self.fallback, false),
        }
    }

    /// The thread's shard, registering one on first use.
    #[inline(always)]
    pub(crate) fn shard_of(&'static self, l: &crate::thread::ThreadState) -> &'static Shard {
        match l.counters.get() {
            Some(s) => s,
            None => {
                crate::thread::arm_release();
                let s = self.register();
                l.counters.set(Some(s));
                s
            }
        }
    }

    /// Counts one call in the calling thread's own shard (its single writer).
    #[inline(always)]
    pub(crate) fn bump_owned(s: &Shard, id: usize, failed: bool) {
        bump(&s.calls[id]);
        if failed {
            bump(&s.errors[id]);
        }
    }

    /// Counts one call of function `id`, and one error if `failed`.
    /// Ids at or above [`MAX_FUNCTIONS`] are ignored.
    #[inline(always)]
    pub fn record(&'static self, id: usize, failed: bool) {
        if id >= MAX_FUNCTIONS {
            return;
        }
        self.with_shard(|s, owned| {
            if owned {
                Counters::bump_owned(s, id, failed);
            } else {
                s.calls[id].fetch_add(1, Ordering::Relaxed);
                if failed {
                    s.errors[id].fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }

    /// Counts a call made while the thread's local storage is being torn down.
    pub(crate) fn record_shared(&'static self, id: usize, failed: bool) {
        if id < MAX_FUNCTIONS {
            self.fallback.calls[id].fetch_add(1, Ordering::Relaxed);
            if failed {
                self.fallback.errors[id].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Totals for every id, summed over all threads (a consistent total only once the
    /// counting threads are quiet, e.g. at exit).
    pub fn snapshot(&self) -> Vec<FunctionCount> {
        let mut out = vec![FunctionCount::default(); MAX_FUNCTIONS];
        let all = self.all.lock();
        for shard in all.iter().copied().chain(std::iter::once(&self.fallback)) {
            for (i, o) in out.iter_mut().enumerate() {
                o.calls += shard.calls[i].load(Ordering::Relaxed);
                o.errors += shard.errors[i].load(Ordering::Relaxed);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_across_threads_and_exits() {
        // Ids 90..93 are used by this test only.
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        Counters::global().record(90, i % 10 == 0);
                        Counters::global().record(91 + (t % 2), false);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Threads that exit hand their shards back; new threads reuse them and keep adding.
        std::thread::spawn(|| Counters::global().record(90, true))
            .join()
            .unwrap();
        let s = Counters::global().snapshot();
        assert_eq!(
            s[90],
            FunctionCount {
                calls: 80_001,
                errors: 8_001
            }
        );
        assert_eq!(s[91].calls, 40_000);
        assert_eq!(s[92].calls, 40_000);
        assert_eq!(s[91].errors + s[92].errors, 0);
    }

    #[test]
    fn out_of_range_id_is_ignored() {
        Counters::global().record(MAX_FUNCTIONS, true);
        Counters::global().record(usize::MAX, true);
        assert_eq!(Counters::global().snapshot().len(), MAX_FUNCTIONS);
    }
}
