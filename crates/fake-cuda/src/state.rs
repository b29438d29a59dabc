//! The driver state after a successful `cuInit`: visible devices, contexts, primary
//! contexts, device allocations and pinned host allocations.
//!
//! Everything here is plain data with no globals, so it is unit-tested directly; the
//! process-wide instance and the per-thread current context live in [`crate::global`].
//!
//! Model:
//!
//! * Context handles are `CTX_HANDLE_BASE + n * 0x100` for a running `n`: unique, non-null,
//!   never reused, never dereferenced. Records of destroyed contexts are kept so that using
//!   one again reports `CUDA_ERROR_CONTEXT_IS_DESTROYED` (709) rather than 201.
//! * Each device has one primary context slot with a refcount. Retain creates a fresh handle
//!   when the slot is empty; Release to zero and Reset destroy it and empty the slot.
//! * Device allocations get addresses `DEVICE_ADDR_BASE + offset`, the offset growing by the
//!   size rounded up to [`ALLOC_ALIGN`]; addresses are never reused. An allocation takes
//!   its exact size from its device's free bytes and gives it back when freed or when its
//!   context is destroyed.
//! * Streams (`cuStreamCreate`) get handles `STREAM_HANDLE_BASE + n * 0x100` and belong to
//!   the context current when they were made; their records outlive the context, so a
//!   launch on a stream of a destroyed context reports `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
//! * Physical allocations (`cuMemCreate`) get handles `PHYSICAL_HANDLE_BASE + n`, take their
//!   size from the device named in the allocation properties, and give it back at
//!   `cuMemRelease`.
//! * Kernels: per-handle settings from `cuFuncSetAttribute` (see [`crate::launch`]).
//! * Asynchrony: launches and asynchronous copies wait in per-stream queues
//!   ([`crate::queue`]) until a synchronisation runs them; a copy reads its source then.
//!   Device memory that copies touch is backed by real bytes (allocations up to
//!   [`MAX_BACKED`]), so a program can read back what reached the device. Destroying,
//!   resetting or releasing a context discards its queued work.
//! * Events (`cuEventCreate`) get handles `EVENT_HANDLE_BASE + n * 0x100`, belong to the
//!   current context, and mark a position in a stream's queue when recorded.
//! * Pinned host memory (`cuMemHostAlloc`, `cuMemAllocHost`) is real memory owned by the
//!   current context; `cuMemFreeHost` fills it with [`POISON`] and keeps it (never released),
//!   so a queued copy that reads it afterwards gets the poison instead of crashing. It dies
//!   with its context. Registered ranges (`cuMemHostRegister`) are the program's memory.

use std::collections::{BTreeMap, HashMap, HashSet};

use seedance_cuda::{CUdevice, CUdeviceptr, CUresult};

use crate::config::Topology;
use crate::device::Device;
use crate::launch::{FuncLimits, FuncSettings, LaunchLimits};
use crate::queue::{default_queue, Op, Queue, QueueKey, Side};

/// First context handle value.
pub const CTX_HANDLE_BASE: usize = 0x5eed_c000_0000;
/// Distance between consecutive context handles.
pub const CTX_HANDLE_STEP: usize = 0x100;
/// First device address handed out.
pub const DEVICE_ADDR_BASE: u64 = 0x7000_0000_0000;
/// Alignment of device addresses, bytes.
pub const ALLOC_ALIGN: u64 = 512;
/// First stream handle value.
pub const STREAM_HANDLE_BASE: usize = 0x5eed_5000_0000;
/// First `cuMemCreate` handle value.
pub const PHYSICAL_HANDLE_BASE: u64 = 0x6000_0000;
/// Granularity of `cuMemCreate` sizes (`cuMemGetAllocationGranularity`), bytes: 2 MiB.
pub const PHYSICAL_GRANULARITY: u64 = 2 << 20;
/// First event handle value.
pub const EVENT_HANDLE_BASE: usize = 0x5eed_e000_0000;
/// Largest allocation whose bytes are kept for copies; copies into larger ones are
/// dropped and reads from them give zeros.
pub const MAX_BACKED: u64 = 64 << 20;
/// What freed pinned memory is filled with.
pub const POISON: u8 = 0xdb;

/// What the driver knows about one context, live or destroyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxRecord {
    /// Visible ordinal of its device.
    pub device: usize,
    /// Whether it is a device's primary context.
    pub primary: bool,
    /// `false` once destroyed.
    pub alive: bool,
}

#[derive(Debug, Clone, Copy)]
struct Primary {
    handle: usize,
    refcount: u32,
}

#[derive(Debug, Clone, Copy)]
struct Alloc {
    ctx: usize,
    device: usize,
    bytes: u64,
}

#[derive(Debug, Clone)]
struct Event {
    ctx: usize,
    /// The positions the last record marks: one stream's (`cuEventRecord`), or every stream
    /// of the context (`cuCtxRecordEvent`); empty before the first record.
    marks: Vec<(QueueKey, u64)>,
}

/// The initialised driver.
#[derive(Debug)]
pub struct Driver {
    devices: Vec<Device>,
    contexts: HashMap<usize, CtxRecord>,
    primaries: Vec<Option<Primary>>,
    next_ctx: usize,
    allocs: HashMap<CUdeviceptr, Alloc>,
    next_offset: u64,
    host: HashMap<usize, (usize, usize)>,
    dead_host: HashSet<usize>,
    quarantine: HashSet<usize>,
    registered: BTreeMap<usize, (usize, usize)>,
    queues: HashMap<QueueKey, Queue>,
    /// Queues being captured (`cuStreamBeginCapture_v2`): work for them is dropped.
    capturing: HashSet<QueueKey>,
    /// Captures a forbidden call invalidated: their end answers `STREAM_CAPTURE_INVALIDATED`.
    invalidated: HashSet<QueueKey>,
    next_graph: usize,
    events: HashMap<usize, Event>,
    next_event: usize,
    backing: HashMap<CUdeviceptr, Vec<u8>>,
    streams: HashMap<usize, usize>,
    /// Streams made with `CU_STREAM_NON_BLOCKING`.
    non_blocking: HashSet<usize>,
    next_stream: usize,
    physical: HashMap<u64, (usize, u64)>,
    next_physical: u64,
    funcs: HashMap<usize, FuncSettings>,
    func_max_threads: Option<u32>,
}

impl Driver {
    /// A driver over the given visible devices; `CUDA_ERROR_NO_DEVICE` when there are none.
    pub fn new(devices: Vec<Device>) -> Result<Driver, CUresult> {
        if devices.is_empty() {
            return Err(CUresult::CUDA_ERROR_NO_DEVICE);
        }
        let primaries = vec![None; devices.len()];
        Ok(Driver {
            devices,
            contexts: HashMap::new(),
            primaries,
            next_ctx: 0,
            allocs: HashMap::new(),
            next_offset: 0,
            host: HashMap::new(),
            dead_host: HashSet::new(),
            quarantine: HashSet::new(),
            registered: BTreeMap::new(),
            queues: HashMap::new(),
            capturing: HashSet::new(),
            invalidated: HashSet::new(),
            next_graph: 0,
            events: HashMap::new(),
            next_event: 0,
            backing: HashMap::new(),
            streams: HashMap::new(),
            non_blocking: HashSet::new(),
            next_stream: 0,
            physical: HashMap::new(),
            next_physical: 0,
            funcs: HashMap::new(),
            func_max_threads: None,
        })
    }

