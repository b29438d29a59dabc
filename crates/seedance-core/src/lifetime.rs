//! Lifetimes of contexts and of what belongs to them (issue 5): contexts (created, primary
//! retained and released, destroyed, reset), streams and events with their owning
//! context, pinned host ranges, device allocations that died with their context, and per
//! stream the work submitted since it was last synchronised.
//!
//! The [`Tracker`] is plain data. The shim keeps one behind a mutex and touches it only on
//! cold paths: context, stream and event creation and destruction, synchronisation, pinned
//! allocation and free, and failures. Launches and asynchronous copies are counted without
//! a lock in per-thread shards ([`crate::work`]); the tracker keeps, per (stream key,
//! shard), the counts at the stream's last synchronisation (a baseline), so what is pending
//! is the difference ([`Tracker::pending`]).
//!
//! Every context incarnation gets an id (never reused) and a generation: 1 plus the number
//! of earlier contexts the driver gave the same handle (a primary context re-created after
//! a reset may come back at the same address). Streams and events remember the id of the
//! context they were made in, so a handle from before a reset is recognised even when the
//! context handle is alive again. Each recorded call gets a [`Site`]: the function, the
//! thread, the time and a process-wide sequence number of lifetime calls.
//!
//! The explanations (`explain_*`) and the exit paragraph are built here so they can be
//! tested without a driver.

use crate::alloc::show;
use crate::work::{key_kind, CopyRecord, Counts, KeyKind, Shard};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

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
    baselines: HashMap<(u64, u32), Counts>,
    orphans: Vec<(u32, CopyRecord)>,
}

