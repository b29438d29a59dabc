//! Stream-ordered hazards on pinned host memory: two asynchronous copies that touch the
//! same bytes of a pinned (page-locked) or registered host range from different streams,
//! at least one of them writing the host side, with nothing ordering the second after the
//! first.
//!
//! An asynchronous copy reads or writes its host side when the copy engine runs it, not
//! when the call returns (CUDA driver API, "API synchronization behavior": asynchronous
//! copies involving pinned host memory return before the copy starts). So a
//! `cuMemcpyHtoDAsync` queued behind a long kernel on stream A and a `cuMemcpyDtoHAsync`
//! into the same buffer on stream B may run in either order: the device can receive the
//! bytes the second copy wrote (measured on an H200, driver 580.159; docs/validation.md).
//!
//! The [`Table`] is plain data, the reference model. The shim keeps a [`shared::Shared`]
//! instead: the same rules sharded for threads (by pinned range, stream and event; a
//! property test checks it against the [`Table`]), touched only for copies whose host side
//! falls inside a pinned range it saw being made (a bounding-box test first, then the range
//! look-up), and at the calls that complete or order pending accesses. Rules, each an
//! `Ordering` the table follows:
//!
//! * an access is pending from its call until its stream (or its context) is synchronised,
//!   `cuStreamQuery` reports the stream idle, or an event recorded on the stream after the
//!   access completes (`cuEventSynchronize`, or `cuEventQuery` returning success);
//! * two accesses on the same stream are ordered (stream order); the per-thread default
//!   stream is the same stream only for the same thread;
//! * `cuStreamWaitEvent(S2, e)` orders what is queued on S2 afterwards after everything on
//!   the stream `e` was recorded on before the record (followed transitively: S2 inherits
//!   what that stream was already ordered after);
//! * completion follows those orderings: when S2 completes (synchronised, found idle), so
//!   has everything S2 waited for before; when an event recorded on S2 completes, so has
//!   everything S2 waited for before that record;
//! * the legacy default stream is ordered with every blocking stream of its context, both
//!   ways (CUDA programming guide, "Default Stream", "Implicit Synchronization": a stream
//!   made without `CU_STREAM_NON_BLOCKING`, whatever its priority, or a per-thread default
//!   stream, synchronises with the legacy default stream; measured on driver 580.159, H100,
//!   2026-12-06: an event recorded on stream 0 completed 1.012 s after a blocking stream's
//!   copy queued behind a 1 s kernel). Non-blocking streams are not. So:
//!   - work queued on the legacy stream (a copy, a record, a synchronous memset: a
//!     *barrier*, [`Table::legacy_barrier`]) orders what the blocking streams queue later
//!     after what they queued before it (an access's `epoch` says which barriers came
//!     before it);
//!   - an event recorded on the legacy stream, once complete, completes the blocking
//!     streams' accesses queued before the record, and a stream that waits for it is
//!     ordered after them;
//!   - a `cuStreamSynchronize` of the legacy default stream (or a synchronous copy that
//!     blocks the host) completes the blocking streams' accesses;
//!   - the per-thread default stream is a blocking stream of its own per thread; a `_ptds`
//!     synchronous copy completes it, the legacy stream and what a barrier before covered
//!     ([`Table::per_thread_synced`]);
//!   - a stream whose flags are unknown counts as blocking (more ordering: a race may be
//!     missed, never invented);
//! * a new access that overlaps a pending one, on a stream not ordered after it, where one
//!   of the two writes the host memory, is a [`Hazard`].

pub mod shared;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::alloc::short as human;
use seedance_hotpath::work::{key_context, key_kind, KeyKind};

/// Pending accesses kept at most; when full, the oldest is forgotten (counted).
pub const MAX_PENDING: usize = 1024;
/// Stream orderings (`cuStreamWaitEvent`) kept at most; the oldest go first.
pub const MAX_WAITS: usize = 512;
/// Event records remembered at most (events recorded while accesses were pending).
pub const MAX_EVENTS: usize = 1024;
/// Contexts whose latest legacy-stream barrier is kept at most; a barrier of one more
/// forgets the pending accesses (unknown means forget).
pub const MAX_BARRIER_CONTEXTS: usize = 64;

/// The legacy default stream's key of context `ctx`.
pub fn legacy_key(ctx: u64) -> u64 {
    seedance_hotpath::work::stream_key(0, ctx as usize, false)
}

/// How a copy touches host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// The copy reads the host memory (host to device).
    Read,
    /// The copy writes the host memory (device to host).
    Write,
}

impl Direction {
    /// `read` / `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Direction::Read => "reads",
            Direction::Write => "writes",
        }
    }
}

/// A pinned or registered host range as the table knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub lo: u64,
    /// Length, bytes.
    pub bytes: u64,
    /// The call that made it (`cuMemHostAlloc`, `cuMemAllocHost_v2`, `cuMemHostRegister_v2`).
    pub made_by: &'static str,
}

/// One asynchronous copy's access to pinned host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Exported symbol of the copy (`cuMemcpyHtoDAsync_v2`).
    pub function: &'static str,
    /// Stream key ([`seedance_hotpath::work::stream_key`]).
    pub key: u64,
    /// The stream argument as the program passed it (0, 1, 2 or a handle).
    pub stream: u64,
    /// A `_ptsz` call (stream 0 is the per-thread default stream).
    pub per_thread: bool,
    /// The calling thread's current context handle.
    pub ctx: u64,
    /// Kernel thread id of the caller.
    pub tid: u64,
    /// Read or write of the host memory.
    pub dir: Direction,
    /// First host byte touched.
    pub addr: u64,
    /// Bytes touched.
    pub bytes: u64,
    /// First byte of the pinned range it lies in.
    pub range_lo: u64,
    /// Order of the access among all accesses (set by [`Table::commit`]).
    pub seq: u64,
    /// Legacy-stream barriers made before it, all contexts together (set by
    /// [`Table::commit`]): a barrier of its context numbered above it was queued after it.
    pub epoch: u64,
}

