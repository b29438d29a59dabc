//! The process's own live device allocations, tracked on the success path of every
//! allocation and free, for the out-of-memory explanation. A thread's latest allocation
//! is held in the thread's own shard first and enters this table only when the thread
//! allocates again before freeing it ([`crate::held`]).
//!
//! A bounded open-addressing hash table of atomics ([`LiveTable`]): insert and remove take
//! no lock, allocate nothing and make no system call; a `static` table lives in `.bss`, so
//! untouched pages cost no memory. Each slot holds a key (a device address, or a
//! `cuMemCreate` handle in a second table) and a value (the size in bytes and, when known
//! at insert time, the device). Removed slots become tombstones that later inserts reuse.
//!
//! Bounded: a key that finds no free slot within [`MAX_PROBE`] slots is not tracked and
//! only counted ([`LiveTable::untracked`]), so totals are a lower bound then. Under a race
//! between a free and a new allocation of the same address on two threads, one entry can be
//! lost (an undercount, never a crash). Allocations released implicitly (a destroyed
//! context) stay until their address is reused or the shim drops them after asking the
//! driver (`cuPointerGetAttribute`) on the failure path.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots examined per insert or remove before giving up.
pub const MAX_PROBE: usize = 32;

const EMPTY: u64 = 0;
const GONE: u64 = u64::MAX;
const BYTES_MASK: u64 = (1 << 56) - 1;

/// Bits of a size word ([`size_word`]) that hold the size; the next 8 hold the holder.
pub const SIZE_BITS: u32 = 48;
/// The largest size a size word holds (256 TiB - 1); larger sizes saturate.
pub const MAX_SIZE: u64 = (1 << SIZE_BITS) - 1;

/// The word a live allocation's size travels in (held lines, this table): the size in the
/// low [`SIZE_BITS`] bits (saturated at [`MAX_SIZE`]), the library that asked for the
/// allocation in the next 8 (`holder`, an index the shim hands out; 0 for unknown). A plain
/// size below 2^48 is a size word of holder 0.
#[inline(always)]
pub const fn size_word(bytes: u64, holder: u8) -> u64 {
    let b = if bytes > MAX_SIZE { MAX_SIZE } else { bytes };
    b | ((holder as u64) << SIZE_BITS)
}

/// The size and the holder of a size word ([`size_word`]).
#[inline(always)]
pub const fn split_word(word: u64) -> (u64, u8) {
    (word & MAX_SIZE, (word >> SIZE_BITS) as u8)
}

struct Slot {
    key: AtomicU64,
    value: AtomicU64,
}

/// One live allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The device address (or allocation handle).
    pub key: u64,
    /// Size in bytes (saturated at [`MAX_SIZE`]).
    pub bytes: u64,
    /// The device ordinal, when it was known at insert time.
    pub device: Option<u8>,
    /// The library that asked for the allocation (the shim's index, 0 for unknown).
    pub holder: u8,
}

/// A lock-free table of at most `N` live allocations (`N` a power of two, at least 2).
pub struct LiveTable<const N: usize> {
    slots: [Slot; N],
    untracked: AtomicU64,
}

