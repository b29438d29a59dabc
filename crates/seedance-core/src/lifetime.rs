//! Lifetimes of contexts and of what belongs to them: contexts (created, primary
//! retained and released, destroyed, reset), streams and events with their owning
//! context, pinned host ranges, device allocations that died with their context, and per
//! stream the work submitted since it was last synchronised.
//!
//! The [`Tracker`] is plain data. The shim keeps one behind a mutex and touches it only on
//! cold paths: context, stream and event creation and destruction, synchronisation, pinned
//! allocation and free, and failures. Launches and asynchronous copies are counted without
//! a lock in per-thread shards ([`crate::work`]), which also keep, per stream key, the counts
//! at the stream's last synchronisation (a baseline), so what is pending is the difference
//! ([`Tracker::pending`]); a synchronize raises the baselines without the tracker
//! ([`seedance_hotpath::work::retire_key`], [`seedance_hotpath::work::retire_event`]).
//!
//! The tracker counts the stream and event handles it holds whose context ended
//! ([`Tracker::dead_handles`]) and can publish that count in an atomic, so the checks before
//! a synchronize skip the lock while no handle is dead.
//!
//! Every context incarnation gets an id (never reused) and a generation: 1 plus the number
//! of earlier contexts the driver gave the same handle (a primary context re-created after
//! a reset may come back at the same address), counted while the handle's latest
//! incarnation is remembered.
//!
//! Each context event costs O(1): contexts are kept by id in a map, the latest incarnation
//! of each handle and the per-device counts (contexts made, alive) are kept up to date
//! rather than found by walking every context seen. An ended context is remembered (for
//! the explanations of its handles and memory) while a stream or event of it is held, and
//! otherwise only among the last [`KEEP_ENDED`] to end: a process that makes and destroys
//! contexts in a loop keeps the tracker's size. Streams and events remember the id of the
//! context they were made in, so a handle from before a reset is recognised even when the
//! context handle is alive again. Each recorded call gets a [`Site`]: the function, the
//! thread, the time and a process-wide sequence number of lifetime calls.
//!
//! The explanations (`explain_*`) and the exit line are built in [`explain`] so they
//! can be tested without a driver; they are re-exported here.

use seedance_hotpath::work::{key_kind, CopyRecord, Counts, KeyKind, Shard};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

mod explain;
#[cfg(test)]
mod tests;

pub use explain::*;

/// Where and when a lifetime call happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Exported symbol of the call (`cuCtxDestroy_v2`).
    pub function: &'static str,
    /// Kernel thread id of the caller.
    pub tid: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Sequence number among the lifetime calls the shim recorded in this process, from 1.
    pub seq: u64,
}

impl Site {
    /// `cuCtxDestroy_v2 on thread 1234 (lifetime call #7)`.
    pub fn describe(&self) -> String {
        format!(
            "{} on thread {} (lifetime call #{})",
            self.function, self.tid, self.seq
        )
    }
}

/// How a context ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndKind {
    /// `cuCtxDestroy`.
    Destroyed,
    /// `cuDevicePrimaryCtxReset` (also what `cudaDeviceReset` does).
    Reset,
    /// The last `cuDevicePrimaryCtxRelease`.
    Released,
}

impl EndKind {
    /// `destroyed`, `reset`, `released`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndKind::Destroyed => "destroyed",
            EndKind::Reset => "reset",
            EndKind::Released => "released",
        }
    }
}

/// The end of a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// How.
    pub how: EndKind,
    /// The call that ended it.
    pub site: Site,
    /// Work that was still pending on its streams when it ended (zero when everything had
    /// been synchronised, by the program or by the shim's repair).
    pub lost: Counts,
}

/// One context incarnation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// Tracker id, never reused.
    pub id: u32,
    /// The `CUcontext` handle.
    pub handle: u64,
    /// The `CUdevice` it was made on, when known.
    pub device: Option<i32>,
    /// A device's primary context.
    pub primary: bool,
    /// 1 + earlier contexts with the same handle.
    pub generation: u32,
    /// For a primary context, retains not yet released; 1 for a created context.
    pub retained: u32,
    /// The call that made it (for a primary context, the first retain).
    pub created: Site,
    /// How it ended; `None` while alive.
    pub end: Option<End>,
}