/// Most context incarnations remembered; later ones are not tracked.
pub const MAX_CONTEXTS: usize = 1 << 16;

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Tracker {
        Tracker::default()
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
        self.streams.insert(handle, Owned { ctx, created: site });
        if let Some(c) = ctx {
            self.key_ctx.insert(handle, c);
        }
    }

    /// A stream handle leaves: destroyed, or found dead. Its key keeps its context (work
    /// counted on it before stays attributed) until the handle is made again.
    pub fn stream_forgotten(&mut self, handle: u64) -> Option<Owned> {
        self.streams.remove(&handle)
    }

    /// What the tracker knows of a stream handle.
    pub fn stream(&self, handle: u64) -> Option<&Owned> {
        self.streams.get(&handle)
    }

    /// A successful `cuEventCreate` in context `ctx`.
    pub fn event_created(&mut self, handle: u64, ctx: Option<u32>, site: Site) {
        self.events.insert(handle, Owned { ctx, created: site });
    }

    /// An event handle leaves.
    pub fn event_forgotten(&mut self, handle: u64) -> Option<Owned> {
        self.events.remove(&handle)
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

    fn baseline(&self, key: u64, shard: u32) -> Counts {
        self.baselines
            .get(&(key, shard))
            .copied()
            .unwrap_or_default()
    }

    fn raise(&mut self, key: u64, shard: u32, to: Counts) {
        let b = self.baselines.entry((key, shard)).or_default();
        b.launches = b.launches.max(to.launches);
        b.copies = b.copies.max(to.copies);
    }

    /// Work pending on the keys `want` selects, across `shards`, one entry per key with
    /// something pending.
    pub fn pending(&self, shards: &[&Shard], want: impl Fn(u64) -> bool) -> Vec<Pending> {
        let mut by_key: BTreeMap<u64, Pending> = BTreeMap::new();
        for s in shards {
            for (key, counts) in s.keys() {
                if !want(key) {
                    continue;
                }
                let since = counts.since(self.baseline(key, s.id()));
                if since.is_zero() {
                    continue;
                }
                let p = by_key.entry(key).or_insert_with(|| Pending {
                    key,
                    shards: Vec::new(),
                    counts: Counts::default(),
                    copies: Vec::new(),
                });
                p.shards.push(s.id());
                p.counts.launches += since.launches;
                p.counts.copies += since.copies;
            }
            for c in s.copy_records() {
                if let Some(p) = by_key.get_mut(&c.key) {
                    if c.ordinal > self.baseline(c.key, s.id()).copies && p.shards.contains(&s.id())
                    {
                        p.copies.push(c);
                    }
                }
            }
        }
        by_key.into_values().collect()
    }

    /// Takes the current counts of the keys `want` selects as synchronised (a stream or
    /// context synchronize, a destroy).
    pub fn retire(&mut self, shards: &[&Shard], want: impl Fn(u64) -> bool) {
        for s in shards {
            for (key, counts) in s.keys() {
                if want(key) {
                    self.raise(key, s.id(), counts);
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

    /// Takes one shard's current counts on `key` as synchronised (the per-thread default
    /// stream, which only its own thread can synchronise).
    pub fn retire_in(&mut self, shard: &Shard, key: u64) {
        if let Some(c) = shard.counts(key) {
            self.raise(key, shard.id(), c);
        }
    }

    /// An event was synchronised (or found complete): the work its latest record covered
    /// is done.
    pub fn retire_event(&mut self, shards: &[&Shard], event: u64) {
        let latest = shards
            .iter()
            .filter_map(|s| s.event_mark(event).map(|m| (m, s.id())))
            .max_by_key(|(m, _)| m.seq);
        if let Some((m, shard)) = latest {
            self.raise(m.key, shard, m.counts);
        }
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

/// One stream in an explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWork {
    /// The stream handle, or `None` for a default stream.
    pub stream: Option<u64>,
    /// For a default stream: `true` for the per-thread one.
    pub per_thread: bool,
    /// Launches and copies since its last synchronisation.
    pub counts: Counts,
    /// Where it was created, when known.
    pub created: Option<Site>,
}

impl StreamWork {
    /// `stream 0x5eed50000100 (made by cuStreamCreate on thread 7 (lifetime call #3)): 1
    /// launch and 2 copies`.
    pub fn describe(&self) -> String {
        let name = match self.stream {
            Some(h) => format!("stream {h:#x}"),
            None if self.per_thread => "the per-thread default stream".to_string(),
            None => "the default stream".to_string(),
        };
        let made = self
            .created
            .as_ref()
            .map(|s| format!(" (made by {})", s.describe()))
            .unwrap_or_default();
        format!("{name}{made}: {}", counted(self.counts))
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 launch and 2 copies`, `1 copy`, `3 launches` (`no work` for none).
pub fn counted(c: Counts) -> String {
    match (c.launches, c.copies) {
        (0, 0) => "no work".to_string(),
        (l, 0) => plural(l, "launch", "launches"),
        (0, n) => plural(n, "copy", "copies"),
        (l, n) => format!(
            "{} and {}",
            plural(l, "launch", "launches"),
            plural(n, "copy", "copies")
        ),
    }
}

fn total(streams: &[StreamWork]) -> Counts {
    streams.iter().fold(Counts::default(), |a, s| Counts {
        launches: a.launches + s.counts.launches,
        copies: a.copies + s.counts.copies,
    })
}

/// A context about to be destroyed, reset or released with work its streams have not
/// finished (`cuStreamQuery` said so). `repaired`: the shim synchronised it first.
pub fn explain_pending_at_end(
    how: EndKind,
    ctx: &Context,
    streams: &[StreamWork],
    repaired: bool,
) -> String {
    let verb = match how {
        EndKind::Destroyed => "destroying",
        EndKind::Reset => "resetting",
        EndKind::Released => "releasing the last reference to",
    };
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    let mut s = format!(
        "{verb} {} while its streams still have unfinished work ({} submitted since they were \
         last synchronised: {}); ",
        ctx.describe(),
        counted(total(streams)),
        list.join("; ")
    );
    if repaired {
        s.push_str(
            "fix: the shim synchronised the context first (cuCtxSynchronize), so the work \
             completed; ",
        );
    } else {
        s.push_str(
            "the work is abandoned: its results are lost and later calls on these streams get \
             CUDA_ERROR_CONTEXT_IS_DESTROYED (709) or CUDA_ERROR_INVALID_HANDLE (400); ",
        );
    }
    s.push_str(
        "synchronise before tearing a context down (cuCtxSynchronize / cudaDeviceSynchronize, \
         or cuStreamSynchronize on each stream)",
    );
    s
}

/// What kind of handle a call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleKind {
    /// A `CUcontext`.
    Context,
    /// A `CUstream`.
    Stream,
    /// A `CUevent`.
    Event,
    /// A device address.
    DeviceMemory,
    /// A pinned host address.
    PinnedMemory,
}

impl HandleKind {
    /// `context`, `stream`, `event`, `device memory`, `pinned memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandleKind::Context => "context",
            HandleKind::Stream => "stream",
            HandleKind::Event => "event",
            HandleKind::DeviceMemory => "device memory",
            HandleKind::PinnedMemory => "pinned memory",
        }
    }
}

/// A call with a handle whose context is gone. `repaired`: in fix mode the shim answered a
/// free or destroy itself (the driver already released the handle with its context), or a
/// synchronize of a handle whose work had all completed before the context ended.
pub fn explain_dead_handle(
    kind: HandleKind,
    handle: u64,
    created: Option<&Site>,
    ctx: &Context,
    repaired: Option<&str>,
) -> String {
    let end = ctx.end.as_ref();
    let how = end.map_or("ended", |e| e.how.as_str());
    let made = created
        .map(|s| format!(", made by {},", s.describe()))
        .unwrap_or_default();
    let mut s = if kind == HandleKind::Context {
        format!("{} was already {how}", ctx.describe())
    } else {
        format!(
            "{} {handle:#x}{made} belonged to {}, which was {how}",
            kind.as_str(),
            ctx.describe()
        )
    };
    if let Some(e) = end {
        let _ = write!(s, " by {}", e.site.describe());
        if !e.lost.is_zero() {
            let _ = write!(s, " with {} still unfinished (lost)", counted(e.lost));
        }
    }
    s.push_str("; ");
    match (kind, repaired) {
        (_, Some(what)) => {
            let _ = write!(s, "fix: {what}; ");
        }
        (HandleKind::Context, None) => {}
        _ => {
            let _ = write!(
                s,
                "the driver released the {} with its context; ",
                kind.as_str()
            );
        }
    }
    s.push_str(match kind {
        HandleKind::Context => {
            "do not use a context after destroying or resetting it; retain or create a new one"
        }
        _ => {
            "release handles before their context (destroy streams and events, free memory, then \
             destroy the context or reset the device), and do not call CUDA from static \
             destructors or atexit handlers that run after the runtime tore the context down"
        }
    });
    s
}

/// A free or unregister of host memory that copies not yet finished still read or write
/// (`what` names the call's effect: "freeing", "unregistering").
pub fn explain_pinned_in_use(
    what: &str,
    range: (u64, u64),
    pinned: Option<&Pinned>,
    streams: &[StreamWork],
    repaired: bool,
) -> String {
    let (lo, bytes) = range;
    let made = pinned
        .map(|p| format!(", made by {}", p.created.describe()))
        .unwrap_or_default();
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    let mut s = format!(
        "{what} pinned host memory {lo:#x} ({}{made}) while asynchronous copies that read or \
         write it have not finished ({}); ",
        show(bytes),
        list.join("; ")
    );
    if repaired {
        s.push_str(
            "fix: the shim waited for those streams first (cuStreamSynchronize), so the copies \
             completed with the data intact; ",
        );
    } else {
        s.push_str(
            "the copies may read freed or reused memory (corrupted data) or write into memory \
             that belongs to something else; ",
        );
    }
    s.push_str(
        "synchronise the stream (or record an event after the copy and synchronise it) before \
         freeing or reusing the buffer",
    );
    s
}

/// A stream-ordered free of device memory that copies on other streams still use.
pub fn explain_device_in_use(
    addr: u64,
    bytes: Option<u64>,
    streams: &[StreamWork],
    repaired: bool,
) -> String {
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    let size = bytes.map(|b| format!(" ({})", show(b))).unwrap_or_default();
    let mut s = format!(
        "freeing device memory {addr:#x}{size} on one stream while asynchronous copies on other \
         streams still use it ({}); the free is ordered only on its own stream; ",
        list.join("; ")
    );
    if repaired {
        s.push_str("fix: the shim waited for those streams first (cuStreamSynchronize); ");
    }
    s.push_str(
        "make the freeing stream wait for the others (cuEventRecord + cuStreamWaitEvent) before \
         the free",
    );
    s
}

/// Leaked memory of one context, for the exit report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// The owning context, when known (for pinned host memory: the context current when
    /// it was allocated).
    pub ctx: Option<u32>,
    /// `true` for pinned host memory.
    pub host: bool,
    /// Allocations.
    pub allocations: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What the exit report found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExitFindings {
    /// Contexts alive at exit.
    pub live: Vec<Context>,
    /// Memory never freed, per context.
    pub leaks: Vec<Leak>,
    /// Streams with work never synchronised: (context id, stream work).
    pub unsynchronized: Vec<(Option<u32>, StreamWork)>,
    /// Calls that got `CUDA_ERROR_DEINITIALIZED`, by function (the runtime's own
    /// `cuDevicePrimaryCtxRelease` at teardown excluded).
    pub after_deinit: BTreeMap<String, u64>,
}

/// The one stderr paragraph at exit, `None` when nothing is worth saying. State that
/// belongs to a primary context still retained at exit is left out: the CUDA runtime keeps
/// its primary contexts (and a caching allocator's memory, and its streams) until its own
/// teardown, which comes after the driver's (measured on an H200, driver 580.159), so a
/// healthy runtime program always exits that way. It stays in the trace.
pub fn exit_paragraph(f: &ExitFindings, ctx: impl Fn(u32) -> Option<Context>) -> Option<String> {
    // Memory whose context the driver could not name at exit (it had shut down already)
    // counts as the runtime's when every live context is a retained primary context.
    let only_primaries = !f.live.is_empty() && f.live.iter().all(|c| c.primary);
    let runtime_owned = |id: Option<u32>| match id {
        Some(i) => ctx(i).is_some_and(|c| c.primary && c.end.is_none()),
        None => only_primaries,
    };
    let mut parts = Vec::new();
    let live: Vec<&Context> = f.live.iter().filter(|c| !c.primary).collect();
    if !live.is_empty() {
        let list: Vec<String> = live.iter().map(|c| c.describe()).collect();
        parts.push(format!(
            "{} still alive ({})",
            plural(live.len() as u64, "context", "contexts"),
            list.join("; ")
        ));
    }
    for l in f.leaks.iter().filter(|l| !runtime_owned(l.ctx)) {
        let whose = match (l.host, l.ctx.and_then(&ctx)) {
            (true, _) => "pinned host memory".to_string(),
            (false, Some(c)) => format!(
                "device memory of {}",
                c.device.map_or_else(
                    || format!("context {:#x}", c.handle),
                    |d| format!("device {d}")
                )
            ),
            (false, None) => "device memory".to_string(),
        };
        parts.push(format!(
            "{} of {whose} never freed ({})",
            plural(l.allocations, "allocation", "allocations"),
            show(l.bytes)
        ));
    }
    let unsynced: Vec<String> = f
        .unsynchronized
        .iter()
        .filter(|(c, _)| !runtime_owned(*c))
        .map(|(_, w)| w.describe())
        .collect();
    if !unsynced.is_empty() {
        parts.push(format!("work never synchronised ({})", unsynced.join("; ")));
    }
    if !f.after_deinit.is_empty() {
        let n: u64 = f.after_deinit.values().sum();
        let list: Vec<String> = f
            .after_deinit
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect();
        parts.push(format!(
            "{} after CUDA was deinitialised (CUDA_ERROR_DEINITIALIZED: {}): they ran from \
             static destructors or atexit handlers after the driver shut down, and did nothing",
            plural(n, "call", "calls"),
            list.join(", ")
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "at exit: {}. Release CUDA resources before exit (free memory, destroy streams, events \
         and contexts, synchronise outstanding work), before the runtime and driver tear down",
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::{stream_key, CopyKind};

    fn site(t: &mut Tracker, f: &'static str) -> Site {
        t.site(f, 100, 1)
    }

    #[test]
    fn contexts_primary_generations_and_ends() {
        let mut t = Tracker::new();
        let s = site(&mut t, "cuCtxCreate_v2");
        assert_eq!(s.seq, 1);
        let a = t.context_created(0x1000, Some(0), s).unwrap();
        let s = site(&mut t, "cuDevicePrimaryCtxRetain");
        let p = t.primary_retained(0x2000, Some(1), s).unwrap();
        let s = site(&mut t, "cuDevicePrimaryCtxRetain");
        assert_eq!(t.primary_retained(0x2000, Some(1), s), Some(p));
        assert_eq!(t.context(p).unwrap().retained, 2);
        assert_eq!(t.live_primary(1).map(|c| c.id), Some(p));
        t.primary_released(p);
        assert_eq!(t.context(p).unwrap().retained, 1);
        let s = site(&mut t, "cuStreamCreate");
        t.stream_created(0x5000, Some(p), s);
        let s = site(&mut t, "cuEventCreate");
        t.event_created(0x6000, Some(p), s);
        let created = site(&mut t, "cuMemHostAlloc");
        t.pinned_added(Pinned {
            lo: 0x9000,
            bytes: 4096,
            kind: PinnedKind::Allocated,
            ctx: Some(p),
            created,
        });
        let end = site(&mut t, "cuDevicePrimaryCtxReset_v2");
        t.context_ended(
            p,
            EndKind::Reset,
            end.clone(),
            Counts::default(),
            &[(0x7000, 512)],
        );
        assert!(t.live_context(0x2000).is_none());
        assert_eq!(t.ended(t.stream(0x5000).unwrap().ctx).unwrap().id, p);
        assert_eq!(t.ended(t.event(0x6000).unwrap().ctx).unwrap().id, p);
        assert_eq!(
            t.dead_device(0x7000),
            Some(&DeadMemory { bytes: 512, ctx: p })
        );
        assert!(t.pinned(0x9000).is_none());
        assert_eq!(t.dead_pinned(0x9000).map(|d| d.ctx), Some(p));
        // The primary context comes back at the same handle: a new incarnation.
        let s = site(&mut t, "cuDevicePrimaryCtxRetain");
        let p2 = t.primary_retained(0x2000, Some(1), s).unwrap();
        assert_ne!(p, p2);
        assert_eq!(t.context(p2).unwrap().generation, 2);
        assert_eq!(t.latest_context(0x2000).unwrap().id, p2);
        // The old stream is still recognised as dead.
        assert!(t.ended(t.stream(0x5000).unwrap().ctx).is_some());
        assert_eq!(t.live_contexts().len(), 2);
        assert_eq!(t.context(a).unwrap().generation, 1);
        // Handing the address out again forgets the dead allocation.
        assert!(t.forget_dead_device(0x7000).is_some());
        assert!(t.dead_device(0x7000).is_none());
        let e = t.context(p).unwrap().end.clone().unwrap();
        assert_eq!(e.site, end);
    }

    #[test]
    fn pending_work_and_baselines() {
        let mut t = Tracker::new();
        let s = site(&mut t, "cuCtxCreate_v2");
        let c = t.context_created(0x1000, Some(0), s).unwrap();
        let s = site(&mut t, "cuStreamCreate");
        t.stream_created(0x5000, Some(c), s);
        let a = Box::new(Shard::new(0));
        let b = Box::new(Shard::new(1));
        let legacy = stream_key(0, 0x1000, false);
        a.add_launch(0x5000);
        a.add_copy(0x5000, 0x7000, 0x9000, 64, CopyKind::HostToDevice);
        b.add_launch(0x5000);
        b.add_launch(legacy);
        let shards: [&Shard; 2] = [&a, &b];
        let mine = |k: u64| t.key_owner(k) == Some(c);
        let p = t.pending(&shards, mine);
        assert_eq!(p.len(), 2);
        let s = p.iter().find(|p| p.key == 0x5000).unwrap();
        assert_eq!(
            s.counts,
            Counts {
                launches: 2,
                copies: 1
            }
        );
        assert_eq!(s.shards, vec![0, 1]);
        assert_eq!(s.copies.len(), 1);
        assert!(s.copies[0].touches_host(0x9020, 0x9021));
        // Synchronising the stream retires it; the default stream stays pending.
        t.retire(&shards, |k| k == 0x5000);
        let p = t.pending(&shards, |k| t.key_owner(k) == Some(c));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].key, legacy);
        b.add_launch(legacy);
        t.retire_context(&shards, c);
        assert!(t.pending(&shards, |k| t.key_owner(k) == Some(c)).is_empty());
        b.add_launch(legacy);
        // New work after the baseline is pending again.
        a.add_copy(0x5000, 0x7000, 0x9000, 8, CopyKind::HostToDevice);
        let p = t.pending(&shards, |k| k == 0x5000);
        assert_eq!(
            p[0].counts,
            Counts {
                launches: 0,
                copies: 1
            }
        );
        assert_eq!(p[0].copies.len(), 1);
        assert_eq!(p[0].copies[0].bytes, 8);
        // An event recorded after the copy retires it when synchronised.
        a.add_event_record(0xe0, 0x5000);
        a.add_launch(0x5000);
        t.retire_event(&shards, 0xe0);
        let p = t.pending(&shards, |k| k == 0x5000);
        assert_eq!(
            p[0].counts,
            Counts {
                launches: 1,
                copies: 0
            }
        );
        // Retiring one shard's per-thread stream.
        t.retire_in(&b, legacy);
        assert!(t.pending(&shards, |k| k == legacy).is_empty());
    }

    #[test]
    fn orphans_follow_their_context() {
        let mut t = Tracker::new();
        let rec = CopyRecord {
            key: 0x5000,
            ordinal: 1,
            dst: 0x7000,
            src: 0x9000,
            bytes: 16,
            kind: CopyKind::HostToDevice,
        };
        t.orphan(3, &[rec]);
        assert_eq!(t.orphans_touching_host(0x9000, 0x9001).len(), 1);
        assert!(t.orphans_touching_host(0x7000, 0x7010).is_empty());
        t.context_synchronized(3);
        assert!(t.orphans_touching_host(0x9000, 0x9001).is_empty());
    }

    #[test]
    fn explanations() {
        let mut t = Tracker::new();
        let s = site(&mut t, "cuCtxCreate_v2");
        let c = t.context_created(0x5eedc0000100, Some(0), s).unwrap();
        let s = site(&mut t, "cuStreamCreate");
        let work = vec![
            StreamWork {
                stream: Some(0x5eed50000100),
                per_thread: false,
                counts: Counts {
                    launches: 1,
                    copies: 2,
                },
                created: Some(s.clone()),
            },
            StreamWork {
                stream: None,
                per_thread: false,
                counts: Counts {
                    launches: 3,
                    copies: 0,
                },
                created: None,
            },
        ];
        let ctx = t.context(c).unwrap().clone();
        let text = explain_pending_at_end(EndKind::Destroyed, &ctx, &work, false);
        assert_eq!(
            text,
            "destroying context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 on \
             thread 100 (lifetime call #1)) while its streams still have unfinished work (4 \
             launches and 2 copies submitted since they were last synchronised: stream \
             0x5eed50000100 (made by cuStreamCreate on thread 100 (lifetime call #2)): 1 launch \
             and 2 copies; the default stream: 3 launches); the work is abandoned: \
             its results are lost and later calls on these streams get \
             CUDA_ERROR_CONTEXT_IS_DESTROYED (709) or CUDA_ERROR_INVALID_HANDLE (400); \
             synchronise before tearing a context down (cuCtxSynchronize / \
             cudaDeviceSynchronize, or cuStreamSynchronize on each stream)"
        );
        assert!(explain_pending_at_end(EndKind::Reset, &ctx, &work, true)
            .starts_with("resetting context"));
        let end = site(&mut t, "cuCtxDestroy_v2");
        t.context_ended(c, EndKind::Destroyed, end, work[0].counts, &[]);
        let ctx = t.context(c).unwrap().clone();
        let text = explain_dead_handle(HandleKind::Stream, 0x5eed50000100, Some(&s), &ctx, None);
        assert!(
            text.starts_with(
                "stream 0x5eed50000100, made by cuStreamCreate on thread 100 (lifetime call #2), \
             belonged to context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 \
             on thread 100 (lifetime call #1)), which was destroyed by cuCtxDestroy_v2 on thread \
             100 (lifetime call #3) with 1 launch and 2 copies still unfinished (lost); the \
             driver released the stream with its context; release handles before"
            ),
            "{text}"
        );
        let text = explain_dead_handle(
            HandleKind::DeviceMemory,
            0x7000,
            None,
            &ctx,
            Some("returned CUDA_SUCCESS without calling the driver"),
        );
        assert!(text.contains("; fix: returned CUDA_SUCCESS without calling the driver; "));
        let text = explain_dead_handle(HandleKind::Context, 0x5eedc0000100, None, &ctx, None);
        assert!(text.starts_with("context 0x5eedc0000100 (device 0"));
        assert!(text.ends_with("retain or create a new one"));
        let p = Pinned {
            lo: 0x9000,
            bytes: 4096,
            kind: PinnedKind::Allocated,
            ctx: None,
            created: s,
        };
        let text = explain_pinned_in_use("freeing", (0x9000, 4096), Some(&p), &work[..1], true);
        assert!(text.starts_with(
            "freeing pinned host memory 0x9000 (4.0 KiB (4096 bytes), made by cuStreamCreate"
        ));
        assert!(text.contains("fix: the shim waited for those streams first"));
        assert!(explain_device_in_use(0x7000, Some(512), &work[..1], false)
            .starts_with("freeing device memory 0x7000 (512 bytes) on one stream"));
    }

    #[test]
    fn exit_paragraph_leaves_out_runtime_owned_state() {
        let mut t = Tracker::new();
        let s = site(&mut t, "cuDevicePrimaryCtxRetain");
        let p = t.primary_retained(0x2000, Some(0), s).unwrap();
        let mut f = ExitFindings {
            live: t.live_contexts().into_iter().cloned().collect(),
            leaks: vec![Leak {
                ctx: Some(p),
                host: false,
                allocations: 3,
                bytes: 3 << 20,
            }],
            unsynchronized: vec![(
                Some(p),
                StreamWork {
                    stream: None,
                    per_thread: false,
                    counts: Counts {
                        launches: 5,
                        copies: 0,
                    },
                    created: None,
                },
            )],
            after_deinit: BTreeMap::new(),
        };
        let lookup = |id: u32| t.context(id).cloned();
        assert_eq!(exit_paragraph(&f, lookup), None);
        // Memory the driver could not attribute counts as the runtime's too, and so does
        // pinned memory allocated in the retained primary context (a caching allocator's).
        f.leaks.push(Leak {
            ctx: None,
            host: false,
            allocations: 1,
            bytes: 1,
        });
        f.leaks.push(Leak {
            ctx: Some(p),
            host: true,
            allocations: 2,
            bytes: 2 << 20,
        });
        assert_eq!(exit_paragraph(&f, lookup), None);
        f.leaks.truncate(1);
        f.after_deinit.insert("cuMemFree_v2".into(), 2);
        let s = site(&mut t, "cuCtxCreate_v2");
        let c = t.context_created(0x1000, Some(1), s).unwrap();
        f.live = t.live_contexts().into_iter().cloned().collect();
        f.leaks.push(Leak {
            ctx: Some(c),
            host: false,
            allocations: 1,
            bytes: 4096,
        });
        let lookup = |id: u32| t.context(id).cloned();
        let text = exit_paragraph(&f, lookup).unwrap();
        assert_eq!(
            text,
            "at exit: 1 context still alive (context 0x1000 (device 1, generation 1, made by \
             cuCtxCreate_v2 on thread 100 (lifetime call #2))); 1 allocation of device memory of \
             device 1 never freed (4.0 KiB (4096 bytes)); 2 calls after CUDA was deinitialised \
             (CUDA_ERROR_DEINITIALIZED: cuMemFree_v2 x2): they ran from static destructors or \
             atexit handlers after the driver shut down, and did nothing. Release CUDA \
             resources before exit (free memory, destroy streams, events and contexts, \
             synchronise outstanding work), before the runtime and driver tear down"
        );
    }
}
