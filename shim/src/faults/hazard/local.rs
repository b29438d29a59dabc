//! A thread's copy state between a copy's `pre` and `ok` hooks ([`Local`]): the accesses
//! kept for the `ok` hook, whether any were, and the gap between pinned ranges its last
//! miss fell in, reached in one thread-local access per hook (each access reads a TLS
//! descriptor from the GOT and the thread pointer, `.cargo/config.toml`).

use seedance_core::hazard::shared::{Held, LastClock, Ranges};
use seedance_core::hazard::Access;
use std::cell::RefCell;
use std::mem::ManuallyDrop;

/// The accesses of one copy: its host side, or both sides of a unified copy, each with the
/// pinned range it lies in (`None`: the thread's cache's last range, [`Ranges::last`]).
pub(super) type Sides = [Option<(Access, Option<Held>)>; 2];

/// What a thread keeps between a copy's `pre` and `ok` hooks (one thread-local access
/// per hook). In this order, after the `RefCell`'s flag and on [`LocalCell`]'s line: what a
/// copy outside every pinned range reads (the flag, `ranges`, `armed`) is one cache line
/// (checked by a test below).
#[repr(C)]
pub(super) struct Local {
    /// Its cache of the pinned-range snapshot, with the gap between ranges its last miss
    /// fell in: a copy from the same pageable buffer inside the ranges' bounding box passes
    /// without a look-up ([`Ranges::misses`]).
    pub(super) ranges: Option<Ranges>,
    /// Whether the last `pre` hook kept accesses in `next` for the `ok` hook (a copy
    /// that failed leaves them; the next copy's `pre` hook empties or disarms them).
    pub(super) armed: bool,
    /// The accesses of the copy this thread is making (a fixed pair: no allocation per
    /// copy).
    pub(super) next: Sides,
    /// The clock of the stream this thread's last copy was committed on, for its next
    /// event record on that stream ([`seedance_core::hazard::shared::Shared::event_recorded_after`]).
    pub(super) clock: LastClock,
}

/// The thread's [`Local`], aligned to a cache line.
#[repr(align(64))]
pub(super) struct LocalCell(pub(super) RefCell<Local>);

impl std::ops::Deref for LocalCell {
    type Target = RefCell<Local>;
    fn deref(&self) -> &RefCell<Local> {
        &self.0
    }
}

/// Empties the thread's [`Local`] when its local storage is torn down (what it holds are
/// reference counts: the range snapshot, a pending copy's range). Armed by [`arm_release`]
/// when the thread first caches the snapshot.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let _ = NEXT.try_with(|n| {
            if let Ok(mut l) = n.try_borrow_mut() {
                l.ranges = None;
                l.armed = false;
                l.next = [None, None];
                l.clock = LastClock::new();
            }
        });
    }
}

thread_local! {
    /// Without a destructor of its own (`ManuallyDrop`; [`Release`] empties it): a
    /// thread-local with one has a state word beside it that every access reads.
    pub(super) static NEXT: ManuallyDrop<LocalCell> = const {
        ManuallyDrop::new(LocalCell(RefCell::new(Local {
            ranges: None,
            armed: false,
            next: [None, None],
            clock: LastClock::new(),
        })))
    };
    static RELEASE: Release = const { Release };
}

/// Makes sure the thread's [`Local`] is emptied when it exits (the first access of
/// [`RELEASE`] registers its destructor). A thread that first caches the snapshot while its
/// local storage is being torn down keeps one reference to it.
#[cold]
pub(super) fn arm_release() {
    let _ = RELEASE.try_with(|_| ());
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

/// Runs `f` with the calling thread's [`LastClock`] (`None` while its copy state is in use
/// or its local storage is gone: the record then takes the locked path).
#[inline(always)]
pub(super) fn with_last_clock(f: impl FnOnce(Option<&LastClock>)) {
    let mut f = Some(f);
    let _ = NEXT.try_with(|n| {
        if let Some(f) = f.take() {
            f(n.try_borrow().ok().as_ref().map(|l| &l.clock));
        }
    });
    if let Some(f) = f {
        f(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy outside every pinned range reads the `RefCell`'s flag, `ranges` and `armed`:
    /// all on the first cache line of [`LocalCell`] (64-byte aligned).
    #[test]
    fn what_a_miss_reads_is_on_one_line() {
        let c = LocalCell(RefCell::new(Local {
            ranges: None,
            armed: false,
            next: [None, None],
            clock: LastClock::new(),
        }));
        let base = &c as *const LocalCell as usize;
        assert_eq!(base % 64, 0);
        let value = c.0.as_ptr() as usize - base;
        // The flag lies before the value (not after `next`, lines away).
        assert_eq!(value, std::mem::size_of::<isize>(), "RefCell's flag first");
        let ranges_end =
            value + std::mem::offset_of!(Local, ranges) + std::mem::size_of::<Option<Ranges>>();
        let armed_end = value + std::mem::offset_of!(Local, armed) + 1;
        assert!(
            ranges_end <= 64 && armed_end <= 64,
            "ranges end {ranges_end}, armed end {armed_end}"
        );
    }
}
