//! Work submitted to each stream, counted on the success path of every launch and
//! asynchronous copy without a lock, an allocation or a system call.
//!
//! Each thread owns a [`Shard`]: a small open-addressing table of stream slots (cumulative
//! launch and copy counts per stream key), a ring of its most recent asynchronous copies
//! (with their address ranges), and a direct-mapped table of its most recent event records.
//! Only the owning thread writes a shard's counts, with plain loads and stores of relaxed
//! atomics; other threads read it at the few moments that need the numbers (a context
//! destroy or reset, a free of pinned or device memory, a synchronize, exit). A thread's first launch takes a shard from a free
//! list, or leaks a new one (about 29 KiB); when the thread exits its shard goes back with
//! its counts intact, so nothing is lost and shard ids stay stable.
//!
//! Counts are cumulative and never reset. What is "since the last synchronisation" is the
//! difference from a baseline kept beside each stream slot of the shard, raised (an atomic
//! maximum, by any thread, without a lock) to the slot's counts when the stream, its context
//! or a recorded event is synchronised ([`Shard::retire`], [`retire_key`],
//! [`retire_event`]). A thread that synchronises its own stream or event so writes only its
//! own shard and reads the others' stream keys through a list of shards read without a lock
//! ([`for_each_shard`]). A stream key is the stream handle for a
//! created stream, and for the default streams the current context with a tag in the low
//! bits ([`stream_key`]); the calling thread's current context is kept here
//! ([`set_current_context`]) by the shim's context hooks, so a launch on the default stream
//! costs no driver query.
//!
//! Exactness: per shard the counts are exact. Across threads, a launch made while another
//! thread is taking a baseline may land on either side of it (and a reader may see one of a
//! baseline's three counts raised before the others); and a copy record is
//! overwritten after [`COPIES`] newer copies on the same thread. The shim therefore confirms
//! with the driver (`cuStreamQuery`) before it reports or repairs anything.

use crate::cache_padded::CachePadded;
use crate::counters::{Counters, MAX_FUNCTIONS};
use crate::held::{Allocation, Counted, Held};
use crate::held_lines::{Entry, Lines};
use crate::live::LiveTable;
use crate::owners::AllocRing;
use crate::thread::ThreadState;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Stream slots per thread (a power of two).
pub const SLOTS: usize = 128;
/// Slots examined from a key's home slot before the key is counted as untracked.
pub const PROBE: usize = 8;
/// Asynchronous copies remembered per thread (a power of two).
pub const COPIES: usize = 256;
/// Event records remembered per thread (a power of two), direct-mapped by event handle.
pub const EVENTS: usize = 64;

const LEGACY_TAG: u64 = 1;
const PER_THREAD_TAG: u64 = 2;
const TAG_MASK: u64 = 3;

/// The key pending work on `stream` is counted under, for a thread whose current context is
/// `ctx`. `per_thread` is true for the `_ptsz` entry points, where stream 0 means the
/// per-thread default stream.
///
/// Created streams are keyed by their handle (a pointer, aligned, so its two low bits are
/// clear). The legacy default stream (0, or `CU_STREAM_LEGACY` = 1) is keyed by the context
/// handle with tag 1, the per-thread default stream (`CU_STREAM_PER_THREAD` = 2, or 0 in a
/// `_ptsz` call) by the context handle with tag 2; both are per thread's current context.
#[inline(always)]
pub fn stream_key(stream: usize, ctx: usize, per_thread: bool) -> u64 {
    if stream > 2 {
        return stream as u64;
    }
    let tag = if stream == 2 || (stream == 0 && per_thread) {
        PER_THREAD_TAG
    } else {
        LEGACY_TAG
    };
    (ctx as u64 & !TAG_MASK) | tag
}

/// What a stream key stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A created stream, by handle.
    Stream(u64),
    /// The legacy default stream of the context with this handle (0 = unknown context).
    Legacy(u64),
    /// The per-thread default stream of the context with this handle, for the thread that
    /// owns the shard.
    PerThread(u64),
}

/// Decodes a key made by [`stream_key`].
pub fn key_kind(key: u64) -> KeyKind {
    match key & TAG_MASK {
        LEGACY_TAG => KeyKind::Legacy(key & !TAG_MASK),
        PER_THREAD_TAG => KeyKind::PerThread(key & !TAG_MASK),
        _ => KeyKind::Stream(key),
    }
}

/// The context handle a default-stream key belongs to; `None` for a created stream.
pub fn key_context(key: u64) -> Option<u64> {
    match key_kind(key) {
        KeyKind::Stream(_) => None,
        KeyKind::Legacy(c) | KeyKind::PerThread(c) => Some(c),
    }
}

/// Launches, copies and other stream operations, cumulative or since a baseline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Kernel launches.
    pub launches: u64,
    /// Asynchronous copies.
    pub copies: u64,
    /// Other stream-ordered operations: asynchronous memsets, graph launches and host
    /// functions (`cuLaunchHostFunc`).
    pub ops: u64,
}

impl Counts {
    /// `self - base`, saturating (a baseline is never above the count it was taken from).
    pub fn since(self, base: Counts) -> Counts {
        Counts {
            launches: self.launches.saturating_sub(base.launches),
            copies: self.copies.saturating_sub(base.copies),
            ops: self.ops.saturating_sub(base.ops),
        }
    }

    /// `self + other`.
    pub fn plus(self, other: Counts) -> Counts {
        Counts {
            launches: self.launches + other.launches,
            copies: self.copies + other.copies,
            ops: self.ops + other.ops,
        }
    }

    /// Whether all are zero.
    pub fn is_zero(self) -> bool {
        self.launches == 0 && self.copies == 0 && self.ops == 0
    }
}

/// Which sides of a copy are host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// `cuMemcpyHtoDAsync`: the source is host memory, the destination device memory.
    HostToDevice,
    /// `cuMemcpyDtoHAsync`: the source is device memory, the destination host memory.
    DeviceToHost,
    /// `cuMemcpyAsync` (unified addressing): either side may be either.
    Unified,
}

impl CopyKind {
    fn code(self) -> u64 {
        match self {
            CopyKind::HostToDevice => 1,
            CopyKind::DeviceToHost => 2,
            CopyKind::Unified => 3,
        }
    }

    fn from_code(c: u64) -> Option<CopyKind> {
        match c {
            1 => Some(CopyKind::HostToDevice),
            2 => Some(CopyKind::DeviceToHost),
            3 => Some(CopyKind::Unified),
            _ => None,
        }
    }
}

/// One asynchronous copy as submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyRecord {
    /// Stream key.
    pub key: u64,
    /// The shard's cumulative copy count on this key after this copy: the copy is pending
    /// while the key's baseline for this shard is below it.
    pub ordinal: u64,
    /// Destination address.
    pub dst: u64,
    /// Source address.
    pub src: u64,
    /// Bytes.
    pub bytes: u64,
    /// Which sides are host memory.
    pub kind: CopyKind,
}

fn overlaps(a: u64, len: u64, lo: u64, hi: u64) -> bool {
    len > 0 && a < hi && a.saturating_add(len) > lo
}

impl CopyRecord {
    /// Whether the host side of the copy (for a unified copy, either side) overlaps
    /// `[lo, hi)`.
    pub fn touches_host(&self, lo: u64, hi: u64) -> bool {
        match self.kind {
            CopyKind::HostToDevice => overlaps(self.src, self.bytes, lo, hi),
            CopyKind::DeviceToHost => overlaps(self.dst, self.bytes, lo, hi),
            CopyKind::Unified => {
                overlaps(self.src, self.bytes, lo, hi) || overlaps(self.dst, self.bytes, lo, hi)
            }
        }
    }

