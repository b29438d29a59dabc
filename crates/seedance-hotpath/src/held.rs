//! A thread's latest device allocation, held in the thread's own shard until the thread
//! allocates again, so that an allocation freed before that (an allocate/free loop, a
//! scratch buffer) never reaches the shared live-allocation table ([`crate::live`]) or the
//! allocation ring ([`crate::owners`]): on the H200, any work between one allocation call
//! and the next costs the driver's serialised allocator several times its own length in
//! throughput from 8 threads on (docs/performance.md, "Cost in threads").
//!
//! [`Held`] is five words (40 bytes): the address (the claim), its size, the context it was
//! made in and two counts. Its home is one line, either a shard's or one found by thread
//! pointer ([`crate::held_lines`]). Who may write it:
//!
//! * the owning thread, which holds a new allocation ([`Held::hold`]) and releases its own
//!   held allocation on a free ([`Held::release_own`]): plain loads and stores;
//! * any thread, which takes a held address it frees, or one that died with its context
//!   ([`Held::take`]): a compare-and-swap from the address to 0.
//!
//! The claim decides who owns an allocation's fate. The owner *publishes* a held
//! allocation (when it allocates again) by inserting it into the table first and then
//! swapping the claim to 0: if that fails, another thread took it (a free or a context's
//! end) and the owner removes its insert again. A free on another thread removes the
//! address from the table; when the table had it not, it takes the claim wherever it is
//! held; when no shard held it, it removes from the table once more, which then finds an
//! insert whose claim was published before the take looked (the claim's release/acquire
//! order). So an allocation freed on any thread is never left in the table as live.
//!
//! The line also counts its owner's successful allocation and free calls of the functions
//! whose hooks ask for that ([`Held::count`]: `cuMemAlloc_v2` and `cuMemFree_v2` in the
//! shim), instead of in the call counters ([`crate::counters`]): the line an allocation or
//! free writes anyway, so their success path writes one line fewer. The counts stay with
//! the shard when its thread exits, as the call counters do.
//!
//! Readers that only look ([`Held::peek`]: explanations, the exit report) read the three
//! words and check the claim again; an address handed out, published, freed and handed out
//! again between their two reads can pair with its former size (a size off in one
//! explanation, never a fault invented).

use crate::live::LiveTable;
use std::sync::atomic::{AtomicU64, Ordering};

/// One thread's held allocation (see the module documentation). `addr` 0: none. Not
/// aligned itself: its holder puts it on a line of its own.
pub struct Held {
    addr: AtomicU64,
    bytes: AtomicU64,
    ctx: AtomicU64,
    /// Calls counted on this line, by [`Counted`] (only the owner writes them).
    counts: [AtomicU64; 2],
}

/// What [`Held::count`] counts: the index of its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A successful allocation call.
    Alloc = 0,
    /// A successful free call.
    Free = 1,
}

/// A held allocation as a reader saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// The device address.
    pub addr: u64,
    /// Size in bytes, as the allocation call asked.
    pub bytes: u64,
    /// The context current on the allocating thread, as the shim's context hooks last saw
    /// it; 0 for none or unknown.
    pub ctx: u64,
    /// The library that asked for it (the shim's index, 0 for unknown).
    pub holder: u8,
}

impl Allocation {
    /// The allocation at `addr` whose size word ([`crate::live::size_word`]) is `word`.
    #[inline(always)]
    pub fn from_word(addr: u64, word: u64, ctx: u64) -> Allocation {
        let (bytes, holder) = crate::live::split_word(word);
        Allocation {
            addr,
            bytes,
            ctx,
            holder,
        }
    }

    /// Its size word.
    #[inline(always)]
    pub fn word(&self) -> u64 {
        crate::live::size_word(self.bytes, self.holder)
    }
}

impl From<Allocation> for crate::live::Entry {
    /// The live-table entry of a held allocation (its device is not known at insert time).
    fn from(a: Allocation) -> Self {
        crate::live::Entry {
            key: a.addr,
            bytes: a.bytes,
            device: None,
            holder: a.holder,
        }
    }
}

impl Default for Held {
    fn default() -> Self {
        Self::new()
    }
}

impl Held {
    /// Nothing held.
    pub const fn new() -> Held {
        Held {
            addr: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            ctx: AtomicU64::new(0),
            counts: [const { AtomicU64::new(0) }; 2],
        }
    }

