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
//! ([`crate::work::retire_key`], [`crate::work::retire_event`]).
//!
//! The tracker counts the stream and event handles it holds whose context ended
//! ([`Tracker::dead_handles`]) and can publish that count in an atomic, so the checks before
//! a synchronize skip the lock while no handle is dead.
//!
//! Every context incarnation gets an id (never reused) and a generation: 1 plus the number
//! of earlier contexts the driver gave the same handle (a primary context re-created after
//! a reset may come back at the same address). Streams and events remember the id of the
//! context they were made in, so a handle from before a reset is recognised even when the
//! context handle is alive again. Each recorded call gets a [`Site`]: the function, the
//! thread, the time and a process-wide sequence number of lifetime calls.
//!
//! The explanations (`explain_*`) and the exit line are built in [`explain`] so they
//! can be tested without a driver; they are re-exported here.

use crate::work::{key_kind, CopyRecord, Counts, KeyKind, Shard};
use std::collections::{BTreeMap, HashMap};
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
    /// Stream key ([`crate::work::stream_key`]).
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
    contexts: Vec<Context>,
    live: HashMap<u64, u32>,
    generations: HashMap<u64, u32>,
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

/// Most context incarnations remembered; later ones are not tracked.
pub const MAX_CONTEXTS: usize = 1 << 16;

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
        let of = |o: &Owned| o.ctx == Some(id);
        let n = self.streams.values().filter(|o| of(o)).count()
            + self.events.values().filter(|o| of(o)).count();
        self.add_dead(n, 0);
    }

    /// A handle entry was added (`new_dead`: one of an ended context) in place of `old`:
    /// the dead count follows.
    fn handle_replaced(&mut self, new_dead: bool, old: Option<&Owned>) {
        let minus = old.is_some_and(|o| self.is_dead(o)) as usize;
        self.add_dead(new_dead as usize, minus);
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
            self.contexts[old as usize].end = Some(End {
                how: EndKind::Destroyed,
                site: site.clone(),
                lost: Counts::default(),
            });
            self.handles_died(old);
        }
        let g = self.generations.entry(handle).or_insert(0);
        *g += 1;
        let id = self.contexts.len() as u32;
        self.contexts.push(Context {
            id,
            handle,
            device,
            primary,
            generation: *g,
            retained: 1,
            created: site,
            end: None,
        });
        self.live.insert(handle, id);
        Some(id)
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
            let c = &mut self.contexts[id as usize];
            if c.primary {
                c.retained = c.retained.saturating_add(1);
                return Some(id);
            }
        }
        self.add_context(handle, device, true, site)
    }

    /// A successful `cuDevicePrimaryCtxRelease` that did not end the context.
    pub fn primary_released(&mut self, id: u32) {
        if let Some(c) = self.contexts.get_mut(id as usize) {
            c.retained = c.retained.saturating_sub(1);
        }
    }

    /// The live context with this handle.
    pub fn live_context(&self, handle: u64) -> Option<&Context> {
        self.live
            .get(&handle)
            .map(|&id| &self.contexts[id as usize])
    }

    /// The live primary context of `device`.
    pub fn live_primary(&self, device: i32) -> Option<&Context> {
        self.live
            .values()
            .map(|&id| &self.contexts[id as usize])
            .find(|c| c.primary && c.device == Some(device))
    }

    /// The context incarnation `id`.
    pub fn context(&self, id: u32) -> Option<&Context> {
        self.contexts.get(id as usize)
    }

    /// The most recent incarnation with this handle, alive or not.
    pub fn latest_context(&self, handle: u64) -> Option<&Context> {
        if let Some(c) = self.live_context(handle) {
            return Some(c);
        }
        self.contexts.iter().rev().find(|c| c.handle == handle)
    }

    /// Every live context.
    pub fn live_contexts(&self) -> Vec<&Context> {
        let mut v: Vec<&Context> = self
            .live
            .values()
            .map(|&id| &self.contexts[id as usize])
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
        let Some(c) = self.contexts.get_mut(id as usize) else {
            return;
        };
        if c.end.is_some() {
            return;
        }
        c.end = Some(End { how, site, lost });
        c.retained = 0;
        if self.live.get(&c.handle) == Some(&id) {
            self.live.remove(&c.handle);
        }
        self.handles_died(id);
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