impl Access {
    fn overlaps(&self, other: &Access) -> bool {
        self.bytes > 0
            && other.bytes > 0
            && self.addr < other.addr.saturating_add(other.bytes)
            && other.addr < self.addr.saturating_add(self.bytes)
    }

    /// The default-stream kind of its key, per thread for the per-thread default stream:
    /// two accesses are on the same stream when their keys are equal and, for the
    /// per-thread default stream, their threads are.
    fn same_stream(&self, other: &Access) -> bool {
        self.key == other.key
            && (!matches!(key_kind(self.key), KeyKind::PerThread(_)) || self.tid == other.tid)
    }

    /// Whether this access, committed after `x`, supersedes it: the same stream, the same
    /// direction, and all of `x`'s bytes (stream order makes `x` complete before it, so
    /// nothing can race `x` that would not race this one).
    fn supersedes(&self, x: &Access) -> bool {
        x.same_stream(self)
            && x.dir == self.dir
            && self.addr <= x.addr
            && x.addr.saturating_add(x.bytes) <= self.addr.saturating_add(self.bytes)
    }

    /// `stream 0x5eed50000100`, `the legacy default stream`, `the per-thread default stream`.
    pub fn describe_stream(&self) -> String {
        describe_key(self.key)
    }
}

/// `stream 0x5eed50000100`, `the legacy default stream`, `the per-thread default stream`.
pub fn describe_key(key: u64) -> String {
    match key_kind(key) {
        KeyKind::Stream(h) => format!("stream {h:#x}"),
        KeyKind::Legacy(_) => "the legacy default stream".to_string(),
        KeyKind::PerThread(_) => "the per-thread default stream".to_string(),
    }
}

/// A hazard found by [`Table::check`]: the pending access and the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hazard {
    /// The earlier access, still pending.
    pub first: Access,
    /// The new access.
    pub second: Access,
    /// The pinned range both lie in.
    pub range: Range,
    /// The first access's stream was destroyed since (its work still runs; no event can be
    /// recorded on it any more).
    pub first_destroyed: bool,
}

impl Hazard {
    /// The pair of call sites it is explained once for: both entry points and directions.
    pub fn site_key(&self) -> (&'static str, Direction, &'static str, Direction) {
        (
            self.first.function,
            self.first.dir,
            self.second.function,
            self.second.dir,
        )
    }
}

/// An event's last record while accesses were pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    key: u64,
    tid: u64,
    /// Accesses with a lower seq were queued before the record.
    upto: u64,
    /// A record on the legacy default stream is a barrier of its context: the blocking
    /// streams' accesses with a lower epoch were queued before it (0 for other streams).
    barrier: u64,
}

/// "Stream `waiter` is ordered after what stream `after` had queued before access `upto`",
/// since the moment `at` (on the same clock as the accesses' seq: an event recorded on
/// `waiter` later covers the wait, and so what the wait covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wait {
    waiter: u64,
    waiter_tid: u64,
    after: u64,
    after_tid: u64,
    upto: u64,
    at: u64,
    /// A wait on a record of the legacy default stream: also ordered after the blocking
    /// streams' accesses of that context with an epoch below this barrier (0: none).
    barrier: u64,
}

fn same(key_a: u64, tid_a: u64, key_b: u64, tid_b: u64) -> bool {
    key_a == key_b && (!matches!(key_kind(key_a), KeyKind::PerThread(_)) || tid_a == tid_b)
}

/// Pinned ranges, pending accesses and the orderings between streams (see the module
/// documentation).
#[derive(Debug, Default)]
pub struct Table {
    ranges: BTreeMap<u64, Range>,
    pending: Vec<Access>,
    waits: Vec<Wait>,
    events: HashMap<u64, Mark>,
    /// Created streams made with `CU_STREAM_NON_BLOCKING`.
    non_blocking: std::collections::HashSet<u64>,
    /// Legacy-stream barriers made so far, all contexts together.
    barrier: u64,
    /// Each context's latest legacy-stream barrier (while accesses are pending).
    barriers: HashMap<u64, u64>,
    /// Created streams destroyed while accesses on them were pending (only while some are).
    destroyed: std::collections::HashSet<u64>,
    next_seq: u64,
    forgotten: u64,
    /// While every pending access is on one stream: that stream (key, thread). A new
    /// access on it cannot race with any of them, so [`Table::check`] returns at once.
    single: Option<(u64, u64)>,
}

impl Table {
    /// An empty table.
    pub fn new() -> Table {
        Table {
            next_seq: 1,
            ..Table::default()
        }
    }

    /// A pinned or registered range was made.
    pub fn pinned_added(&mut self, r: Range) {
        self.ranges.insert(r.lo, r);
    }

    /// The range starting at `lo` was freed or unregistered: its accesses are gone with it
    /// (the free itself is checked by the lifetime tracker).
    pub fn pinned_removed(&mut self, lo: u64) -> Option<Range> {
        let r = self.ranges.remove(&lo)?;
        self.pending.retain(|a| a.range_lo != lo);
        self.prune();
        Some(r)
    }

    /// The pinned range that holds `[addr, addr + bytes)` (its first byte is enough: a copy
    /// that runs past the end is the driver's to refuse).
    pub fn pinned_at(&self, addr: u64) -> Option<&Range> {
        let (_, r) = self.ranges.range(..=addr).next_back()?;
        (addr - r.lo < r.bytes.max(1)).then_some(r)
    }

    /// Every pinned range, lowest first.
    pub fn ranges(&self) -> impl Iterator<Item = &Range> {
        self.ranges.values()
    }

    /// Whether accesses are pending.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Pending accesses.
    pub fn pending(&self) -> &[Access] {
        &self.pending
    }