impl<const N: usize> Default for LiveTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LiveTable<N> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        assert!(
            N.is_power_of_two() && N >= 2,
            "N must be a power of two >= 2"
        );
        LiveTable {
            slots: [const {
                Slot {
                    key: AtomicU64::new(EMPTY),
                    value: AtomicU64::new(0),
                }
            }; N],
            untracked: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    fn start(key: u64) -> usize {
        let bits = N.trailing_zeros();
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    #[inline(always)]
    fn slot(&self, start: usize, i: usize) -> &Slot {
        &self.slots[(start + i) & (N - 1)]
    }

    /// Records a live allocation at `key` of `bytes`, a size word ([`size_word`]: a plain
    /// size below 2^48, or one with its holder); `device` when known. Takes the first
    /// free slot (empty or a tombstone) from the key's home slot, so an insert costs one
    /// compare-and-swap in the common case. A stale entry with the same key (an address the
    /// driver reused after freeing it implicitly) may remain further on: [`Self::entries`]
    /// reports each key once. Returns `false` (and counts it as untracked) when no free slot
    /// is found within [`MAX_PROBE`] slots. Keys 0 and `u64::MAX` and sizes of 0 are ignored.
    #[inline(always)]
    pub fn insert(&self, key: u64, bytes: u64, device: Option<u8>) -> bool {
        if key == EMPTY || key == GONE || bytes == 0 {
            return false;
        }
        // A word above the size word's range is a plain size too large for it: saturated.
        let word = if bytes > BYTES_MASK { MAX_SIZE } else { bytes };
        let value = word | device.map_or(0, |d| (u64::from(d) + 1) << 56);
        let start = Self::start(key);
        for i in 0..MAX_PROBE.min(N) {
            let s = self.slot(start, i);
            let k = s.key.load(Ordering::Relaxed);
            if (k == EMPTY || k == GONE)
                && s.key
                    .compare_exchange(k, key, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                s.value.store(value, Ordering::Release);
                return true;
            }
        }
        self.untracked.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Forgets the allocation at `key` and returns it, `None` when it was not tracked.
    #[inline(always)]
    pub fn remove(&self, key: u64) -> Option<Entry> {
        if key == EMPTY || key == GONE {
            return None;
        }
        let start = Self::start(key);
        for i in 0..MAX_PROBE.min(N) {
            let s = self.slot(start, i);
            let k = s.key.load(Ordering::Relaxed);
            if k == key {
                // No read-modify-write: an insert never takes a slot holding a key, so only
                // another remove of the same key (a double free racing this one) writes here,
                // and both then forget it.
                let v = s.value.load(Ordering::Acquire);
                s.value.store(0, Ordering::Release);
                s.key.store(GONE, Ordering::Release);
                return Some(decode(key, v));
            }
            if k == EMPTY {
                return None;
            }
        }
        None
    }

    /// The allocation at `key`, `None` when it is not tracked. Lock-free; the same probe
    /// as [`Self::remove`].
    #[inline]
    pub fn get(&self, key: u64) -> Option<Entry> {
        if key == EMPTY || key == GONE {
            return None;
        }
        let start = Self::start(key);
        for i in 0..MAX_PROBE.min(N) {
            let s = self.slot(start, i);
            let k = s.key.load(Ordering::Acquire);
            if k == key {
                let v = s.value.load(Ordering::Acquire);
                return (v != 0).then(|| decode(key, v));
            }
            if k == EMPTY {
                return None;
            }
        }
        None
    }

    /// [`Self::remove`] without building the entry (the success path of a free).
    #[inline(always)]
    pub fn forget(&self, key: u64) {
        let _ = self.remove(key);
    }

    /// Every live allocation, one per key (the first in probe order when a stale duplicate
    /// exists), in table order. Failure path: walks all `N` slots.
    pub fn entries(&self) -> Vec<Entry> {
        let mut seen = std::collections::HashSet::new();
        self.slots
            .iter()
            .filter_map(|s| {
                let k = s.key.load(Ordering::Acquire);
                let v = s.value.load(Ordering::Acquire);
                (k != EMPTY && k != GONE && v != 0).then(|| decode(k, v))
            })
            .filter(|e| seen.insert(e.key))
            .collect()
    }

    /// Allocations that could not be recorded because the table was full around their key.
    pub fn untracked(&self) -> u64 {
        self.untracked.load(Ordering::Relaxed)
    }
}

fn decode(key: u64, v: u64) -> Entry {
    let d = v >> 56;
    let (bytes, holder) = split_word(v & BYTES_MASK);
    Entry {
        key,
        bytes,
        device: (d > 0).then(|| (d - 1) as u8),
        holder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_remove_entries() {
        let t: LiveTable<64> = LiveTable::new();
        assert!(t.insert(0x7000_0000_0000, 4096, None));
        assert!(t.insert(0x7000_0000_1000, 100, Some(1)));
        assert!(!t.insert(0, 5, None));
        assert!(!t.insert(0x1000, 0, None));
        let mut e = t.entries();
        e.sort_by_key(|e| e.key);
        assert_eq!(
            e,
            vec![
                Entry {
                    key: 0x7000_0000_0000,
                    bytes: 4096,
                    device: None,
                    holder: 0
                },
                Entry {
                    key: 0x7000_0000_1000,
                    bytes: 100,
                    device: Some(1),
                    holder: 0
                },
            ]
        );
        assert_eq!(
            t.remove(0x7000_0000_1000),
            Some(Entry {
                key: 0x7000_0000_1000,
                bytes: 100,
                device: Some(1),
                holder: 0
            })
        );
        assert_eq!(t.remove(0x7000_0000_1000), None);
        assert_eq!(t.get(0x7000_0000_1000), None);
        assert_eq!(t.get(0x7000_0000_0000).map(|e| e.bytes), Some(4096));
        assert_eq!(t.get(0), None);
        assert_eq!(t.entries().len(), 1);
        // A stale entry with the same key (its free was never seen) is reported once, and
        // the next free removes one of the two.
        assert!(t.insert(0x7000_0000_0000, 8192, Some(0)));
        assert_eq!(t.entries().len(), 1);
        assert!(t.remove(0x7000_0000_0000).is_some());
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.untracked(), 0);
    }

    #[test]
    fn full_table_counts_untracked_and_tombstones_are_reused() {
        let t: LiveTable<4> = LiveTable::new();
        for k in 1..=4u64 {
            assert!(t.insert(k << 20, 1, None));
        }
        assert!(!t.insert(5 << 20, 1, None));
        assert_eq!(t.untracked(), 1);
        assert!(t.remove(2 << 20).is_some());
        assert!(t.insert(5 << 20, 7, None));
        assert_eq!(t.entries().iter().map(|e| e.bytes).sum::<u64>(), 10);
    }

    #[test]
    fn huge_sizes_saturate() {
        let t: LiveTable<8> = LiveTable::new();
        assert!(t.insert(0x1000, u64::MAX - 4095, Some(3)));
        let e = t.entries()[0];
        assert_eq!(e.bytes, MAX_SIZE);
        assert_eq!(e.device, Some(3));
        assert_eq!(e.holder, 0);
    }

    #[test]
    fn the_holder_travels_with_the_size() {
        let t: LiveTable<8> = LiveTable::new();
        assert!(t.insert(0x1000, size_word(4096, 7), Some(2)));
        assert!(t.insert(0x2000, size_word(u64::MAX, 255), None));
        let mut e = t.entries();
        e.sort_by_key(|e| e.key);
        assert_eq!((e[0].bytes, e[0].holder, e[0].device), (4096, 7, Some(2)));
        assert_eq!(
            (e[1].bytes, e[1].holder, e[1].device),
            (MAX_SIZE, 255, None)
        );
        assert_eq!(split_word(size_word(100, 3)), (100, 3));
    }

    #[test]
    fn matches_a_model_under_churn() {
        static T: LiveTable<1024> = LiveTable::new();
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = ((x % 600) + 1) << 9;
            if x & 1 == 0 {
                // Like a driver, never hand out an address that is still live.
                if model.contains_key(&key) {
                    continue;
                }
                let bytes = (x >> 20) % 1_000_000 + 1;
                assert!(T.insert(key, bytes, None));
                model.insert(key, bytes);
            } else {
                assert_eq!(T.remove(key).map(|e| e.bytes), model.remove(&key));
            }
        }
        let mut got: Vec<(u64, u64)> = T.entries().iter().map(|e| (e.key, e.bytes)).collect();
        let mut want: Vec<(u64, u64)> = model.into_iter().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn concurrent_inserts_and_removes_balance() {
        static T: LiveTable<4096> = LiveTable::new();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..200u64 {
                        let keys: Vec<u64> = (0..64u64)
                            .map(|i| ((t << 40) | (round << 20) | (i << 9)) + 512)
                            .collect();
                        for &k in &keys {
                            assert!(T.insert(k, 512, Some(t as u8)));
                        }
                        for &k in &keys {
                            assert_eq!(T.remove(k).map(|e| e.bytes), Some(512));
                        }
                    }
                    for i in 0..10u64 {
                        T.insert((t << 40) | (1 << 39) | ((i + 1) << 9), 1, Some(t as u8));
                    }
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        let e = T.entries();
        assert_eq!(e.len(), 40);
        assert_eq!(T.untracked(), 0);
    }

    /// Cost of one insert + remove pair on the calling thread (the success-path cost the shim
    /// adds to `cuMemAlloc` + `cuMemFree`). `cargo test -p seedance-core --release -- --ignored
    /// --nocapture live_table_cost`.
    #[test]
    #[ignore]
    fn live_table_cost() {
        static T: LiveTable<65536> = LiveTable::new();
        // A realistic background: 1000 live allocations.
        for i in 0..1000u64 {
            T.insert(0x7f00_0000_0000 + (i << 21), 2 << 20, None);
        }
        let n = 2_000_000u64;
        let t0 = std::time::Instant::now();
        for i in 0..n {
            let k = 0x7000_0000_0000 + ((i % 4096) << 9);
            std::hint::black_box(T.insert(k, 4096, None));
            std::hint::black_box(T.remove(k));
        }
        let per = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("LiveTable<65536>: {per:.1} ns per insert+remove pair");
    }
}
