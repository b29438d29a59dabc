//! Held-allocation lines found by the calling thread's *thread pointer* (the address the
//! platform's thread register holds: `fs:0` on x86-64 Linux, `tpidr_el0` on aarch64 Linux),
//! so that an allocation or a free reaches its thread's held allocation ([`crate::held`])
//! without a thread-local access.
//!
//! A thread-local access from a shared library costs, after the driver's own work, a chain
//! of dependent cache lines: the TLS descriptor in the global offset table, the loader's
//! descriptor function, the thread's state, then the shard its pointer names
//! (`scripts/bench/lines-touched.sh`, docs/performance.md "Cache lines per call"). Here the chain is the
//! thread pointer (the thread control block's first line, which the C library's
//! stack-protector reads keep warm) and then the line itself: [`Lines::own`] hashes the
//! thread pointer to one line of a static table and compares the line's owner tag.
//!
//! Each [`Entry`] is a [`Held`] plus two words: the owner (the thread pointer of the thread
//! that claimed it, 0 for none) and that thread's current context, mirrored from its thread
//! state by [`crate::work::set_current_context`]. Its owner writes the entry with plain
//! loads and stores of relaxed atomics, as it writes its shard's held line; other threads
//! only take a held address from it or read it (the protocol of [`crate::held`]).
//!
//! Who owns an entry:
//!
//! * a thread *claims* the entry its thread pointer hashes to (a compare-and-swap of the
//!   owner from 0) on the slow path of its first allocation, once its thread state has
//!   armed the release at exit; another thread owning the entry (a collision) leaves the
//!   thread on its shard's held line, as before;
//! * the owner *releases* it when its thread-local storage is torn down (the owner tag back
//!   to 0; the held allocation and the counts stay, as a shard's do when its thread exits,
//!   and the next owner publishes what it finds);
//! * a forked child uses none: it forwards only, tracking nothing (the shim's fork handler).
//!
//! A thread pointer is unique among the threads alive in a process (it is the address of
//! the thread's control block), and a thread that owns an entry releases it before it is
//! gone, so an owner tag names at most one living thread. The table is never freed: its
//! lines stay where readers may look.

use crate::held::{Allocation, Held};
use crate::live::LiveTable;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Entries in the table (a power of two). 128 KiB of zeroed memory; only the pages of
/// claimed entries are ever touched.
pub const ENTRIES: usize = 1024;

/// One thread's held-allocation line (see the module documentation). 128 bytes apart, so
/// that two owners never share a line pair (Intel's spatial prefetcher fetches pairs).
#[repr(C, align(128))]
pub struct Entry {
    /// The owner's thread pointer, 0 for none.
    owner: AtomicUsize,
    /// The owner's current context, as the shim's context hooks last set it.
    ctx: AtomicU64,
    /// The owner's latest allocation and its counts.
    held: Held,
}

impl Entry {
    const fn new() -> Entry {
        Entry {
            owner: AtomicUsize::new(0),
            ctx: AtomicU64::new(0),
            held: Held::new(),
        }
    }

    /// The held allocation and counts on this line.
    #[inline(always)]
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// Owner thread only: holds the allocation `addr` of `bytes` in the owner's current
    /// context, counted when `count` ([`Held::count_and_hold_then`]).
    #[inline(always)]
    pub fn hold_then<const N: usize, F: FnOnce(Allocation)>(
        &self,
        table: &LiveTable<N>,
        addr: u64,
        bytes: u64,
        count: bool,
        file: F,
    ) {
        let ctx = self.ctx.load(Ordering::Relaxed);
        self.held
            .count_and_hold_then(table, addr, bytes, ctx, count, file);
    }

    /// Owner thread only: its current context is now `ctx`.
    #[inline]
    pub fn set_context(&self, ctx: u64) {
        self.ctx.store(ctx, Ordering::Relaxed);
    }
}

/// The table of entries, with two bitmaps: the entries ever claimed (their counts are
/// summed over all of them) and the entries that may hold an allocation (owned, or given up
/// while holding one), which the readers of held allocations visit. A process whose threads
/// come and go with new thread pointers claims many entries over its life, while the
/// entries a free on another thread looks through stay about as many as its threads alive.
pub struct Lines {
    entries: [Entry; ENTRIES],
    claimed: [AtomicU64; ENTRIES / 64],
    holding: [AtomicU64; ENTRIES / 64],
}

