//! Explain once: the record of which faults have already been explained, so that a fault
//! repeated in a loop gives one stderr line and one trace event, not one per call.
//!
//! Every explaining part of the shim (device faults, allocation, launch, lifetime and
//! host-hazard faults, and the session's one-time lines) keeps one [`ExplainOnce`] keyed by
//! what makes two faults the same (function, check, value). The record is thread-safe and
//! cold-path only: it takes a lock and may allocate, so it is consulted only after a call
//! failed or a fault was found, never on a healthy call.

use parking_lot::Mutex;
use std::collections::BTreeSet;

/// A thread-safe set of keys already explained, optionally bounded.
///
/// With a bound of `n`, at most `n` distinct keys are remembered; once it is full, every key
/// not yet remembered is reported as already explained ([`ExplainOnce::first`] returns
/// `false`), so that a program producing endless distinct faults cannot grow the shim's
/// memory without limit and is not flooded with lines.
pub struct ExplainOnce<K> {
    seen: Mutex<BTreeSet<K>>,
    limit: usize,
}

impl<K: Ord> ExplainOnce<K> {
    /// A record of at most `limit` distinct keys (usable in a `static`).
    pub const fn bounded(limit: usize) -> ExplainOnce<K> {
        ExplainOnce {
            seen: Mutex::new(BTreeSet::new()),
            limit,
        }
    }

    /// A record without a bound on its keys, for key spaces the shim itself limits (device
    /// ordinals, fixed messages).
    pub const fn unbounded() -> ExplainOnce<K> {
        ExplainOnce::bounded(usize::MAX)
    }

    /// `true` the first time `key` is seen (and remembers it), `false` when it was seen
    /// before or the record is full.
    pub fn first(&self, key: K) -> bool {
        let mut seen = self.seen.lock();
        seen.len() < self.limit && seen.insert(key)
    }

    /// Distinct keys remembered.
    pub fn len(&self) -> usize {
        self.seen.lock().len()
    }

    /// Whether no key has been remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Ord> Default for ExplainOnce<K> {
    fn default() -> ExplainOnce<K> {
        ExplainOnce::unbounded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn first_time_only() {
        let once: ExplainOnce<(usize, &str, u32)> = ExplainOnce::unbounded();
        assert!(once.is_empty());
        assert!(once.first((1, "a", 2)));
        assert!(!once.first((1, "a", 2)));
        assert!(once.first((1, "a", 3)));
        assert!(once.first((2, "a", 2)));
        assert_eq!(once.len(), 3);
    }

    #[test]
    fn bound_stops_new_keys_but_keeps_old_ones_explained() {
        let once = ExplainOnce::bounded(2);
        assert!(once.first(1));
        assert!(once.first(2));
        // Full: a new key is not explained, an old one still counts as explained.
        assert!(!once.first(3));
        assert!(!once.first(1));
        assert_eq!(once.len(), 2);
        let none: ExplainOnce<i32> = ExplainOnce::bounded(0);
        assert!(!none.first(0));
    }

    #[test]
    fn usable_in_a_static_with_owned_keys() {
        static SAID: ExplainOnce<String> = ExplainOnce::unbounded();
        assert!(SAID.first("stub".to_string()));
        assert!(!SAID.first("stub".to_string()));
        assert!(ExplainOnce::<String>::default().first("stub".to_string()));
    }

    #[test]
    fn exactly_one_thread_explains_a_key() {
        let once: ExplainOnce<u32> = ExplainOnce::bounded(4096);
        let winners = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for k in 0..100 {
                        if once.first(k) {
                            winners.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(winners.load(Ordering::Relaxed), 100);
    }

    proptest! {
        #[test]
        fn first_is_true_once_per_key_within_the_bound(
            keys in proptest::collection::vec(0u8..32, 0..200),
            limit in 0usize..40,
        ) {
            let once = ExplainOnce::bounded(limit);
            let mut explained = BTreeSet::new();
            for &k in &keys {
                if once.first(k) {
                    // Never twice for one key.
                    prop_assert!(explained.insert(k));
                }
                prop_assert!(once.len() <= limit);
            }
            // Every distinct key is explained while there is room.
            let distinct: BTreeSet<u8> = keys.iter().copied().collect();
            prop_assert_eq!(explained.len(), distinct.len().min(limit));
        }
    }
}