    /// Accesses forgotten because the table was full.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// A stream was created with `flags`; `CU_STREAM_NON_BLOCKING` (1) exempts it from the
    /// legacy default stream's implicit ordering.
    pub fn stream_created(&mut self, handle: u64, flags: u32) {
        self.destroyed.remove(&handle);
        if flags & 1 != 0 {
            self.non_blocking.insert(handle);
        } else {
            self.non_blocking.remove(&handle);
        }
    }

    /// Whether a key synchronises with the legacy default stream of its context.
    fn blocking(&self, key: u64) -> bool {
        match key_kind(key) {
            KeyKind::Stream(h) => !self.non_blocking.contains(&h),
            KeyKind::PerThread(_) => true,
            KeyKind::Legacy(_) => true,
        }
    }

    /// Whether the blocking access `a` was queued before a legacy-stream barrier of its
    /// context (work its context's blocking streams queue afterwards is ordered after it).
    fn fenced(&self, a: &Access) -> bool {
        self.barriers
            .get(&legacy_key(a.ctx))
            .is_some_and(|&b| b > a.epoch)
    }

    /// Whether `second` is ordered after the pending `first`.
    fn ordered(&self, first: &Access, second: &Access) -> bool {
        if first.same_stream(second) {
            return true;
        }
        let legacy = |a: &Access| matches!(key_kind(a.key), KeyKind::Legacy(_));
        if first.ctx == second.ctx
            && self.blocking(first.key)
            && self.blocking(second.key)
            && (legacy(first) || legacy(second) || self.fenced(first))
        {
            return true;
        }
        self.waits.iter().any(|w| {
            same(w.waiter, w.waiter_tid, second.key, second.tid)
                && ((same(w.after, w.after_tid, first.key, first.tid) && w.upto > first.seq)
                    || (w.barrier > first.epoch
                        && w.after == legacy_key(first.ctx)
                        && self.blocking(first.key)))
        })
    }

    /// Work was queued on the legacy default stream of context `ctx` (an asynchronous
    /// copy, a record, a synchronous copy or memset that does not block the host): a
    /// barrier. It runs after everything the context's blocking streams queued before it,
    /// and what they queue afterwards runs after it (CUDA programming guide, "Default
    /// Stream" and "Implicit Synchronization"). Returns its number.
    pub fn legacy_barrier(&mut self, ctx: u64) -> u64 {
        let k = legacy_key(ctx);
        if !self.barriers.contains_key(&k) && self.barriers.len() >= MAX_BARRIER_CONTEXTS {
            // Unknown means forget: a barrier that cannot be kept must not leave accesses
            // it ordered to be reported.
            self.forget_pending();
        }
        self.barrier += 1;
        if !self.pending.is_empty() {
            self.barriers.insert(k, self.barrier);
        }
        self.barrier
    }

    /// Work on the per-thread default stream of thread `tid` in context `ctx` that blocks
    /// the host returned (a `_ptds` synchronous copy): it ran after that stream's earlier
    /// work and, the per-thread default stream being blocking, after the legacy default
    /// stream's earlier work, and so after every blocking stream's work queued before the
    /// context's latest legacy barrier.
    pub fn per_thread_synced(&mut self, ctx: u64, tid: u64) {
        let pt = seedance_hotpath::work::stream_key(0, ctx as usize, true);
        let now = self.next_seq;
        let b = self.barriers.get(&legacy_key(ctx)).copied().unwrap_or(0);
        self.complete_through(pt, tid, now, 0);
        self.complete_through(legacy_key(ctx), 0, now, b);
        self.prune();
    }

    /// The pending accesses that `next` (not yet committed) would race with, the latest
    /// first per stream, one per stream.
    pub fn check(&self, next: &Access) -> Vec<Hazard> {
        if let Some((key, tid)) = self.single {
            if same(key, tid, next.key, next.tid) {
                return Vec::new();
            }
        }
        let Some(range) = self.ranges.get(&next.range_lo) else {
            return Vec::new();
        };
        let mut out: Vec<Hazard> = Vec::new();
        for a in self.pending.iter().rev() {
            if !a.overlaps(next)
                || (a.dir == Direction::Read && next.dir == Direction::Read)
                || self.ordered(a, next)
            {
                continue;
            }
            if out.iter().any(|h| h.first.same_stream(a)) {
                continue;
            }
            out.push(Hazard {
                first: a.clone(),
                second: next.clone(),
                range: range.clone(),
                first_destroyed: self.destroyed.contains(&a.key),
            });
        }
        out
    }