    /// The driver for a configured topology (visible devices in ordinal order).
    pub fn from_topology(t: &Topology) -> Result<Driver, CUresult> {
        let devices = t
            .visible
            .iter()
            .filter_map(|&p| t.physical.get(p as usize))
            .map(Device::new)
            .collect();
        let mut d = Driver::new(devices)?;
        d.func_max_threads = t.func_max_threads;
        Ok(d)
    }

    /// Number of visible devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Visible ordinal of a `CUdevice`, or `CUDA_ERROR_INVALID_DEVICE`.
    pub fn ordinal(&self, dev: CUdevice) -> Result<usize, CUresult> {
        usize::try_from(dev)
            .ok()
            .filter(|&i| i < self.devices.len())
            .ok_or(CUresult::CUDA_ERROR_INVALID_DEVICE)
    }

    /// The device behind a `CUdevice`, or `CUDA_ERROR_INVALID_DEVICE`.
    pub fn device(&self, dev: CUdevice) -> Result<&Device, CUresult> {
        let i = self.ordinal(dev)?;
        Ok(&self.devices[i])
    }

    /// The device at a visible ordinal already validated (a context's device).
    pub fn device_at(&self, ordinal: usize) -> &Device {
        &self.devices[ordinal]
    }

    fn new_context(&mut self, device: usize, primary: bool) -> usize {
        self.next_ctx += 1;
        let h = CTX_HANDLE_BASE + self.next_ctx * CTX_HANDLE_STEP;
        self.contexts.insert(
            h,
            CtxRecord {
                device,
                primary,
                alive: true,
            },
        );
        h
    }

    /// Creates a (non-primary) context on `dev` and returns its handle; fails with
    /// [`Device::context_refusal`] for a busy, prohibited or full device.
    pub fn ctx_create(&mut self, dev: CUdevice) -> Result<usize, CUresult> {
        let i = self.ordinal(dev)?;
        if let Some(e) = self.devices[i].context_refusal() {
            return Err(e);
        }
        Ok(self.new_context(i, false))
    }

    /// The record of a context handle, live or not.
    pub fn ctx_record(&self, ctx: usize) -> Option<CtxRecord> {
        self.contexts.get(&ctx).copied()
    }

