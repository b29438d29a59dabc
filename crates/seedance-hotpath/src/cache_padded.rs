//! A value padded to cache lines of its own ([`CachePadded`]), so that writes to its neighbours in memory
//! never invalidate the line its readers hold (false sharing).

/// `T` aligned to 128 bytes: two 64-byte lines, since Intel cores fetch lines in adjacent
/// pairs (the spatial prefetcher), so a neighbour one line away still shares with it.
/// Dereferences to `T`.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct CachePadded<T>(pub T);

impl<T> CachePadded<T> {
    /// `value` on lines of its own (usable in a `static`).
    pub const fn new(value: T) -> CachePadded<T> {
        CachePadded(value)
    }
}

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn neighbours_are_two_lines_apart() {
        static A: [CachePadded<AtomicU64>; 2] = [
            CachePadded::new(AtomicU64::new(1)),
            CachePadded::new(AtomicU64::new(2)),
        ];
        let (a, b) = (&A[0] as *const _ as usize, &A[1] as *const _ as usize);
        assert_eq!(b - a, 128);
        assert_eq!(a % 128, 0);
        assert_eq!(A[1].load(Ordering::Relaxed), 2);
    }
}
