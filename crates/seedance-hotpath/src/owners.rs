//! Which context each device allocation was made in, so that a context's end costs what
//! the context owned (docs/performance.md, "Context create and destroy").
//!
//! When a context ends the driver releases its device allocations with it; the shim must
//! find them (to forget them as live and to recognise a later free of one). Asking the
//! driver about every live allocation of the process, or walking the whole live-pointer
//! table ([`crate::live`]), made every destroy cost what the process held in all contexts.
//!
//! Instead each allocation is filed under the context that was current on its thread when
//! it was made, as the shim's context hooks last saw it ([`crate::work::current_context`]):
//!
//! * an allocation is first held in its thread's shard ([`crate::held`]); when the thread
//!   allocates again before freeing it, it enters the live table and the thread appends
//!   `(context, address)` to a ring in its own shard ([`AllocRing`]: single writer, no
//!   lock, no allocation, no system call);
//! * at a context's end every ring is drained, under one lock, into an index of addresses
//!   per context ([`Index`]); the addresses filed under the ended context (and under "no
//!   context known", 0), and the allocations still held that were made in it, are the only
//!   candidates the shim then checks with the driver;
//! * a ring that fills is drained by its own thread, under the same lock, alone
//!   ([`crate::work::file_own_ring`]): threads whose rings fill together each read 8 KiB of
//!   their own, instead of one of them reading every thread's while the others wait.
//!
//! Frees are not recorded: an entry whose address is no longer live when its ring is
//! drained is dropped then (an allocation freed before its thread's next one never reaches
//! the ring; one freed newest-first cancels its entry: [`AllocRing::cancel_last`]), and a
//! filed address that is freed later is dropped when its context's list has doubled since
//! it was last compacted, so each list stays within
//! twice its context's live allocations (at least [`COMPACT_MIN`]), and the work of
//! compacting is paid once per entry. An address freed and handed out again in another
//! context can sit in both lists; the driver's answer at the end decides.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Entries per thread's ring (a power of two): 16 bytes each, 8 KiB per thread.
pub const RING: usize = 512;
/// How long a drainer waits for the owner's reclaim of a ring to end before it leaves that
/// ring for a later drain (a reclaim reads at most [`RING`] entries, microseconds).
pub const RECLAIM_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
/// A context's list is first compacted when it reaches this length.
pub const COMPACT_MIN: usize = 256;

struct Entry {
    ctx: AtomicU64,
    addr: AtomicU64,
}

/// One thread's recent allocations, `(context, address)`, waiting to be filed. One writer
/// (the owning thread) and one reader at a time (the drainer, under the index's lock).
pub struct AllocRing {
    head: AtomicU64,
    tail: AtomicU64,
    /// Set by the owner while it reclaims cancelled entries ([`AllocRing::reclaim`]).
    reclaiming: AtomicBool,
    /// Set by a drainer while it reads the ring.
    draining: AtomicBool,
    entries: [Entry; RING],
}

impl Default for AllocRing {
    fn default() -> Self {
        Self::new()
    }
}

impl AllocRing {
    /// An empty ring.
    pub const fn new() -> AllocRing {
        AllocRing {
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            reclaiming: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            entries: [const {
                Entry {
                    ctx: AtomicU64::new(0),
                    addr: AtomicU64::new(0),
                }
            }; RING],
        }
    }

    /// Appends `(ctx, addr)`; `false` when the ring is full (the caller drains it and
    /// retries). Owner thread only: two loads, two stores and a release store.
    #[inline(always)]
    pub fn push(&self, ctx: u64, addr: u64) -> bool {
        let h = self.head.load(Ordering::Relaxed);
        if h.wrapping_sub(self.tail.load(Ordering::Acquire)) >= RING as u64 {
            return false;
        }
        let e = &self.entries[(h as usize) & (RING - 1)];
        e.ctx.store(ctx, Ordering::Relaxed);
        e.addr.store(addr, Ordering::Relaxed);
        self.head.store(h.wrapping_add(1), Ordering::Release);
        true
    }

    /// Entries pushed since the ring was made.
    pub fn pushed(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }

    /// Forgets the most recent entry if it is `addr` (a free right after its allocation on
    /// the same thread, the pattern of an allocate/free loop): its address becomes 0 and
    /// the drainer skips it. Owner thread only; a drainer reading the entry at the same
    /// time files it or not, either is correct.
    #[inline(always)]
    pub fn cancel_last(&self, addr: u64) {
        let h = self.head.load(Ordering::Relaxed);
        let e = &self.entries[(h.wrapping_sub(1) as usize) & (RING - 1)];
        if e.addr.load(Ordering::Relaxed) == addr {
            e.addr.store(0, Ordering::Relaxed);
        }
    }

    /// Owner thread only, when [`Self::push`] found the ring full: if every waiting entry
    /// was cancelled (an allocate/free loop: each free cancels its allocation's entry),
    /// frees their places without a lock and returns `true`. `false` when some entry is
    /// still an allocation to file, or a drainer is reading the ring: the caller files the
    /// ring under the index's lock.
    ///
    /// The owner and a drainer exclude each other with two flags, each set (sequentially
    /// consistent) before the other's is read: at least one of them sees the other's, so
    /// `tail` has one writer at a time. Costs one read of the ring's 8 KiB, once per
    /// [`RING`] allocations.
    #[cold]
    #[inline(never)]
    pub fn reclaim(&self) -> bool {
        self.reclaiming.store(true, Ordering::SeqCst);
        let freed = !self.draining.load(Ordering::SeqCst) && {
            let t = self.tail.load(Ordering::Relaxed);
            let h = self.head.load(Ordering::Relaxed);
            let cancelled = (0..h.wrapping_sub(t)).all(|i| {
                let e = &self.entries[(t.wrapping_add(i) as usize) & (RING - 1)];
                e.addr.load(Ordering::Relaxed) == 0
            });
            if cancelled {
                self.tail.store(h, Ordering::Release);
            }
            cancelled
        };
        self.reclaiming.store(false, Ordering::Release);
        freed
    }

    /// Hands every waiting entry to `f`, oldest first, and frees their places. One drainer
    /// at a time (the caller holds the index's lock); waits while the owner reclaims
    /// ([`Self::reclaim`]: a read of at most [`RING`] entries). A reclaim that never ends
    /// (its thread was stopped in it, or did not survive a `fork`) is waited for
    /// [`RECLAIM_WAIT`], then the ring is left as it is: its entries wait for a later
    /// drain (a fault it may miss, never a hang).
    fn drain(&self, mut f: impl FnMut(u64, u64)) {
        self.draining.store(true, Ordering::SeqCst);
        let mut since: Option<std::time::Instant> = None;
        let mut spins = 0u32;
        while self.reclaiming.load(Ordering::SeqCst) {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                let t0 = *since.get_or_insert_with(std::time::Instant::now);
                if t0.elapsed() >= RECLAIM_WAIT {
                    self.draining.store(false, Ordering::Release);
                    return;
                }
            }
            std::hint::spin_loop();
        }
        let t = self.tail.load(Ordering::Acquire);
        let h = self.head.load(Ordering::Acquire);
        let mut i = t;
        while i != h {
            let e = &self.entries[(i as usize) & (RING - 1)];
            f(
                e.ctx.load(Ordering::Relaxed),
                e.addr.load(Ordering::Relaxed),
            );
            i = i.wrapping_add(1);
        }
        self.tail.store(h, Ordering::Release);
        self.draining.store(false, Ordering::Release);
    }
}

#[derive(Debug, Default)]
struct List {
    addrs: Vec<u64>,
    compact_at: usize,
}

/// Addresses per context (see the module documentation). Plain data; the shim keeps one
/// behind a lock.
#[derive(Debug, Default)]
pub struct Index {
    by_ctx: HashMap<u64, List>,
}

impl Index {
    /// An empty index.
    pub fn new() -> Index {
        Index::default()
    }

    /// Files `addr` under `ctx`; when the list has doubled since its last compaction, drops
    /// the addresses `live` says are no longer live.
    pub fn file(&mut self, ctx: u64, addr: u64, live: &dyn Fn(u64) -> bool) {
        let l = self.by_ctx.entry(ctx).or_default();
        l.addrs.push(addr);
        if l.addrs.len() >= l.compact_at.max(COMPACT_MIN) {
            l.addrs.retain(|&a| live(a));
            l.compact_at = 2 * l.addrs.len();
        }
    }