    /// Whether the device side of the copy (for a unified copy, either side) overlaps
    /// `[lo, hi)`.
    pub fn touches_device(&self, lo: u64, hi: u64) -> bool {
        match self.kind {
            CopyKind::HostToDevice => overlaps(self.dst, self.bytes, lo, hi),
            CopyKind::DeviceToHost => overlaps(self.src, self.bytes, lo, hi),
            CopyKind::Unified => {
                overlaps(self.src, self.bytes, lo, hi) || overlaps(self.dst, self.bytes, lo, hi)
            }
        }
    }
}

/// The last record of an event on one thread: the stream it was recorded on and that
/// thread's counts on the stream at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMark {
    /// Process-wide order of records (a later record of the same event supersedes).
    pub seq: u64,
    /// Event handle.
    pub event: u64,
    /// Stream key.
    pub key: u64,
    /// The recording thread's cumulative counts on the key when the event was recorded.
    pub counts: Counts,
}

/// One stream key's counts in a shard, on a cache line of its own: a launch, copy or event
/// record on the key reads and writes this one line (as parallel arrays, key and count
/// were two lines, an event record's counts four; each is a cache miss after the driver's
/// own work, scripts/bench/cachegrind-evicted.sh).
#[repr(align(64))]
struct StreamSlot {
    key: AtomicU64,
    launches: AtomicU64,
    copies: AtomicU64,
    /// Other operations (memsets, graph launches, host functions).
    ops: AtomicU64,
    /// The counts at the key's last synchronisation (raised by any thread).
    base_launches: AtomicU64,
    base_copies: AtomicU64,
    base_ops: AtomicU64,
}

/// A copy record, on a cache line of its own (one line written per copy).
#[repr(align(64))]
struct CopySlot {
    /// 0 while being written; otherwise the ring position + 1 of the record held.
    stamp: AtomicU64,
    key: AtomicU64,
    ordinal: AtomicU64,
    dst: AtomicU64,
    src: AtomicU64,
    bytes: AtomicU64,
    kind: AtomicU64,
}

/// An event record, on a cache line of its own.
#[repr(align(64))]
struct EventSlot {
    seq: AtomicU64,
    event: AtomicU64,
    key: AtomicU64,
    launches: AtomicU64,
    copies: AtomicU64,
    ops: AtomicU64,
}

/// One thread's pending-work counters (see the module documentation).
pub struct Shard {
    id: u32,
    /// Stream slots, a cache line each ([`StreamSlot`]).
    slots: [StreamSlot; SLOTS],
    copy_head: AtomicU64,
    copies: [CopySlot; COPIES],
    events: [EventSlot; EVENTS],
    untracked: AtomicU64,
    /// Stream slots claimed (readers skip a shard that never counted anything).
    used: AtomicU64,
    /// Device allocations made by this thread, waiting to be filed by context.
    allocs: AllocRing,
    /// This thread's latest device allocation, not yet in the live table
    /// ([`crate::held`]), for a thread without a line of [`LINES`].
    held: CachePadded<Held>,
}

#[inline(always)]
fn bump(a: &AtomicU64) -> u64 {
    // Single writer per shard: a plain load and store, no locked read-modify-write.
    let v = a.load(Ordering::Relaxed).wrapping_add(1);
    a.store(v, Ordering::Relaxed);
    v
}

#[inline(always)]
fn home(key: u64, n: usize) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - n.trailing_zeros())) as usize
}

/// The order of event records, one counter per group of event handles (the handle's
/// [`home`] among [`EVENT_CLOCKS`]), each on a cache line of its own. Only records of one
/// event are ever compared ([`latest_event_mark`]), and those always take the same counter,
/// so each event's records are in order; threads recording their own events bump counters
/// no other such thread writes (one counter for the process made every record on every
/// thread write one cache line: measured with `scripts/bench/host-threads.sh`).
static EVENT_SEQ: [CachePadded<AtomicU64>; EVENT_CLOCKS] =
    [const { CachePadded::new(AtomicU64::new(1)) }; EVENT_CLOCKS];
/// Counters in [`EVENT_SEQ`] (a power of two).
const EVENT_CLOCKS: usize = 256;

impl Shard {
    /// An empty shard with id `id` (its index in the list of every shard).
    pub fn new(id: u32) -> Shard {
        Shard {
            id,
            slots: [const {
                StreamSlot {
                    key: AtomicU64::new(0),
                    launches: AtomicU64::new(0),
                    copies: AtomicU64::new(0),
                    ops: AtomicU64::new(0),
                    base_launches: AtomicU64::new(0),
                    base_copies: AtomicU64::new(0),
                    base_ops: AtomicU64::new(0),
                }
            }; SLOTS],
            copy_head: AtomicU64::new(0),
            copies: [const {
                CopySlot {
                    stamp: AtomicU64::new(0),
                    key: AtomicU64::new(0),
                    ordinal: AtomicU64::new(0),
                    dst: AtomicU64::new(0),
                    src: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    kind: AtomicU64::new(0),
                }
            }; COPIES],
            events: [const {
                EventSlot {
                    seq: AtomicU64::new(0),
                    event: AtomicU64::new(0),
                    key: AtomicU64::new(0),
                    launches: AtomicU64::new(0),
                    copies: AtomicU64::new(0),
                    ops: AtomicU64::new(0),
                }
            }; EVENTS],
            untracked: AtomicU64::new(0),
            used: AtomicU64::new(0),
            allocs: AllocRing::new(),
            held: CachePadded::new(Held::new()),
        }
    }

    /// This shard's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The slot of `key`, claiming a free one on first use; `None` (counted) when the
    /// probe window is full. Owner thread only. The home slot is checked inline, the rest
    /// of the probe out of line.
    #[inline(always)]
    fn slot(&self, key: u64) -> Option<usize> {
        let h = home(key, SLOTS);
        if self.slots[h].key.load(Ordering::Relaxed) == key {
            return Some(h);
        }
        self.slot_slow(key, h)
    }

