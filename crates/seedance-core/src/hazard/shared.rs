//! The race model of [`super::Table`] shared between threads without one lock for all:
//! the same rules and the same verdicts (a property test below checks them against the
//! [`super::Table`] on random sequences), sharded so that threads working on their own
//! streams and their own pinned buffers never take a lock another one takes.
//!
//! * Pinned ranges: a snapshot (`arc_swap`) published when a range is made or freed;
//!   a copy finds its range without a lock. Each range holds its pending accesses behind
//!   its own mutex, so the check and the commit of a copy lock only the copy's range.
//! * Streams: each stream with pending accesses has a state (its clock, how many accesses
//!   it has pending and in which ranges, whether it was destroyed) in one of [`SHARDS`]
//!   maps chosen by stream key. Sequence numbers are per stream: every comparison the
//!   model makes (an access against a wait's or a record's "up to", a wait's moment
//!   against a record) is between points of one stream. A stream's state goes when its
//!   last access completes; its next state starts above every number handed out so far
//!   ([`Shared::fresh`]), so each stream's clock only moves forward. The clock is an
//!   atomic that a range whose accesses are all on that stream also holds: a copy that
//!   supersedes the range's one pending access (the loop on one buffer) takes its number
//!   under the range's lock alone, since the stream's state cannot go while that access
//!   is pending.
//! * Event records: [`SHARDS`] maps by event handle.
//! * Orderings between different streams (`cuStreamWaitEvent` on another stream's record,
//!   the shim's repair): one list behind a mutex, taken only when such an ordering exists
//!   and a stream completes or a copy meets a pending access of another stream. A wait on
//!   a record of the waiter's own stream orders nothing new and takes no lock.
//!
//! * What threads share they only read: the snapshot, each range's bounds and the `busy`
//!   hint of the pending count are on cache lines that nobody writes while threads keep
//!   to their own streams and buffers (docs/performance.md, "The shim's own cost in
//!   threads").
//!
//! * Legacy-stream barriers: a counter (an access's `epoch` is its value at the commit) and
//!   each context's latest barrier behind a mutex, taken by legacy-stream work while
//!   accesses of other streams are pending and by the checks that meet a pending access of
//!   another stream.
//!
//! Lock order: a range, then a stream shard, the wait list, the flags or the barriers; an
//! event shard, then a stream shard or the wait list; no lock is taken while a stream
//! shard, the wait list, the flags or the barriers are held (a stream's flags are asked of
//! the driver with no lock but its range's).

use super::{
    legacy_key, Access, Direction, Hazard, Range, MAX_BARRIER_CONTEXTS, MAX_EVENTS, MAX_PENDING,
    MAX_WAITS,
};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use seedance_hotpath::work::{key_kind, KeyKind};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Shards of the stream states and of the event records (a power of two).
pub const SHARDS: usize = 256;
/// Created streams whose flags are kept at most (more: counted blocking, unknown means
/// silent).
const MAX_FLAGS: usize = 1 << 16;
/// Event records kept per shard at most.
const EVENTS_PER_SHARD: usize = MAX_EVENTS / 64;
/// Numbers a stream state hands out before it moves to a fresh block.
const BLOCK: u64 = 1 << 32;

/// A stream as the model tells them apart: its key and, for the per-thread default
/// stream, the thread.
type Sid = (u64, u64);

fn sid(key: u64, tid: u64) -> Sid {
    match key_kind(key) {
        KeyKind::PerThread(_) => (key, tid),
        _ => (key, 0),
    }
}

fn shard_of(x: u64) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// A multiplicative hash for the shards' maps: their keys are stream and event handles
/// (pointers), which need no protection against chosen collisions.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(26) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<Mix>>;

/// Keeps each shard on its own cache lines.
use seedance_hotpath::cache_padded::CachePadded as Pad;

#[derive(Default)]
struct Pending {
    list: Vec<Access>,
    /// While every access of the range is on one stream: that stream.
    single: Option<Sid>,
    /// The clock of `single`'s state, where the commit that made it single knew it: a
    /// copy that supersedes the range's one access takes its number from it without the
    /// stream shard's lock ([`Shared::commit_in`]). `None` when not known.
    clock: Option<Arc<Clock>>,
    /// The range was freed: copies that still hold it record nothing.
    dead: bool,
}

/// A range and its pending accesses. The range is read by every thread whose copy looks
/// near it in the snapshot, the lock written by every copy from it: each on a cache line of
/// its own (and apart from the `Arc`'s counts, which a [`Held`] writes), so a look-up that
/// passes another thread's range reads a line nobody writes.
#[repr(align(128))]
struct Slot {
    range: Range,
    pending: Pad<Guarded>,
}

/// A range's pending accesses behind their lock, with a hint of them readable without it
/// ([`Guarded::hint`]), on the same line.
struct Guarded {
    /// [`NONE_PENDING`], [`SEVERAL`], or [`sid_hint`] of the one stream every pending
    /// access is on; written under the lock whenever the accesses change.
    hint: AtomicU64,
    lock: Mutex<Pending>,
}

/// [`Guarded::hint`]: no access pending.
const NONE_PENDING: u64 = 0;
/// [`Guarded::hint`]: accesses of more than one stream pending.
const SEVERAL: u64 = u64::MAX;