    /// The visible ordinal of a live context's device: `CUDA_ERROR_INVALID_CONTEXT` for 0
    /// (no current context) or an unknown handle, `CUDA_ERROR_CONTEXT_IS_DESTROYED` for a
    /// destroyed one.
    pub fn ctx_device(&self, ctx: usize) -> Result<usize, CUresult> {
        match self.contexts.get(&ctx) {
            Some(r) if r.alive => Ok(r.device),
            Some(_) => Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED),
            None => Err(CUresult::CUDA_ERROR_INVALID_CONTEXT),
        }
    }

    /// What `cuCtxGetDevice` answers for `ctx`: as [`Self::ctx_device`], except that a
    /// primary context that was reset still names its device, while launches in it get
    /// `CUDA_ERROR_CONTEXT_IS_DESTROYED` (measured: H200, driver 580.159.04,
    /// scripts/gpu/launch.sh case `destroyed_context`).
    pub fn get_device_answer(&self, ctx: usize) -> Result<usize, CUresult> {
        match self.contexts.get(&ctx) {
            Some(r) if r.primary && !r.alive => Ok(r.device),
            _ => self.ctx_device(ctx),
        }
    }

    /// Marks a context destroyed, discards its queued work and frees its allocations,
    /// pinned host memory and registrations.
    fn kill(&mut self, ctx: usize) {
        if let Some(r) = self.contexts.get_mut(&ctx) {
            r.alive = false;
        }
        for key in self.queues_of(ctx) {
            self.queues.remove(&key);
        }
        let pinned: Vec<usize> = self
            .host
            .iter()
            .filter(|(_, &(_, c))| c == ctx)
            .map(|(&p, _)| p)
            .collect();
        for p in pinned {
            self.host.remove(&p);
            self.dead_host.insert(p);
        }
        self.registered.retain(|_, &mut (_, c)| c != ctx);
        let dead: Vec<CUdeviceptr> = self
            .allocs
            .iter()
            .filter(|(_, a)| a.ctx == ctx)
            .map(|(p, _)| *p)
            .collect();
        for p in dead {
            self.release_alloc(p);
        }
    }

    /// `cuCtxDestroy`: 201 for an unknown handle or a primary context (those go through
    /// Release/Reset), 709 for one already destroyed.
    pub fn ctx_destroy(&mut self, ctx: usize) -> Result<(), CUresult> {
        self.ctx_device(ctx)?;
        if self.contexts.get(&ctx).is_some_and(|r| r.primary) {
            return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
        }
        self.kill(ctx);
        Ok(())
    }

    /// `cuDevicePrimaryCtxRetain`: the device's primary context, created if needed (which
    /// fails like [`Driver::ctx_create`] on a busy, prohibited or full device); the refcount
    /// goes up by one.
    pub fn primary_retain(&mut self, dev: CUdevice) -> Result<usize, CUresult> {
        let i = self.ordinal(dev)?;
        let p = match self.primaries[i] {
            Some(p) => p,
            None => {
                if let Some(e) = self.devices[i].context_refusal() {
                    return Err(e);
                }
                Primary {
                    handle: self.new_context(i, true),
                    refcount: 0,
                }
            }
        };
        self.primaries[i] = Some(Primary {
            refcount: p.refcount + 1,
            ..p
        });
        Ok(p.handle)
    }

    /// `cuDevicePrimaryCtxRelease`: refcount down by one, destroying the context at zero;
    /// `CUDA_ERROR_INVALID_CONTEXT` when it is not retained.
    pub fn primary_release(&mut self, dev: CUdevice) -> Result<(), CUresult> {
        let i = self.ordinal(dev)?;
        let p = self.primaries[i].ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)?;
        if p.refcount <= 1 {
            self.primaries[i] = None;
            self.kill(p.handle);
        } else {
            self.primaries[i] = Some(Primary {
                refcount: p.refcount - 1,
                ..p
            });
        }
        Ok(())
    }

    /// `cuDevicePrimaryCtxReset`: destroys the primary context (if any) whatever its refcount.
    pub fn primary_reset(&mut self, dev: CUdevice) -> Result<(), CUresult> {
        let i = self.ordinal(dev)?;
        if let Some(p) = self.primaries[i].take() {
            self.kill(p.handle);
        }
        Ok(())
    }

    /// The primary context's handle and refcount, if retained.
    pub fn primary_state(&self, dev: CUdevice) -> Option<(usize, u32)> {
        let i = self.ordinal(dev).ok()?;
        self.primaries[i].map(|p| (p.handle, p.refcount))
    }

    /// Allocates `bytes` on the device of context `ctx`: 201/709 for a bad context,
    /// `CUDA_ERROR_INVALID_VALUE` for 0 bytes, `CUDA_ERROR_OUT_OF_MEMORY` above the device's
    /// free bytes.
    pub fn mem_alloc(&mut self, ctx: usize, bytes: u64) -> Result<CUdeviceptr, CUresult> {
        let device = self.ctx_device(ctx)?;
        if bytes == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let dev = &mut self.devices[device];
        if bytes > dev.free_mem {
            return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        }
        let span = bytes.div_ceil(ALLOC_ALIGN).saturating_mul(ALLOC_ALIGN);
        let addr = DEVICE_ADDR_BASE
            .checked_add(self.next_offset)
            .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
        self.next_offset = self
            .next_offset
            .checked_add(span)
            .ok_or(CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
        dev.free_mem -= bytes;
        self.allocs.insert(addr, Alloc { ctx, device, bytes });
        Ok(addr)
    }

    fn release_alloc(&mut self, addr: CUdeviceptr) -> bool {
        self.backing.remove(&addr);
        match self.allocs.remove(&addr) {
            Some(a) => {
                let dev = &mut self.devices[a.device];
                dev.free_mem = dev.free_mem.saturating_add(a.bytes).min(dev.total_mem);
                true
            }
            None => false,
        }
    }

    /// `cuMemFree`: 0 is a no-op; otherwise 201/709 without a live context, and
    /// `CUDA_ERROR_INVALID_VALUE` for an address that is not a live allocation's start.
    /// Like the real driver, the free first waits for the work queued in the allocation's
    /// context (an implicit synchronisation).
    pub fn mem_free(&mut self, ctx: usize, addr: CUdeviceptr) -> Result<(), CUresult> {
        if addr == 0 {
            return Ok(());
        }
        self.ctx_device(ctx)?;
        if let Some(a) = self.allocs.get(&addr).copied() {
            self.sync_context(a.ctx);
        }
        if self.release_alloc(addr) {
            Ok(())
        } else {
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        }
    }

    /// `(free, total)` bytes of the device of context `ctx`.
    pub fn mem_info(&self, ctx: usize) -> Result<(u64, u64), CUresult> {
        let d = &self.devices[self.ctx_device(ctx)?];
        Ok((d.free_mem, d.total_mem))
    }

    /// Number of live device allocations.
    pub fn live_allocations(&self) -> usize {
        self.allocs.len()
    }

    /// The device and context of the live allocation that contains `addr`.
    pub fn alloc_containing(&self, addr: CUdeviceptr) -> Option<(usize, usize)> {
        self.allocs
            .iter()
            .find(|(&start, a)| addr >= start && addr - start < a.bytes.max(1))
            .map(|(_, a)| (a.device, a.ctx))
    }

    /// `cuMemCreate`: `bytes` (a non-zero multiple of [`PHYSICAL_GRANULARITY`], else
    /// `CUDA_ERROR_INVALID_VALUE`) on the device at visible ordinal `dev`
    /// (`CUDA_ERROR_INVALID_DEVICE`), `CUDA_ERROR_OUT_OF_MEMORY` above its free bytes.
    pub fn physical_create(&mut self, dev: CUdevice, bytes: u64) -> Result<u64, CUresult> {
        let i = self.ordinal(dev)?;
        if bytes == 0 || !bytes.is_multiple_of(PHYSICAL_GRANULARITY) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let d = &mut self.devices[i];
        if bytes > d.free_mem {
            return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        }
        d.free_mem -= bytes;
        self.next_physical += 1;
        let h = PHYSICAL_HANDLE_BASE + self.next_physical;
        self.physical.insert(h, (i, bytes));
        Ok(h)
    }

    /// `cuMemRelease`: `CUDA_ERROR_INVALID_VALUE` for a handle that is not live.
    pub fn physical_release(&mut self, h: u64) -> Result<(), CUresult> {
        let (i, bytes) = self
            .physical
            .remove(&h)
            .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let d = &mut self.devices[i];
        d.free_mem = d.free_mem.saturating_add(bytes).min(d.total_mem);
        Ok(())
    }

    /// `cuStreamCreate` in context `ctx` (201/709 for a bad context).
    pub fn stream_create(&mut self, ctx: usize) -> Result<usize, CUresult> {
        self.ctx_device(ctx)?;
        self.next_stream += 1;
        let h = STREAM_HANDLE_BASE + self.next_stream * CTX_HANDLE_STEP;
        self.streams.insert(h, ctx);
        Ok(h)
    }

    /// `cuStreamDestroy`: `CUDA_ERROR_INVALID_HANDLE` for an unknown stream,
    /// `CUDA_ERROR_CONTEXT_IS_DESTROYED` for one whose context was destroyed (the handle is
    /// forgotten either way). Work still queued on it completes first, as the real driver
    /// finishes it on its own.
    pub fn stream_destroy(&mut self, stream: usize) -> Result<(), CUresult> {
        let ctx = self
            .streams
            .remove(&stream)
            .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
        self.non_blocking.remove(&stream);
        self.ctx_device(ctx)?;
        self.run_queue(stream, u64::MAX, 0);
        self.queues.remove(&stream);
        Ok(())
    }

    /// `cuStreamCreate`'s flags for the stream just made: `CU_STREAM_NON_BLOCKING` (1) keeps
    /// it out of the legacy default stream's implicit synchronisation.
    pub fn set_stream_flags(&mut self, stream: usize, flags: u32) {
        if flags & 1 != 0 {
            self.non_blocking.insert(stream);
        } else {
            self.non_blocking.remove(&stream);
        }
    }

    /// `cuStreamGetFlags`: the flags `stream` was made with (0 for a default stream);
    /// `INVALID_HANDLE` for a stream that is not live.
    pub fn stream_flags(&self, stream: usize, current: usize) -> Result<u32, CUresult> {
        let (key, _) = self.target_queue(stream, current)?;
        Ok(u32::from(self.non_blocking.contains(&key)))
    }

    /// The created streams of context `ctx` that synchronise with its legacy default
    /// stream (made without `CU_STREAM_NON_BLOCKING`), oldest first.
    fn blocking_streams(&self, ctx: usize) -> Vec<usize> {
        let mut keys: Vec<usize> = self
            .streams
            .iter()
            .filter(|(s, &c)| c == ctx && !self.non_blocking.contains(s))
            .map(|(&s, _)| s)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The context whose default-stream queue `key` is, if it is one.
    fn default_of(&self, key: QueueKey) -> Option<usize> {
        (key & 1 == 1 && self.contexts.contains_key(&(key & !1))).then_some(key & !1)
    }

    /// The implicit synchronisation of work about to be queued on `key` (CUDA programming
    /// guide, "Default Stream", "Implicit Synchronization"; measured on driver 580.159,
    /// H100, 2026-12-06: an event recorded on stream 0 completed 1.012 s after a blocking
    /// stream's copy queued behind a 1 s kernel): on the legacy default stream it waits
    /// for what the context's blocking streams queued so far; on a blocking stream, for
    /// what the legacy default stream queued so far. Non-blocking streams wait for
    /// nothing. (The per-thread default stream shares the legacy stream's queue here, so
    /// its work orders as legacy work: more than the real driver, never less.)
    fn implicit_waits(&self, key: QueueKey) -> Vec<Op> {
        let pending = |q: QueueKey| {
            self.queues.get(&q).filter(|x| x.busy()).map(|x| Op::Wait {
                queue: q,
                upto: x.submitted,
            })
        };
        if let Some(ctx) = self.default_of(key) {
            return self
                .blocking_streams(ctx)
                .into_iter()
                .filter_map(pending)
                .collect();
        }
        match self.streams.get(&key) {
            Some(&ctx) if !self.non_blocking.contains(&key) => {
                pending(default_queue(ctx)).into_iter().collect()
            }
            _ => Vec::new(),
        }
    }

    /// The context of `stream` as seen from a thread whose current context is `current`:
    /// the default streams (0, 0x1, 0x2) follow `current` (201/709 when it is bad); an
    /// unknown stream is `CUDA_ERROR_INVALID_HANDLE`, one whose context was destroyed
    /// `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
    pub fn stream_ctx(&self, stream: usize, current: usize) -> Result<usize, CUresult> {
        if stream <= 2 {
            self.ctx_device(current)?;
            return Ok(current);
        }
        let ctx = *self
            .streams
            .get(&stream)
            .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
        self.ctx_device(ctx)?;
        Ok(ctx)
    }

    /// Checks that a launch from a thread whose current context is `current` may use
    /// `stream`: 201/709 for a bad current context, `CUDA_ERROR_INVALID_HANDLE` for an unknown
    /// stream or one of another context, 709 for one whose context was destroyed. Returns
    /// the current context's device.
    pub fn launch_stream(&self, stream: usize, current: usize) -> Result<usize, CUresult> {
        let device = self.ctx_device(current)?;
        if self.stream_ctx(stream, current)? != current {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        Ok(device)
    }

    /// The limits of kernel `f` on the device at visible ordinal `device`.
    pub fn func_limits(&self, f: usize, device: usize) -> FuncLimits {
        FuncLimits::of(
            f,
            &LaunchLimits::of(&self.devices[device]),
            self.func_max_threads,
            self.funcs.get(&f).copied().unwrap_or_default(),
        )
    }

    /// The settings `cuFuncSetAttribute` made on kernel `f`, for changing.
    pub fn func_settings(&mut self, f: usize) -> &mut FuncSettings {
        self.funcs.entry(f).or_default()
    }

    /// Records a pinned host allocation of `bytes` made in context `ctx`.
    pub fn host_insert(&mut self, p: usize, bytes: usize, ctx: usize) {
        self.quarantine.remove(&p);
        self.dead_host.remove(&p);
        self.host.insert(p, (bytes, ctx));
    }

    /// Forgets a pinned host allocation; `false` if it was not one.
    pub fn host_remove(&mut self, p: usize) -> bool {
        self.host.remove(&p).is_some()
    }

    /// `cuMemFreeHost`: the queued copies that read or write the block run first (as
    /// driver 580 waits for them: [`crate::global::release_waits`]), then the block is
    /// forgotten and its size returned (the caller poisons it; it is never released, see
    /// the module documentation). Anything else fails like `cuMemFree`: 201/709 without a
    /// live current context, else `INVALID_VALUE`.
    pub fn host_free(&mut self, p: usize, current: usize) -> Result<usize, CUresult> {
        if let Some(&(bytes, ctx)) = self.host.get(&p) {
            self.finish_copies_touching(p, bytes, ctx);
            self.host.remove(&p);
            self.quarantine.insert(p);
            return Ok(bytes);
        }
        self.ctx_device(current)?;
        Err(CUresult::CUDA_ERROR_INVALID_VALUE)
    }

    /// Whether `p` was pinned memory of a context since destroyed.
    pub fn host_died(&self, p: usize) -> bool {
        self.dead_host.contains(&p)
    }

    /// `cuMemHostRegister`: `[p, p + bytes)` in context `current`;
    /// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` (712) when it overlaps a registration.
    pub fn host_register(
        &mut self,
        p: usize,
        bytes: usize,
        current: usize,
    ) -> Result<(), CUresult> {
        self.ctx_device(current)?;
        if p == 0 || bytes == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let end = p.saturating_add(bytes);
        let overlaps = self
            .registered
            .range(..end)
            .next_back()
            .is_some_and(|(&lo, &(n, _))| lo.saturating_add(n) > p);
        if overlaps {
            return Err(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
        }
        self.registered.insert(p, (bytes, current));
        Ok(())
    }

    /// `cuMemHostUnregister`: `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED` (713) unless `p`
    /// starts a registration; the queued copies that read or write the range run first, as
    /// for [`Driver::host_free`].
    pub fn host_unregister(&mut self, p: usize) -> Result<(), CUresult> {
        let &(bytes, ctx) = self
            .registered
            .get(&p)
            .ok_or(CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)?;
        self.finish_copies_touching(p, bytes, ctx);
        self.registered.remove(&p);
        Ok(())
    }

    /// A release of host range `[p, p + bytes)` made in context `ctx`: runs the work queued
    /// in that context, as its `cuMemFree` does, and every other queue holding a copy that
    /// reads or writes the range. Driver 580's `cuMemFreeHost` and `cuMemHostUnregister`
    /// returned only after a pending copy of the range had finished, with its stream idle
    /// (H100, driver 580.159, 2026-12-06: docs/design.md); how far beyond that stream they
    /// wait was not measured, and the fake waits as its `cuMemFree` does.
    /// `FAKE_CUDA_RELEASE_NO_WAIT=1` plays a driver that releases at once instead
    /// ([`crate::global::release_waits`]).
    fn finish_copies_touching(&mut self, p: usize, bytes: usize, ctx: usize) {
        if !crate::global::release_waits() {
            return;
        }
        self.sync_context(ctx);
        let (lo, hi) = (p, p.saturating_add(bytes));
        let keys: Vec<QueueKey> = self
            .queues
            .iter()
            .filter(|(_, q)| q.touches_host(lo, hi))
            .map(|(&k, _)| k)
            .collect();
        for key in keys {
            self.sync_queue(key);
        }
    }

    fn queues_of(&self, ctx: usize) -> Vec<QueueKey> {
        let mut keys: Vec<QueueKey> = self
            .streams
            .iter()
            .filter(|(_, &c)| c == ctx)
            .map(|(&s, _)| s)
            .collect();
        // Created streams in the order they were made (handles increase), then the
        // default stream: a context synchronize runs them in a scripted order, never a
        // hash map's.
        keys.sort_unstable();
        keys.push(default_queue(ctx));
        keys
    }

    /// The queue work on `stream` goes to, from a thread whose current context is
    /// `current`: the checks of [`Driver::launch_stream`].
    pub fn submit_queue(&self, stream: usize, current: usize) -> Result<QueueKey, CUresult> {
        self.launch_stream(stream, current)?;
        Ok(if stream <= 2 {
            default_queue(current)
        } else {
            stream
        })
    }

    /// The queue a synchronize or query of `stream` waits on, and its context: a created
    /// stream needs no current context (709 when its own was destroyed); an unknown handle
    /// or a default stream need a live current context (201/709), then an unknown handle is
    /// `INVALID_HANDLE`.
    pub fn target_queue(
        &self,
        stream: usize,
        current: usize,
    ) -> Result<(QueueKey, usize), CUresult> {
        if stream > 2 {
            if let Some(&ctx) = self.streams.get(&stream) {
                self.ctx_device(ctx)?;
                return Ok((stream, ctx));
            }
        }
        self.ctx_device(current)?;
        if stream > 2 {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        Ok((default_queue(current), current))
    }

    /// Appends `op` to queue `key`; work for a capturing queue goes into its graph, which
    /// this driver does not keep (it never runs).
    pub fn enqueue(&mut self, key: QueueKey, op: Op) {
        if self.capturing.contains(&key) {
            return;
        }
        let waits = self.implicit_waits(key);
        let q = self.queues.entry(key).or_default();
        for w in waits {
            q.push(w);
        }
        q.push(op);
    }

    /// `cuStreamBeginCapture_v2` on queue `key`: `ILLEGAL_STATE` when it is capturing.
    pub fn capture_begin(&mut self, key: QueueKey) -> Result<(), CUresult> {
        if !self.capturing.insert(key) {
            return Err(CUresult::CUDA_ERROR_ILLEGAL_STATE);
        }
        Ok(())
    }

    /// A synchronisation of queue `key` while it is capturing, which the real driver
    /// refuses: `STREAM_CAPTURE_UNSUPPORTED`, and the capture is invalidated (its end
    /// answers `STREAM_CAPTURE_INVALIDATED`). `Ok` when the queue is not capturing.
    pub fn refuse_in_capture(&mut self, key: QueueKey) -> Result<(), CUresult> {
        if self.capturing.contains(&key) {
            self.invalidated.insert(key);
            return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        }
        Ok(())
    }

    /// `cuStreamEndCapture` on queue `key`: a new graph handle, `ILLEGAL_STATE` when it is
    /// not capturing.
    pub fn capture_end(&mut self, key: QueueKey) -> Result<usize, CUresult> {
        if !self.capturing.remove(&key) {
            return Err(CUresult::CUDA_ERROR_ILLEGAL_STATE);
        }
        if self.invalidated.remove(&key) {
            return Err(CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
        self.next_graph += 1;
        Ok(0x6a00_0000 + (self.next_graph << 8))
    }

    /// Whether work is still queued on `key`.
    pub fn queue_busy(&self, key: QueueKey) -> bool {
        self.queues.get(&key).is_some_and(Queue::busy)
    }

    /// Runs queue `key` up to position `upto`.
    fn run_queue(&mut self, key: QueueKey, upto: u64, depth: u32) {
        let ops = match self.queues.get_mut(&key) {
            Some(q) => q.take_upto(upto),
            None => return,
        };
        for op in ops {
            match op {
                Op::Launches(_) => {}
                Op::Copy { dst, src, bytes } => self.copy_now(dst, src, bytes),
                Op::Wait { queue, upto } if depth < 16 => self.run_queue(queue, upto, depth + 1),
                Op::Wait { .. } => {}
            }
        }
    }

    /// Runs everything queued on `key` (`cuStreamSynchronize`); for a context's legacy
    /// default stream, its blocking streams' work too (they synchronise with it), not its
    /// non-blocking streams'.
    pub fn sync_queue(&mut self, key: QueueKey) {
        self.run_queue(key, u64::MAX, 0);
        if let Some(ctx) = self.default_of(key) {
            for s in self.blocking_streams(ctx) {
                self.run_queue(s, u64::MAX, 0);
            }
        }
    }

    /// Runs everything queued in context `ctx` (`cuCtxSynchronize`).
    pub fn sync_context(&mut self, ctx: usize) {
        for key in self.queues_of(ctx) {
            self.run_queue(key, u64::MAX, 0);
        }
    }

    /// Classifies an address of a unified-addressing copy.
    pub fn side(&self, addr: u64) -> Side {
        if self.alloc_containing(addr).is_some() {
            Side::Device(addr)
        } else {
            Side::Host(addr as usize)
        }
    }

    /// Checks that a copy of `bytes` between these sides is possible now: a device side
    /// must lie inside one live allocation, a host side must be non-null.
    pub fn check_copy(&self, dst: Side, src: Side, bytes: usize) -> Result<(), CUresult> {
        for side in [dst, src] {
            match side {
                Side::Host(0) if bytes > 0 => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
                Side::Host(_) => {}
                Side::Device(a) => {
                    let (start, len) = self
                        .alloc_span(a)
                        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
                    if a - start + bytes as u64 > len {
                        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
                    }
                }
            }
        }
        Ok(())
    }

    fn alloc_span(&self, addr: u64) -> Option<(u64, u64)> {
        self.allocs
            .iter()
            .find(|(&start, a)| addr >= start && addr - start < a.bytes.max(1))
            .map(|(&start, a)| (start, a.bytes))
    }

    /// The bytes of device memory at `addr`, for reading back in tests (`None` if not
    /// allocated or never written).
    pub fn device_bytes(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let (start, _) = self.alloc_span(addr)?;
        let b = self.backing.get(&start)?;
        let off = (addr - start) as usize;
        b.get(off..off + len).map(<[u8]>::to_vec)
    }

    fn read_side(&self, side: Side, bytes: usize) -> Vec<u8> {
        match side {
            Side::Host(p) => {
                let mut v = vec![0u8; bytes];
                // SAFETY: the program gave this host address to a copy of `bytes` bytes and
                // must keep it valid until the copy completes (the driver's contract);
                // pinned memory it freed early is never released (poisoned instead).
                unsafe { std::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr(), bytes) };
                v
            }
            Side::Device(a) => {
                let mut v = vec![0u8; bytes];
                if let Some((start, _)) = self.alloc_span(a) {
                    if let Some(b) = self.backing.get(&start) {
                        let off = (a - start) as usize;
                        let n = bytes.min(b.len().saturating_sub(off));
                        v[..n].copy_from_slice(&b[off..off + n]);
                    }
                }
                v
            }
        }
    }

    fn write_side(&mut self, side: Side, data: &[u8]) {
        match side {
            Side::Host(p) => {
                // SAFETY: as in `read_side`: the program's destination buffer of this size.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p as *mut u8, data.len()) };
            }
            Side::Device(a) => {
                let Some((start, len)) = self.alloc_span(a) else {
                    return;
                };
                if len > MAX_BACKED {
                    return;
                }
                let b = self
                    .backing
                    .entry(start)
                    .or_insert_with(|| vec![0; len as usize]);
                let off = (a - start) as usize;
                let n = data.len().min(b.len().saturating_sub(off));
                b[off..off + n].copy_from_slice(&data[..n]);
            }
        }
    }

    /// Performs a copy now (a queued copy running, or a synchronous copy). A device side
    /// freed meanwhile reads zeros and drops writes.
    pub fn copy_now(&mut self, dst: Side, src: Side, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let data = self.read_side(src, bytes);
        self.write_side(dst, &data);
    }

    /// `cuEventCreate` in context `current`.
    pub fn event_create(&mut self, current: usize) -> Result<usize, CUresult> {
        self.ctx_device(current)?;
        self.next_event += 1;
        let h = EVENT_HANDLE_BASE + self.next_event * CTX_HANDLE_STEP;
        self.events.insert(
            h,
            Event {
                ctx: current,
                marks: Vec::new(),
            },
        );
        Ok(h)
    }

    /// Whether `stream` is a created stream whose context was destroyed (its record is
    /// kept; see the module documentation).
    pub fn stream_of_dead_context(&self, stream: usize) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|c| self.ctx_device(*c) == Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED))
    }

    /// Whether `e` is an event whose context was destroyed.
    pub fn event_of_dead_context(&self, e: usize) -> bool {
        self.events.get(&e).is_some_and(|ev| {
            self.ctx_device(ev.ctx) == Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED)
        })
    }

    fn event(&self, e: usize) -> Result<Event, CUresult> {
        let ev = self
            .events
            .get(&e)
            .cloned()
            .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)?;
        self.ctx_device(ev.ctx)?;
        Ok(ev)
    }

    /// `cuEventDestroy`: `INVALID_HANDLE` for an unknown event, `CONTEXT_IS_DESTROYED` for
    /// one whose context was destroyed (forgotten either way).
    pub fn event_destroy(&mut self, e: usize) -> Result<(), CUresult> {
        let r = self.event(e).map(|_| ());
        self.events.remove(&e);
        r
    }

    /// `cuEventRecord(e, stream)`: the event marks the end of the work queued on the stream
    /// so far; the stream must belong to the event's context (`INVALID_HANDLE`).
    pub fn event_record(
        &mut self,
        e: usize,
        stream: usize,
        current: usize,
    ) -> Result<(), CUresult> {
        let ev = self.event(e)?;
        let (key, ctx) = self.target_queue(stream, current)?;
        if ctx != ev.ctx {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        // The record is work on its stream: it waits as that stream's work does (a record
        // on the legacy default stream, for the blocking streams' earlier work).
        let waits = self.implicit_waits(key);
        if !waits.is_empty() && !self.capturing.contains(&key) {
            let q = self.queues.entry(key).or_default();
            for w in waits {
                q.push(w);
            }
        }
        let pos = self.queues.get(&key).map_or(0, |q| q.submitted);
        if let Some(x) = self.events.get_mut(&e) {
            x.marks = vec![(key, pos)];
        }
        Ok(())
    }

    /// `cuEventSynchronize`: runs the event's streams up to its marks.
    pub fn event_sync(&mut self, e: usize) -> Result<(), CUresult> {
        for (key, upto) in self.event(e)?.marks {
            self.run_queue(key, upto, 0);
        }
        Ok(())
    }

    /// `cuEventQuery`: `CUDA_ERROR_NOT_READY` (600) until the work it marks has run.
    pub fn event_query(&self, e: usize) -> Result<(), CUresult> {
        for (key, upto) in self.event(e)?.marks {
            if self.queues.get(&key).is_some_and(|q| q.completed < upto) {
                return Err(CUresult::CUDA_ERROR_NOT_READY);
            }
        }
        Ok(())
    }

    /// `cuStreamWaitEvent(stream, e)`: work queued on `stream` afterwards runs after the
    /// event's work.
    pub fn stream_wait_event(
        &mut self,
        stream: usize,
        e: usize,
        current: usize,
    ) -> Result<(), CUresult> {
        let ev = self.event(e)?;
        let key = self.submit_queue(stream, current)?;
        for (queue, upto) in ev.marks {
            self.enqueue(key, Op::Wait { queue, upto });
        }
        Ok(())
    }

    /// The queues of context `ctx`: its default stream's and its created streams'.
    fn ctx_queues(&self, ctx: usize) -> Vec<QueueKey> {
        let mut keys: Vec<QueueKey> = self
            .streams
            .iter()
            .filter(|&(_, &c)| c == ctx)
            .map(|(&s, _)| s)
            .collect();
        keys.sort_unstable();
        keys.insert(0, default_queue(ctx));
        keys
    }

    /// `cuCtxRecordEvent(ctx, e)`: the event marks the work queued so far on every stream of
    /// the context (CUDA 12.5+, `cuda.h`); the event must belong to that context
    /// (`INVALID_HANDLE`), which must be alive.
    pub fn ctx_record_event(&mut self, ctx: usize, e: usize) -> Result<(), CUresult> {
        self.ctx_device(ctx)?;
        let ev = self.event(e)?;
        if ev.ctx != ctx {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        let marks = self
            .ctx_queues(ctx)
            .into_iter()
            .map(|k| (k, self.queues.get(&k).map_or(0, |q| q.submitted)))
            .collect();
        if let Some(x) = self.events.get_mut(&e) {
            x.marks = marks;
        }
        Ok(())
    }

    /// `cuCtxWaitEvent(ctx, e)`: work queued afterwards on the context's streams runs after
    /// the event's work (here: each stream the context has now waits; a stream created
    /// later does not).
    pub fn ctx_wait_event(&mut self, ctx: usize, e: usize) -> Result<(), CUresult> {
        self.ctx_device(ctx)?;
        let ev = self.event(e)?;
        for key in self.ctx_queues(ctx) {
            for &(queue, upto) in &ev.marks {
                self.enqueue(key, Op::Wait { queue, upto });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PhysicalDevice, DEFAULT_TOTAL_MEM};
    use std::collections::BTreeMap;

    const E_VALUE: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;
    const E_OOM: CUresult = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    const E_DEVICE: CUresult = CUresult::CUDA_ERROR_INVALID_DEVICE;
    const E_CTX: CUresult = CUresult::CUDA_ERROR_INVALID_CONTEXT;
    const E_DESTROYED: CUresult = CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED;

    fn driver(frees: &[u64]) -> Driver {
        let devices = frees
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                Device::new(&PhysicalDevice {
                    index: i as u32,
                    total_mem: 10_000,
                    free_mem: f,
                    attr_overrides: BTreeMap::new(),
                    name: None,
                    busy: false,
                    ctx_oom: false,
                })
            })
            .collect();
        Driver::new(devices).expect("devices")
    }

    #[test]
    fn no_devices() {
        assert_eq!(
            Driver::new(vec![]).err(),
            Some(CUresult::CUDA_ERROR_NO_DEVICE)
        );
    }

    #[test]
    fn topology_maps_ordinals_to_physical() {
        let mut vars = BTreeMap::new();
        vars.insert("FAKE_CUDA_DEVICE_COUNT".to_string(), "4".to_string());
        vars.insert("CUDA_VISIBLE_DEVICES".to_string(), "3,1".to_string());
        let d = Driver::from_topology(&Topology::from_vars(&vars)).expect("driver");
        assert_eq!(d.device_count(), 2);
        assert_eq!(d.device(0).map(|x| x.physical), Ok(3));
        assert_eq!(
            d.device(1).map(|x| x.name()),
            Ok("Fake H200 #1".to_string())
        );
        assert_eq!(d.device(2).err(), Some(E_DEVICE));
        assert_eq!(d.device(-1).err(), Some(E_DEVICE));
        vars.insert("CUDA_VISIBLE_DEVICES".to_string(), String::new());
        assert_eq!(
            Driver::from_topology(&Topology::from_vars(&vars)).err(),
            Some(CUresult::CUDA_ERROR_NO_DEVICE)
        );
    }

    #[test]
    fn allocation_accounting() {
        let mut d = driver(&[5000, 10_000]);
        let c0 = d.ctx_create(0).expect("ctx");
        let c1 = d.ctx_create(1).expect("ctx");
        assert_eq!(d.mem_info(c0), Ok((5000, 10_000)));
        let a = d.mem_alloc(c0, 1000).expect("alloc");
        assert_eq!(a, DEVICE_ADDR_BASE);
        assert_eq!(d.mem_info(c0), Ok((4000, 10_000)));
        assert_eq!(d.mem_info(c1), Ok((10_000, 10_000)));
        let b = d.mem_alloc(c0, 1).expect("alloc");
        assert_eq!(b, DEVICE_ADDR_BASE + 1024);
        let c = d.mem_alloc(c1, 512).expect("alloc");
        assert_eq!(c, DEVICE_ADDR_BASE + 1536);
        assert_eq!(d.mem_info(c0), Ok((3999, 10_000)));
        assert_eq!(d.mem_info(c1), Ok((9488, 10_000)));
        assert_eq!(d.mem_alloc(c0, 4000), Err(E_OOM));
        assert_eq!(d.mem_alloc(c0, 0), Err(E_VALUE));
        let e = d.mem_alloc(c0, 3999).expect("exactly the free bytes");
        assert_eq!(e, DEVICE_ADDR_BASE + 2048);
        assert_eq!(d.mem_info(c0), Ok((0, 10_000)));
        assert_eq!(d.live_allocations(), 4);

        assert_eq!(d.mem_free(c0, a), Ok(()));
        assert_eq!(d.mem_free(c0, a), Err(E_VALUE));
        assert_eq!(d.mem_free(c0, b + 1), Err(E_VALUE));
        assert_eq!(d.mem_free(c0, 0), Ok(()));
        assert_eq!(d.mem_info(c0), Ok((1000, 10_000)));
        // Freed from another context of another device: unified addresses.
        assert_eq!(d.mem_free(c1, b), Ok(()));
        assert_eq!(d.mem_info(c0), Ok((1001, 10_000)));
        // Addresses are not reused.
        assert_eq!(d.mem_alloc(c0, 1), Ok(DEVICE_ADDR_BASE + 2048 + 4096));
        assert_eq!(d.mem_alloc(0, 1), Err(E_CTX));
        assert_eq!(d.mem_free(0, c), Err(E_CTX));
    }

    #[test]
    fn destroying_a_context_frees_its_memory() {
        let mut d = driver(&[10_000]);
        let c = d.ctx_create(0).expect("ctx");
        let other = d.ctx_create(0).expect("ctx");
        let a = d.mem_alloc(c, 3000).expect("alloc");
        d.mem_alloc(other, 1000).expect("alloc");
        assert_eq!(d.mem_info(other), Ok((6000, 10_000)));
        assert_eq!(d.ctx_destroy(c), Ok(()));
        assert_eq!(d.mem_info(other), Ok((9000, 10_000)));
        assert_eq!(d.mem_free(other, a), Err(E_VALUE));
        assert_eq!(d.mem_alloc(c, 1), Err(E_DESTROYED));
        assert_eq!(d.mem_info(c), Err(E_DESTROYED));
    }

    #[test]
    fn contexts() {
        let mut d = driver(&[10_000, 10_000]);
        let a = d.ctx_create(1).expect("ctx");
        let b = d.ctx_create(1).expect("ctx");
        assert_ne!(a, b);
        assert_eq!(a, CTX_HANDLE_BASE + CTX_HANDLE_STEP);
        assert_eq!(d.ctx_device(a), Ok(1));
        assert_eq!(d.ctx_create(2), Err(E_DEVICE));
        assert_eq!(d.ctx_destroy(a), Ok(()));
        assert_eq!(d.ctx_destroy(a), Err(E_DESTROYED));
        assert_eq!(d.ctx_device(a), Err(E_DESTROYED));
        assert_eq!(d.ctx_destroy(0x1234), Err(E_CTX));
        assert_eq!(d.ctx_device(0), Err(E_CTX));
        let c = d.ctx_create(0).expect("ctx");
        assert!(c > b, "handles are never reused");
    }

    #[test]
    fn primary_context_refcount() {
        let mut d = driver(&[10_000, 10_000]);
        let p = d.primary_retain(0).expect("retain");
        assert_eq!(d.primary_retain(0), Ok(p));
        assert_eq!(d.primary_state(0), Some((p, 2)));
        let q = d.primary_retain(1).expect("retain");
        assert_ne!(p, q);
        assert_eq!(d.ctx_destroy(p), Err(E_CTX));
        assert_eq!(d.primary_release(0), Ok(()));
        assert_eq!(d.ctx_device(p), Ok(0));
        let a = d.mem_alloc(p, 100).expect("alloc");
        assert_eq!(d.primary_release(0), Ok(()));
        assert_eq!(d.primary_state(0), None);
        assert_eq!(d.ctx_device(p), Err(E_DESTROYED));
        assert_eq!(d.mem_free(q, a), Err(E_VALUE));
        assert_eq!(d.mem_info(q), Ok((10_000, 10_000)));
        assert_eq!(d.primary_release(0), Err(E_CTX));
        let p2 = d.primary_retain(0).expect("retain");
        assert_ne!(p2, p);
        assert_eq!(d.primary_state(0), Some((p2, 1)));

        assert_eq!(d.primary_retain(1), Ok(q));
        assert_eq!(d.primary_reset(1), Ok(()));
        assert_eq!(d.primary_state(1), None);
        assert_eq!(d.ctx_device(q), Err(E_DESTROYED));
        assert_eq!(d.primary_reset(1), Ok(()));
        assert_ne!(d.primary_retain(1), Ok(q));
        assert_eq!(d.primary_retain(5), Err(E_DEVICE));
        assert_eq!(d.primary_release(-1), Err(E_DEVICE));
        assert_eq!(d.primary_reset(2), Err(E_DEVICE));
    }

    #[test]
    fn unavailable_devices_refuse_contexts() {
        let mut vars = BTreeMap::new();
        for (k, v) in [
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_BUSY", "1"),
            ("FAKE_CUDA_ATTR_20", ",,2"),
            ("FAKE_CUDA_CTX_OOM", "3"),
            ("CUDA_VISIBLE_DEVICES", "3,2,1,0"),
        ] {
            vars.insert(k.to_string(), v.to_string());
        }
        let mut d = Driver::from_topology(&Topology::from_vars(&vars)).expect("driver");
        const E_UNAVAILABLE: CUresult = CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE;
        // Ordinals 0..4 are physical 3 (full), 2 (prohibited), 1 (busy), 0 (free).
        assert_eq!(d.ctx_create(0), Err(E_OOM));
        assert_eq!(d.primary_retain(0), Err(E_OOM));
        assert_eq!(d.ctx_create(1), Err(E_UNAVAILABLE));
        assert_eq!(d.primary_retain(1), Err(E_UNAVAILABLE));
        assert_eq!(d.ctx_create(2), Err(E_UNAVAILABLE));
        assert_eq!(d.primary_retain(2), Err(E_UNAVAILABLE));
        assert_eq!(d.primary_state(2), None);
        assert_eq!(d.device(2).map(|x| x.attribute(20)), Ok(Some(3)));
        assert_eq!(d.device(1).map(|x| x.attribute(20)), Ok(Some(2)));
        let c = d.ctx_create(3).expect("free device");
        assert_eq!(d.ctx_device(c), Ok(3));
        assert!(d.primary_retain(3).is_ok());
        // Memory queries still work on the refused devices.
        assert_eq!(d.device(0).map(|x| x.free_mem), Ok(DEFAULT_TOTAL_MEM));
    }

    #[test]
    fn streams_physical_memory_and_pointers() {
        let devices = (0..2)
            .map(|i| {
                Device::new(&PhysicalDevice {
                    index: i,
                    total_mem: 10 << 20,
                    free_mem: 10 << 20,
                    attr_overrides: BTreeMap::new(),
                    name: None,
                    busy: false,
                    ctx_oom: false,
                })
            })
            .collect();
        let mut d = Driver::new(devices).expect("devices");
        let a = d.ctx_create(0).expect("ctx");
        let b = d.ctx_create(1).expect("ctx");
        let s = d.stream_create(a).expect("stream");
        assert_eq!(s, STREAM_HANDLE_BASE + CTX_HANDLE_STEP);
        assert_eq!(d.stream_ctx(s, b), Ok(a));
        assert_eq!(d.stream_ctx(0, b), Ok(b));
        assert_eq!(d.stream_ctx(2, 0), Err(E_CTX));
        assert_eq!(d.launch_stream(s, a), Ok(0));
        assert_eq!(
            d.launch_stream(s, b),
            Err(CUresult::CUDA_ERROR_INVALID_HANDLE)
        );
        assert_eq!(
            d.launch_stream(0x1234, a),
            Err(CUresult::CUDA_ERROR_INVALID_HANDLE)
        );
        let p = d.mem_alloc(b, 4096).expect("alloc");
        assert_eq!(d.alloc_containing(p + 100), Some((1, b)));
        assert_eq!(d.alloc_containing(p + 4096), None);
        assert_eq!(d.ctx_destroy(a), Ok(()));
        assert_eq!(d.stream_ctx(s, b), Err(E_DESTROYED));
        assert_eq!(d.launch_stream(s, b), Err(E_DESTROYED));
        assert_eq!(d.stream_destroy(s), Err(E_DESTROYED));
        assert_eq!(
            d.stream_destroy(s),
            Err(CUresult::CUDA_ERROR_INVALID_HANDLE)
        );

        assert_eq!(d.physical_create(0, 3 << 20), Err(E_VALUE));
        assert_eq!(d.physical_create(0, 0), Err(E_VALUE));
        assert_eq!(d.physical_create(0, 12 << 20), Err(E_OOM));
        assert_eq!(d.physical_create(5, 2 << 20), Err(E_DEVICE));
        let h = d.physical_create(1, 4 << 20).expect("create");
        assert_eq!(d.mem_info(b), Ok(((6 << 20) - 4096, 10 << 20)));
        assert_eq!(d.physical_release(h), Ok(()));
        assert_eq!(d.physical_release(h), Err(E_VALUE));
        assert_eq!(d.mem_info(b), Ok(((10 << 20) - 4096, 10 << 20)));
    }

    #[test]
    fn host_allocations() {
        let mut d = driver(&[1]);
        d.host_insert(0x1000, 64, 0);
        assert!(d.host_remove(0x1000));
        assert!(!d.host_remove(0x1000));
        let c = d.ctx_create(0).expect("ctx");
        d.host_insert(0x2000, 64, c);
        assert_eq!(d.host_free(0x2000, c), Ok(64));
        assert_eq!(d.host_free(0x2000, c), Err(E_VALUE));
        assert_eq!(d.host_free(0x2000, 0), Err(E_CTX));
        d.host_insert(0x3000, 64, c);
        assert_eq!(d.host_register(0x9000, 100, c), Ok(()));
        assert_eq!(
            d.host_register(0x9050, 10, c),
            Err(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        );
        assert_eq!(
            d.host_register(0x8ff0, 0x11, c),
            Err(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        );
        assert_eq!(d.host_register(0x9064, 4, c), Ok(()));
        assert_eq!(d.host_unregister(0x9064), Ok(()));
        assert_eq!(
            d.host_unregister(0x9001),
            Err(CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        );
        assert_eq!(d.ctx_destroy(c), Ok(()));
        assert!(d.host_died(0x3000));
        assert_eq!(
            d.host_unregister(0x9000),
            Err(CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        );
        assert_eq!(d.host_free(0x3000, c), Err(E_DESTROYED));
    }

    /// An event recorded on the legacy default stream completes after the blocking
    /// streams' earlier work, not the non-blocking streams'; a synchronisation of the
    /// legacy stream runs the blocking streams too; a blocking stream's later work waits
    /// for the legacy stream's earlier work.
    #[test]
    fn the_legacy_default_stream_synchronises_with_blocking_streams_only() {
        let mut d = driver(&[10_000]);
        let c = d.ctx_create(0).expect("ctx");
        let blocking = d.stream_create(c).expect("stream");
        let non_blocking = d.stream_create(c).expect("stream");
        d.set_stream_flags(non_blocking, 1);
        assert_eq!(d.stream_flags(blocking, c), Ok(0));
        assert_eq!(d.stream_flags(non_blocking, c), Ok(1));
        assert_eq!(d.stream_flags(0, c), Ok(0));
        assert_eq!(
            d.stream_flags(0x1234_5600, c),
            Err(CUresult::CUDA_ERROR_INVALID_HANDLE)
        );
        d.enqueue(blocking, Op::Launches(1));
        d.enqueue(non_blocking, Op::Launches(1));
        let e = d.event_create(c).expect("event");
        assert_eq!(d.event_record(e, 0, c), Ok(()));
        let q0 = crate::queue::default_queue(c);
        assert_eq!(d.event_query(e), Err(CUresult::CUDA_ERROR_NOT_READY));
        assert_eq!(d.event_sync(e), Ok(()));
        assert!(!d.queue_busy(blocking), "the legacy event waited for it");
        assert!(
            d.queue_busy(non_blocking),
            "not for the non-blocking stream"
        );
        // A blocking stream's later work waits for the legacy stream's earlier work.
        d.enqueue(q0, Op::Launches(1));
        d.enqueue(blocking, Op::Launches(1));
        d.sync_queue(blocking);
        assert!(!d.queue_busy(q0));
        // A synchronisation of the legacy stream runs the blocking streams.
        d.enqueue(blocking, Op::Launches(1));
        d.sync_queue(q0);
        assert!(!d.queue_busy(blocking));
        assert!(d.queue_busy(non_blocking));
    }

    #[test]
    fn queued_work_runs_on_synchronisation_and_is_lost_with_its_context() {
        let mut d = driver(&[10_000]);
        let c = d.ctx_create(0).expect("ctx");
        let s = d.stream_create(c).expect("stream");
        let dev = d.mem_alloc(c, 64).expect("alloc");
        let src = [7u8; 16];
        let mut dst = vec![0u8; 16];
        let key = d.submit_queue(s, c).expect("queue");
        assert_eq!(key, s);
        assert_eq!(
            d.check_copy(Side::Device(dev + 60), Side::Host(1), 8),
            Err(E_VALUE)
        );
        assert_eq!(
            d.check_copy(Side::Device(dev), Side::Host(0), 8),
            Err(E_VALUE)
        );
        d.enqueue(key, Op::Launches(1));
        d.enqueue(
            key,
            Op::Copy {
                dst: Side::Device(dev + 8),
                src: Side::Host(src.as_ptr() as usize),
                bytes: 16,
            },
        );
        assert!(d.queue_busy(s));
        assert_eq!(d.device_bytes(dev + 8, 16), None);
        // An event recorded now marks both ops; a later launch is not covered.
        let e = d.event_create(c).expect("event");
        assert_eq!(d.event_record(e, s, c), Ok(()));
        d.enqueue(key, Op::Launches(1));
        assert_eq!(d.event_query(e), Err(CUresult::CUDA_ERROR_NOT_READY));
        assert_eq!(d.event_sync(e), Ok(()));
        assert_eq!(d.event_query(e), Ok(()));
        assert_eq!(d.device_bytes(dev + 8, 16), Some(vec![7; 16]));
        assert!(d.queue_busy(s));
        d.sync_queue(s);
        assert!(!d.queue_busy(s));
        // Device to host through the default stream, run by a context synchronize.
        let q0 = d.submit_queue(0, c).expect("default");
        assert_eq!(q0, crate::queue::default_queue(c));
        d.enqueue(
            q0,
            Op::Copy {
                dst: Side::Host(dst.as_mut_ptr() as usize),
                src: Side::Device(dev + 8),
                bytes: 16,
            },
        );
        d.sync_context(c);
        assert_eq!(dst, vec![7; 16]);
        assert_eq!(d.side(dev + 3), Side::Device(dev + 3));
        assert_eq!(d.side(0x1234), Side::Host(0x1234));
        // A wait on the event from another stream.
        let s2 = d.stream_create(c).expect("stream");
        assert_eq!(d.event_record(e, s, c), Ok(()));
        d.enqueue(s, Op::Launches(2));
        assert_eq!(d.event_record(e, s, c), Ok(()));
        assert_eq!(d.stream_wait_event(s2, e, c), Ok(()));
        d.sync_queue(s2);
        assert!(!d.queue_busy(s));
        // cuMemFree waits for the context's queues.
        d.enqueue(s, Op::Launches(1));
        assert_eq!(d.mem_free(c, dev), Ok(()));
        assert!(!d.queue_busy(s));
        // Destroying the context loses what is queued.
        let dev2 = d.mem_alloc(c, 64).expect("alloc");
        d.enqueue(
            s,
            Op::Copy {
                dst: Side::Device(dev2),
                src: Side::Host(src.as_ptr() as usize),
                bytes: 16,
            },
        );
        assert_eq!(d.ctx_destroy(c), Ok(()));
        assert!(!d.queue_busy(s));
        assert_eq!(d.target_queue(s, 0), Err(E_DESTROYED));
        assert_eq!(d.event_sync(e), Err(E_DESTROYED));
        assert_eq!(d.event_destroy(e), Err(E_DESTROYED));
        assert_eq!(d.event_destroy(e), Err(CUresult::CUDA_ERROR_INVALID_HANDLE));
        assert_eq!(d.target_queue(0x1234_5600, 0), Err(E_CTX));
    }
}