    /// The sequence number the next committed access gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Records `a` as pending (its copy was accepted by the driver); returns its seq.
    ///
    /// A pending access that `a` supersedes (same stream, same direction, bytes inside
    /// `a`'s) is dropped: whatever would race with it races with `a`, and whatever is
    /// ordered after `a` is ordered after it. So a loop copying one buffer on one stream
    /// keeps one entry, not one per copy.
    pub fn commit(&mut self, mut a: Access) -> u64 {
        if matches!(key_kind(a.key), KeyKind::Legacy(_)) {
            self.legacy_barrier(a.ctx);
        }
        a.epoch = self.barrier;
        a.seq = self.next_seq;
        self.next_seq += 1;
        self.pending.retain(|p| !a.supersedes(p));
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
            self.forgotten += 1;
        }
        let seq = a.seq;
        self.single = match self.single {
            _ if self.pending.is_empty() => Some((a.key, a.tid)),
            Some((k, t)) if same(k, t, a.key, a.tid) => Some((k, t)),
            _ => None,
        };
        self.pending.push(a);
        seq
    }

    /// Orders what stream `waiter` (thread `tid` for its per-thread default stream) queues
    /// from now on after everything stream `after` had queued up to now: a
    /// `cuStreamWaitEvent` on an event just recorded, or the shim's own repair.
    pub fn order(&mut self, waiter: u64, waiter_tid: u64, after: u64, after_tid: u64) {
        let upto = self.next_seq;
        self.add_wait(waiter, waiter_tid, after, after_tid, upto, 0);
    }

    fn add_wait(
        &mut self,
        waiter: u64,
        waiter_tid: u64,
        after: u64,
        after_tid: u64,
        upto: u64,
        barrier: u64,
    ) {
        if same(waiter, waiter_tid, after, after_tid) {
            return;
        }
        let at = self.tick();
        // What `after` was ordered after before the point waited for, `waiter` now is too
        // (transitively).
        let inherited: Vec<Wait> = self
            .waits
            .iter()
            .filter(|w| same(w.waiter, w.waiter_tid, after, after_tid) && w.at < upto)
            .map(|w| Wait {
                waiter,
                waiter_tid,
                at,
                ..*w
            })
            .collect();
        let first = Wait {
            waiter,
            waiter_tid,
            after,
            after_tid,
            upto,
            at,
            barrier,
        };
        for w in std::iter::once(first).chain(inherited) {
            if same(w.waiter, w.waiter_tid, w.after, w.after_tid) {
                continue;
            }
            // An older wait that covers as much is enough (it also holds from earlier on);
            // a newer one that covers more is kept beside older ones, which an event
            // recorded in between still covers.
            let pair = |o: &Wait| {
                o.waiter == w.waiter
                    && o.waiter_tid == w.waiter_tid
                    && o.after == w.after
                    && o.after_tid == w.after_tid
            };
            if self
                .waits
                .iter()
                .any(|o| pair(o) && o.upto >= w.upto && o.barrier >= w.barrier)
            {
                continue;
            }
            if self.waits.len() >= MAX_WAITS {
                self.waits.remove(0);
            }
            self.waits.push(w);
        }
    }

    /// The next point on the accesses' clock: records and waits take one, so that "before"
    /// and "after" between them and the accesses are exact.
    fn tick(&mut self) -> u64 {
        let t = self.next_seq;
        self.next_seq += 1;
        t
    }

    /// `cuEventRecord(event, stream)` on thread `tid`: the event covers what the stream has
    /// queued so far. Only matters while accesses are pending (an access made later has a
    /// higher seq than any record before it).
    pub fn event_recorded(&mut self, event: u64, key: u64, tid: u64) {
        // A record on the legacy default stream is a barrier whether or not it is kept.
        let barrier = match key_kind(key) {
            KeyKind::Legacy(_) => self.legacy_barrier_of(key),
            _ => 0,
        };
        if self.events.len() >= MAX_EVENTS && !self.events.contains_key(&event) {
            // Keep the table bounded: records with nothing pending before them are useless.
            let floor = self.pending.first().map_or(u64::MAX, |a| a.seq);
            self.events.retain(|_, m| m.upto > floor);
            if self.events.len() >= MAX_EVENTS {
                return;
            }
        }
        let upto = self.tick();
        self.events.insert(
            event,
            Mark {
                key,
                tid,
                upto,
                barrier,
            },
        );
    }

    /// [`Table::legacy_barrier`] by the context's legacy key.
    fn legacy_barrier_of(&mut self, legacy: u64) -> u64 {
        match key_context(legacy) {
            Some(ctx) => self.legacy_barrier(ctx),
            None => 0,
        }
    }

    /// Whether the table holds a record of `event` (one made while accesses were pending).
    pub fn knows_event(&self, event: u64) -> bool {
        self.events.contains_key(&event)
    }

    /// Unknown means forget: the model met an ordering it cannot follow (a wait on an event
    /// it never saw recorded, a call on a stream whose effect on other streams it does not
    /// model), so every pending access is dropped from the race checks rather than risk
    /// reporting a race the program ordered. Returns whether any was dropped.
    pub fn forget_pending(&mut self) -> bool {
        let any = !self.pending.is_empty();
        self.pending.clear();
        self.prune();
        any
    }

    /// The stream key an event was last recorded on while accesses were pending.
    pub fn event_key(&self, event: u64) -> Option<u64> {
        self.events.get(&event).map(|m| m.key)
    }

    /// `cuStreamWaitEvent(stream, event)` on thread `tid`: `waiter` is ordered after the
    /// event's record.
    pub fn stream_waited(&mut self, waiter: u64, tid: u64, event: u64) {
        if let Some(m) = self.events.get(&event).copied() {
            self.add_wait(waiter, tid, m.key, m.tid, m.upto, m.barrier);
        }
    }

    /// The event completed (`cuEventSynchronize`, `cuEventQuery` success): what it covered
    /// is done, and so is what its stream had waited for before the record.
    pub fn event_completed(&mut self, event: u64) {
        if let Some(m) = self.events.get(&event).copied() {
            self.complete_through(m.key, m.tid, m.upto, m.barrier);
            self.prune();
        }
    }

    /// Stream `key` (thread `tid`) completed what it had queued before `upto`: those
    /// accesses are done, and so is what it had been ordered after by then (the waits
    /// are transitive already, so one level is enough).
    ///
    /// A `barrier` above 0 (`key` the legacy default stream, completed through a record
    /// that was a barrier) also completes the context's blocking streams' accesses queued
    /// before that barrier; so does a wait on such a record.
    fn complete_through(&mut self, key: u64, tid: u64, upto: u64, barrier: u64) {
        let covered: Vec<(u64, u64, u64, u64)> = self
            .waits
            .iter()
            .filter(|w| same(w.waiter, w.waiter_tid, key, tid) && w.at < upto)
            .map(|w| (w.after, w.after_tid, w.upto, w.barrier))
            .chain(std::iter::once((key, tid, upto, barrier)))
            .collect();
        let blocking: Vec<bool> = self.pending.iter().map(|a| self.blocking(a.key)).collect();
        let mut i = 0;
        self.pending.retain(|a| {
            let b = blocking[i];
            i += 1;
            !covered.iter().any(|&(k, t, u, bar)| {
                (same(a.key, a.tid, k, t) && a.seq < u)
                    || (bar > a.epoch && b && legacy_key(a.ctx) == k)
            })
        });
    }

    /// Stream `key` was synchronised or found idle by thread `tid`: its accesses are done,
    /// and those of the streams it waited for (up to what it waited for); for the legacy
    /// default stream, those of its context's blocking streams too.
    pub fn stream_completed(&mut self, key: u64, tid: u64, ctx: u64) {
        let now = self.next_seq;
        self.complete_through(key, tid, now, 0);
        let legacy = matches!(key_kind(key), KeyKind::Legacy(_));
        let blocking: Vec<bool> = self.pending.iter().map(|a| self.blocking(a.key)).collect();
        let mut i = 0;
        self.pending.retain(|a| {
            let done = same(a.key, a.tid, key, tid) || (legacy && a.ctx == ctx && blocking[i]);
            i += 1;
            !done
        });
        self.prune();
    }

    /// Context `ctx` was synchronised, destroyed or reset: its accesses are done.
    pub fn context_completed(&mut self, ctx: u64) {
        self.pending.retain(|a| a.ctx != ctx);
        self.prune();
    }

    /// A stream was destroyed: while accesses on it are pending (they complete on their
    /// own, and stay pending until something synchronises their context) it is remembered
    /// as gone (a repair must not use it) and keeps its flags; otherwise its flags are
    /// forgotten.
    pub fn stream_destroyed(&mut self, handle: u64) {
        if matches!(key_kind(handle), KeyKind::Stream(_))
            && self.pending.iter().any(|a| a.key == handle)
        {
            // Its pending work still runs as the stream was made: the flags stay.
            self.destroyed.insert(handle);
        } else {
            self.non_blocking.remove(&handle);
        }
    }

    /// Whether the created stream `key` was destroyed with accesses pending on it.
    pub fn is_destroyed(&self, key: u64) -> bool {
        self.destroyed.contains(&key)
    }

    fn prune(&mut self) {
        if !self.destroyed.is_empty() {
            let pending = &self.pending;
            self.destroyed
                .retain(|&h| pending.iter().any(|a| a.key == h));
        }
        if self.pending.is_empty() {
            self.waits.clear();
            self.events.clear();
            self.barriers.clear();
            self.single = None;
        }
    }
}