/// A stream's value of [`Guarded::hint`]: a hash of it, never [`NONE_PENDING`] or
/// [`SEVERAL`] (two streams with the same hash, about one chance in 2^64, would make
/// [`Shared::check_in`] skip a check between them: a missed hazard, never an invented one).
fn sid_hint(s: Sid) -> u64 {
    let h = (s.0.rotate_left(29) ^ s.1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(31);
    h.clamp(1, u64::MAX - 1)
}

/// The hint of the accesses `p` ([`Guarded::hint`]).
fn hint_of(p: &Pending) -> u64 {
    if p.list.is_empty() {
        NONE_PENDING
    } else {
        p.single.map_or(SEVERAL, sid_hint)
    }
}

impl Guarded {
    fn new(p: Pending) -> Guarded {
        Guarded {
            hint: AtomicU64::new(hint_of(&p)),
            lock: Mutex::new(p),
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Pending> {
        self.lock.lock()
    }

    /// Writes the hint of `p` (the accesses just left under the lock).
    fn publish(&self, p: &Pending) {
        let h = hint_of(p);
        if self.hint.load(Ordering::Relaxed) != h {
            self.hint.store(h, Ordering::Release);
        }
    }
}

type RangeMap = BTreeMap<u64, Arc<Slot>>;

/// [`Ranges`]'s gap when it has none: no address lies in `[0, 0)`.
const NO_GAP: (u64, u64) = (0, 0);

/// One thread's cache of the pinned-range snapshot ([`Shared::ranges_cache`]): a look-up
/// through it costs one atomic load while no range was made or freed.
pub struct Ranges {
    cache: arc_swap::Cache<&'static ArcSwap<RangeMap>, Arc<RangeMap>>,
    /// The snapshot `last` and `gap` were found in, held so that no later snapshot can
    /// have its address (a snapshot's address alone would let a freed one's answers be
    /// taken for a new one's).
    snap: Option<Arc<RangeMap>>,
    /// The range last found.
    last: Option<Held>,
    /// The gap between ranges `[lo, hi)` the last miss fell in: a copy from the same
    /// pageable buffer (or any address of that gap) misses without a search (the search's
    /// cost grows with the number of ranges: one per thread in a loader). `(0, 0)`, which
    /// holds no address, when there is none: 16 bytes, so that a thread's copy state
    /// with this cache fits one cache line (`shim/src/faults/hazard/local.rs`).
    gap: (u64, u64),
}

impl Ranges {
    /// The range the last look-up through this cache found ([`Shared::find_cached_ref`]).
    pub fn last(&self) -> Option<&Held> {
        self.last.as_ref()
    }

    /// Whether every address of `addrs` lies in the gap the last look-up that found
    /// nothing fell in, under the current snapshot: then [`Shared::find_cached`] finds
    /// nothing for them either, and this answers without a search (one atomic load while
    /// no range was made or freed).
    pub fn misses(&mut self, addrs: [u64; 2]) -> bool {
        // The gap first: an address outside it (a copy from a pinned buffer) answers
        // without touching the snapshot.
        let (lo, hi) = self.gap;
        addrs.iter().all(|&a| a >= lo && a < hi) && {
            let map = self.cache.load();
            self.snap.as_ref().is_some_and(|s| Arc::ptr_eq(s, map))
        }
    }
}

/// A pinned range found by [`Shared::find`].
#[derive(Clone)]
pub struct Held(Arc<Slot>);

impl Held {
    /// The range.
    pub fn range(&self) -> &Range {
        &self.0.range
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.range.fmt(f)
    }
}

/// A stream state's clock: the next number it hands out. Numbers come in blocks of
/// [`BLOCK`] that start at a multiple of it ([`Shared::fresh`]); a block's last [`MARGIN`]
/// numbers are never handed out, so a tick that races a move to a fresh block (one
/// without the shard's lock, [`Clock::try_tick`]) cannot hand out a number of the next
/// block.
struct Clock {
    next: AtomicU64,
    /// Cleared under the shard's lock when the stream's state goes (its last access
    /// completed): a range that still names this clock then takes the locked path.
    live: AtomicBool,
}

/// Numbers at the end of each block that no stream hands out (far more than threads can
/// take between a tick that finds itself in them and the move to a fresh block).
const MARGIN: u64 = 1 << 20;

impl Clock {
    fn starting(at: u64) -> Arc<Clock> {
        Arc::new(Clock {
            next: AtomicU64::new(at),
            live: AtomicBool::new(true),
        })
    }

    /// The next number, under the stream shard's lock: moves to a fresh block near the
    /// end of this one.
    fn tick(&self, fresh: impl FnOnce() -> u64) -> u64 {
        let t = self.next.fetch_add(1, Ordering::Relaxed);
        if t % BLOCK < BLOCK - MARGIN {
            return t;
        }
        let c = fresh();
        self.next.store(c + 1, Ordering::Relaxed);
        c
    }

    /// The next number without the shard's lock: by a caller that holds a range's lock
    /// with an access of this stream pending in it (so the state cannot go meanwhile), or
    /// by an event record through the thread's [`LastClock`] (a state that goes after the
    /// `live` load leaves the number above every access of its own and below every
    /// access of the next state's: what a record made just before the end would hold);
    /// `None` near the block's end or once the state went (the caller takes the locked
    /// path; the number taken is left unused, a gap on the clock).
    fn try_tick(&self) -> Option<u64> {
        let t = self.next.fetch_add(1, Ordering::Relaxed);
        (t % BLOCK < BLOCK - MARGIN && self.live.load(Ordering::Relaxed)).then_some(t)
    }

    /// The clock now: above every number handed out.
    fn now(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

/// The clock of the stream a thread's last copy was committed on, kept by that thread
/// ([`Shared::commit_in_noting`]) for its next event record on the same stream
/// ([`Shared::event_recorded_after`]): the record then takes its number from the clock
/// without the stream shard's lock or its hash look-up, while the clock's state lives.
///
/// A clock whose state went is never used: a state made again for the stream has a clock
/// of its own, and a copy ordered before the record that made it was committed after the
/// old state's end, which the record then sees (the old clock's `live` is cleared before
/// that end, under the shard's lock the new state's first commit takes).
#[derive(Default)]
pub struct LastClock(Option<(Sid, Arc<Clock>)>);

impl LastClock {
    /// None known (a thread's first copy notes one).
    pub const fn new() -> LastClock {
        LastClock(None)
    }

    /// `c` is `s`'s clock (a clock belongs to one stream: the same clock is the same
    /// stream).
    #[inline(always)]
    fn note(&mut self, s: Sid, c: &Arc<Clock>) {
        if !self.0.as_ref().is_some_and(|(_, k)| Arc::ptr_eq(k, c)) {
            self.0 = Some((s, Arc::clone(c)));
        }
    }

    /// A number on `s`'s clock, if this is `s`'s live clock ([`Clock::try_tick`]).
    fn tick(&self, s: Sid) -> Option<u64> {
        match &self.0 {
            Some((x, c)) if *x == s => c.try_tick(),
            _ => None,
        }
    }
}

struct Stream {
    /// Its clock, shared with the ranges whose accesses are all on this stream
    /// ([`Pending::clock`]).
    clock: Arc<Clock>,
    /// Accesses pending on this stream, all ranges together.
    pending: usize,
    /// First bytes of the ranges that may hold them.
    ranges: Vec<u64>,
    /// Destroyed while accesses were pending.
    destroyed: bool,
}

impl Stream {
    fn tick(&mut self, fresh: impl FnOnce() -> u64) -> u64 {
        self.clock.tick(fresh)
    }
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    stream: Sid,
    upto: u64,
    /// The barrier a record on the legacy default stream is (0 for other streams).
    barrier: u64,
}

/// `waiter` is ordered after what `after` had queued before `upto` (on `after`'s clock),
/// since the moment `at` (on `waiter`'s clock).
#[derive(Debug, Clone, Copy)]
struct Wait {
    waiter: Sid,
    after: Sid,
    upto: u64,
    at: u64,
    /// A wait on a legacy-stream record: also after the blocking streams' accesses of
    /// that context with an epoch below it (0: none).
    barrier: u64,
}

type Streams = Mutex<Map<Sid, Stream>>;
type Events = Mutex<Map<u64, Mark>>;

/// The shared race table (see the module documentation); every method takes `&self`.
///
/// The fields every copy or stream hook reads (`ranges`, `has_waits`) and those written
/// on a stream's first access and completion (`pending`, `epoch`) are on cache lines of
/// their own.
pub struct Shared {
    ranges: Pad<ArcSwap<RangeMap>>,
    /// Serialises the writers of `ranges`.
    writer: Mutex<()>,
    streams: [Pad<Streams>; SHARDS],
    events: [Pad<Events>; SHARDS],
    waits: Mutex<Vec<Wait>>,
    has_waits: AtomicBool,
    /// Created streams' flags as learnt (`true`: `CU_STREAM_NON_BLOCKING`).
    flags: Mutex<Map<u64, bool>>,
    /// How to ask the driver a stream's flags (`cuStreamGetFlags`), set by the shim.
    ask: std::sync::OnceLock<fn(u64) -> Option<u32>>,
    /// Legacy-stream barriers made so far, all contexts together (an access's epoch).
    barrier: Pad<AtomicU64>,
    /// Each context's latest legacy-stream barrier, by its legacy key.
    barriers: Mutex<Map<u64, u64>>,
    pending: Pad<AtomicUsize>,
    /// Set when `pending` leaves 0, cleared when it returns to 0: read first by
    /// [`Shared::is_idle`], so while threads keep accesses pending (the count moving, never
    /// reaching 0) their hooks read a line nobody writes. May be stale either way after
    /// racing updates: `true` only costs work, and `false` sends the reader to the count.
    busy: Pad<AtomicBool>,
    forgotten: AtomicU64,
    epoch: Pad<AtomicU64>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

/// Accesses taken out of a range, counted per stream without allocating: the streams of
/// the accesses one completion removes are nearly always one or two.
struct Released<'a> {
    t: &'a Shared,
    last: Option<(Sid, usize)>,
}

impl Released<'_> {
    fn add(&mut self, s: Sid) {
        match &mut self.last {
            Some((l, n)) if *l == s => *n += 1,
            _ => {
                self.flush();
                self.last = Some((s, 1));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((s, n)) = self.last.take() {
            self.t.release(s, n);
        }
    }
}

impl Drop for Released<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Shared {
    /// An empty table.
    pub fn new() -> Shared {
        Shared {
            ranges: Pad(ArcSwap::from_pointee(BTreeMap::new())),
            writer: Mutex::new(()),
            streams: std::array::from_fn(|_| Pad(Mutex::new(Map::default()))),
            events: std::array::from_fn(|_| Pad(Mutex::new(Map::default()))),
            waits: Mutex::new(Vec::new()),
            has_waits: AtomicBool::new(false),
            flags: Mutex::new(Map::default()),
            ask: std::sync::OnceLock::new(),
            barrier: Pad(AtomicU64::new(0)),
            barriers: Mutex::new(Map::default()),
            pending: Pad(AtomicUsize::new(0)),
            busy: Pad(AtomicBool::new(false)),
            forgotten: AtomicU64::new(0),
            epoch: Pad(AtomicU64::new(0)),
        }
    }

    /// A number above every number any stream was handed so far.
    fn fresh(&self) -> u64 {
        (self.epoch.fetch_add(1, Ordering::Relaxed) + 1) * BLOCK
    }

    fn streams(&self, s: Sid) -> &Streams {
        &self.streams[shard_of(s.0 ^ s.1.rotate_left(32))].0
    }

    fn events(&self, e: u64) -> &Events {
        &self.events[shard_of(e)].0
    }

    /// The next point on `s`'s clock without making a state: a stream with nothing pending
    /// gets a fresh number.
    fn tick(&self, s: Sid) -> u64 {
        let mut m = self.streams(s).lock();
        match m.get_mut(&s) {
            Some(st) => st.tick(|| self.fresh()),
            None => self.fresh(),
        }
    }

    /// `s`'s clock now (every access queued on it so far is below it).
    fn now(&self, s: Sid) -> Option<u64> {
        self.streams(s).lock().get(&s).map(|st| st.clock.now())
    }

    /// `n` accesses of stream `s` completed or were dropped.
    fn release(&self, s: Sid, n: usize) {
        self.pending_sub(n);
        let gone = {
            let mut m = self.streams(s).lock();
            match m.get_mut(&s) {
                Some(st) if st.pending <= n => {
                    st.clock.live.store(false, Ordering::Relaxed);
                    m.remove(&s);
                    true
                }
                Some(st) => {
                    st.pending -= n;
                    false
                }
                None => false,
            }
        };
        // A wait after a stream with nothing pending orders nothing any more (but a wait
        // on a legacy-stream barrier, which orders the blocking streams' accesses, until
        // nothing is pending at all).
        if gone && self.has_waits.load(Ordering::Relaxed) {
            let idle = self.pending.load(Ordering::Relaxed) == 0;
            let mut w = self.waits.lock();
            w.retain(|w| w.after != s || (w.barrier > 0 && !idle));
            self.has_waits.store(!w.is_empty(), Ordering::Relaxed);
        }
    }

    fn slot(&self, lo: u64) -> Option<Arc<Slot>> {
        self.ranges.load().get(&lo).cloned()
    }

    /// A pinned or registered range was made. A range the table holds at the same first
    /// byte is replaced: its pending accesses move to the new one, and the old one is
    /// marked dead with the new snapshot already published, both under the old one's lock,
    /// so that a completion that finds it dead finds its successor ([`Shared::complete_in`]).
    pub fn pinned_added(&self, r: Range) {
        let _w = self.writer.lock();
        let mut map = BTreeMap::clone(&self.ranges.load());
        let old = map.get(&r.lo).cloned();
        let mut old_pending = old.as_ref().map(|s| s.pending.lock());
        let mut pending = Pending::default();
        if let Some(p) = old_pending.as_mut() {
            pending.list = std::mem::take(&mut p.list);
            pending.single = p.single.take();
            pending.clock = p.clock.take();
            p.dead = true;
        }
        let lo = r.lo;
        map.insert(
            lo,
            Arc::new(Slot {
                range: r,
                pending: Pad(Guarded::new(pending)),
            }),
        );
        self.ranges.store(Arc::new(map));
        if let (Some(s), Some(p)) = (&old, &old_pending) {
            s.pending.publish(p);
        }
    }

    /// The range starting at `lo` was freed or unregistered: its accesses are gone with it.
    pub fn pinned_removed(&self, lo: u64) -> Option<Range> {
        let slot = {
            let _w = self.writer.lock();
            let mut map = BTreeMap::clone(&self.ranges.load());
            let slot = map.remove(&lo)?;
            self.ranges.store(Arc::new(map));
            slot
        };
        let list = {
            let mut p = slot.pending.lock();
            p.dead = true;
            p.single = None;
            p.clock = None;
            let list = std::mem::take(&mut p.list);
            slot.pending.publish(&p);
            list
        };
        let mut rel = Released {
            t: self,
            last: None,
        };
        for a in &list {
            rel.add(sid(a.key, a.tid));
        }
        Some(slot.range.clone())
    }

    /// The pinned range that holds `addr` (no lock).
    pub fn pinned_at(&self, addr: u64) -> Option<Range> {
        self.find(addr).map(|h| h.0.range.clone())
    }

    /// A cache of the pinned ranges for the calling thread ([`Shared::find_cached`]).
    pub fn ranges_cache(&'static self) -> Ranges {
        Ranges {
            cache: arc_swap::Cache::new(&self.ranges),
            snap: None,
            last: None,
            gap: NO_GAP,
        }
    }

    /// [`Shared::find`] through a thread's cache of the snapshot.
    pub fn find_cached(&self, cache: &mut Ranges, addr: u64) -> Option<Held> {
        self.find_cached_ref(cache, addr).cloned()
    }

    /// [`Shared::find_cached`] without a hold of its own: the range found is `cache`'s
    /// [`Ranges::last`] until the next look-up through `cache`, which keeps it alive (a
    /// copy's `pre` and `ok` hooks then take no reference count on it).
    pub fn find_cached_ref<'c>(&self, cache: &'c mut Ranges, addr: u64) -> Option<&'c Held> {
        let map = cache.cache.load();
        if !cache.snap.as_ref().is_some_and(|s| Arc::ptr_eq(s, map)) {
            cache.snap = Some(Arc::clone(map));
            cache.last = None;
            cache.gap = NO_GAP;
        }
        let inside = |r: &Range| addr >= r.lo && addr - r.lo < r.bytes.max(1);
        if cache.last.as_ref().is_some_and(|h| inside(&h.0.range)) {
            return cache.last.as_ref();
        }
        let (lo, hi) = cache.gap;
        if addr >= lo && addr < hi {
            return None;
        }
        let below = map.range(..=addr).next_back();
        if let Some((_, s)) = below {
            if inside(&s.range) {
                cache.last = Some(Held(Arc::clone(s)));
                return cache.last.as_ref();
            }
        }
        // A miss: every address from the end of the range below to the start of the next
        // one has the same range below and lies outside it, so it misses too.
        let lo = below.map_or(0, |(_, s)| s.range.lo.saturating_add(s.range.bytes.max(1)));
        let hi = map
            .range(addr.saturating_add(1)..)
            .next()
            .map_or(u64::MAX, |(k, _)| *k);
        cache.gap = (lo, hi);
        None
    }

    /// The pinned range that holds `addr`, held for [`Shared::check_in`] and
    /// [`Shared::commit_in`] (one snapshot look-up for a copy's check and commit).
    pub fn find(&self, addr: u64) -> Option<Held> {
        let map = self.ranges.load();
        let (_, s) = map.range(..=addr).next_back()?;
        (addr - s.range.lo < s.range.bytes.max(1)).then(|| Held(Arc::clone(s)))
    }

    /// Whether any range is known.
    pub fn has_ranges(&self) -> bool {
        !self.ranges.load().is_empty()
    }

    /// The end of the range starting at `lo`.
    pub fn range_end(&self, lo: u64) -> Option<u64> {
        self.slot(lo)
            .map(|s| s.range.lo.saturating_add(s.range.bytes))
    }

    /// Whether no access is pending: one relaxed load while accesses are pending (the
    /// `busy` hint), two when none is.
    pub fn is_idle(&self) -> bool {
        !self.busy.load(Ordering::Relaxed) && self.pending.load(Ordering::Relaxed) == 0
    }

    fn pending_add(&self, n: usize) {
        if self.pending.fetch_add(n, Ordering::Relaxed) == 0 {
            self.busy.store(true, Ordering::Relaxed);
        }
    }

    fn pending_sub(&self, n: usize) {
        if n > 0 && self.pending.fetch_sub(n, Ordering::Relaxed) == n {
            self.busy.store(false, Ordering::Relaxed);
        }
    }

    /// Every pending access (a copy; for tests and reports).
    pub fn pending(&self) -> Vec<Access> {
        let map = self.ranges.load();
        map.values()
            .flat_map(|s| s.pending.lock().list.clone())
            .collect()
    }

    /// Accesses forgotten because a range's list was full.
    pub fn forgotten(&self) -> u64 {
        self.forgotten.load(Ordering::Relaxed)
    }

    /// Entries held: ranges, pending accesses, stream states, event records, waits and
    /// non-blocking streams (for the tests that memory stays flat).
    pub fn entries(&self) -> usize {
        let map = self.ranges.load();
        map.len()
            + map
                .values()
                .map(|s| s.pending.lock().list.len())
                .sum::<usize>()
            + self.streams.iter().map(|m| m.0.lock().len()).sum::<usize>()
            + self.events.iter().map(|m| m.0.lock().len()).sum::<usize>()
            + self.waits.lock().len()
            + self.flags.lock().len()
    }

    /// A stream was created with `flags` (`CU_STREAM_NON_BLOCKING` = 1 matters; the
    /// priority of `cuStreamCreateWithPriority` does not: flags alone decide).
    pub fn stream_created(&self, handle: u64, flags: u32) {
        let s = (handle, 0);
        if let Some(st) = self.streams(s).lock().get_mut(&s) {
            st.destroyed = false;
        }
        self.learn(handle, flags & 1 != 0);
    }

    fn learn(&self, handle: u64, non_blocking: bool) {
        let mut f = self.flags.lock();
        if f.len() < MAX_FLAGS || f.contains_key(&handle) {
            f.insert(handle, non_blocking);
        }
    }

    /// How to ask the driver the flags of a stream the table did not see made
    /// (`cuStreamGetFlags`; `None`: it cannot be asked). Set once; asked at most once per
    /// stream, when a rule depends on whether the stream is blocking.
    pub fn set_flags_source(&self, ask: fn(u64) -> Option<u32>) {
        let _ = self.ask.set(ask);
    }

    /// A stream was destroyed: while accesses on it are pending it is marked destroyed and
    /// its flags are kept (its work still runs as it was made; a stream not seen made is
    /// never asked about once destroyed: it counts as blocking); otherwise they are
    /// forgotten.
    pub fn stream_destroyed(&self, handle: u64) {
        let mut pending = false;
        if matches!(key_kind(handle), KeyKind::Stream(_)) {
            let s = (handle, 0);
            if let Some(st) = self.streams(s).lock().get_mut(&s) {
                st.destroyed = true;
                pending = true;
            }
        }
        let mut f = self.flags.lock();
        if !pending {
            f.remove(&handle);
        } else if !f.contains_key(&handle) && f.len() < MAX_FLAGS {
            f.insert(handle, false);
        }
    }

    /// Whether the created stream `key` was destroyed with accesses pending on it.
    pub fn is_destroyed(&self, key: u64) -> bool {
        let s = (key, 0);
        self.streams(s)
            .lock()
            .get(&s)
            .is_some_and(|st| st.destroyed)
    }

    /// Whether a key synchronises with its context's legacy default stream: the legacy
    /// and the per-thread default stream do, a created stream unless made with
    /// `CU_STREAM_NON_BLOCKING`. A stream the table did not see made is asked about once
    /// ([`Shared::set_flags_source`]); one that cannot be asked counts as blocking, which
    /// only orders or completes more (unknown means silent).
    fn blocking(&self, key: u64) -> bool {
        let KeyKind::Stream(h) = key_kind(key) else {
            return true;
        };
        if let Some(&nb) = self.flags.lock().get(&h) {
            return !nb;
        }
        let Some(ask) = self.ask.get() else {
            return true;
        };
        // Without the lock: the answer comes from the driver.
        let nb = ask(h).is_some_and(|f| f & 1 != 0);
        self.learn(h, nb);
        !nb
    }

    /// Whether the blocking access `a` was queued before a legacy-stream barrier of its
    /// context ([`super::Table`]'s rule).
    fn fenced(&self, a: &Access) -> bool {
        self.barriers
            .lock()
            .get(&legacy_key(a.ctx))
            .is_some_and(|&b| b > a.epoch)
    }

    /// Whether `second` is ordered after the pending `first` (of another stream).
    fn ordered(&self, first: &Access, second: &Access) -> bool {
        let legacy = |a: &Access| matches!(key_kind(a.key), KeyKind::Legacy(_));
        if first.ctx == second.ctx
            && self.blocking(first.key)
            && self.blocking(second.key)
            && (legacy(first) || legacy(second) || self.fenced(first))
        {
            return true;
        }
        if !self.has_waits.load(Ordering::Relaxed) {
            return false;
        }
        let (f, s) = (sid(first.key, first.tid), sid(second.key, second.tid));
        let fence = legacy_key(first.ctx);
        let (direct, by_barrier) = {
            let waits = self.waits.lock();
            let mut direct = false;
            let mut by_barrier = false;
            for w in waits.iter().filter(|w| w.waiter == s) {
                direct |= w.after == f && w.upto > first.seq;
                by_barrier |= w.barrier > first.epoch && w.after.0 == fence;
            }
            (direct, by_barrier)
        };
        direct || (by_barrier && self.blocking(first.key))
    }

    /// Work was queued on the legacy default stream of context `ctx`, as
    /// [`super::Table::legacy_barrier`]; returns the barrier's number.
    pub fn legacy_barrier(&self, ctx: u64) -> u64 {
        self.legacy_barrier_of(legacy_key(ctx))
    }

    fn legacy_barrier_of(&self, legacy: u64) -> u64 {
        let mut m = self.barriers.lock();
        if !m.contains_key(&legacy) && m.len() >= MAX_BARRIER_CONTEXTS {
            drop(m);
            self.forget_pending();
            m = self.barriers.lock();
            m.clear();
        }
        let b = self.barrier.fetch_add(1, Ordering::Relaxed) + 1;
        m.insert(legacy, b);
        b
    }

    /// Host-blocking work on the per-thread default stream of thread `tid` in context
    /// `ctx` returned, as [`super::Table::per_thread_synced`].
    pub fn per_thread_synced(&self, ctx: u64, tid: u64) {
        if self.is_idle() {
            return;
        }
        let pt = sid(
            seedance_hotpath::work::stream_key(0, ctx as usize, true),
            tid,
        );
        let lg = sid(legacy_key(ctx), 0);
        let b = self.barriers.lock().get(&lg.0).copied().unwrap_or(0);
        let now = self.now(pt).unwrap_or_else(|| self.fresh());
        self.complete_through(pt, now, 0);
        let now = self.now(lg).unwrap_or_else(|| self.fresh());
        self.complete_through(lg, now, b);
    }

    /// The pending accesses that `next` (not yet committed) would race with, as
    /// [`super::Table::check`].
    pub fn check(&self, next: &Access) -> Vec<Hazard> {
        match self.slot(next.range_lo) {
            Some(slot) => self.check_in(&Held(slot), next),
            None => Vec::new(),
        }
    }

    /// [`Shared::check`] in the range `held` ([`Shared::find`]).
    pub fn check_in(&self, held: &Held, next: &Access) -> Vec<Hazard> {
        let mut out: Vec<Hazard> = Vec::new();
        let slot = &held.0;
        // Without the lock while nothing, or only this stream's accesses, are pending (a
        // loop on one buffer): the same answer as under it, but for a commit of another
        // thread's racing this check, which the lock does not order either (the check runs
        // before the driver call, the commit after its own).
        let hint = slot.pending.hint.load(Ordering::Acquire);
        let own = sid(next.key, next.tid);
        if hint == NONE_PENDING || hint == sid_hint(own) {
            return out;
        }
        let p = slot.pending.lock();
        if p.single == Some(own) || p.list.is_empty() {
            return out;
        }
        for a in p.list.iter().rev() {
            if !a.overlaps(next)
                || (a.dir == Direction::Read && next.dir == Direction::Read)
                || a.same_stream(next)
                || out.iter().any(|h| h.first.same_stream(a))
                || self.ordered(a, next)
            {
                continue;
            }
            out.push(Hazard {
                first: a.clone(),
                second: next.clone(),
                range: slot.range.clone(),
                first_destroyed: self.is_destroyed(a.key),
            });
        }
        out
    }

    /// Records `a` as pending, as [`super::Table::commit`] (an access it supersedes is
    /// dropped); returns its number on its stream's clock, 0 when its range is gone.
    pub fn commit(&self, a: Access) -> u64 {
        match self.slot(a.range_lo) {
            Some(slot) => self.commit_in(&Held(slot), a),
            None => 0,
        }
    }

    /// [`Shared::commit`] in the range `held` ([`Shared::find`]).
    pub fn commit_in(&self, held: &Held, a: Access) -> u64 {
        self.commit_in_noting(held, a, &mut LastClock::new())
    }

    /// [`Shared::commit`], noting the clock of the access's stream in the calling
    /// thread's `last` ([`Shared::event_recorded_after`]).
    pub fn commit_noting(&self, a: Access, last: &mut LastClock) -> u64 {
        match self.slot(a.range_lo) {
            Some(slot) => self.commit_in_noting(&Held(slot), a, last),
            None => 0,
        }
    }

    /// [`Shared::commit_in`], noting the clock of the access's stream in the calling
    /// thread's `last`.
    pub fn commit_in_noting(&self, held: &Held, mut a: Access, last: &mut LastClock) -> u64 {
        let slot = &held.0;
        let s = sid(a.key, a.tid);
        // A copy on the legacy default stream is a barrier of its context. Not needed (the
        // same verdicts) while the one access pending in the whole table is the one this
        // copy supersedes (the loop on one buffer on stream 0): a barrier orders only
        // accesses of other streams pending before it.
        let legacy = matches!(key_kind(a.key), KeyKind::Legacy(_));
        let mut p = slot.pending.lock();
        if p.dead {
            return 0;
        }
        // The loop on one buffer: the range's one access, on this stream, is superseded.
        // The number comes from the stream's clock without the shard's lock; the list's
        // length, the hint, the stream's count and ranges and the table's count stay as
        // they are (what the locked path below does for it too).
        if p.single == Some(s)
            && p.list.len() == 1
            && a.supersedes(&p.list[0])
            && (!legacy || self.pending.load(Ordering::Relaxed) == 1)
        {
            if let Some(c) = p.clock.as_ref() {
                if let Some(t) = c.try_tick() {
                    last.note(s, c);
                    a.seq = t;
                    a.epoch = self.barrier.load(Ordering::Relaxed);
                    p.list[0] = a;
                    return t;
                }
            }
        }
        if legacy {
            // Without the range's lock: the barrier may forget every pending access.
            drop(p);
            self.legacy_barrier_of(a.key);
            p = slot.pending.lock();
            if p.dead {
                return 0;
            }
        }
        a.epoch = self.barrier.load(Ordering::Relaxed);
        let before = p.list.len();
        p.list.retain(|x| !a.supersedes(x));
        let superseded = before - p.list.len();
        let dropped = (p.list.len() >= MAX_PENDING).then(|| p.list.remove(0));
        let single = match p.single {
            _ if p.list.is_empty() => Some(s),
            Some(x) if x == s => Some(x),
            _ => None,
        };
        let mut m = self.streams(s).lock();
        let st = match (superseded, m.get_mut(&s)) {
            // The loop on one buffer: the stream's count and ranges stay as they are.
            (1, Some(st)) => st,
            _ => {
                let st = m.entry(s).or_insert_with(|| Stream {
                    clock: Clock::starting(self.fresh()),
                    pending: 0,
                    ranges: Vec::new(),
                    destroyed: false,
                });
                st.pending = (st.pending + 1).saturating_sub(superseded);
                if !st.ranges.contains(&a.range_lo) {
                    st.ranges.push(a.range_lo);
                }
                st
            }
        };
        a.seq = st.tick(|| self.fresh());
        last.note(s, &st.clock);
        if single.is_none() {
            p.clock = None;
        } else if !p.clock.as_ref().is_some_and(|c| Arc::ptr_eq(c, &st.clock)) {
            p.clock = Some(Arc::clone(&st.clock));
        }
        drop(m);
        p.single = single;
        let seq = a.seq;
        p.list.push(a);
        slot.pending.publish(&p);
        drop(p);
        // Net one more, less what it superseded: nothing to write in a loop on one buffer.
        match superseded {
            0 => self.pending_add(1),
            1 => {}
            n => self.pending_sub(n - 1),
        }
        if let Some(d) = dropped {
            self.forgotten.fetch_add(1, Ordering::Relaxed);
            self.release(sid(d.key, d.tid), 1);
        }
        seq
    }

    /// Removes from the ranges in `los` (all ranges when `None`) the accesses `done`
    /// says are complete.
    fn complete_in(&self, los: Option<&[u64]>, done: impl Fn(&Access) -> bool) -> bool {
        let map = self.ranges.load();
        let mut rel = Released {
            t: self,
            last: None,
        };
        let mut any = false;
        let mut one = |slot: &Slot| {
            #[cfg(test)]
            tests::before_range_lock();
            let mut p = slot.pending.lock();
            let before = p.list.len();
            p.list.retain(|a| {
                let d = done(a);
                if d {
                    rel.add(sid(a.key, a.tid));
                }
                !d
            });
            if p.list.len() != before {
                any = true;
                let first = p.list.first().map(|a| sid(a.key, a.tid));
                let single = first.filter(|&f| p.list.iter().all(|a| sid(a.key, a.tid) == f));
                if single != p.single || single.is_none() {
                    p.clock = None;
                }
                p.single = single;
                slot.pending.publish(&p);
            }
            p.dead
        };
        // A range found dead was replaced or freed after `map` was loaded: its accesses
        // moved to the range that replaced it (published before the mark, under the lock
        // this completion took), which the completion visits too, so that none is left
        // pending by a completion that raced the move. A range made after `map` may hold
        // accesses committed since this completion began; taking those out as well only
        // forgets them (a hazard missed, never one invented).
        let mut visit = |slot: &Arc<Slot>| {
            let lo = slot.range.lo;
            let mut dead = one(slot);
            let mut last = Arc::clone(slot);
            while dead {
                match self.slot(lo) {
                    Some(next) if !Arc::ptr_eq(&next, &last) => {
                        dead = one(&next);
                        last = next;
                    }
                    _ => break,
                }
            }
        };
        match los {
            Some(los) => {
                for lo in los {
                    if let Some(slot) = map.get(lo) {
                        visit(slot);
                    }
                }
            }
            None => map.values().for_each(&mut visit),
        }
        any
    }

    /// The ranges stream `s` may have accesses pending in.
    fn ranges_of(&self, s: Sid, into: &mut Vec<u64>) {
        if let Some(st) = self.streams(s).lock().get(&s) {
            for lo in &st.ranges {
                if !into.contains(lo) {
                    into.push(*lo);
                }
            }
        }
    }

    /// Stream `s` completed what it queued before `upto`, and so what it had been ordered
    /// after by then.
    ///
    /// A `barrier` above 0 (`s` the legacy default stream, completed through a record that
    /// was a barrier) also completes the context's blocking streams' accesses queued
    /// before it; so does a wait on such a record.
    fn complete_through(&self, s: Sid, upto: u64, barrier: u64) {
        let mut covered: Vec<(Sid, u64, u64)> = if self.has_waits.load(Ordering::Relaxed) {
            self.waits
                .lock()
                .iter()
                .filter(|w| w.waiter == s && w.at < upto)
                .map(|w| (w.after, w.upto, w.barrier))
                .collect()
        } else {
            Vec::new()
        };
        covered.push((s, upto, barrier));
        let fences: Vec<(u64, u64)> = covered
            .iter()
            .filter(|c| c.2 > 0)
            .map(|c| (c.0 .0, c.2))
            .collect();
        let done = |a: &Access| {
            let x = sid(a.key, a.tid);
            covered.iter().any(|&(c, u, _)| x == c && a.seq < u)
                || (fences
                    .iter()
                    .any(|&(k, b)| b > a.epoch && legacy_key(a.ctx) == k)
                    && self.blocking(a.key))
        };
        if fences.is_empty() {
            let mut los = Vec::new();
            for &(c, _, _) in &covered {
                self.ranges_of(c, &mut los);
            }
            self.complete_in(Some(&los), done);
        } else {
            self.complete_in(None, done);
        }
    }

    /// Stream `key` was synchronised or found idle by thread `tid`, as
    /// [`super::Table::stream_completed`].
    pub fn stream_completed(&self, key: u64, tid: u64, ctx: u64) {
        let s = sid(key, tid);
        if matches!(key_kind(key), KeyKind::Legacy(_)) {
            let now = self.now(s).unwrap_or_else(|| self.fresh());
            self.complete_through(s, now, 0);
            self.complete_in(None, |a| a.ctx == ctx && self.blocking(a.key));
            return;
        }
        let now = match self.now(s) {
            Some(n) => n,
            None if self.has_waits.load(Ordering::Relaxed) => self.fresh(),
            None => return,
        };
        self.complete_through(s, now, 0);
    }

    /// Context `ctx` was synchronised, destroyed or reset: its accesses are done.
    pub fn context_completed(&self, ctx: u64) {
        if !self.is_idle() {
            self.complete_in(None, |a| a.ctx == ctx);
        }
    }

    /// Unknown means forget ([`super::Table::forget_pending`]); whether any was dropped.
    pub fn forget_pending(&self) -> bool {
        !self.is_idle() && self.complete_in(None, |_| true)
    }

    /// `cuEventRecord(event, stream)` on thread `tid`.
    pub fn event_recorded(&self, event: u64, key: u64, tid: u64) {
        self.event_recorded_after(event, key, tid, &LastClock::new());
    }

    /// [`Shared::event_recorded`] by the thread whose [`LastClock`] is `last`: a record on
    /// the stream of that thread's last copy takes its number from the stream's clock
    /// without the stream shard's lock, while the clock's state lives.
    pub fn event_recorded_after(&self, event: u64, key: u64, tid: u64, last: &LastClock) {
        let s = sid(key, tid);
        // A record on the legacy default stream is a barrier of its context.
        let barrier = match key_kind(key) {
            KeyKind::Legacy(_) => self.legacy_barrier_of(key),
            _ => 0,
        };
        let upto = last.tick(s).unwrap_or_else(|| self.tick(s));
        let mut m = self.events(event).lock();
        let mark = Mark {
            stream: s,
            upto,
            barrier,
        };
        // A record of an event recorded before (the loop's case) replaces its mark in place.
        if let Some(old) = m.get_mut(&event) {
            *old = mark;
            return;
        }
        if m.len() >= EVENTS_PER_SHARD {
            // A record of a stream with nothing pending that waits for no other stream
            // covers nothing.
            let waiters: Vec<Sid> = if self.has_waits.load(Ordering::Relaxed) {
                self.waits.lock().iter().map(|w| w.waiter).collect()
            } else {
                Vec::new()
            };
            m.retain(|_, k| {
                waiters.contains(&k.stream) || k.barrier > 0 || self.now(k.stream).is_some()
            });
            if m.len() >= EVENTS_PER_SHARD {
                return;
            }
        }
        m.insert(event, mark);
    }

    /// The event completed (`cuEventSynchronize`, `cuEventQuery` success), as
    /// [`super::Table::event_completed`].
    pub fn event_completed(&self, event: u64) {
        let m = self.events(event).lock().get(&event).copied();
        if let Some(m) = m {
            if !self.is_idle() {
                self.complete_through(m.stream, m.upto, m.barrier);
            }
        }
    }

    /// The event was destroyed: its record goes.
    pub fn event_destroyed(&self, event: u64) {
        self.events(event).lock().remove(&event);
    }

    /// Whether the table holds a record of `event`.
    pub fn knows_event(&self, event: u64) -> bool {
        self.events(event).lock().contains_key(&event)
    }

    /// The stream key `event` was last recorded on.
    pub fn event_key(&self, event: u64) -> Option<u64> {
        self.events(event).lock().get(&event).map(|m| m.stream.0)
    }

    /// `cuStreamWaitEvent(stream, event)` on thread `tid`; `false` when the table holds
    /// no record of `event` (nothing done).
    pub fn stream_waited(&self, waiter: u64, tid: u64, event: u64) -> bool {
        let m = self.events(event).lock().get(&event).copied();
        if let Some(m) = m {
            self.add_wait(sid(waiter, tid), m.stream, m.upto, m.barrier);
        }
        m.is_some()
    }

    /// Orders what `waiter` queues from now on after everything `after` queued so far.
    pub fn order(&self, waiter: u64, waiter_tid: u64, after: u64, after_tid: u64) {
        let a = sid(after, after_tid);
        let upto = self.now(a).unwrap_or_else(|| self.fresh());
        self.add_wait(sid(waiter, waiter_tid), a, upto, 0);
    }

    fn add_wait(&self, waiter: Sid, after: Sid, upto: u64, barrier: u64) {
        if waiter == after {
            return;
        }
        // A wait on a legacy-stream barrier orders the blocking streams' accesses too.
        let live = self.now(after).is_some() || (barrier > 0 && !self.is_idle());
        if !live && !self.has_waits.load(Ordering::Relaxed) {
            return;
        }
        let at = self.tick(waiter);
        let mut waits = self.waits.lock();
        let inherited: Vec<Wait> = waits
            .iter()
            .filter(|w| w.waiter == after && w.at < upto)
            .map(|w| Wait { waiter, at, ..*w })
            .collect();
        let first = live.then_some(Wait {
            waiter,
            after,
            upto,
            at,
            barrier,
        });
        for w in first.into_iter().chain(inherited) {
            if w.waiter == w.after
                || waits.iter().any(|o| {
                    o.waiter == w.waiter
                        && o.after == w.after
                        && o.upto >= w.upto
                        && o.barrier >= w.barrier
                })
            {
                continue;
            }
            if waits.len() >= MAX_WAITS {
                waits.remove(0);
            }
            waits.push(w);
        }
        self.has_waits.store(!waits.is_empty(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Table;
    use super::*;
    use proptest::prelude::*;
    use seedance_hotpath::work::stream_key;
    use std::collections::HashSet;

    const CTX: u64 = 0x5eed_c000_0100;
    const LO: [u64; 2] = [0x7f00_0000_0000, 0x7f00_0010_0000];
    const SIZE: u64 = 4096;

    fn range(i: usize) -> Range {
        Range {
            lo: LO[i],
            bytes: SIZE,
            made_by: "cuMemHostAlloc",
        }
    }

    /// Created streams (the first blocking, the others not), the legacy and the per-thread
    /// default stream.
    fn key(i: u8) -> u64 {
        match i % 5 {
            0 => 0x5eed_5000_0100,
            1 => 0x5eed_5000_0200,
            2 => 0x5eed_5000_0300,
            3 => stream_key(0, CTX as usize, false),
            _ => stream_key(0, CTX as usize, true),
        }
    }

    fn access(k: u8, tid: u64, write: bool, r: usize, off: u64, bytes: u64) -> Access {
        Access {
            function: "cuMemcpyAsync",
            key: key(k),
            stream: key(k),
            per_thread: false,
            ctx: CTX,
            tid,
            dir: if write {
                Direction::Write
            } else {
                Direction::Read
            },
            addr: LO[r] + off,
            bytes,
            range_lo: LO[r],
            seq: 0,
            epoch: 0,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Copy(u8, u64, bool, usize, u64, u64),
        Record(u64, u8, u64),
        Wait(u8, u64, u64),
        StreamDone(u8, u64),
        EventDone(u64),
        ContextDone,
        Order(u8, u64, u8, u64),
        Destroy(u8),
        Create(u8),
        Repin(usize),
        Forget,
        /// Legacy-stream work that does not block the host (a synchronous memset).
        Barrier,
        /// Host-blocking work on a thread's per-thread default stream (a `_ptds` copy).
        PtSynced(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let s = 0u8..5;
        let t = 1u64..3;
        prop_oneof![
            6 => (s.clone(), t.clone(), any::<bool>(), 0usize..2, 0u64..4, 1u64..3)
                .prop_map(|(k, t, w, r, o, b)| Op::Copy(k, t, w, r, o * 1024, b * 1024)),
            3 => (0xe0u64..0xe3, s.clone(), t.clone()).prop_map(|(e, k, t)| Op::Record(e, k, t)),
            3 => (s.clone(), t.clone(), 0xe0u64..0xe4).prop_map(|(k, t, e)| Op::Wait(k, t, e)),
            2 => (s.clone(), t.clone()).prop_map(|(k, t)| Op::StreamDone(k, t)),
            1 => (0xe0u64..0xe3).prop_map(Op::EventDone),
            1 => Just(Op::ContextDone),
            1 => (s.clone(), t.clone(), s.clone(), t.clone())
                .prop_map(|(a, b, c, d)| Op::Order(a, b, c, d)),
            1 => (0u8..3).prop_map(Op::Destroy),
            1 => (0u8..3).prop_map(Op::Create),
            1 => (0usize..2).prop_map(Op::Repin),
            1 => Just(Op::Forget),
            2 => Just(Op::Barrier),
            1 => t.clone().prop_map(Op::PtSynced),
        ]
    }

    /// What a verdict says, without the per-table sequence numbers.
    type Verdict = Vec<(u64, u64, Direction, u64, u64, bool)>;

    fn verdict(h: Vec<Hazard>) -> Verdict {
        let mut v: Verdict = h
            .into_iter()
            .map(|h| {
                let a = h.first;
                (a.key, a.tid, a.dir, a.addr, a.bytes, h.first_destroyed)
            })
            .collect();
        v.sort();
        v
    }

    fn pending(p: Vec<Access>) -> Vec<(u64, u64, Direction, u64, u64)> {
        let mut v: Vec<_> = p
            .into_iter()
            .map(|a| (a.key, a.tid, a.dir, a.addr, a.bytes))
            .collect();
        v.sort();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The shared table gives the unsharded one's verdicts: the same hazards for every
        /// copy, the same pending accesses after every step. A wait on an event the table
        /// does not know is handled as the shim does (forget, unless the event was recorded
        /// at some time: the lifetime shards remember every record).
        #[test]
        fn the_shared_table_gives_the_same_verdicts(ops in proptest::collection::vec(op(), 1..60)) {
            let mut t = Table::new();
            let s = Shared::new();
            for i in 0..2 {
                t.pinned_added(range(i));
                s.pinned_added(range(i));
            }
            // One blocking and two non-blocking created streams (Destroy forgets the
            // flags: such a stream then counts as blocking, Create learns them again).
            for k in 0..3 {
                t.stream_created(key(k), u32::from(k != 0));
                s.stream_created(key(k), u32::from(k != 0));
            }
            let mut recorded = HashSet::new();
            // Each thread's clock of its last copy's stream, as the shim keeps it.
            let mut lasts: HashMap<u64, LastClock> = HashMap::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Copy(k, tid, w, r, off, bytes) => {
                        let a = access(k, tid, w, r, off, bytes);
                        prop_assert_eq!(verdict(t.check(&a)), verdict(s.check(&a)), "step {}", n);
                        t.commit(a.clone());
                        s.commit_noting(a, lasts.entry(tid).or_default());
                    }
                    Op::Record(e, k, tid) => {
                        recorded.insert(e);
                        t.event_recorded(e, key(k), tid);
                        s.event_recorded_after(e, key(k), tid, lasts.entry(tid).or_default());
                    }
                    Op::Wait(k, tid, e) => {
                        let shim = |known: bool| if known { 0 } else if recorded.contains(&e) { 1 } else { 2 };
                        match shim(t.knows_event(e)) {
                            0 => t.stream_waited(key(k), tid, e),
                            1 => {}
                            _ => { t.forget_pending(); }
                        }
                        if !s.stream_waited(key(k), tid, e) {
                            match shim(false) {
                                1 => {}
                                _ => { s.forget_pending(); }
                            }
                        }
                    }
                    Op::StreamDone(k, tid) => {
                        t.stream_completed(key(k), tid, CTX);
                        s.stream_completed(key(k), tid, CTX);
                    }
                    Op::EventDone(e) => {
                        t.event_completed(e);
                        s.event_completed(e);
                    }
                    Op::ContextDone => {
                        t.context_completed(CTX);
                        s.context_completed(CTX);
                    }
                    Op::Order(a, b, c, d) => {
                        t.order(key(a), b, key(c), d);
                        s.order(key(a), b, key(c), d);
                    }
                    Op::Destroy(k) => {
                        t.stream_destroyed(key(k));
                        s.stream_destroyed(key(k));
                    }
                    Op::Create(k) => {
                        let flags = u32::from(k != 0);
                        t.stream_created(key(k), flags);
                        s.stream_created(key(k), flags);
                    }
                    Op::Repin(r) => {
                        t.pinned_removed(LO[r]);
                        s.pinned_removed(LO[r]);
                        t.pinned_added(range(r));
                        s.pinned_added(range(r));
                    }
                    Op::Forget => {
                        prop_assert_eq!(t.forget_pending(), s.forget_pending());
                    }
                    Op::Barrier => {
                        t.legacy_barrier(CTX);
                        s.legacy_barrier(CTX);
                    }
                    Op::PtSynced(tid) => {
                        t.per_thread_synced(CTX, tid);
                        s.per_thread_synced(CTX, tid);
                    }
                }
                prop_assert_eq!(pending(t.pending().to_vec()), pending(s.pending()), "step {}", n);
                prop_assert_eq!(t.is_idle(), s.is_idle());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A thread's cached look-up (the range last found, the gap the last miss fell in)
        /// answers every address as the uncached one does, while ranges come and go
        /// (adjacent ones included; pinned ranges never overlap and are never empty: the
        /// shim records only those the driver made).
        #[test]
        fn cached_look_ups_find_what_the_snapshot_holds(
            ops in proptest::collection::vec((0u8..4, 0u64..48, 0u64..3), 1..200)
        ) {
            let s: &'static Shared = Box::leak(Box::new(Shared::new()));
            let mut cache = s.ranges_cache();
            let base = 0x7f00_0000_0000u64;
            let mut made: Vec<(u64, u64)> = Vec::new();
            for (n, (what, at, pages)) in ops.into_iter().enumerate() {
                let lo = base + at * 1024;
                match what {
                    0 => {
                        let hi = lo + (pages + 1) * 2048;
                        if made.iter().all(|&(l, h)| hi <= l || lo >= h) {
                            made.push((lo, hi));
                            s.pinned_added(Range { lo, bytes: hi - lo, made_by: "cuMemHostAlloc" });
                        }
                    }
                    1 => {
                        made.retain(|&(l, _)| l != lo);
                        s.pinned_removed(lo);
                    }
                    _ => {
                        for addr in [lo, lo + 1, lo + 1023, lo.saturating_sub(1)] {
                            let want = s.find(addr).map(|h| h.range().lo);
                            if cache.misses([addr, addr]) {
                                prop_assert_eq!(want, None, "step {} address {:#x}", n, addr);
                            }
                            let got = s.find_cached(&mut cache, addr).map(|h| h.range().lo);
                            prop_assert_eq!(got, want, "step {} address {:#x}", n, addr);
                        }
                    }
                }
            }
        }
    }

    thread_local! {
        /// Run once by this thread's next completion between its snapshot load and its
        /// first range lock ([`Shared::complete_in`]): puts another thread's work there.
        static BEFORE_RANGE_LOCK: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
            std::cell::RefCell::new(None);
    }

    pub(super) fn before_range_lock() {
        if let Some(f) = BEFORE_RANGE_LOCK.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// A range made again at the first byte of one the table holds, between a
    /// completion's snapshot load and its lock of that range: the completion still takes
    /// out the accesses that moved to the new range, so none stays pending to be reported
    /// against a copy on another stream.
    #[test]
    fn a_completion_racing_a_range_made_again_takes_out_the_moved_accesses() {
        let s: &'static Shared = Box::leak(Box::new(Shared::new()));
        s.pinned_added(range(0));
        s.commit(access(0, 1, false, 0, 0, 64));
        s.commit(access(0, 1, false, 0, 1024, 64));
        BEFORE_RANGE_LOCK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                std::thread::spawn(move || s.pinned_added(range(0)))
                    .join()
                    .unwrap();
            }))
        });
        s.stream_completed(key(0), 1, CTX);
        assert!(s.pending().is_empty(), "{:?}", s.pending());
        assert!(s.is_idle());
        // A write on another stream into the same bytes is no hazard.
        assert!(s.check(&access(1, 2, true, 0, 0, 64)).is_empty());
        assert_eq!(s.entries(), 1);
    }

    /// A range freed and made again between a completion's snapshot load and its lock:
    /// the freed range's accesses went with it, and the new one's (copies after the
    /// free, on the completed stream) are taken out too.
    #[test]
    fn a_completion_racing_a_free_and_a_new_range_leaves_nothing_pending() {
        let s: &'static Shared = Box::leak(Box::new(Shared::new()));
        s.pinned_added(range(0));
        s.commit(access(0, 1, false, 0, 0, 64));
        BEFORE_RANGE_LOCK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                std::thread::spawn(move || {
                    s.pinned_removed(LO[0]);
                    s.pinned_added(range(0));
                    s.commit(access(0, 1, false, 0, 0, 64));
                })
                .join()
                .unwrap();
            }))
        });
        s.stream_completed(key(0), 1, CTX);
        // The copy after the free was committed after the completion read its stream's
        // clock: it is still pending, and a write on another stream races it.
        assert_eq!(s.pending().len(), 1);
        assert_eq!(s.check(&access(1, 2, true, 0, 0, 64)).len(), 1);
        s.stream_completed(key(0), 1, CTX);
        assert!(s.pending().is_empty());
        assert!(s.is_idle());
    }

    static ASKED: AtomicUsize = AtomicUsize::new(0);

    /// The driver's answer for a stream the table did not see made: stream 1 non-blocking,
    /// stream 2 unknown (`cuStreamGetFlags` failed).
    fn ask(h: u64) -> Option<u32> {
        ASKED.fetch_add(1, Ordering::Relaxed);
        match h {
            x if x == key(1) => Some(1),
            _ => None,
        }
    }

    /// A stream the table did not see made is asked about once, when a rule needs it; an
    /// answer of non-blocking keeps its race reported across a legacy barrier, no answer
    /// counts it blocking (the race is then not reported: unknown means silent).
    #[test]
    fn flags_of_a_stream_not_seen_made_are_asked_once() {
        let s = Shared::new();
        s.set_flags_source(ask);
        s.pinned_added(range(0));
        s.commit(access(1, 1, false, 0, 0, 64));
        s.commit(access(2, 1, false, 0, 1024, 64));
        s.legacy_barrier(CTX);
        assert_eq!(ASKED.load(Ordering::Relaxed), 0, "nothing asked yet");
        let w = |off| access(0, 1, true, 0, off, 64);
        assert_eq!(s.check(&w(0)).len(), 1, "non-blocking: still a race");
        assert!(s.check(&w(1024)).is_empty(), "unknown: ordered");
        // The writer's stream (0, not seen made either) was asked too.
        assert_eq!(ASKED.load(Ordering::Relaxed), 3);
        for _ in 0..10 {
            s.check(&w(0));
            s.check(&w(1024));
        }
        assert_eq!(ASKED.load(Ordering::Relaxed), 3, "asked once per stream");
        // A synchronisation of the legacy stream completes the blocking (unknown) one's.
        s.stream_completed(key(3), 1, CTX);
        let left = s.pending();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].key, key(1));
    }

    static ASKED_AFTER_DESTROY: AtomicUsize = AtomicUsize::new(0);

    fn ask_counting(_: u64) -> Option<u32> {
        ASKED_AFTER_DESTROY.fetch_add(1, Ordering::Relaxed);
        Some(1)
    }

    /// A stream destroyed with accesses pending is never asked about (its handle must not
    /// be used): it counts as blocking, and its flags, when known, stay.
    #[test]
    fn a_destroyed_stream_is_never_asked_about() {
        let s = Shared::new();
        s.set_flags_source(ask_counting);
        s.pinned_added(range(0));
        s.stream_created(key(0), 0);
        s.stream_created(key(2), 1);
        s.commit(access(1, 1, false, 0, 0, 64));
        s.commit(access(2, 1, false, 0, 1024, 64));
        s.stream_destroyed(key(1));
        s.stream_destroyed(key(2));
        s.legacy_barrier(CTX);
        assert!(
            s.check(&access(0, 1, true, 0, 0, 64)).is_empty(),
            "blocking"
        );
        assert_eq!(
            s.check(&access(0, 1, true, 0, 1024, 64)).len(),
            1,
            "still non-blocking"
        );
        assert_eq!(ASKED_AFTER_DESTROY.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_million_copies_streams_and_events_leave_nothing_behind() {
        let s = Shared::new();
        s.pinned_added(range(0));
        for i in 0..1_000_000u64 {
            let h = 0x5eed_0000_0000 + (i << 8);
            let e = 0xe000_0000 + (i << 4);
            s.stream_created(h, 1);
            let mut a = access(0, 1, false, 0, 0, 64);
            a.key = h;
            s.check(&a);
            s.commit(a);
            s.event_recorded(e, h, 1);
            s.stream_waited(h, 1, e);
            s.stream_waited(0x5eed_5000_0100, 1, e);
            if i % 2 == 0 {
                s.stream_completed(h, 1, CTX);
            } else {
                s.event_completed(e);
                s.stream_completed(0x5eed_5000_0100, 1, CTX);
            }
            s.event_destroyed(e);
            s.stream_destroyed(h);
        }
        assert!(s.is_idle());
        // The range itself is the one entry left.
        assert_eq!(s.entries(), 1);
        s.pinned_removed(LO[0]);
        assert_eq!(s.entries(), 0);
    }

    #[test]
    fn event_records_never_destroyed_stay_bounded() {
        let s = Shared::new();
        s.pinned_added(range(0));
        let bound = SHARDS * EVENTS_PER_SHARD;
        for round in 0..4u64 {
            let a = access(0, 1, false, 0, 0, 64);
            s.commit(a);
            // A cross-stream wait exists, and B (the waiter) has nothing pending.
            s.event_recorded(0xe0, key(0), 1);
            s.stream_waited(key(1), 1, 0xe0);
            for i in 0..(2 * bound as u64) {
                s.event_recorded(
                    0x1_0000_0000 + ((round * 2 * bound as u64 + i) << 4),
                    key(2),
                    1,
                );
            }
            s.stream_completed(key(0), 1, CTX);
            assert!(s.is_idle());
            assert!(s.entries() <= bound + 2, "{}", s.entries());
        }
        // With nothing pending, a new record still finds room.
        s.event_recorded(0xe1, key(2), 1);
        assert!(s.knows_event(0xe1));
    }

    /// The loop on one buffer: a copy that supersedes the one access pending in its range,
    /// on its own stream, takes its number without the stream shard's lock (here held by
    /// the test while the copy commits), one above the access it replaces.
    #[test]
    fn a_copy_superseding_its_streams_one_access_takes_no_stream_lock() {
        let s = Shared::new();
        s.pinned_added(range(0));
        let first = s.commit(access(1, 1, false, 0, 0, SIZE));
        let held = s.find(LO[0]).unwrap();
        let guard = s.streams(sid(key(1), 1)).lock();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let seq = s.commit_in(&held, access(1, 1, false, 0, 0, SIZE));
                tx.send(seq).unwrap();
            });
            let got = rx.recv_timeout(std::time::Duration::from_secs(30));
            drop(guard);
            assert_eq!(
                got,
                Ok(first + 1),
                "the commit waited for the stream shard's lock"
            );
        });
        let pending = s.pending();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].seq, first + 1);
        assert!(!s.is_idle());
        // What completes the stream completes the access that took the unlocked path.
        s.stream_completed(key(1), 1, CTX);
        assert!(s.pending().is_empty() && s.is_idle());
        assert_eq!(s.entries(), 1, "the range alone");
    }

    /// An event record on the stream of its thread's last copy takes its number from the
    /// clock that thread noted, without the stream shard's lock (here held by the test
    /// while the record runs): one above the copy's, so a wait on it covers the copy.
    /// Once the stream's state went, the noted clock is not used: a record after a copy
    /// on another thread (a new state) covers that copy.
    #[test]
    fn a_record_after_its_threads_copy_takes_no_stream_lock() {
        let s = Shared::new();
        s.pinned_added(range(0));
        let mut last = LastClock::new();
        let seq = s.commit_noting(access(1, 1, false, 0, 0, SIZE), &mut last);
        let guard = s.streams(sid(key(1), 1)).lock();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                s.event_recorded_after(0xe0, key(1), 1, &last);
                tx.send(()).unwrap();
            });
            let got = rx.recv_timeout(std::time::Duration::from_secs(30));
            drop(guard);
            assert_eq!(got, Ok(()), "the record waited for the stream shard's lock");
        });
        let mark = s.events(0xe0).lock().get(&0xe0).copied().unwrap();
        assert_eq!(mark.upto, seq + 1);
        // The event's completion completes the copy.
        s.event_completed(0xe0);
        assert!(s.pending().is_empty() && s.is_idle());
        // The state went with it; another thread's copy on the stream makes a new one.
        let other = s.commit(access(1, 2, false, 0, 0, SIZE));
        assert!(
            other > seq + 1,
            "a new state's clock starts above the old one's"
        );
        s.event_recorded_after(0xe1, key(1), 1, &last);
        let mark = s.events(0xe1).lock().get(&0xe1).copied().unwrap();
        assert!(
            mark.upto > other,
            "the old clock was not used: {} <= {other}",
            mark.upto
        );
        s.event_completed(0xe1);
        assert!(s.pending().is_empty() && s.is_idle());
    }

    /// A clock never hands out the last [`MARGIN`] numbers of a block: the unlocked tick
    /// declines them, the locked one moves to a fresh block, and numbers only grow.
    #[test]
    fn a_clock_moves_to_a_fresh_block_before_the_margin() {
        let c = Clock::starting(3 * BLOCK);
        assert_eq!(c.try_tick(), Some(3 * BLOCK));
        let last = 4 * BLOCK - MARGIN - 1;
        c.next.store(last, Ordering::Relaxed);
        assert_eq!(c.try_tick(), Some(last));
        assert_eq!(c.try_tick(), None, "inside the margin");
        assert_eq!(c.tick(|| 9 * BLOCK), 9 * BLOCK);
        assert_eq!(c.now(), 9 * BLOCK + 1);
        assert_eq!(c.try_tick(), Some(9 * BLOCK + 1));
        assert_eq!(c.tick(|| unreachable!("inside the block")), 9 * BLOCK + 2);
        c.live.store(false, Ordering::Relaxed);
        assert_eq!(c.try_tick(), None, "the stream's state went");
    }

    /// Threads copying one buffer on one stream (each copy superseding the one before,
    /// mostly on the unlocked path) while another thread completes the stream and events
    /// are recorded and completed on it: the table ends exact, with no stream state left
    /// behind and the last access still found by a racing write.
    #[test]
    fn threads_sharing_a_stream_and_a_buffer_leave_an_exact_table() {
        let s = Shared::new();
        s.pinned_added(range(0));
        let h = key(1);
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let s = &s;
                scope.spawn(move || {
                    // Records through the thread's noted clock while another thread
                    // completes the stream (its states going and made again).
                    let mut last = LastClock::new();
                    for i in 0..10_000u64 {
                        let a = access(1, t, false, 0, 0, SIZE);
                        assert!(s.check(&a).is_empty());
                        s.commit_noting(a, &mut last);
                        if i % 97 == 0 {
                            s.event_recorded_after(0xe0 + t, h, t, &last);
                        }
                        if i % 101 == 0 {
                            s.event_completed(0xe0 + t);
                        }
                    }
                });
            }
            let s = &s;
            scope.spawn(move || {
                for _ in 0..5_000 {
                    s.stream_completed(h, 9, CTX);
                    std::thread::yield_now();
                }
            });
        });
        s.commit(access(1, 1, false, 0, 0, SIZE));
        assert_eq!(s.pending().len(), 1);
        let write = access(2, 1, true, 0, 0, SIZE);
        assert_eq!(s.check(&write).len(), 1, "the write races the pending read");
        s.stream_completed(h, 1, CTX);
        assert!(s.check(&write).is_empty());
        assert!(s.is_idle() && s.pending().is_empty());
        for t in 0..4 {
            s.event_destroyed(0xe0 + t);
        }
        assert_eq!(s.entries(), 1, "the range alone: no stream state left");
    }

    #[test]
    fn threads_on_their_own_streams_and_ranges_are_exact() {
        let s = Arc::new(Shared::new());
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    let lo = 0x7e00_0000_0000 + (t << 24);
                    s.pinned_added(Range {
                        lo,
                        bytes: SIZE,
                        made_by: "cuMemHostAlloc",
                    });
                    let h = 0x5eed_6000_0000 + (t << 8);
                    let mut hazards = 0;
                    for i in 0..10_000u64 {
                        let mut a = access(0, t, i % 3 == 0, 0, 0, 64);
                        a.key = h;
                        a.addr = lo;
                        a.range_lo = lo;
                        hazards += s.check(&a).len();
                        s.commit(a);
                        s.event_recorded(0xe0 + (t << 8), h, t);
                        s.stream_waited(h, t, 0xe0 + (t << 8));
                        if i % 64 == 63 {
                            s.stream_completed(h, t, CTX);
                        }
                    }
                    s.stream_completed(h, t, CTX);
                    hazards
                })
            })
            .collect();
        let hazards: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(hazards, 0);
        assert!(s.is_idle());
        assert_eq!(s.pending().len(), 0);
    }
}