impl Context {
    /// `context 0x5eedc0000100 (device 0, primary, generation 2)`.
    pub fn describe(&self) -> String {
        let mut s = format!("context {:#x} (", self.handle);
        if let Some(d) = self.device {
            let _ = write!(s, "device {d}, ");
        }
        if self.primary {
            s.push_str("primary, ");
        }
        let _ = write!(
            s,
            "generation {}, made by {})",
            self.generation,
            self.created.describe()
        );
        s
    }
}

/// A created stream or event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// Id of the context it was made in (`None` when no context was current).
    pub ctx: Option<u32>,
    /// The call that made it.
    pub created: Site,
}

/// How a pinned host range came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinnedKind {
    /// `cuMemHostAlloc` or `cuMemAllocHost`: freed with `cuMemFreeHost`.
    Allocated,
    /// `cuMemHostRegister`: released with `cuMemHostUnregister`.
    Registered,
}

/// A pinned host range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// First byte.
    pub lo: u64,
    /// Length in bytes.
    pub bytes: u64,
    /// Allocated or registered.
    pub kind: PinnedKind,
    /// The context current when it was made.
    pub ctx: Option<u32>,
    /// The call that made it.
    pub created: Site,
}

/// Memory (device or pinned host) that the driver released with its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadMemory {
    /// Bytes.
    pub bytes: u64,
    /// Id of the context it died with.
    pub ctx: u32,
}

/// Work pending on one stream key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Stream key ([`seedance_hotpath::work::stream_key`]).
    pub key: u64,
    /// Shards (threads) with pending work on the key.
    pub shards: Vec<u32>,
    /// Launches and copies since the key's last synchronisation.
    pub counts: Counts,
    /// The pending copies still remembered.
    pub copies: Vec<CopyRecord>,
}

/// Everything the tracker knows; see the module documentation.
#[derive(Debug, Default)]
pub struct Tracker {
    seq: u64,
    /// Live contexts and the ended ones remembered, by id.
    contexts: HashMap<u32, Context>,
    /// The id the next context gets.
    next_id: u32,
    live: HashMap<u64, u32>,
    /// The latest incarnation remembered of each handle (alive or ended).
    latest: HashMap<u64, u32>,
    /// Streams and events held, by the id of their context.
    refs: HashMap<u32, u32>,
    /// Ended contexts in the order they ended, the last [`KEEP_ENDED`].
    ended_order: VecDeque<u32>,
    /// Ended contexts past [`KEEP_ENDED`] still named by a held stream or event: forgotten
    /// when the last of those goes.
    evictable: HashSet<u32>,
    /// Per device: contexts made (incarnations), contexts alive; and the first context's
    /// call and thread.
    devices: BTreeMap<i32, DeviceContexts>,
    streams: HashMap<u64, Owned>,
    events: HashMap<u64, Owned>,
    key_ctx: HashMap<u64, u32>,
    pinned: BTreeMap<u64, Pinned>,
    dead_pinned: BTreeMap<u64, DeadMemory>,
    dead_device: HashMap<u64, DeadMemory>,
    orphans: Vec<(u32, CopyRecord)>,
    /// Streams and events held whose context ended.
    dead_handles: usize,
    /// Where [`Tracker::dead_handles`] is published after every change, if anywhere.
    dead_mirror: Option<&'static AtomicUsize>,
}

/// Most contexts remembered at once (alive, or ended and still named); contexts made
/// beyond it are not tracked.
pub const MAX_CONTEXTS: usize = 1 << 16;

/// Ended contexts remembered when no stream or event of theirs is held: the last ones to
/// end.
pub const KEEP_ENDED: usize = 1024;