/// The explanation of a hazard, as the user sees it (without the `seedance: function: `
/// prefix). `repaired` names what the shim did in fix mode.
pub fn explain_hazard(h: &Hazard, repaired: Option<&str>) -> String {
    let (a, b) = (&h.first, &h.second);
    let off = |x: &Access| x.addr - h.range.lo;
    let mut s = String::new();
    let ordering = if h.first_destroyed {
        format!(
            "{} was destroyed after the first copy (cuStreamDestroy returns before its work \
             completes), and nothing orders {} after it (no event recorded on it before the \
             destroy and waited for by the second stream, no synchronisation in between)",
            a.describe_stream(),
            b.describe_stream(),
        )
    } else {
        format!(
            "nothing orders {} after {} (no event recorded after the first copy and waited \
             for by the second stream, no synchronisation in between)",
            b.describe_stream(),
            a.describe_stream(),
        )
    };
    let _ = write!(
        s,
        "{} on {} (thread {}) {} host bytes {}..{} ({}) of pinned range {:#x} ({}, made by {}) \
         that {} on {} (thread {}) still {} (bytes {}..{}, {}); {}, so the second copy may run \
         before the first one {}",
        b.function,
        b.describe_stream(),
        b.tid,
        b.dir.verb(),
        off(b),
        off(b) + b.bytes,
        human(b.bytes),
        h.range.lo,
        human(h.range.bytes),
        h.range.made_by,
        a.function,
        a.describe_stream(),
        a.tid,
        a.dir.verb(),
        off(a),
        off(a) + a.bytes,
        human(a.bytes),
        ordering,
        match a.dir {
            Direction::Read => "reads",
            Direction::Write => "writes",
        },
    );
    let consequence = match (a.dir, b.dir) {
        (Direction::Read, Direction::Write) => {
            ": the device would receive the bytes the second copy wrote"
        }
        (Direction::Write, Direction::Read) => {
            ": the second copy would send the bytes from before the first copy wrote them"
        }
        _ => ": the bytes left in host memory would be either copy's",
    };
    s.push_str(consequence);
    if h.first_destroyed {
        let _ = write!(
            s,
            "; fix: before destroying {} record an event on it after the first copy and make \
             the second stream wait for it (cuStreamWaitEvent({}, event, 0)), or synchronise \
             it (cuStreamSynchronize) before destroying it",
            a.describe_stream(),
            stream_arg(b),
        );
    } else {
        let _ = write!(
            s,
            "; fix: record an event after the first copy (cuEventRecord(event, {})) and make the \
         second stream wait for it (cuStreamWaitEvent({}, event, 0)) before the second copy, \
         or keep the buffer until the first copy completes (cuStreamSynchronize or \
         cuEventSynchronize) before reusing it",
            stream_arg(a),
            stream_arg(b),
        );
    }
    if let Some(r) = repaired {
        let _ = write!(s, "; fix mode: {r}");
    }
    s
}