impl Default for Lines {
    fn default() -> Self {
        Self::new()
    }
}

/// The entry `tp` hashes to (Fibonacci hashing: thread pointers of threads made one after
/// another differ by a stack's size, in their high bits).
#[inline(always)]
pub(crate) fn home(tp: usize) -> usize {
    ((tp as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - ENTRIES.trailing_zeros())) as usize
}

impl Lines {
    /// No entry claimed (usable in a `static`).
    pub const fn new() -> Lines {
        Lines {
            entries: [const { Entry::new() }; ENTRIES],
            claimed: [const { AtomicU64::new(0) }; ENTRIES / 64],
            holding: [const { AtomicU64::new(0) }; ENTRIES / 64],
        }
    }

    /// The entry the thread with thread pointer `tp` owns, if it claimed one. `tp` 0 (a
    /// platform without a thread pointer the shim reads) owns none. One load of the entry's
    /// line: the hot path of every allocation and free.
    #[inline(always)]
    pub fn own(&self, tp: usize) -> Option<&Entry> {
        let e = &self.entries[home(tp)];
        (tp != 0 && e.owner.load(Ordering::Relaxed) == tp).then_some(e)
    }

    /// Claims the entry `tp` hashes to for the calling thread, whose current context is
    /// `ctx`: its index, or `None` when another thread owns it (or `tp` is 0). The caller
    /// releases it ([`Lines::release`]) before its thread is gone.
    #[cold]
    pub fn claim(&self, tp: usize, ctx: u64) -> Option<usize> {
        if tp == 0 {
            return None;
        }
        let i = home(tp);
        let e = &self.entries[i];
        // Acquire: the previous owner's writes to the line are seen by this one's plain
        // loads and stores.
        e.owner
            .compare_exchange(0, tp, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        e.set_context(ctx);
        // Release: a reader that sees a bit sees the claim (and, through the program's own
        // ordering, any allocation the owner then holds and hands to another thread).
        self.claimed[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
        self.holding[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
        Some(i)
    }

    /// The entry at index `i` (as [`Lines::claim`] gave it).
    pub fn at(&self, i: usize) -> &Entry {
        &self.entries[i]
    }

    /// Owner thread only: gives entry `i` up (its thread is exiting). The held allocation
    /// and the counts stay on the line; an entry that holds nothing leaves the readers'
    /// bitmap first, while its owner still keeps any other thread from claiming it (a claim
    /// after this sets the bit again).
    pub fn release(&self, i: usize) {
        if self.entries[i].held.peek().is_none() {
            self.holding[i / 64].fetch_and(!(1 << (i % 64)), Ordering::Relaxed);
        }
        // Release: the next owner's claim sees this owner's writes.
        self.entries[i].owner.store(0, Ordering::Release);
    }

    /// Whether entry `i` was ever claimed (for tests that need one nobody claimed).
    #[cfg(test)]
    pub(crate) fn ever_claimed(&self, i: usize) -> bool {
        self.claimed[i / 64].load(Ordering::Acquire) & (1 << (i % 64)) != 0
    }

    /// Calls `f` on every entry ever claimed, in index order (the counts' readers).
    pub fn for_each(&self, f: impl FnMut(&Entry)) {
        Self::visit(&self.entries, &self.claimed, f)
    }

    /// Calls `f` on every entry that may hold an allocation (owned, or given up while
    /// holding one), in index order: the readers of held allocations.
    pub fn for_each_holding(&self, f: impl FnMut(&Entry)) {
        Self::visit(&self.entries, &self.holding, f)
    }

    fn visit(entries: &[Entry; ENTRIES], map: &[AtomicU64], mut f: impl FnMut(&Entry)) {
        for (w, bits) in map.iter().enumerate() {
            let mut b = bits.load(Ordering::Acquire);
            while b != 0 {
                let i = w * 64 + b.trailing_zeros() as usize;
                f(&entries[i]);
                b &= b - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pointer other than `tp` that hashes to the same entry.
    fn collider(tp: usize) -> usize {
        (1..)
            .map(|k| tp + k * 0x1000)
            .find(|&t| home(t) == home(tp))
            .unwrap()
    }

    #[test]
    fn an_entry_is_found_by_its_owner_only() {
        let l = Box::new(Lines::new());
        let tp = 0x7f00_1234_5000;
        assert!(l.own(tp).is_none(), "unclaimed");
        let i = l.claim(tp, 7).unwrap();
        assert_eq!(i, home(tp));
        assert!(std::ptr::eq(l.own(tp).unwrap(), l.at(i)));
        assert!(l.own(tp + 0x800_000).is_none());
        assert!(l.own(0).is_none(), "thread pointer 0 owns nothing");
        assert_eq!(l.claim(0, 0), None);
        let t: LiveTable<64> = LiveTable::new();
        l.own(tp).unwrap().hold_then(&t, 0x1000, 512, true, |_| {});
        assert_eq!(
            l.at(i).held().peek(),
            Some(Allocation {
                addr: 0x1000,
                bytes: 512,
                ctx: 7,
                holder: 0
            }),
            "held under the context the claim mirrored"
        );
        l.at(i).set_context(9);
        l.own(tp).unwrap().hold_then(&t, 0x2000, 64, true, |_| {});
        assert_eq!(l.at(i).held().peek().map(|a| a.ctx), Some(9));
        assert_eq!(l.at(i).held().counted(), [2, 0]);
    }

    #[test]
    fn a_collision_claims_nothing_until_the_owner_releases() {
        let l = Box::new(Lines::new());
        let a = 0x7f00_0000_0000;
        let b = collider(a);
        let i = l.claim(a, 1).unwrap();
        assert_eq!(l.claim(b, 2), None, "owned by a");
        assert!(l.own(b).is_none());
        let t: LiveTable<64> = LiveTable::new();
        l.at(i).hold_then(&t, 0x1000, 512, true, |_| {});
        l.release(i);
        assert!(l.own(a).is_none(), "released");
        assert_eq!(l.claim(b, 2), Some(i));
        let mut published = None;
        l.own(b)
            .unwrap()
            .hold_then(&t, 0x2000, 64, true, |p| published = Some(p));
        assert_eq!(
            published.map(|p| (p.addr, p.ctx)),
            Some((0x1000, 1)),
            "the next owner publishes what the last one held"
        );
        assert_eq!(l.at(i).held().counted(), [2, 0], "counts stay on the line");
    }

    #[test]
    fn readers_visit_the_claimed_entries() {
        let l = Box::new(Lines::new());
        let tps = [0x7f00_0000_0000usize, 0x7f00_0080_1000, 0x7f00_0100_2000];
        let mut idx: Vec<usize> = tps.iter().map(|&t| l.claim(t, 0).unwrap()).collect();
        let mut seen = Vec::new();
        l.for_each(|e| seen.push(e as *const Entry as usize));
        idx.sort_unstable();
        let want: Vec<usize> = idx
            .iter()
            .map(|&i| l.at(i) as *const Entry as usize)
            .collect();
        assert_eq!(seen, want);
        let t: LiveTable<64> = LiveTable::new();
        l.at(idx[0]).hold_then(&t, 0x1000, 64, true, |_| {});
        for &i in &idx {
            l.release(i);
        }
        let mut holding = Vec::new();
        l.for_each_holding(|e| holding.push(e as *const Entry as usize));
        assert_eq!(
            holding,
            vec![l.at(idx[0]) as *const Entry as usize],
            "given up holding nothing: not visited for allocations"
        );
        let mut counted = 0;
        l.for_each(|_| counted += 1);
        assert_eq!(counted, 3, "still visited for counts");
        l.claim(tps[2], 0).unwrap();
        let mut n = 0;
        l.for_each_holding(|_| n += 1);
        assert_eq!(n, 2, "claimed again");
    }

    #[test]
    fn entries_are_two_lines_apart() {
        assert_eq!(std::mem::size_of::<Entry>(), 128);
        assert!(std::mem::offset_of!(Entry, held) + std::mem::size_of::<Held>() <= 64);
    }
}
