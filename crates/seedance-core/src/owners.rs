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
//! * on the success path the allocating thread appends `(context, address)` to a ring in
//!   its own shard ([`AllocRing`]: single writer, no lock, no allocation, no system call);
//! * at a context's end (and when a ring fills) the rings are drained, under one lock,
//!   into an index of addresses per context ([`Index`]); the addresses filed under the
//!   ended context (and under "no context known", 0) are the only candidates the shim then
//!   checks with the driver.
//!
//! Frees are not recorded: an entry whose address is no longer live when its ring is
//! drained is dropped then (an allocation freed soon after it was made costs a ring push
//! and one look-up in the live table), and a filed address that is freed later is dropped
//! when its context's list has doubled since it was last compacted, so each list stays within
//! twice its context's live allocations (at least [`COMPACT_MIN`]), and the work of
//! compacting is paid once per entry. An address freed and handed out again in another
//! context can sit in both lists; the driver's answer at the end decides.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries per thread's ring (a power of two): 16 bytes each, 8 KiB per thread.
pub const RING: usize = 512;
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

    /// Hands every waiting entry to `f`, oldest first, and frees their places. One drainer
    /// at a time (the caller holds the index's lock).
    fn drain(&self, mut f: impl FnMut(u64, u64)) {
        let t = self.tail.load(Ordering::Relaxed);
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
}