/// The contexts of one device, counted as they are made and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceContexts {
    /// Contexts made there (a primary context retained again is one).
    pub contexts: u32,
    /// Of those, alive now.
    pub live: u32,
    /// The call that made the first one.
    pub first_function: &'static str,
    /// The thread that made the first one.
    pub first_tid: u64,
}

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// An empty tracker that stores [`Tracker::dead_handles`] in `mirror` (release) after
    /// every change, for a reader that does not take the tracker's lock: while `mirror`
    /// reads 0, no stream or event the tracker holds belongs to an ended context.
    pub fn with_dead_handle_mirror(mirror: &'static AtomicUsize) -> Tracker {
        mirror.store(0, Ordering::Release);
        Tracker {
            dead_mirror: Some(mirror),
            ..Tracker::default()
        }
    }

    /// Stream and event handles held whose context ended (so [`Tracker::ended`] of their
    /// `ctx` is `Some`).
    pub fn dead_handles(&self) -> usize {
        self.dead_handles
    }

    fn is_dead(&self, o: &Owned) -> bool {
        self.ended(o.ctx).is_some()
    }

    fn add_dead(&mut self, plus: usize, minus: usize) {
        if plus == minus {
            return;
        }
        self.dead_handles = (self.dead_handles + plus).saturating_sub(minus);
        if let Some(m) = self.dead_mirror {
            m.store(self.dead_handles, Ordering::Release);
        }
    }

    /// Context `id` just ended: its streams and events are dead handles now.
    fn handles_died(&mut self, id: u32) {
        let n = self.refs.get(&id).copied().unwrap_or(0) as usize;
        self.add_dead(n, 0);
    }

    /// A stream or event of context `ctx` is now held (`+1`) or no longer (`-1`); an
    /// ended context named by none and past [`KEEP_ENDED`] is forgotten.
    fn reference(&mut self, ctx: Option<u32>, held: bool) {
        let Some(id) = ctx else { return };
        if held {
            *self.refs.entry(id).or_insert(0) += 1;
            return;
        }
        if let Some(n) = self.refs.get_mut(&id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.refs.remove(&id);
                if self.evictable.remove(&id) {
                    self.forget_context(id);
                }
            }
        }
    }

    /// Forgets ended context `id` altogether.
    fn forget_context(&mut self, id: u32) {
        if let Some(c) = self.contexts.remove(&id) {
            if self.latest.get(&c.handle) == Some(&id) {
                self.latest.remove(&c.handle);
            }
        }
    }

    /// Context `id` ended: remembered among the last [`KEEP_ENDED`]; the oldest beyond
    /// that are forgotten, or once no stream or event of theirs is held.
    fn remember_ended(&mut self, id: u32) {
        self.ended_order.push_back(id);
        while self.ended_order.len() > KEEP_ENDED {
            let Some(old) = self.ended_order.pop_front() else {
                break;
            };
            if self.refs.contains_key(&old) {
                self.evictable.insert(old);
            } else {
                self.forget_context(old);
            }
        }
    }

    /// Contexts remembered now (alive, or ended and kept): bounded by the contexts alive,
    /// the ended ones whose streams or events are held, and [`KEEP_ENDED`].
    pub fn contexts_remembered(&self) -> usize {
        self.contexts.len()
    }

    /// Per device: contexts made, alive, and the first one's call and thread.
    pub fn device_contexts(&self) -> &BTreeMap<i32, DeviceContexts> {
        &self.devices
    }

    /// A handle entry was added (`new_dead`: one of an ended context) in place of `old`:
    /// the dead count follows.
    fn handle_replaced(&mut self, new_dead: bool, old: Option<&Owned>) {
        let minus = old.is_some_and(|o| self.is_dead(o)) as usize;
        self.add_dead(new_dead as usize, minus);
        if let Some(o) = old {
            self.reference(o.ctx, false);
        }
    }

    /// A new site for a call of `function` on thread `tid` at `ts_ns`.
    pub fn site(&mut self, function: &'static str, tid: u64, ts_ns: u64) -> Site {
        self.seq += 1;
        Site {
            function,
            tid,
            ts_ns,
            seq: self.seq,
        }
    }

    fn add_context(
        &mut self,
        handle: u64,
        device: Option<i32>,
        primary: bool,
        site: Site,
    ) -> Option<u32> {
        if handle == 0 || self.contexts.len() >= MAX_CONTEXTS {
            return None;
        }
        if let Some(old) = self.live.remove(&handle) {
            // The driver handed the same handle out again without our seeing the old one
            // end: forget it quietly.
            let device = self.contexts.get_mut(&old).and_then(|c| {
                c.end = Some(End {
                    how: EndKind::Destroyed,
                    site: site.clone(),
                    lost: Counts::default(),
                });
                c.device
            });
            self.device_ended(device);
            self.handles_died(old);
            self.remember_ended(old);
        }
        let generation = self
            .latest
            .get(&handle)
            .and_then(|id| self.contexts.get(id))
            .map_or(1, |c| c.generation + 1);
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        if let Some(d) = device {
            let e = self.devices.entry(d).or_insert(DeviceContexts {
                contexts: 0,
                live: 0,
                first_function: site.function,
                first_tid: site.tid,
            });
            e.contexts = e.contexts.saturating_add(1);
            e.live += 1;
        }
        self.contexts.insert(
            id,
            Context {
                id,
                handle,
                device,
                primary,
                generation,
                retained: 1,
                created: site,
                end: None,
            },
        );
        self.live.insert(handle, id);
        self.latest.insert(handle, id);
        Some(id)
    }

    fn device_ended(&mut self, device: Option<i32>) {
        if let Some(e) = device.and_then(|d| self.devices.get_mut(&d)) {
            e.live = e.live.saturating_sub(1);
        }
    }

    /// A successful `cuCtxCreate`.
    pub fn context_created(&mut self, handle: u64, device: Option<i32>, site: Site) -> Option<u32> {
        self.add_context(handle, device, false, site)
    }

    /// A successful `cuDevicePrimaryCtxRetain`: the live primary context gains a retain, or
    /// a new incarnation starts.
    pub fn primary_retained(
        &mut self,
        handle: u64,
        device: Option<i32>,
        site: Site,
    ) -> Option<u32> {
        if let Some(&id) = self.live.get(&handle) {
            let c = self.contexts.get_mut(&id)?;
            if c.primary {
                c.retained = c.retained.saturating_add(1);
                return Some(id);
            }
        }
        self.add_context(handle, device, true, site)
    }

    /// A successful `cuDevicePrimaryCtxRelease` that did not end the context.
    pub fn primary_released(&mut self, id: u32) {
        if let Some(c) = self.contexts.get_mut(&id) {
            c.retained = c.retained.saturating_sub(1);
        }
    }

    /// The live context with this handle.
    pub fn live_context(&self, handle: u64) -> Option<&Context> {
        self.live.get(&handle).and_then(|id| self.contexts.get(id))
    }

    /// The live primary context of `device`.
    pub fn live_primary(&self, device: i32) -> Option<&Context> {
        self.live
            .values()
            .filter_map(|id| self.contexts.get(id))
            .find(|c| c.primary && c.device == Some(device))
    }

    /// The context incarnation `id`.
    pub fn context(&self, id: u32) -> Option<&Context> {
        self.contexts.get(&id)
    }

    /// The most recent incarnation with this handle, alive or not.
    pub fn latest_context(&self, handle: u64) -> Option<&Context> {
        if let Some(c) = self.live_context(handle) {
            return Some(c);
        }
        self.latest
            .get(&handle)
            .and_then(|id| self.contexts.get(id))
    }

    /// Every live context.
    pub fn live_contexts(&self) -> Vec<&Context> {
        let mut v: Vec<&Context> = self
            .live
            .values()
            .filter_map(|id| self.contexts.get(id))
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Marks context `id` ended: its streams, events and pinned ranges die with it, and the
    /// device allocations `allocations` (address, bytes) that the driver released with it
    /// are remembered as dead. The baselines of its streams are the caller's business
    /// ([`Tracker::retire`]).
    pub fn context_ended(
        &mut self,
        id: u32,
        how: EndKind,
        site: Site,
        lost: Counts,
        allocations: &[(u64, u64)],
    ) {
        let Some(c) = self.contexts.get_mut(&id) else {
            return;
        };
        if c.end.is_some() {
            return;
        }
        c.end = Some(End { how, site, lost });
        c.retained = 0;
        let (handle, device) = (c.handle, c.device);
        if self.live.get(&handle) == Some(&id) {
            self.live.remove(&handle);
        }
        self.device_ended(device);
        self.handles_died(id);
        self.remember_ended(id);
        for &(addr, bytes) in allocations {
            self.dead_device.insert(addr, DeadMemory { bytes, ctx: id });
        }
        let dead: Vec<u64> = self
            .pinned
            .iter()
            .filter(|(_, p)| p.ctx == Some(id))
            .map(|(&lo, _)| lo)
            .collect();
        for lo in dead {
            if let Some(p) = self.pinned.remove(&lo) {
                self.dead_pinned.insert(
                    lo,
                    DeadMemory {
                        bytes: p.bytes,
                        ctx: id,
                    },
                );
            }
        }
        self.orphans.retain(|(c, _)| *c != id);
    }

    /// The ended context that `id` names, if it ended.
    pub fn ended(&self, id: Option<u32>) -> Option<&Context> {
        self.context(id?).filter(|c| c.end.is_some())
    }

    /// A successful `cuStreamCreate` in context `ctx`.
    pub fn stream_created(&mut self, handle: u64, ctx: Option<u32>, site: Site) {
        let new = Owned { ctx, created: site };
        let dead = self.is_dead(&new);
        self.reference(ctx, true);
        let old = self.streams.insert(handle, new);
        self.handle_replaced(dead, old.as_ref());
        if let Some(c) = ctx {
            self.key_ctx.insert(handle, c);
        }
    }

    /// A stream handle leaves: destroyed (its counted work retired, the copies still
    /// running kept with its context: [`Tracker::orphan`]), or found dead with its context.
    /// Nothing of it stays, so a program that makes and destroys streams in a loop keeps
    /// the tracker's size.
    pub fn stream_forgotten(&mut self, handle: u64) -> Option<Owned> {
        self.key_ctx.remove(&handle);
        let old = self.streams.remove(&handle);
        self.handle_replaced(false, old.as_ref());
        old
    }

    /// Entries the tracker holds for stream and event handles (live streams and events,
    /// and the context of each stream key it keeps): bounded by the handles alive.
    pub fn handles(&self) -> usize {
        self.streams.len() + self.events.len() + self.key_ctx.len()
    }

    /// What the tracker knows of a stream handle.
    pub fn stream(&self, handle: u64) -> Option<&Owned> {
        self.streams.get(&handle)
    }

    /// A successful `cuEventCreate` in context `ctx`.
    pub fn event_created(&mut self, handle: u64, ctx: Option<u32>, site: Site) {
        let new = Owned { ctx, created: site };
        let dead = self.is_dead(&new);
        self.reference(ctx, true);
        let old = self.events.insert(handle, new);
        self.handle_replaced(dead, old.as_ref());
    }

    /// An event handle leaves.
    pub fn event_forgotten(&mut self, handle: u64) -> Option<Owned> {
        let old = self.events.remove(&handle);
        self.handle_replaced(false, old.as_ref());
        old
    }

    /// What the tracker knows of an event handle.
    pub fn event(&self, handle: u64) -> Option<&Owned> {
        self.events.get(&handle)
    }

    /// Records the context of a stream key learnt from the driver (`cuStreamGetCtx`).
    pub fn learn_key(&mut self, key: u64, ctx: u32) {
        self.key_ctx.insert(key, ctx);
    }

    /// The context incarnation a stream key belongs to, when known.
    pub fn key_owner(&self, key: u64) -> Option<u32> {
        match key_kind(key) {
            KeyKind::Stream(h) => self.key_ctx.get(&h).copied(),
            KeyKind::Legacy(c) | KeyKind::PerThread(c) => self.latest_context(c).map(|c| c.id),
        }
    }

    /// Pinned memory: a successful `cuMemHostAlloc`, `cuMemAllocHost` or
    /// `cuMemHostRegister`.
    pub fn pinned_added(&mut self, p: Pinned) {
        self.dead_pinned.remove(&p.lo);
        self.pinned.insert(p.lo, p);
    }

    /// The pinned range starting at `lo`.
    pub fn pinned(&self, lo: u64) -> Option<&Pinned> {
        self.pinned.get(&lo)
    }

    /// Forgets the pinned range starting at `lo` (freed or unregistered).
    pub fn pinned_removed(&mut self, lo: u64) -> Option<Pinned> {
        self.pinned.remove(&lo)
    }

    /// Every live pinned range.
    pub fn pinned_ranges(&self) -> impl Iterator<Item = &Pinned> {
        self.pinned.values()
    }

    /// Pinned memory starting at `lo` that died with its context.
    pub fn dead_pinned(&self, lo: u64) -> Option<&DeadMemory> {
        self.dead_pinned.get(&lo)
    }

    /// Forgets dead pinned memory at `lo` (its free was answered).
    pub fn forget_dead_pinned(&mut self, lo: u64) {
        self.dead_pinned.remove(&lo);
    }

    /// Device memory at `addr` that died with its context.
    pub fn dead_device(&self, addr: u64) -> Option<&DeadMemory> {
        self.dead_device.get(&addr)
    }

    /// Forgets dead device memory at `addr` (its free was answered, or the driver handed
    /// the address out again).
    pub fn forget_dead_device(&mut self, addr: u64) -> Option<DeadMemory> {
        self.dead_device.remove(&addr)
    }

    /// Every dead device address (for the shim's lock-free filter).
    pub fn dead_device_addresses(&self) -> impl Iterator<Item = u64> + '_ {
        self.dead_device.keys().copied()
    }

    /// Work pending on the keys `want` selects, across `shards`, one entry per key with
    /// something pending.
    pub fn pending(&self, shards: &[&Shard], want: impl Fn(u64) -> bool) -> Vec<Pending> {
        let mut by_key: BTreeMap<u64, Pending> = BTreeMap::new();
        for s in shards {
            let mut any = false;
            for (key, counts) in s.keys() {
                if !want(key) {
                    continue;
                }
                let since = counts.since(s.baseline(key));
                if since.is_zero() {
                    continue;
                }
                any = true;
                let p = by_key.entry(key).or_insert_with(|| Pending {
                    key,
                    shards: Vec::new(),
                    counts: Counts::default(),
                    copies: Vec::new(),
                });
                p.shards.push(s.id());
                p.counts = p.counts.plus(since);
            }
            // The copy ring is read only for a shard with pending work on a wanted key.
            if !any {
                continue;
            }
            for c in s.copy_records() {
                if let Some(p) = by_key.get_mut(&c.key) {
                    if c.ordinal > s.baseline(c.key).copies && p.shards.contains(&s.id()) {
                        p.copies.push(c);
                    }
                }
            }
        }
        by_key.into_values().collect()
    }

    /// Takes the current counts of the keys `want` selects as synchronised (a stream or
    /// context synchronize, a destroy). The baselines live in the shards
    /// ([`Shard::retire`]): this takes no `&mut` and needs no lock of the caller's.
    pub fn retire(&self, shards: &[&Shard], want: impl Fn(u64) -> bool) {
        for s in shards {
            for (key, counts) in s.keys() {
                if want(key) {
                    s.raise(key, counts);
                }
            }
        }
    }

    /// Takes the current counts of every key of context `ctx` as synchronised (a context
    /// synchronize, or its end), and forgets its orphaned copies.
    pub fn retire_context(&mut self, shards: &[&Shard], ctx: u32) {
        let keys: std::collections::HashSet<u64> = shards
            .iter()
            .flat_map(|s| s.keys())
            .map(|(k, _)| k)
            .filter(|&k| self.key_owner(k) == Some(ctx))
            .collect();
        self.retire(shards, |k| keys.contains(&k));
        self.context_synchronized(ctx);
    }

    /// Remembers copies still pending on a stream being destroyed: the driver finishes them
    /// on its own, so they can only be waited for through their context.
    pub fn orphan(&mut self, ctx: u32, copies: &[CopyRecord]) {
        self.orphans.extend(copies.iter().map(|c| (ctx, *c)));
    }

    /// Orphaned copies overlapping the host range `[lo, hi)`, with their context.
    pub fn orphans_touching_host(&self, lo: u64, hi: u64) -> Vec<(u32, CopyRecord)> {
        self.orphans
            .iter()
            .filter(|(_, c)| c.touches_host(lo, hi))
            .copied()
            .collect()
    }

    /// The context was synchronised: its orphaned copies are done.
    pub fn context_synchronized(&mut self, ctx: u32) {
        self.orphans.retain(|(c, _)| *c != ctx);
    }
}
