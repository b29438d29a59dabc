//! A thread's copy state between a copy's `pre` and `ok` hooks ([`Local`]): the accesses
//! kept for the `ok` hook, whether any were, and the gap between pinned ranges its last
//! miss fell in, reached in one thread-local access per hook (the shim is a shared object:
//! each access is a call to `__tls_get_addr`).

use seedance_core::hazard::shared::{Held, Ranges};
use seedance_core::hazard::Access;
use std::cell::RefCell;

/// The accesses of one copy: its host side, or both sides of a unified copy, each with the
/// pinned range it lies in (`None`: the thread's cache's last range, [`Ranges::last`]).
pub(super) type Sides = [Option<(Access, Option<Held>)>; 2];

/// What a thread keeps between a copy's `pre` and `ok` hooks (one thread-local access
/// per hook).
pub(super) struct Local {
    /// The accesses of the copy this thread is making (a fixed pair: no allocation per
    /// copy).
    pub(super) next: Sides,
    /// Whether the last `pre` hook kept accesses in `next` for the `ok` hook (a copy
    /// that failed leaves them; the next copy's `pre` hook empties or disarms them).
    pub(super) armed: bool,
    /// Its cache of the pinned-range snapshot, with the gap between ranges its last miss
    /// fell in: a copy from the same pageable buffer inside the ranges' bounding box passes
    /// without a look-up ([`Ranges::misses`]).
    pub(super) ranges: Option<Ranges>,
}

thread_local! {
    pub(super) static NEXT: RefCell<Local> = const {
        RefCell::new(Local {
            next: [None, None],
            armed: false,
            ranges: None,
        })
    };
}

impl Local {
    /// Whether the host sides `a` and `b` lie in the gap this thread's last miss found,
    /// under the current ranges: then the copy touches no pinned range, and its `ok` hook
    /// has nothing to commit (disarmed here, so that accesses a failed copy left are never
    /// taken for this one's).
    #[inline(always)]
    fn known_miss(&mut self, a: u64, b: u64) -> bool {
        let hit = self.ranges.as_mut().is_some_and(|r| r.misses([a, b]));
        if hit {
            self.armed = false;
        }
        hit
    }
}

/// A copy's `pre` work for host sides `a` and `b`, unless they are a known miss (the
/// caller wraps it in its panic guard). Without the thread's storage (a copy made while
/// the thread exits) nothing is checked.
#[inline(always)]
pub(super) fn unless_known_miss(a: u64, b: u64, work: impl FnOnce(&RefCell<Local>)) {
    let _ = NEXT.try_with(|n| {
        let miss = n.try_borrow_mut().map_or(true, |mut l| l.known_miss(a, b));
        if !miss {
            work(n);
        }
    });
}