    #[inline(never)]
    fn slot_slow(&self, key: u64, h: usize) -> Option<usize> {
        for i in 0..PROBE {
            let j = (h + i) & (SLOTS - 1);
            let k = self.slots[j].key.load(Ordering::Relaxed);
            if k == key {
                return Some(j);
            }
            if k == 0 {
                self.slots[j].key.store(key, Ordering::Release);
                // Release: a reader that sees the count sees the key.
                let n = self.used.load(Ordering::Relaxed) + 1;
                self.used.store(n, Ordering::Release);
                return Some(j);
            }
        }
        self.untracked.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// The slot of `key` if this shard has one (any thread).
    fn find(&self, key: u64) -> Option<usize> {
        let h = home(key, SLOTS);
        for i in 0..PROBE {
            let j = (h + i) & (SLOTS - 1);
            match self.slots[j].key.load(Ordering::Acquire) {
                k if k == key => return Some(j),
                0 => return None,
                _ => {}
            }
        }
        None
    }

    /// Counts one launch on `key`. Owner thread only. The hot path: a hash, one compare
    /// and one increment when the key is in its home slot.
    #[inline(always)]
    pub fn add_launch(&self, key: u64) {
        let h = home(key, SLOTS);
        if self.slots[h].key.load(Ordering::Relaxed) == key {
            bump(&self.slots[h].launches);
        } else {
            self.add_launch_slow(key, h);
        }
    }

    #[inline(never)]
    fn add_launch_slow(&self, key: u64, h: usize) {
        if let Some(j) = self.slot_slow(key, h) {
            bump(&self.slots[j].launches);
        }
    }

    /// Counts one other operation (an asynchronous memset, a graph launch or a host
    /// function) on `key`. Owner thread only.
    #[inline]
    pub fn add_op(&self, key: u64) {
        if let Some(j) = self.slot(key) {
            bump(&self.slots[j].ops);
        }
    }

    /// Counts one asynchronous copy on `key` and remembers its ranges; returns `true` when
    /// it is this shard's first copy on `key`. Owner thread only.
    pub fn add_copy(&self, key: u64, dst: u64, src: u64, bytes: u64, kind: CopyKind) -> bool {
        let Some(j) = self.slot(key) else {
            return false;
        };
        let ordinal = bump(&self.slots[j].copies);
        let pos = bump(&self.copy_head);
        let c = &self.copies[((pos - 1) as usize) & (COPIES - 1)];
        // A seqlock per record: readers accept it only if the stamp is the same non-zero
        // value before and after reading the fields.
        c.stamp.store(0, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        c.key.store(key, Ordering::Relaxed);
        c.ordinal.store(ordinal, Ordering::Relaxed);
        c.dst.store(dst, Ordering::Relaxed);
        c.src.store(src, Ordering::Relaxed);
        c.bytes.store(bytes, Ordering::Relaxed);
        c.kind.store(kind.code(), Ordering::Relaxed);
        c.stamp.store(pos, Ordering::Release);
        ordinal == 1
    }

    /// Remembers that `event` was recorded on `key` now (this thread's counts on the key
    /// at this moment). Owner thread only.
    pub fn add_event_record(&self, event: u64, key: u64) {
        let counts = self.counts(key).unwrap_or_default();
        let e = &self.events[home(event, EVENTS)];
        let seq = EVENT_SEQ[home(event, EVENT_CLOCKS)].fetch_add(1, Ordering::Relaxed);
        e.seq.store(0, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        e.event.store(event, Ordering::Relaxed);
        e.key.store(key, Ordering::Relaxed);
        e.launches.store(counts.launches, Ordering::Relaxed);
        e.copies.store(counts.copies, Ordering::Relaxed);
        e.ops.store(counts.ops, Ordering::Relaxed);
        e.seq.store(seq, Ordering::Release);
    }

    /// This shard's cumulative counts on `key`, `None` if it never used the key.
    pub fn counts(&self, key: u64) -> Option<Counts> {
        self.find(key).map(|j| self.counts_at(j))
    }

    fn counts_at(&self, j: usize) -> Counts {
        Counts {
            launches: self.slots[j].launches.load(Ordering::Relaxed),
            copies: self.slots[j].copies.load(Ordering::Relaxed),
            ops: self.slots[j].ops.load(Ordering::Relaxed),
        }
    }

    /// The counts on `key` at its last synchronisation on this shard (zero for a key never
    /// synchronised or never used here). Any thread.
    pub fn baseline(&self, key: u64) -> Counts {
        self.find(key)
            .map(|j| Counts {
                launches: self.slots[j].base_launches.load(Ordering::Relaxed),
                copies: self.slots[j].base_copies.load(Ordering::Relaxed),
                ops: self.slots[j].base_ops.load(Ordering::Relaxed),
            })
            .unwrap_or_default()
    }

    /// Raises the baseline of `key` to at least `to`, count by count (a baseline never goes
    /// down). Nothing for a key this shard never used. Any thread, no lock.
    pub fn raise(&self, key: u64, to: Counts) {
        if let Some(j) = self.find(key) {
            self.raise_at(j, to);
        }
    }

    fn raise_at(&self, j: usize, to: Counts) {
        // Skip the locked read-modify-write when the baseline is there already (a stream
        // synchronised again with nothing new on it, the other threads' slots).
        let up = |a: &AtomicU64, v: u64| {
            if a.load(Ordering::Relaxed) < v {
                a.fetch_max(v, Ordering::Relaxed);
            }
        };
        up(&self.slots[j].base_launches, to.launches);
        up(&self.slots[j].base_copies, to.copies);
        up(&self.slots[j].base_ops, to.ops);
    }

    /// Takes this shard's current counts on `key` as synchronised: `key`'s work submitted
    /// by this shard's thread so far is done. Any thread, no lock.
    pub fn retire(&self, key: u64) {
        if let Some(j) = self.find(key) {
            self.raise_at(j, self.counts_at(j));
        }
    }

    /// Every key this shard has used, with its cumulative counts.
    pub fn keys(&self) -> Vec<(u64, Counts)> {
        if self.used.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        (0..SLOTS)
            .filter_map(|j| {
                let k = self.slots[j].key.load(Ordering::Acquire);
                (k != 0).then(|| (k, self.counts_at(j)))
            })
            .collect()
    }

    /// The copies still in the ring, oldest overwritten first; a record being written at
    /// this moment is skipped.
    pub fn copy_records(&self) -> Vec<CopyRecord> {
        self.copies
            .iter()
            .filter_map(|c| {
                let stamp = c.stamp.load(Ordering::Acquire);
                if stamp == 0 {
                    return None;
                }
                let r = CopyRecord {
                    key: c.key.load(Ordering::Relaxed),
                    ordinal: c.ordinal.load(Ordering::Relaxed),
                    dst: c.dst.load(Ordering::Relaxed),
                    src: c.src.load(Ordering::Relaxed),
                    bytes: c.bytes.load(Ordering::Relaxed),
                    kind: CopyKind::from_code(c.kind.load(Ordering::Relaxed))?,
                };
                std::sync::atomic::fence(Ordering::Acquire);
                (c.stamp.load(Ordering::Relaxed) == stamp).then_some(r)
            })
            .collect()
    }

    /// This shard's last record of `event`, if still remembered.
    pub fn event_mark(&self, event: u64) -> Option<EventMark> {
        let e = &self.events[home(event, EVENTS)];
        let seq = e.seq.load(Ordering::Acquire);
        if seq == 0 || e.event.load(Ordering::Relaxed) != event {
            return None;
        }
        let m = EventMark {
            seq,
            event,
            key: e.key.load(Ordering::Relaxed),
            counts: Counts {
                launches: e.launches.load(Ordering::Relaxed),
                copies: e.copies.load(Ordering::Relaxed),
                ops: e.ops.load(Ordering::Relaxed),
            },
        };
        std::sync::atomic::fence(Ordering::Acquire);
        (e.seq.load(Ordering::Relaxed) == seq && e.event.load(Ordering::Relaxed) == event)
            .then_some(m)
    }

    /// This thread's ring of device allocations not yet filed by context
    /// ([`crate::owners`]).
    pub fn allocs(&self) -> &AllocRing {
        &self.allocs
    }

    /// Launches, copies and other operations that found no free stream slot.
    pub fn untracked(&self) -> u64 {
        self.untracked.load(Ordering::Relaxed)
    }
}

/// Every shard ever handed out, and those whose thread has exited.
static ALL: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());
/// Shards read without a lock: the first [`LISTED`] of [`ALL`], by id, published once each
/// (shards are never freed; the list only grows).
static LIST: [OnceLock<&'static Shard>; LISTED] = [const { OnceLock::new() }; LISTED];
/// How many of [`LIST`] are published (release: a reader that sees the count sees them).
static LIST_LEN: AtomicUsize = AtomicUsize::new(0);
/// Shards readable without a lock; a process with more threads alive at once than this
/// reads the rest of [`ALL`] under its lock.
pub const LISTED: usize = 4096;
static FREE: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());
/// Calls made while a thread's local storage was being torn down.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);

/// Set once copies have been made on two different stream keys (by any threads): before
/// that, no copy can be pending on a stream other than the one a free is ordered on.
static MULTI_STREAM_COPIES: AtomicBool = AtomicBool::new(false);
static FIRST_COPY_KEY: AtomicU64 = AtomicU64::new(0);

/// Hands an exited thread's shard back for reuse.
pub(crate) fn release(s: &'static Shard) {
    FREE.lock().push(s);
}

#[cold]
fn register() -> &'static Shard {
    if let Some(s) = FREE.lock().pop() {
        return s;
    }
    let mut all = ALL.lock();
    let s: &'static Shard = Box::leak(Box::new(Shard::new(all.len() as u32)));
    if all.len() < LISTED {
        let _ = LIST[all.len()].set(s);
        LIST_LEN.store(all.len() + 1, Ordering::Release);
    }
    all.push(s);
    s
}

/// Calls `f` on every shard, in id order, without a lock while at most [`LISTED`] shards
/// exist (a shard made while this runs may be left out, as with [`shards`]).
pub fn for_each_shard(mut f: impl FnMut(&'static Shard)) {
    let n = LIST_LEN.load(Ordering::Acquire);
    for s in LIST[..n].iter().filter_map(|s| s.get()) {
        f(s);
    }
    if n == LISTED {
        let rest: Vec<&'static Shard> = ALL.lock().get(LISTED..).unwrap_or_default().to_vec();
        rest.into_iter().for_each(f);
    }
}

/// A synchronize of stream key `key` (a created stream or a legacy default stream, which
/// any thread may have used): every shard's counts on it are taken as synchronised. No lock
/// while at most [`LISTED`] shards exist; writes only the shards that used `key`.
pub fn retire_key(key: u64) {
    for_each_shard(|s| s.retire(key));
}

/// A synchronize of the calling thread's per-thread default stream, `key`: only this
/// thread's shard can have work on it. No lock once the thread has its shard.
pub fn retire_own(key: u64) {
    with_local(|s, _| s.retire(key));
}

/// The latest record of `event` among `shards` (the one a synchronize of the event waits
/// for), with the shard that made it.
pub fn latest_event_mark<'a>(
    shards: impl IntoIterator<Item = &'a Shard>,
    event: u64,
) -> Option<(EventMark, &'a Shard)> {
    shards
        .into_iter()
        .filter_map(|s| s.event_mark(event).map(|m| (m, s)))
        .max_by_key(|(m, _)| m.seq)
}

/// A synchronize of `event` (or its completion seen otherwise): the work its latest record
/// covered is taken as synchronised, in the shard that recorded it. No lock while at most
/// [`LISTED`] shards exist.
pub fn retire_event(event: u64) {
    if let Some((m, s)) = latest_event_mark_anywhere(event) {
        s.raise(m.key, m.counts);
    }
}

/// The latest record of `event` in any shard, with its shard ([`latest_event_mark`] over
/// every shard, no lock while at most [`LISTED`] shards exist).
pub fn latest_event_mark_anywhere(event: u64) -> Option<(EventMark, &'static Shard)> {
    let mut latest: Option<(EventMark, &'static Shard)> = None;
    for_each_shard(|s| {
        if let Some(m) = s.event_mark(event) {
            if latest.as_ref().is_none_or(|(l, _)| m.seq > l.seq) {
                latest = Some((m, s));
            }
        }
    });
    latest
}

#[inline(always)]
fn shard_of(l: &ThreadState) -> &'static Shard {
    match l.work.get() {
        Some(s) => s,
        None => {
            crate::thread::arm_release();
            let s = register();
            l.work.set(Some(s));
            s
        }
    }
}

#[inline(always)]
fn with_local(f: impl FnOnce(&'static Shard, usize)) {
    let done = crate::thread::with(|l| f(shard_of(l), l.ctx.get()));
    if done.is_none() {
        UNTRACKED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records the calling thread's current context (after `cuCtxSetCurrent`, `cuCtxCreate`,
/// `cuCtxPushCurrent`, `cuCtxPopCurrent`, ...).
pub fn set_current_context(ctx: usize) {
    let _ = crate::thread::with(|l| {
        l.ctx.set(ctx);
        if let Some(e) = own_line(l) {
            e.set_context(ctx as u64);
        }
        for (s, k) in l.default_keys.iter().enumerate() {
            k.set(stream_key(s, ctx, false));
        }
    });
}

/// The calling thread's current context as last recorded, 0 for none or unknown.
pub fn current_context() -> usize {
    crate::thread::with(|l| l.ctx.get()).unwrap_or(0)
}

/// Counts a successful launch on `stream` by the calling thread.
#[inline(always)]
pub fn note_launch(stream: usize, per_thread: bool) {
    with_local(|s, ctx| s.add_launch(stream_key(stream, ctx, per_thread)));
}

/// Counts one call of function `id` (as [`Counters::record`]) and, when it succeeded and
/// `track` is set, one launch on `stream`, with a single thread-local access. The hot path
/// of every kernel launch.
#[inline(always)]
pub fn count_launch(id: usize, failed: bool, stream: usize, per_thread: bool, track: bool) {
    if id >= MAX_FUNCTIONS {
        return;
    }
    let scope = ();
    match crate::thread::state(&scope) {
        Some(l) => {
            Counters::bump_owned(Counters::global().shard_of(l), id, failed);
            if track && !failed {
                let key = if stream > 2 {
                    stream as u64
                } else {
                    // Stream 0 in a `_ptsz` call is the per-thread default stream (key 2).
                    let i = if per_thread && stream == 0 { 2 } else { stream };
                    l.default_keys[i].get()
                };
                shard_of(l).add_launch(key);
            }
        }
        None => Counters::global().record_shared(id, failed),
    }
}

/// Counts a successful asynchronous memset, graph launch or host function on `stream` by
/// the calling thread (no lock, no allocation once the thread has its shard).
#[inline]
pub fn note_op(stream: usize, per_thread: bool) {
    with_local(|s, ctx| s.add_op(stream_key(stream, ctx, per_thread)));
}

/// Counts a successful asynchronous copy on `stream` by the calling thread.
#[inline]
pub fn note_copy(stream: usize, per_thread: bool, dst: u64, src: u64, bytes: u64, kind: CopyKind) {
    with_local(|s, ctx| {
        let key = stream_key(stream, ctx, per_thread);
        if s.add_copy(key, dst, src, bytes, kind) {
            first_copy_on(key);
        }
    });
}

#[cold]
fn first_copy_on(key: u64) {
    if let Err(first) = FIRST_COPY_KEY.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
    {
        if first != key {
            MULTI_STREAM_COPIES.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether copies have been made on more than one stream key (a cheap filter for the
/// checks that look for copies on other streams).
#[inline(always)]
pub fn copies_on_several_streams() -> bool {
    MULTI_STREAM_COPIES.load(Ordering::Relaxed)
}

/// Records a successful `cuEventRecord(event, stream)` by the calling thread.
pub fn note_event_record(event: u64, stream: usize, per_thread: bool) {
    with_local(|s, ctx| s.add_event_record(event, stream_key(stream, ctx, per_thread)));
}

/// The held-allocation lines found by thread pointer ([`crate::held_lines`]): a thread that
/// claimed one holds its latest allocation there instead of in its shard.
static LINES: Lines = Lines::new();

/// A thread state's `line` once the thread holds in its shard for good: the entry its thread
/// pointer hashes to was another thread's, or it has exited.
const NO_LINE: u32 = u32::MAX;

/// A successful device allocation of `bytes` at `addr` by the calling thread, whose thread
/// pointer is `tp` (0 where none is read): held on its line under its current context
/// ([`crate::held`]). The one held before is published into `table` and handed to `file`,
/// to be filed by the context it was made in ([`file_alloc`]), on the (cold) path that
/// publishes it ([`Held::hold_then`]). With `count`, the call is also counted on that line
/// ([`Held::count`]). The hot path of every `cuMemAlloc_v2`: one load of the line found by
/// `tp` ([`Lines::own`]) and three stores when nothing was held (the previous allocation was
/// freed), no thread-local access; a thread without a line of its own holds in its shard
/// ([`hold_in_shard`]). `false` when the calling thread's local storage is being torn down:
/// nothing held or counted, the caller records (and counts) the allocation itself.
#[inline(always)]
pub fn hold_alloc<const N: usize, F: FnOnce(Allocation)>(
    tp: usize,
    table: &LiveTable<N>,
    addr: u64,
    bytes: u64,
    count: bool,
    file: F,
) -> bool {
    match LINES.own(tp) {
        Some(e) => {
            e.hold_then(table, addr, bytes, count, file);
            true
        }
        None => hold_in_shard(tp, table, addr, bytes, count, file),
    }
}

/// [`hold_alloc`] for a thread without a line: it claims the one `tp` hashes to (once) and
/// holds there, or holds in its shard when that line is another thread's.
#[inline(never)]
fn hold_in_shard<const N: usize, F: FnOnce(Allocation)>(
    tp: usize,
    table: &LiveTable<N>,
    addr: u64,
    bytes: u64,
    count: bool,
    file: F,
) -> bool {
    let scope = ();
    match crate::thread::state(&scope) {
        Some(l) => {
            let s = shard_of(l);
            if let Some(e) = claim_line(l, tp) {
                e.hold_then(table, addr, bytes, count, file);
                return true;
            }
            s.held
                .count_and_hold_then(table, addr, bytes, l.ctx.get() as u64, count, file);
            true
        }
        None => false,
    }
}

/// The calling thread's first try for a line: the entry `tp` hashes to, claimed once the
/// thread's exit is sure to release it (its release armed), or `None` (tried before, owned
/// by another thread, or no thread pointer).
#[cold]
fn claim_line(l: &ThreadState, tp: usize) -> Option<&'static Entry> {
    if l.line.get() != 0 || !crate::thread::arm_release() {
        return None;
    }
    let claimed = LINES.claim(tp, l.ctx.get() as u64);
    l.line.set(claimed.map_or(NO_LINE, |i| i as u32 + 1));
    claimed.map(|i| LINES.at(i))
}

/// The index of the thread state's claimed line, if any.
fn line_index(l: &ThreadState) -> Option<usize> {
    match l.line.get() {
        0 | NO_LINE => None,
        i => Some(i as usize - 1),
    }
}

/// The thread state's claimed line, if any.
fn own_line(l: &ThreadState) -> Option<&'static Entry> {
    line_index(l).map(|i| LINES.at(i))
}

/// Gives the exiting thread's line up (its held allocation and counts stay there).
pub(crate) fn release_line(l: &ThreadState) {
    if let Some(i) = line_index(l) {
        LINES.release(i);
    }
    l.line.set(NO_LINE);
}

/// Calls `f` on every held-allocation line that may hold an allocation: every shard's,
/// then every entry owned or given up holding one ([`Lines::for_each_holding`]).
fn for_each_held(mut f: impl FnMut(&Held)) {
    for_each_shard(|s| f(&s.held));
    LINES.for_each_holding(|e| f(e.held()));
}

/// The calls counted on every held-allocation line ([`Held::count`]), `[allocations,
/// frees]`, over every thread that ever ran (exact once the counting threads are quiet).
pub fn held_counts() -> [u64; 2] {
    let mut n = [0u64; 2];
    let mut add = |h: &Held| {
        let c = h.counted();
        n[0] += c[0];
        n[1] += c[1];
    };
    for_each_shard(|s| add(&s.held));
    LINES.for_each(|e| add(e.held()));
    n
}

/// Files a published allocation at `addr`, made in `ctx`, on the calling thread's ring
/// ([`crate::owners`]): a push, no lock (a full ring whose entries were all cancelled by
/// frees is emptied without one: [`AllocRing::reclaim`]). `false` when the ring is full
/// of allocations still to file (the caller files the ring's entries and calls again:
/// [`file_own_ring`]) or the thread is exiting (the caller files it under no context).
#[inline]
pub fn file_alloc(ctx: u64, addr: u64) -> bool {
    let scope = ();
    match crate::thread::state(&scope) {
        Some(l) => {
            let ring = &shard_of(l).allocs;
            ring.push(ctx, addr) || (ring.reclaim() && ring.push(ctx, addr))
        }
        None => false,
    }
}

/// A successful free of the device allocation at `addr` by the calling thread, whose thread
/// pointer is `tp`, wherever it is recorded: this thread's held allocation (a store), else
/// the live `table` (and this thread's ring's latest entry is cancelled when it is that
/// allocation: [`AllocRing::cancel_last`]), else another thread's held allocation
/// ([`take_held`], then the table once more: see [`crate::held`]). With `count`, the call is
/// also counted on this thread's held-allocation line ([`Held::count`]) when the thread has
/// one: `true` when it was counted there (`false`: the caller counts it). The hot path of
/// every `cuMemFree_v2`: one load of the line found by `tp`, a load and a store to free the
/// allocation held there.
#[inline(always)]
pub fn free_alloc<const N: usize>(tp: usize, table: &LiveTable<N>, addr: u64, count: bool) -> bool {
    match LINES.own(tp) {
        Some(e) => {
            if count {
                e.held().count(Counted::Free);
            }
            if !e.held().release_own(addr) {
                free_unheld(table, addr);
            }
            count
        }
        None => free_from_shard(table, addr, count),
    }
}

/// [`free_alloc`] of an address the calling thread does not hold: removed from the table
/// (cancelling this thread's latest ring entry when it is that allocation), else taken
/// from wherever it is held.
#[inline(never)]
fn free_unheld<const N: usize>(table: &LiveTable<N>, addr: u64) {
    if table.remove(addr).is_some() {
        let scope = ();
        if let Some(s) = crate::thread::state(&scope).and_then(|l| l.work.get()) {
            s.allocs.cancel_last(addr);
        }
    } else {
        free_elsewhere(table, addr);
    }
}

/// [`free_alloc`] for a thread without a line: its shard's held allocation, else as
/// [`free_unheld`].
#[inline(never)]
fn free_from_shard<const N: usize>(table: &LiveTable<N>, addr: u64, count: bool) -> bool {
    let scope = ();
    let own = crate::thread::state(&scope).and_then(|l| l.work.get());
    if let Some(s) = own {
        if count {
            s.held.count(Counted::Free);
        }
        if s.held.release_own(addr) {
            return count;
        }
    }
    free_unheld(table, addr);
    count && own.is_some()
}

/// [`free_alloc`] of an address neither this thread held nor the table had: held by
/// another thread, or published while this looked.
#[cold]
#[inline(never)]
fn free_elsewhere<const N: usize>(table: &LiveTable<N>, addr: u64) {
    if !take_held(addr) {
        table.forget(addr);
    }
}

/// Takes `addr` from every held-allocation line that holds it (a free, or an allocation
/// that died with its context): `true` when one did. No lock while at most [`LISTED`]
/// shards exist.
pub fn take_held(addr: u64) -> bool {
    let mut took = false;
    for_each_held(|h| took |= h.take(addr));
    took
}

/// The held allocation at `addr` in any shard, if one holds it.
pub fn held_at(addr: u64) -> Option<Allocation> {
    let mut found = None;
    for_each_held(|h| {
        if found.is_none() {
            found = h.peek().filter(|a| a.addr == addr);
        }
    });
    found
}

/// Every shard's held allocation (cold: explanations, a context's end, the exit report).
pub fn held_all() -> Vec<Allocation> {
    let mut v = Vec::new();
    for_each_held(|h| v.extend(h.peek()));
    v
}

/// The calling thread's ring is full ([`file_alloc`] said `false`): files that ring's
/// entries into `index` (only this thread's: no other thread's ring is read, so threads
/// whose rings fill at the same time do not queue behind one drain of every ring; a
/// context's end drains them all), then files `(ctx, addr)` on the emptied ring. `false`
/// when it could still not be filed (the thread is exiting): the caller files it itself.
/// The caller holds the lock that makes it the only drainer.
pub fn file_own_ring(
    index: &mut crate::owners::Index,
    ctx: u64,
    addr: u64,
    live: &dyn Fn(u64) -> bool,
) -> bool {
    let scope = ();
    match crate::thread::state(&scope).and_then(|l| l.work.get()) {
        Some(s) => {
            index.drain([s.allocs()], live);
            file_alloc(ctx, addr)
        }
        None => false,
    }
}

/// What a hook needs to know of its calling thread and its stream argument ([`caller`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The stream key `stream` stands for on this thread ([`stream_key`]).
    pub key: u64,
    /// The thread's current context as last recorded, 0 for none or unknown.
    pub ctx: usize,
    /// The thread's id: [`caller`]'s `tid` answer, asked once per thread and kept.
    pub tid: u64,
}

/// The calling thread's stream key for `stream`, its current context and its id, in one
/// thread-local access (during thread exit: context 0 and `tid` asked).
#[inline(always)]
pub fn caller(stream: usize, per_thread: bool, tid: impl FnOnce() -> u64) -> Caller {
    let scope = ();
    match crate::thread::state(&scope) {
        Some(l) => {
            let ctx = l.ctx.get();
            Caller {
                key: stream_key(stream, ctx, per_thread),
                ctx,
                tid: crate::thread::tid_of(l, tid),
            }
        }
        None => Caller {
            key: stream_key(stream, 0, per_thread),
            ctx: 0,
            tid: tid(),
        },
    }
}

/// The stream key the calling thread's `stream` argument stands for.
pub fn key_for(stream: usize, per_thread: bool) -> u64 {
    stream_key(stream, current_context(), per_thread)
}

/// The id of the calling thread's shard, creating it if needed (`None` during thread exit).
pub fn own_shard_id() -> Option<u32> {
    let mut id = None;
    with_local(|s, _| id = Some(s.id()));
    id
}

/// Every shard (for the tracker's read moments).
pub fn shards() -> Vec<&'static Shard> {
    ALL.lock().clone()
}

/// Launches, copies and other operations not counted: no free stream slot, or made during
/// thread exit.
pub fn untracked() -> u64 {
    UNTRACKED.load(Ordering::Relaxed) + ALL.lock().iter().map(|s| s.untracked()).sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(
            stream_key(0x5eed_5000_0100, 0x1000, false),
            0x5eed_5000_0100
        );
        assert_eq!(stream_key(0, 0x1000, false), 0x1001);
        assert_eq!(stream_key(1, 0x1000, true), 0x1001);
        assert_eq!(stream_key(0, 0x1000, true), 0x1002);
        assert_eq!(stream_key(2, 0x1000, false), 0x1002);
        assert_eq!(stream_key(0, 0, false), 1);
        assert_eq!(key_kind(0x1001), KeyKind::Legacy(0x1000));
        assert_eq!(key_kind(0x1002), KeyKind::PerThread(0x1000));
        assert_eq!(key_kind(0x2000), KeyKind::Stream(0x2000));
        assert_eq!(key_context(0x1002), Some(0x1000));
        assert_eq!(key_context(0x2000), None);
    }

    #[test]
    fn counts_copies_and_events() {
        let s = Box::new(Shard::new(7));
        assert_eq!(s.id(), 7);
        assert_eq!(s.counts(0x100), None);
        s.add_launch(0x100);
        s.add_launch(0x100);
        assert!(s.add_copy(0x100, 0x7000, 0x1000, 64, CopyKind::HostToDevice));
        assert!(!s.add_copy(0x100, 0x2000, 0x7000, 16, CopyKind::DeviceToHost));
        s.add_launch(0x201);
        assert_eq!(
            s.counts(0x100),
            Some(Counts {
                launches: 2,
                copies: 2,
                ops: 0
            })
        );
        assert_eq!(s.keys().len(), 2);
        let copies = s.copy_records();
        assert_eq!(copies.len(), 2);
        let c = copies.iter().find(|c| c.ordinal == 1).unwrap();
        assert_eq!((c.dst, c.src, c.bytes), (0x7000, 0x1000, 64));
        assert!(c.touches_host(0x1000, 0x1001));
        assert!(c.touches_host(0x103f, 0x2000));
        assert!(!c.touches_host(0x1040, 0x2000));
        assert!(c.touches_device(0x7000, 0x7001));
        assert!(!c.touches_device(0x1000, 0x1040));
        let u = CopyRecord {
            kind: CopyKind::Unified,
            ..*c
        };
        assert!(u.touches_device(0x1000, 0x1001) && u.touches_host(0x7000, 0x7001));
        s.add_event_record(0xe0, 0x100);
        s.add_launch(0x100);
        let m = s.event_mark(0xe0).unwrap();
        assert_eq!(
            m.counts,
            Counts {
                launches: 2,
                copies: 2,
                ops: 0
            }
        );
        assert_eq!(m.key, 0x100);
        assert_eq!(s.event_mark(0xe1), None);
        let later = {
            s.add_event_record(0xe0, 0x100);
            s.event_mark(0xe0).unwrap()
        };
        assert!(later.seq > m.seq);
        assert_eq!(later.counts.launches, 3);
        s.add_op(0x100);
        s.add_op(0x100);
        assert_eq!(s.counts(0x100).map(|c| c.ops), Some(2));
        assert_eq!(
            s.counts(0x100).unwrap().since(later.counts),
            Counts {
                launches: 0,
                copies: 0,
                ops: 2
            }
        );
        s.add_event_record(0xe0, 0x100);
        assert_eq!(s.event_mark(0xe0).unwrap().counts.ops, 2);
    }

    #[test]
    fn ring_keeps_the_newest_copies() {
        let s = Box::new(Shard::new(0));
        for i in 0..(COPIES as u64 + 10) {
            s.add_copy(0x100, 0x7000 + i, 0x1000, 1, CopyKind::HostToDevice);
        }
        let r = s.copy_records();
        assert_eq!(r.len(), COPIES);
        assert_eq!(r.iter().map(|c| c.ordinal).min(), Some(11));
        assert_eq!(r.iter().map(|c| c.ordinal).max(), Some(COPIES as u64 + 10));
    }

    #[test]
    fn full_probe_window_is_untracked() {
        let s = Box::new(Shard::new(0));
        // More keys than slots: some land in full windows.
        for k in 1..=(SLOTS as u64 * 2) {
            s.add_launch(k << 8);
        }
        let tracked = s.keys().len() as u64;
        assert_eq!(tracked + s.untracked(), SLOTS as u64 * 2);
        assert!(tracked <= SLOTS as u64);
    }

    #[test]
    fn caller_gives_the_key_context_and_id_of_the_calling_thread_asking_the_id_once() {
        std::thread::spawn(|| {
            let asked = std::cell::Cell::new(0);
            let query = || {
                asked.set(asked.get() + 1);
                77
            };
            set_current_context(0x5000);
            for (stream, per_thread) in [(0, false), (0, true), (1, false), (0x9000, false)] {
                let c = caller(stream, per_thread, query);
                assert_eq!(c.key, key_for(stream, per_thread));
                assert_eq!(c.key, stream_key(stream, 0x5000, per_thread));
                assert_eq!((c.ctx, c.tid), (0x5000, 77));
            }
            assert_eq!(asked.get(), 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_local_shards_are_exact_and_recycled() {
        let key = stream_key(0, 0xabc000, false);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    set_current_context(0xabc000);
                    assert_eq!(current_context(), 0xabc000);
                    for _ in 0..1000 {
                        note_launch(0, false);
                    }
                    note_copy(0, false, 0x7000, 0x1000, 8, CopyKind::HostToDevice);
                    note_op(0, false);
                    note_event_record(0xe0, 0, false);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total = shards()
            .iter()
            .filter_map(|s| s.counts(key))
            .fold(Counts::default(), Counts::plus);
        assert_eq!(
            total,
            Counts {
                launches: 4000,
                copies: 4,
                ops: 4
            }
        );
        assert!(shards().iter().filter_map(|s| s.event_mark(0xe0)).count() >= 1);
        // A new thread reuses a shard and keeps adding to it.
        std::thread::spawn(move || {
            set_current_context(0xabc000);
            note_launch(1, false);
        })
        .join()
        .unwrap();
        let after: u64 = shards()
            .iter()
            .filter_map(|s| s.counts(key))
            .map(|c| c.launches)
            .sum();
        assert_eq!(after, 4001);
        // A launch counted with its call: the call counter and the stream, one access.
        std::thread::spawn(move || {
            set_current_context(0xabc000);
            count_launch(89, false, 0, false, true);
            count_launch(89, false, 0, true, true);
            count_launch(89, true, 0, false, true);
            count_launch(89, false, 0, false, false);
        })
        .join()
        .unwrap();
        let launches = |k: u64| -> u64 {
            shards()
                .iter()
                .filter_map(|s| s.counts(k))
                .map(|c| c.launches)
                .sum()
        };
        assert_eq!(launches(key), 4002);
        assert_eq!(launches(stream_key(0, 0xabc000, true)), 1);
        let c = crate::counters::Counters::global().snapshot()[89];
        assert_eq!((c.calls, c.errors), (4, 1));
    }

    #[test]
    fn synchronize_raises_baselines_in_the_shards_without_a_lock() {
        // Eight threads, each on its own stream and event, synchronising them while the
        // shard list's lock is held: the baselines follow exactly, and no thread waits.
        let ready = std::sync::Arc::new(std::sync::Barrier::new(9));
        let go = std::sync::Arc::new(std::sync::Barrier::new(9));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..8u64)
            .map(|i| {
                let (ready, go, tx) = (ready.clone(), go.clone(), tx.clone());
                std::thread::spawn(move || {
                    let key = 0x7a57_0000_0000 + (i << 12);
                    let event = 0x7e57_0000_0000 + (i << 12);
                    // The thread's shard is taken (under the lock) before the lock is held.
                    note_op(key as usize, false);
                    ready.wait();
                    go.wait();
                    for round in 1..=100u64 {
                        note_launch(key as usize, false);
                        note_copy(
                            key as usize,
                            false,
                            0x7000,
                            0x1000,
                            8,
                            CopyKind::HostToDevice,
                        );
                        if round % 2 == 0 {
                            retire_key(key);
                        } else {
                            note_event_record(event, key as usize, false);
                            note_launch(key as usize, false);
                            retire_event(event);
                        }
                    }
                    let s = crate::thread::with(|l| l.work.get())
                        .flatten()
                        .expect("a shard");
                    tx.send((s.counts(key).unwrap(), s.baseline(key))).unwrap();
                })
            })
            .collect();
        ready.wait();
        let held = ALL.lock();
        go.wait();
        let results: Vec<_> = (0..8)
            .map(|_| rx.recv_timeout(std::time::Duration::from_secs(20)))
            .collect();
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        for r in results {
            let (counts, base) = r.expect("a synchronize waited for the shard list's lock");
            let all = Counts {
                launches: 150,
                copies: 100,
                ops: 1,
            };
            assert_eq!(counts, all);
            // The last round (100) synchronised the stream itself.
            assert_eq!(base, all);
        }
        let mut listed = 0;
        for_each_shard(|s| {
            assert_eq!(s.id() as usize, listed);
            listed += 1;
        });
        assert!(listed >= 8 && listed <= shards().len());
    }

    #[test]
    fn an_event_retires_what_its_latest_record_covered() {
        let s = Box::new(Shard::new(0));
        let o = Box::new(Shard::new(1));
        s.add_launch(0x100);
        s.add_event_record(0xe0, 0x100);
        s.add_launch(0x100);
        o.add_launch(0x200);
        o.add_event_record(0xe0, 0x200);
        let (m, by) = latest_event_mark([&*s, &*o], 0xe0).unwrap();
        assert_eq!((m.key, by.id()), (0x200, 1));
        s.raise(
            0x100,
            Counts {
                launches: 1,
                copies: 0,
                ops: 0,
            },
        );
        assert_eq!(s.baseline(0x100).launches, 1);
        // Never lowered, and a key never used has none.
        s.raise(0x100, Counts::default());
        assert_eq!(s.baseline(0x100).launches, 1);
        s.raise(
            0x300,
            Counts {
                launches: 5,
                copies: 0,
                ops: 0,
            },
        );
        assert_eq!(s.baseline(0x300), Counts::default());
        s.retire(0x100);
        assert_eq!(s.baseline(0x100), s.counts(0x100).unwrap());
    }

    #[test]
    fn the_latest_record_of_an_event_is_found_whichever_threads_record_others_between() {
        let a = Box::new(Shard::new(0));
        let b = Box::new(Shard::new(1));
        let c = Box::new(Shard::new(2));
        let d = Box::new(Shard::new(3));
        let latest = |ev| latest_event_mark([&*a, &*b, &*c], ev).map(|(m, by)| (m.key, by.id()));
        // Each event's records alternate between shards, with records of many other events
        // (which take other counters) in between, on a fourth shard (each shard remembers
        // one record per slot of its own, so they would evict these there).
        for round in 0..200u64 {
            let ev = 0xe000 + (round % 7) * 0x100;
            let (by, key) = match round % 3 {
                0 => (&a, 0x100),
                1 => (&b, 0x200),
                _ => (&c, 0x300),
            };
            by.add_event_record(ev, key);
            for other in 0..5u64 {
                d.add_event_record(0x9000 + other * 0x40 + round, 0x400);
            }
            let id = (round % 3) as u32;
            assert_eq!(latest(ev), Some((key, id)), "round {round}");
        }
    }

    /// A thread whose ring fills files its own ring only: another thread's waiting
    /// allocations stay in that thread's ring (read at a context's end), so threads whose
    /// rings fill together do not each wait for a drain of every ring.
    #[test]
    fn a_full_ring_files_only_its_own_entries() {
        use crate::owners::{Index, RING};
        let all = |_: u64| true;
        let go = std::sync::Arc::new(std::sync::Barrier::new(2));
        let done = std::sync::Arc::new(std::sync::Barrier::new(2));
        let other = {
            let (go, done) = (go.clone(), done.clone());
            std::thread::spawn(move || {
                set_current_context(0xb0);
                // Empty this thread's ring (a reused shard may hold a former thread's
                // entries), then leave ten allocations waiting in it.
                let mut n = 0u64;
                while file_alloc(0xb0, 0xb000_0000 + n * 512) {
                    n += 1;
                }
                let mut scratch = Index::new();
                assert!(file_own_ring(&mut scratch, 0xb0, 0xb100_0000, &all));
                for i in 1..10u64 {
                    assert!(file_alloc(0xb0, 0xb100_0000 + i * 512));
                }
                go.wait();
                done.wait();
                let mut room = 0usize;
                while file_alloc(0xb0, 0xb200_0000 + room as u64 * 512) {
                    room += 1;
                }
                room
            })
        };
        let mine = std::thread::spawn(move || {
            go.wait();
            set_current_context(0xa0);
            let mut mine = Vec::new();
            while file_alloc(0xa0, 0xa000_0000 + mine.len() as u64 * 512) {
                mine.push(0xa000_0000 + mine.len() as u64 * 512);
            }
            let mut index = Index::new();
            assert!(file_own_ring(&mut index, 0xa0, 0xa100_0000, &all));
            done.wait();
            (index.take(0xa0), index.take(0xb0), mine)
        });
        let (filed, of_other, pushed) = mine.join().unwrap();
        assert_eq!(filed, pushed, "the full ring's own entries, each filed");
        assert_eq!(
            of_other,
            Vec::<u64>::new(),
            "no entry of the other thread's ring"
        );
        assert_eq!(
            other.join().unwrap(),
            RING - 10,
            "its ten entries still wait in its ring"
        );
    }

    /// What [`hold`] did with a new device allocation.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Hold {
        /// Held in the calling thread's shard: nothing else to do.
        Held,
        /// Held; the allocation held before was published into the live table.
        Published(Allocation),
        /// The calling thread's local storage is being torn down: nothing held.
        NoThread,
    }

    /// A thread pointer for the calling test thread: the address of one of its
    /// thread-locals, unique among live threads as the shim's thread pointer is (the shim
    /// reads the thread register instead; the core has no code that may).
    fn tp() -> usize {
        thread_local! {
            static K: u8 = const { 0 };
        }
        K.with(|k| k as *const u8 as usize)
    }

    /// [`hold_alloc`] with the calling thread's [`tp`], with what it did as a value.
    fn hold<const N: usize>(table: &LiveTable<N>, addr: u64, bytes: u64, count: bool) -> Hold {
        hold_as(tp(), table, addr, bytes, count)
    }

    /// [`hold_alloc`] as a thread with thread pointer `tp` (0: none, so the shard's line).
    fn hold_as<const N: usize>(
        tp: usize,
        table: &LiveTable<N>,
        addr: u64,
        bytes: u64,
        count: bool,
    ) -> Hold {
        let mut published = None;
        if !hold_alloc(tp, table, addr, bytes, count, |a| published = Some(a)) {
            return Hold::NoThread;
        }
        published.map_or(Hold::Held, Hold::Published)
    }

    /// An allocate/free loop holds each allocation on the thread's line (found by thread
    /// pointer, or its shard's without one) and frees it there: the live table never sees
    /// it and the ring is never written.
    #[test]
    fn an_allocate_free_loop_writes_neither_table_nor_ring() {
        static T: LiveTable<64> = LiveTable::new();
        for with_tp in [true, false] {
            std::thread::spawn(move || {
                let me = if with_tp { tp() } else { 0 };
                // A reused line may hold a former thread's allocation: published by the first.
                hold_as(me, &T, 0x6000_0000, 512, false);
                free_alloc(me, &T, 0x6000_0000, false);
                let pushed = || crate::thread::with(|l| l.work.get().unwrap().allocs().pushed());
                let (ring, table) = (pushed(), T.entries());
                for i in 0..(10 * crate::owners::RING as u64) {
                    let addr = 0x7000_0000 + (i % 3) * 512;
                    assert_eq!(hold_as(me, &T, addr, 512, false), Hold::Held);
                    assert_eq!(held_at(addr).map(|a| a.bytes), Some(512));
                    free_alloc(me, &T, addr, false);
                    assert_eq!(held_at(addr), None);
                }
                assert_eq!(pushed(), ring, "no ring entry");
                assert_eq!(T.entries(), table, "no table entry");
                let on_line = crate::thread::with(|l| own_line(l).is_some()).unwrap();
                assert_eq!(on_line, with_tp, "a thread pointer claims a line");
            })
            .join()
            .unwrap();
        }
    }

    /// Two threads whose thread pointers hash to one entry: the first claims it, the second
    /// holds in its shard, and both free their allocations where they hold them.
    #[test]
    fn a_thread_whose_entry_is_taken_holds_in_its_shard() {
        static T: LiveTable<64> = LiveTable::new();
        use crate::held_lines::home;
        // Thread pointers no test thread has (below any thread-local's address), on an
        // entry no other test's thread claimed.
        let a = (1..)
            .map(|k| 0x10_0000usize + k * 64)
            .find(|&t| !LINES.ever_claimed(home(t)))
            .unwrap();
        let b = (1..)
            .map(|k| a + k * 64)
            .find(|&t| home(t) == home(a))
            .unwrap();
        let (claimed, done) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let first = {
            let (claimed, done) = (claimed.clone(), done.clone());
            std::thread::spawn(move || {
                assert_eq!(hold_as(a, &T, 0x5100_0000, 64, true), Hold::Held);
                claimed.wait();
                done.wait();
                assert!(free_alloc(a, &T, 0x5100_0000, true));
                crate::thread::with(|l| own_line(l).is_some()).unwrap()
            })
        };
        claimed.wait();
        let second = std::thread::spawn(move || {
            assert_eq!(hold_as(b, &T, 0x5200_0000, 64, true), Hold::Held);
            let in_shard = crate::thread::with(|l| {
                l.line.get() == NO_LINE && l.work.get().unwrap().held.peek().is_some()
            })
            .unwrap();
            assert!(free_alloc(b, &T, 0x5200_0000, true));
            in_shard
        })
        .join()
        .unwrap();
        done.wait();
        assert!(first.join().unwrap(), "the first claimed the entry");
        assert!(second, "the second held in its shard");
        assert_eq!(held_at(0x5100_0000), None);
        assert_eq!(held_at(0x5200_0000), None);
        assert_eq!(T.entries(), vec![]);
    }

    /// Counted allocations and frees are counted on the thread's held-allocation line, the
    /// uncounted ones not, and the counts stay when the thread exits. A free on a thread
    /// with no shard yet is left to the caller to count.
    #[test]
    fn counted_allocations_and_frees_are_totalled_over_threads_that_exited() {
        static T: LiveTable<64> = LiveTable::new();
        // Other tests' threads count nothing: every other call here passes `false`.
        let before = held_counts();
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        let addr = 0xa000_0000 + t * 0x100_0000 + (i % 7) * 512;
                        hold(&T, addr, 512, true);
                        assert!(free_alloc(tp(), &T, addr, true));
                        hold(&T, addr, 512, false);
                        assert!(!free_alloc(tp(), &T, addr, false));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let after = held_counts();
        assert_eq!([after[0] - before[0], after[1] - before[1]], [4000, 4000]);
        // A thread that never allocated has no shard to count on.
        let counted = std::thread::spawn(|| free_alloc(tp(), &T, 0xb000_0000, true))
            .join()
            .unwrap();
        assert!(!counted);
        assert_eq!(held_counts()[1] - before[1], 4000);
    }

    /// Allocations freed newest first: each is published when the next is made, and its
    /// free cancels its ring entry, so a full ring of them is emptied without filing.
    #[test]
    fn frees_in_reverse_order_never_need_their_ring_filed() {
        static T: LiveTable<64> = LiveTable::new();
        std::thread::spawn(|| {
            let mut full = 0;
            for i in 0..(10 * crate::owners::RING as u64) {
                let (a, b) = (0x8000_0000 + i * 1024, 0x8000_0000 + i * 1024 + 512);
                assert_eq!(hold(&T, a, 512, false), Hold::Held);
                match hold(&T, b, 512, false) {
                    Hold::Published(p) => {
                        assert_eq!(p.addr, a);
                        if !file_alloc(p.ctx, p.addr) {
                            full += 1;
                            let mut index = crate::owners::Index::new();
                            assert!(file_own_ring(&mut index, p.ctx, p.addr, &|_| true));
                        }
                    }
                    h => panic!("{h:?}"),
                }
                assert_eq!(T.get(a).map(|e| e.bytes), Some(512));
                free_alloc(tp(), &T, b, false);
                free_alloc(tp(), &T, a, false);
                assert_eq!(T.get(a), None);
            }
            // A shard another test's thread left behind may hold its entries: at most one
            // filing, for them.
            assert!(full <= 1, "{full} filings");
        })
        .join()
        .unwrap();
    }

    /// A free on another thread of an allocation still held: taken from the holder's shard,
    /// so the holder's next allocation does not publish it.
    #[test]
    fn a_free_on_another_thread_takes_a_held_allocation() {
        static T: LiveTable<64> = LiveTable::new();
        let (made, freed) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let holder = {
            let (made, freed) = (made.clone(), freed.clone());
            std::thread::spawn(move || {
                hold(&T, 0x9000_0000, 4096, false);
                made.wait();
                freed.wait();
                hold(&T, 0x9000_1000, 4096, false)
            })
        };
        made.wait();
        assert_eq!(held_at(0x9000_0000).map(|a| a.bytes), Some(4096));
        free_alloc(tp(), &T, 0x9000_0000, false);
        assert_eq!(held_at(0x9000_0000), None);
        freed.wait();
        let h = holder.join().unwrap();
        assert!(
            !matches!(h, Hold::Published(a) if a.addr == 0x9000_0000),
            "{h:?}"
        );
        assert_eq!(T.get(0x9000_0000), None);
        assert_eq!(
            held_at(0x9000_1000).map(|a| a.bytes),
            Some(4096),
            "still held after its thread exited"
        );
        assert!(take_held(0x9000_1000));
    }
}
