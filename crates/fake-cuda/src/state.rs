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

use std::collections::{HashMap, HashSet};

use seedance_cuda::{CUdevice, CUdeviceptr, CUresult};

use crate::config::Topology;
use crate::device::Device;
use crate::launch::{FuncLimits, FuncSettings, LaunchLimits};

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

/// The initialised driver.
#[derive(Debug)]
pub struct Driver {
    devices: Vec<Device>,
    contexts: HashMap<usize, CtxRecord>,
    primaries: Vec<Option<Primary>>,
    next_ctx: usize,
    allocs: HashMap<CUdeviceptr, Alloc>,
    next_offset: u64,
    host: HashSet<usize>,
    streams: HashMap<usize, usize>,
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
            host: HashSet::new(),
            streams: HashMap::new(),
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

    /// Marks a context destroyed and frees its allocations.
    fn kill(&mut self, ctx: usize) {
        if let Some(r) = self.contexts.get_mut(&ctx) {
            r.alive = false;
        }
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
    pub fn mem_free(&mut self, ctx: usize, addr: CUdeviceptr) -> Result<(), CUresult> {
        if addr == 0 {
            return Ok(());
        }
        self.ctx_device(ctx)?;
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

    /// `cuStreamDestroy`: `CUDA_ERROR_INVALID_HANDLE` for an unknown stream.
    pub fn stream_destroy(&mut self, stream: usize) -> Result<(), CUresult> {
        self.streams
            .remove(&stream)
            .map(|_| ())
            .ok_or(CUresult::CUDA_ERROR_INVALID_HANDLE)
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

    /// Records a pinned host allocation.
    pub fn host_insert(&mut self, p: usize) {
        self.host.insert(p);
    }

    /// Forgets a pinned host allocation; `false` if it was not one.
    pub fn host_remove(&mut self, p: usize) -> bool {
        self.host.remove(&p)
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
        assert_eq!(d.stream_destroy(s), Ok(()));
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
        d.host_insert(0x1000);
        assert!(d.host_remove(0x1000));
        assert!(!d.host_remove(0x1000));
    }
}
