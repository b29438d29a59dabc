//! Errors by (function id, CUresult): kept only on the failure path, under a lock.

use parking_lot::Mutex;
use std::collections::HashMap;

/// Counts failed calls by function id and result code, and remembers which
/// (function, code) pairs were seen before so each distinct fault is announced once.
#[derive(Default)]
pub struct ErrorTally {
    map: Mutex<HashMap<(usize, u32), u64>>,
}

impl ErrorTally {
    /// An empty tally.
    pub fn new() -> ErrorTally {
        ErrorTally::default()
    }

    /// Counts one failure; returns `true` if this (function, code) pair is new.
    pub fn add(&self, id: usize, code: u32) -> bool {
        let mut m = self.map.lock();
        let n = m.entry((id, code)).or_insert(0);
        *n += 1;
        *n == 1
    }

    /// All counts, sorted by function id then code.
    pub fn snapshot(&self) -> Vec<((usize, u32), u64)> {
        let mut v: Vec<_> = self.map.lock().iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_of_each_pair_is_new() {
        let t = ErrorTally::new();
        assert!(t.add(3, 101));
        assert!(!t.add(3, 101));
        assert!(t.add(3, 2));
        assert!(t.add(4, 101));
        assert_eq!(
            t.snapshot(),
            vec![((3, 2), 1), ((3, 101), 2), ((4, 101), 1)]
        );
    }
}