    /// Files every entry waiting in `rings` whose address `live` says is still live (one
    /// freed since is dropped here, before it costs a place in a list).
    pub fn drain<'a>(
        &mut self,
        rings: impl IntoIterator<Item = &'a AllocRing>,
        live: &dyn Fn(u64) -> bool,
    ) {
        let mut batch: Vec<(u64, u64)> = Vec::new();
        for r in rings {
            r.drain(|ctx, addr| {
                if addr != 0 && live(addr) {
                    batch.push((ctx, addr));
                }
            });
        }
        // One look-up per run of entries of the same context.
        let mut i = 0;
        while i < batch.len() {
            let ctx = batch[i].0;
            let mut j = i;
            while j < batch.len() && batch[j].0 == ctx {
                j += 1;
            }
            let l = self.by_ctx.entry(ctx).or_default();
            l.addrs.extend(batch[i..j].iter().map(|&(_, a)| a));
            if l.addrs.len() >= l.compact_at.max(COMPACT_MIN) {
                l.addrs.retain(|&a| live(a));
                l.compact_at = 2 * l.addrs.len();
            }
            i = j;
        }
    }

    /// Removes and returns the addresses filed under `ctx`, sorted, each once.
    pub fn take(&mut self, ctx: u64) -> Vec<u64> {
        let mut v = self
            .by_ctx
            .remove(&ctx)
            .map(|l| l.addrs)
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Addresses filed, all contexts together (duplicates and not yet compacted entries
    /// included).
    pub fn len(&self) -> usize {
        self.by_ctx.values().map(|l| l.addrs.len()).sum()
    }

    /// Whether nothing is filed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ring_fills_drains_and_wraps() {
        let r = Box::new(AllocRing::new());
        let mut index = Index::new();
        let all = |_: u64| true;
        for round in 0..3u64 {
            for i in 0..RING as u64 {
                assert!(r.push(0x100 + round, (round << 32) | (i + 1)));
            }
            assert!(!r.push(0x100, 1), "a full ring refuses");
            index.drain([&*r], &all);
            assert!(r.push(0x100 + round, (round << 32) | 0xffff));
            index.drain([&*r], &all);
        }
        for round in 0..3u64 {
            let got = index.take(0x100 + round);
            assert_eq!(got.len(), RING + 1);
            assert!(got.iter().all(|a| a >> 32 == round));
        }
        assert!(index.is_empty());
    }

    #[test]
    fn take_returns_only_that_context_sorted_once() {
        let mut index = Index::new();
        let all = |_: u64| true;
        index.file(0xa, 0x30, &all);
        index.file(0xb, 0x20, &all);
        index.file(0xa, 0x10, &all);
        index.file(0xa, 0x30, &all);
        assert_eq!(index.take(0xa), [0x10, 0x30]);
        assert_eq!(index.take(0xa), Vec::<u64>::new());
        assert_eq!(index.take(0xb), [0x20]);
    }

    /// An alloc/free loop in a long-lived context keeps its list within twice what is live
    /// (at least COMPACT_MIN), and what is live is never dropped.
    #[test]
    fn lists_stay_bounded_by_what_is_live() {
        let mut index = Index::new();
        let mut live: HashSet<u64> = HashSet::new();
        for i in 1..=100_000u64 {
            live.insert(i);
            if i % 10 != 0 {
                live.remove(&(i - 1));
            }
            let l = live.clone();
            index.file(0xc, i, &move |a| l.contains(&a));
            assert!(index.len() <= (2 * live.len()).max(COMPACT_MIN) + 1);
            if i % 20_000 == 0 {
                let got: HashSet<u64> = index.by_ctx[&0xc].addrs.iter().copied().collect();
                assert!(live.is_subset(&got));
            }
        }
    }

    #[test]
    fn a_full_ring_of_cancelled_entries_is_reclaimed_and_one_live_entry_keeps_it() {
        let r = Box::new(AllocRing::new());
        for i in 1..=RING as u64 {
            assert!(r.push(0x100, i << 9));
            r.cancel_last(i << 9);
        }
        assert!(!r.push(0x100, 1 << 40), "full");
        assert!(r.reclaim(), "every entry was cancelled");
        assert!(r.push(0x100, 1 << 40), "room again");
        for i in 1..RING as u64 {
            assert!(r.push(0x100, (1 << 40) + (i << 9)));
            r.cancel_last((1 << 40) + (i << 9));
        }
        // The first entry (1 << 40) was never freed: the ring keeps it for the index.
        assert!(!r.reclaim());
        let mut index = Index::new();
        index.drain([&*r], &|_| true);
        assert_eq!(index.take(0x100), [1 << 40]);
    }

    /// The owner reclaiming and a drainer reading the same ring at once: every allocation
    /// that was not cancelled is filed exactly once, and no entry twice (a cancelled one
    /// may be filed when the drainer read it before its free: the index drops it later).
    #[test]
    fn reclaim_and_drain_race_without_losing_or_repeating_an_entry() {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        let r: &'static AllocRing = Box::leak(Box::new(AllocRing::new()));
        let index = Arc::new(Mutex::new(Index::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let drainer = {
            let (index, stop) = (index.clone(), stop.clone());
            std::thread::spawn(move || {
                let all = |_: u64| true;
                while !stop.load(Ordering::Relaxed) {
                    index.lock().unwrap().drain([r], &all);
                    std::thread::yield_now();
                }
            })
        };
        let mut kept = Vec::new();
        for i in 1..=200_000u64 {
            let addr = i << 9;
            while !(r.push(0x100, addr) || (r.reclaim() && r.push(0x100, addr))) {
                index.lock().unwrap().drain([r], &|_| true);
            }
            if i % 97 == 0 {
                kept.push(addr);
            } else {
                r.cancel_last(addr);
            }
        }
        stop.store(true, Ordering::Relaxed);
        drainer.join().unwrap();
        let mut index = index.lock().unwrap();
        index.drain([r], &|a| a != 0);
        let filed = index
            .by_ctx
            .remove(&0x100)
            .map(|l| l.addrs)
            .unwrap_or_default();
        let mut sorted = filed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), filed.len(), "an entry filed twice");
        let missing: Vec<u64> = kept
            .iter()
            .filter(|a| sorted.binary_search(a).is_err())
            .copied()
            .collect();
        assert_eq!(missing, Vec::<u64>::new(), "allocations lost");
        assert!(sorted.iter().all(|a| a % 512 == 0 && *a <= 200_000 << 9));
    }

    /// The owner and a drainer exclude each other: a reclaim while a drainer reads the ring
    /// frees nothing, and a drain waits while the owner reclaims.
    #[test]
    fn reclaim_and_drain_exclude_each_other() {
        let r: &'static AllocRing = Box::leak(Box::new(AllocRing::new()));
        for i in 1..=RING as u64 {
            assert!(r.push(0x100, i << 9));
            r.cancel_last(i << 9);
        }
        r.draining.store(true, Ordering::SeqCst);
        assert!(!r.reclaim(), "a drainer is reading the ring");
        assert!(!r.push(0x100, 1), "still full");
        r.draining.store(false, Ordering::SeqCst);

        r.reclaiming.store(true, Ordering::SeqCst);
        let drainer = std::thread::spawn(move || {
            let mut index = Index::new();
            index.drain([r], &|_| true);
            index.len()
        });
        // While the owner reclaims, the drain waits, then leaves the ring as it is.
        assert_eq!(drainer.join().unwrap(), 0, "nothing filed");
        assert!(!r.push(0x100, 1), "still full: the drain freed nothing");
        r.reclaiming.store(false, Ordering::SeqCst);
        Index::new().drain([r], &|_| true);
        assert!(r.push(0x100, 1), "the drain freed the ring");
    }

    /// A reclaim that never ends (its thread is gone: a `fork` child) leaves the ring to a
    /// later drain instead of hanging the drainer; its entries are still there after.
    #[test]
    fn a_reclaim_that_never_ends_does_not_hang_a_drain() {
        let r = Box::new(AllocRing::new());
        assert!(r.push(0x100, 0x7000));
        r.reclaiming.store(true, Ordering::SeqCst);
        let mut index = Index::new();
        index.drain([&*r], &|_| true);
        assert!(index.is_empty(), "nothing filed while the reclaim runs");
        assert!(!r.draining.load(Ordering::SeqCst));
        r.reclaiming.store(false, Ordering::SeqCst);
        index.drain([&*r], &|_| true);
        assert_eq!(index.take(0x100), [0x7000]);
    }
}