    /// Owner thread only: counts one call of kind `c` (a plain load and store: the owner is
    /// the only writer).
    #[inline(always)]
    pub fn count(&self, c: Counted) {
        let a = &self.counts[c as usize];
        a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// Any thread: the calls counted so far, `[allocations, frees]` (exact once the owner
    /// is quiet).
    pub fn counted(&self) -> [u64; 2] {
        [
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        ]
    }

    /// Owner thread only: holds the allocation `addr` of `bytes` (a size word,
    /// [`crate::live::size_word`]), made in `ctx`. The one
    /// held before, if no other thread took it and it is not `addr` itself, is published
    /// into `table` first and returned (the caller files it by context). Address 0 or a
    /// size of 0 is not held.
    pub fn hold<const N: usize>(
        &self,
        table: &LiveTable<N>,
        addr: u64,
        bytes: u64,
        ctx: u64,
    ) -> Option<Allocation> {
        let mut published = None;
        self.hold_then(table, addr, bytes, ctx, |a| published = Some(a));
        published
    }

    /// [`Held::hold`], with the published allocation handed to `file` on the (cold) path
    /// that publishes it, so that a caller inlining this never keeps an [`Allocation`] in
    /// its own stack frame.
    #[inline(always)]
    pub fn hold_then<const N: usize, F: FnOnce(Allocation)>(
        &self,
        table: &LiveTable<N>,
        addr: u64,
        bytes: u64,
        ctx: u64,
        file: F,
    ) {
        let old = self.addr.load(Ordering::Relaxed);
        // The driver handing out the held address again means the held allocation is gone
        // (released with its context): replaced, not published.
        if old != 0 && old != addr {
            self.publish_then(table, old, file);
        }
        if addr != 0 && bytes != 0 {
            self.bytes.store(bytes, Ordering::Relaxed);
            self.ctx.store(ctx, Ordering::Relaxed);
            // Release: a reader that sees the address sees its size and context.
            self.addr.store(addr, Ordering::Release);
        }
    }

    /// Owner thread only: [`Held::count`] of the allocation when `count`, then
    /// [`Held::hold_then`] (what every home of a held line does on an allocation).
    #[inline(always)]
    pub fn count_and_hold_then<const N: usize, F: FnOnce(Allocation)>(
        &self,
        table: &LiveTable<N>,
        addr: u64,
        bytes: u64,
        ctx: u64,
        count: bool,
        file: F,
    ) {
        if count {
            self.count(Counted::Alloc);
        }
        self.hold_then(table, addr, bytes, ctx, file);
    }

    /// Owner thread: [`Held::publish`], then `file` with what it published.
    #[cold]
    #[inline(never)]
    fn publish_then<const N: usize, F: FnOnce(Allocation)>(
        &self,
        table: &LiveTable<N>,
        old: u64,
        file: F,
    ) {
        if let Some(a) = self.publish(table, old) {
            file(a);
        }
    }

    /// Owner thread: moves the held `old` into `table` (see the module documentation).
    #[cold]
    #[inline(never)]
    fn publish<const N: usize>(&self, table: &LiveTable<N>, old: u64) -> Option<Allocation> {
        // Only the owner writes the size and context, so its own reads are exact.
        let word = self.bytes.load(Ordering::Relaxed);
        let a = Allocation::from_word(old, word, self.ctx.load(Ordering::Relaxed));
        let inserted = table.insert(old, word, None);
        match self
            .addr
            .compare_exchange(old, 0, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => Some(a),
            Err(_) => {
                // Taken by a free or a context's end on another thread: not live.
                if inserted {
                    table.forget(old);
                }
                None
            }
        }
    }

    /// Owner thread only: a free of `addr`. `true` when it was the held allocation, which
    /// is then forgotten (it never reached the table); `false` otherwise.
    #[inline(always)]
    pub fn release_own(&self, addr: u64) -> bool {
        if addr != 0 && self.addr.load(Ordering::Relaxed) == addr {
            // A plain store: another thread may only have set it to 0 meanwhile (its own
            // free or a context's end), and 0 is what this writes.
            self.addr.store(0, Ordering::Release);
            true
        } else {
            false
        }
    }

    /// Any thread: takes `addr` if this shard holds it (a free, or the allocation died
    /// with its context). `true` when it did.
    #[inline]
    pub fn take(&self, addr: u64) -> bool {
        addr != 0
            && self.addr.load(Ordering::Relaxed) == addr
            && self
                .addr
                .compare_exchange(addr, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Any thread: the held allocation, if any (see the module documentation for what a
    /// race can pair).
    pub fn peek(&self) -> Option<Allocation> {
        let addr = self.addr.load(Ordering::Acquire);
        if addr == 0 {
            return None;
        }
        let a = Allocation::from_word(
            addr,
            self.bytes.load(Ordering::Relaxed),
            self.ctx.load(Ordering::Relaxed),
        );
        std::sync::atomic::fence(Ordering::Acquire);
        (self.addr.load(Ordering::Relaxed) == addr).then_some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_allocation_is_published_by_the_next_one() {
        let t: LiveTable<64> = LiveTable::new();
        let h = Held::new();
        assert_eq!(h.hold(&t, 0x1000, 512, 7), None);
        assert_eq!(t.entries(), vec![], "held, not in the table");
        assert_eq!(
            h.peek(),
            Some(Allocation {
                addr: 0x1000,
                bytes: 512,
                ctx: 7,
                holder: 0
            })
        );
        assert_eq!(
            h.hold(&t, 0x2000, 100, 8),
            Some(Allocation {
                addr: 0x1000,
                bytes: 512,
                ctx: 7,
                holder: 0
            })
        );
        assert_eq!(t.get(0x1000).map(|e| e.bytes), Some(512));
        assert_eq!(t.get(0x2000), None);
        assert!(h.release_own(0x2000));
        assert!(!h.release_own(0x2000));
        assert_eq!(h.peek(), None);
        assert_eq!(
            h.hold(&t, 0x3000, 1, 0),
            None,
            "a freed one is not published"
        );
        assert_eq!(t.entries().len(), 1);
    }

    #[test]
    fn the_held_address_handed_out_again_replaces_it() {
        let t: LiveTable<64> = LiveTable::new();
        let h = Held::new();
        h.hold(&t, 0x1000, 512, 7);
        assert_eq!(h.hold(&t, 0x1000, 4096, 8), None);
        assert_eq!(t.entries(), vec![], "no stale entry in the table");
        assert_eq!(h.peek().map(|a| (a.bytes, a.ctx)), Some((4096, 8)));
        assert!(h.release_own(0x1000));
        assert_eq!(t.get(0x1000), None);
    }

    #[test]
    fn a_taken_allocation_is_not_published() {
        let t: LiveTable<64> = LiveTable::new();
        let h = Held::new();
        h.hold(&t, 0x1000, 512, 0);
        assert!(!h.take(0x2000));
        assert!(h.take(0x1000));
        assert!(!h.take(0x1000));
        assert_eq!(h.hold(&t, 0x2000, 512, 0), None);
        assert_eq!(t.get(0x1000), None);
        assert_eq!(h.hold(&t, 0, 512, 0).map(|a| a.addr), Some(0x2000));
        assert_eq!(h.peek(), None, "address 0 is not held");
    }

    /// Allocations made on one thread and freed on others, while their owner keeps
    /// allocating: each free runs the whole protocol a free on another thread runs (table,
    /// then every claim, then the table again), and no freed address is left live.
    #[test]
    fn frees_on_other_threads_leave_nothing_live() {
        static T: LiveTable<8192> = LiveTable::new();
        static H: Held = Held::new();
        fn free_elsewhere(addr: u64) {
            if T.remove(addr).is_none() && !H.take(addr) {
                T.forget(addr);
            }
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(64);
        let freer = std::thread::spawn(move || {
            let mut n = 0u64;
            while let Ok(a) = rx.recv() {
                free_elsewhere(a);
                n += 1;
            }
            n
        });
        let mut kept = Vec::new();
        for i in 1..=100_000u64 {
            let addr = i << 9;
            H.hold(&T, addr, 512, 0);
            if i % 3 == 0 {
                kept.push(addr);
            } else {
                tx.send(addr).unwrap();
            }
            // Keep the table from filling with kept allocations.
            if kept.len() > 1000 {
                for a in kept.drain(..) {
                    free_elsewhere(a);
                }
            }
        }
        drop(tx);
        assert_eq!(freer.join().unwrap(), 100_000 - 33_333);
        let mut live: Vec<u64> = T.entries().iter().map(|e| e.key).collect();
        live.extend(H.peek().map(|a| a.addr));
        live.sort_unstable();
        let mut want = kept;
        want.sort_unstable();
        assert_eq!(live, want);
        assert_eq!(T.untracked(), 0);
    }
}