fn stream_arg(a: &Access) -> String {
    match key_kind(a.key) {
        KeyKind::Stream(h) => format!("{h:#x}"),
        KeyKind::Legacy(_) => "0".to_string(),
        KeyKind::PerThread(_) => "CU_STREAM_PER_THREAD".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seedance_hotpath::work::stream_key;

    const CTX: u64 = 0x5eed_c000_0100;
    const A: u64 = 0x5eed_5000_0100;
    const B: u64 = 0x5eed_5000_0200;
    const LO: u64 = 0x7f00_0000_0000;

    fn table() -> Table {
        let mut t = Table::new();
        t.pinned_added(Range {
            lo: LO,
            bytes: 1 << 20,
            made_by: "cuMemHostAlloc",
        });
        t
    }

    fn access(key: u64, tid: u64, dir: Direction, off: u64, bytes: u64) -> Access {
        Access {
            function: match dir {
                Direction::Read => "cuMemcpyHtoDAsync_v2",
                Direction::Write => "cuMemcpyDtoHAsync_v2",
            },
            key,
            stream: key,
            per_thread: false,
            ctx: CTX,
            tid,
            dir,
            addr: LO + off,
            bytes,
            range_lo: LO,
            seq: 0,
            epoch: 0,
        }
    }

    #[test]
    fn ranges_are_found_from_interior_pointers() {
        let t = table();
        assert_eq!(t.pinned_at(LO).map(|r| r.lo), Some(LO));
        assert_eq!(t.pinned_at(LO + 4096).map(|r| r.lo), Some(LO));
        assert_eq!(t.pinned_at(LO + (1 << 20)), None);
        assert_eq!(t.pinned_at(LO - 1), None);
    }

    #[test]
    fn a_read_then_a_write_on_another_stream_is_a_hazard() {
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        let w = access(B, 1, Direction::Write, 4000, 100);
        let h = t.check(&w);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].first.key, A);
        // Two reads never race; the same stream is ordered; disjoint bytes never race.
        assert!(t.check(&access(B, 1, Direction::Read, 0, 4096)).is_empty());
        assert!(t.check(&access(A, 1, Direction::Write, 0, 4096)).is_empty());
        assert!(t
            .check(&access(B, 1, Direction::Write, 4096, 4096))
            .is_empty());
        // From another thread too.
        assert_eq!(t.check(&access(B, 2, Direction::Write, 0, 1)).len(), 1);
    }

    #[test]
    fn completion_ends_the_hazard() {
        for how in 0..4 {
            let mut t = table();
            t.commit(access(A, 1, Direction::Read, 0, 4096));
            match how {
                0 => t.stream_completed(A, 1, CTX),
                1 => t.context_completed(CTX),
                2 => {
                    t.event_recorded(0xe0, A, 1);
                    t.event_completed(0xe0);
                }
                _ => {
                    t.pinned_removed(LO);
                    t.pinned_added(Range {
                        lo: LO,
                        bytes: 1 << 20,
                        made_by: "cuMemHostAlloc",
                    });
                }
            }
            assert!(
                t.check(&access(B, 1, Direction::Write, 0, 1)).is_empty(),
                "{how}"
            );
            assert!(t.is_idle());
        }
        // An event recorded before the access does not cover it.
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 16));
        t.event_recorded(0xe0, A, 1);
        t.commit(access(A, 1, Direction::Read, 64, 16));
        t.event_completed(0xe0);
        assert_eq!(t.pending().len(), 1);
        assert_eq!(t.check(&access(B, 1, Direction::Write, 64, 1)).len(), 1);
        // Another stream's synchronisation does not either.
        t.stream_completed(B, 1, CTX);
        assert_eq!(t.pending().len(), 1);
    }

    #[test]
    fn an_event_waited_for_orders_the_streams() {
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.event_recorded(0xe0, A, 1);
        t.stream_waited(B, 2, 0xe0);
        assert!(t.check(&access(B, 2, Direction::Write, 0, 4096)).is_empty());
        // A third stream is not ordered, unless it waits on B afterwards (transitively).
        let c = 0x5eed_5000_0300;
        assert_eq!(t.check(&access(c, 2, Direction::Write, 0, 1)).len(), 1);
        t.event_recorded(0xe1, B, 2);
        t.stream_waited(c, 2, 0xe1);
        assert!(t.check(&access(c, 2, Direction::Write, 0, 1)).is_empty());
        // A copy on A after the record is not covered by the earlier wait.
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        assert_eq!(t.check(&access(B, 2, Direction::Write, 0, 1)).len(), 1);
        // The shim's own ordering covers everything so far.
        t.order(B, 2, A, 1);
        assert!(t.check(&access(B, 2, Direction::Write, 0, 1)).is_empty());
    }

    #[test]
    fn completion_follows_waits() {
        let c = 0x5eed_5000_0300;
        // Synchronising the waiter completes what it waited for.
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.event_recorded(0xe0, A, 1);
        t.stream_waited(B, 1, 0xe0);
        t.stream_completed(B, 1, CTX);
        assert!(t.is_idle());
        assert!(t.check(&access(c, 1, Direction::Write, 0, 4096)).is_empty());

        // An event recorded on the waiter after the wait covers it; one recorded before
        // does not.
        for (record_after_wait, idle) in [(true, true), (false, false)] {
            let mut t = table();
            t.commit(access(A, 1, Direction::Read, 0, 4096));
            t.event_recorded(0xe0, A, 1);
            if !record_after_wait {
                t.event_recorded(0xe2, B, 1);
            }
            t.stream_waited(B, 1, 0xe0);
            if record_after_wait {
                t.event_recorded(0xe2, B, 1);
            }
            t.event_completed(0xe2);
            assert_eq!(t.is_idle(), idle, "{record_after_wait}");
        }

        // What the waited-for stream queued after the record is not complete.
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 16));
        t.event_recorded(0xe0, A, 1);
        t.commit(access(A, 1, Direction::Read, 64, 16));
        t.stream_waited(B, 1, 0xe0);
        t.stream_completed(B, 1, CTX);
        assert_eq!(t.pending().len(), 1);
        assert_eq!(t.pending()[0].addr, LO + 64);

        // Transitively: C waited for B, which had waited for A.
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.event_recorded(0xe0, A, 1);
        t.stream_waited(B, 1, 0xe0);
        t.event_recorded(0xe1, B, 1);
        t.stream_waited(c, 1, 0xe1);
        t.stream_completed(c, 1, CTX);
        assert!(t.is_idle());
    }

    #[test]
    fn forgetting_drops_every_pending_access() {
        let mut t = table();
        assert!(!t.forget_pending());
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.event_recorded(0xe0, A, 1);
        assert!(t.knows_event(0xe0));
        assert!(!t.knows_event(0xe1));
        assert!(t.forget_pending());
        assert!(t.is_idle());
        assert!(!t.knows_event(0xe0));
        assert!(t.check(&access(B, 1, Direction::Write, 0, 1)).is_empty());
    }

    #[test]
    fn the_legacy_default_stream_orders_blocking_streams() {
        let legacy = stream_key(0, CTX as usize, false);
        let mut t = table();
        t.stream_created(A, 0);
        t.stream_created(B, 1);
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        assert!(t
            .check(&access(legacy, 1, Direction::Write, 0, 1))
            .is_empty());
        t.commit(access(B, 1, Direction::Read, 0, 4096));
        let h = t.check(&access(legacy, 1, Direction::Write, 0, 1));
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].first.key, B);
        // A legacy synchronisation completes the blocking stream's access only.
        t.stream_completed(legacy, 1, CTX);
        assert_eq!(t.pending().len(), 1);
        assert_eq!(t.pending()[0].key, B);
    }

    /// simpleStreams (cuda-samples): a copy on a blocking stream, an event recorded on the
    /// legacy default stream and synchronised, then a copy on another stream into the same
    /// bytes. The record ran after the blocking stream's copy (CUDA programming guide,
    /// "Default Stream"; measured on driver 580.159, H100, 2026-12-06: such an event waited
    /// 1.012 s behind a blocking stream's copy queued after a 1 s kernel), so its completion
    /// completes the copy. A non-blocking stream's copy is not covered.
    #[test]
    fn an_event_on_the_legacy_stream_completes_the_blocking_streams() {
        let legacy = stream_key(0, CTX as usize, false);
        for (flags, raced) in [(0, false), (1, true)] {
            let mut t = table();
            t.stream_created(A, flags);
            t.stream_created(B, flags);
            t.commit(access(A, 1, Direction::Write, 0, 4096));
            t.event_recorded(0xe0, legacy, 1);
            t.event_completed(0xe0);
            assert_eq!(t.is_idle(), !raced, "flags {flags}");
            let h = t.check(&access(B, 1, Direction::Write, 0, 1024));
            assert_eq!(h.len(), usize::from(raced), "flags {flags}");
        }
        // A blocking stream's copy queued after the record is not covered by it.
        let mut t = table();
        t.event_recorded(0xe0, legacy, 1);
        t.commit(access(A, 1, Direction::Write, 0, 4096));
        t.event_completed(0xe0);
        assert_eq!(t.check(&access(B, 1, Direction::Write, 0, 1)).len(), 1);
    }

    /// Legacy-stream work that does not block the host (a synchronous memset, a
    /// device-to-device copy, an asynchronous copy or record on stream 0) still orders the
    /// blocking streams: it runs after their earlier work, and their later work runs after
    /// it (CUDA programming guide, "Implicit Synchronization"). Non-blocking streams are
    /// ordered by none of it.
    #[test]
    fn legacy_stream_work_is_a_barrier_between_blocking_streams() {
        let legacy = stream_key(0, CTX as usize, false);
        for (a_flags, b_flags, raced) in [(0, 0, false), (1, 0, true), (0, 1, true)] {
            let mut t = table();
            t.stream_created(A, a_flags);
            t.stream_created(B, b_flags);
            t.commit(access(A, 1, Direction::Read, 0, 4096));
            let w = access(B, 2, Direction::Write, 0, 64);
            assert_eq!(t.check(&w).len(), 1, "nothing orders them yet");
            t.legacy_barrier(CTX);
            assert_eq!(t.check(&w).len(), usize::from(raced), "{a_flags} {b_flags}");
            // A barrier does not complete anything: the host did not wait.
            assert_eq!(t.pending().len(), 1);
        }
        // An asynchronous copy on the legacy stream (other bytes) is a barrier too.
        let mut t = table();
        t.stream_created(A, 0);
        t.stream_created(B, 0);
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.commit(access(legacy, 1, Direction::Read, 8192, 64));
        assert!(t.check(&access(B, 1, Direction::Write, 0, 64)).is_empty());
        // A barrier of another context orders nothing here.
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.legacy_barrier(CTX + 0x100);
        assert_eq!(t.check(&access(B, 1, Direction::Write, 0, 64)).len(), 1);
        // Work queued after the barrier is not ordered by it.
        let mut t = table();
        t.legacy_barrier(CTX);
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        assert_eq!(t.check(&access(B, 1, Direction::Write, 0, 64)).len(), 1);
    }

    /// A stream waiting for an event recorded on the legacy default stream waits for what
    /// the record waited for: the blocking streams' earlier work; completing it completes
    /// that work.
    #[test]
    fn a_wait_on_a_legacy_record_covers_the_blocking_streams() {
        let legacy = stream_key(0, CTX as usize, false);
        let n = 0x5eed_5000_0300;
        let mut t = table();
        t.stream_created(A, 0);
        t.stream_created(n, 1);
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        assert_eq!(t.check(&access(n, 1, Direction::Write, 0, 64)).len(), 1);
        t.event_recorded(0xe0, legacy, 1);
        t.stream_waited(n, 1, 0xe0);
        assert!(t.check(&access(n, 1, Direction::Write, 0, 64)).is_empty());
        t.stream_completed(n, 1, CTX);
        assert!(t.is_idle());
    }

    /// The per-thread default stream is blocking (it synchronises with the legacy default
    /// stream), a stream of its own per thread: a legacy barrier orders it, another
    /// thread's per-thread stream does not; host-blocking work on it (a `_ptds`
    /// synchronous copy) completes its own work, the legacy stream's and what a legacy
    /// barrier before covered.
    #[test]
    fn the_per_thread_default_stream_is_a_blocking_stream_of_its_own() {
        let pt = stream_key(0, CTX as usize, true);
        let mut t = table();
        t.stream_created(A, 0);
        t.stream_created(B, 1);
        t.commit(access(pt, 1, Direction::Read, 0, 64));
        assert_eq!(t.check(&access(pt, 2, Direction::Write, 0, 64)).len(), 1);
        assert_eq!(t.check(&access(A, 1, Direction::Write, 0, 64)).len(), 1);
        t.legacy_barrier(CTX);
        assert!(t.check(&access(pt, 2, Direction::Write, 0, 64)).is_empty());
        assert!(t.check(&access(A, 2, Direction::Write, 0, 64)).is_empty());
        assert_eq!(t.check(&access(B, 2, Direction::Write, 0, 64)).len(), 1);

        // A `_ptds` synchronous copy on thread 2: thread 1's per-thread access is complete
        // only if a legacy barrier came between.
        let mut t = table();
        t.stream_created(A, 0);
        t.commit(access(pt, 1, Direction::Read, 0, 64));
        t.commit(access(A, 1, Direction::Read, 128, 64));
        t.per_thread_synced(CTX, 2);
        assert_eq!(t.pending().len(), 2);
        t.legacy_barrier(CTX);
        t.per_thread_synced(CTX, 2);
        assert!(t.is_idle());
        // Its own thread's: complete at once.
        let mut t = table();
        t.commit(access(pt, 1, Direction::Read, 0, 64));
        t.per_thread_synced(CTX, 1);
        assert!(t.is_idle());
    }

    #[test]
    fn per_thread_default_streams_of_two_threads_are_different_streams() {
        let pt = stream_key(0, CTX as usize, true);
        let mut t = table();
        t.commit(access(pt, 1, Direction::Read, 0, 64));
        assert!(t.check(&access(pt, 1, Direction::Write, 0, 64)).is_empty());
        assert_eq!(t.check(&access(pt, 2, Direction::Write, 0, 64)).len(), 1);
        t.stream_completed(pt, 2, CTX);
        assert_eq!(t.pending().len(), 1);
        t.stream_completed(pt, 1, CTX);
        assert!(t.is_idle());
    }

    #[test]
    fn a_repeated_copy_on_one_stream_keeps_one_entry() {
        let mut t = table();
        for _ in 0..10_000 {
            t.commit(access(A, 1, Direction::Read, 0, 4096));
        }
        assert_eq!(t.pending().len(), 1);
        // A larger read supersedes a smaller one; a write does not supersede a read.
        t.commit(access(A, 1, Direction::Read, 0, 8192));
        t.commit(access(A, 1, Direction::Write, 0, 8192));
        assert_eq!(t.pending().len(), 2);
        // What raced with the superseded access races with its successor.
        assert_eq!(t.check(&access(B, 1, Direction::Write, 4000, 1)).len(), 1);
    }

    #[test]
    fn the_table_stays_bounded() {
        let mut t = table();
        for i in 0..(MAX_PENDING as u64 + 5) {
            t.commit(access(A, 1, Direction::Read, i * 2, 1));
        }
        assert_eq!(t.pending().len(), MAX_PENDING);
        assert_eq!(t.forgotten(), 5);
        for i in 0..(MAX_WAITS as u64 + 5) {
            t.order(0x1000 + (i << 8), 1, A, 1);
        }
        assert!(t.waits.len() <= MAX_WAITS);
    }

    #[test]
    fn a_destroyed_first_stream_is_marked_while_its_accesses_are_pending() {
        let mut t = table();
        t.commit(access(A, 1, Direction::Read, 0, 4096));
        t.stream_destroyed(B);
        assert!(!t.is_destroyed(B), "nothing pending on B");
        t.stream_destroyed(A);
        let h = &t.check(&access(B, 1, Direction::Write, 0, 1))[0];
        assert!(h.first_destroyed);
        let e = explain_hazard(h, None);
        assert!(
            e.contains("stream 0x5eed50000100 was destroyed after the first copy"),
            "{e}"
        );
        assert!(!e.contains("cuEventRecord(event, 0x5eed50000100)"), "{e}");
        assert!(e.contains("before destroying stream 0x5eed50000100 record an event"));
        // Gone from the table once its accesses are.
        t.context_completed(CTX);
        assert!(!t.is_destroyed(A));
    }

    #[test]
    fn the_explanation_names_both_calls_the_range_and_the_fix() {
        let mut t = table();
        t.commit(access(A, 11, Direction::Read, 0, 64 << 20));
        let h = &t.check(&access(B, 22, Direction::Write, 4096, 4096))[0];
        let e = explain_hazard(h, None);
        assert!(
            e.starts_with(
                "cuMemcpyDtoHAsync_v2 on stream 0x5eed50000200 (thread 22) writes host bytes \
                 4096..8192 (4.0 KiB) of pinned range 0x7f0000000000 (1.0 MiB, made by \
                 cuMemHostAlloc) that cuMemcpyHtoDAsync_v2 on stream 0x5eed50000100 (thread \
                 11) still reads (bytes 0..67108864, 64.0 MiB)"
            ),
            "{e}"
        );
        assert!(e.contains("the second copy may run before the first one reads"));
        assert!(e.contains("cuStreamWaitEvent(0x5eed50000200, event, 0)"));
        assert!(e.contains("cuEventRecord(event, 0x5eed50000100)"));
        let r = explain_hazard(h, Some("the shim ordered it"));
        assert!(r.ends_with("; fix mode: the shim ordered it"));
    }
}
