//! Allocation faults (docs/reliability.md): a failed `cuMemAlloc_v2`, `cuMemAllocPitch_v2`,
//! `cuMemAllocAsync(_ptsz)`, `cuMemAllocManaged`, `cuMemHostAlloc` or `cuMemCreate` is
//! explained: a zero size, a size larger than the device (shown signed too: a negative size
//! that wrapped), a `cuMemCreate` size off the granularity, or, for
//! `CUDA_ERROR_OUT_OF_MEMORY`, the device's free and total memory at that moment, whether the
//! request was larger than the free memory, what this process itself holds there, and which
//! other devices have room (NVML).
//!
//! Success path: a thread's latest allocation is held in its own shard
//! ([`seedance_hotpath::held`]: three stores, and one on its free), and moves into a lock-free
//! table of live allocations ([`seedance_hotpath::live::LiveTable`]) when the thread allocates
//! again before freeing it; a free of an allocation in the table is a removal. The device of each
//! live address is asked of the driver (`cuPointerGetAttribute`) only when an explanation
//! needs it; addresses the driver no longer knows (freed with their context) are dropped
//! then. Everything else runs after a failure, or before the call with
//! `SEEDANCE_VALIDATE=pre` (then a zero size, a size over the device's total memory, or a
//! `cuMemCreate` size off the granularity is refused with the driver's own code).

mod explain;
pub mod holder;

use crate::driver::query;
use crate::hooks::ids::HookId;
use crate::rt::config;
use explain::{fault, pre, Request};
use once_cell::sync::OnceCell;
use seedance_core::alloc::AllocKind;
use seedance_cuda::{
    CUdeviceptr, CUmemAllocationProp, CUmemGenericAllocationHandle, CUresult,
    CU_MEM_LOCATION_TYPE_DEVICE,
};
use seedance_hotpath::held::Counted;
use seedance_hotpath::live::LiveTable;
use seedance_hotpath::work;
use seedance_topology::Nvml;

/// Live device allocations by address (`cuMemAlloc*`), 65536 slots (1 MiB of `.bss`,
/// touched only as used).
static POINTERS: LiveTable<65536> = LiveTable::new();
/// Live `cuMemCreate` allocations by handle, with their device.
static HANDLES: LiveTable<4096> = LiveTable::new();

/// Most live addresses whose device is asked of the driver for one explanation.
const MAX_ATTRIBUTED: usize = 4096;

/// The tracked live allocation at `addr`, in the table or held by a thread (for the
/// lifetime checks; a held one is scanned for in every thread's shard when the table has
/// it not).
pub fn live_pointer(addr: CUdeviceptr) -> Option<seedance_hotpath::live::Entry> {
    POINTERS
        .get(addr)
        .or_else(|| work::held_at(addr).map(Into::into))
}

/// Whether the live table has `addr` (not looking at held allocations: what the owner
/// index keeps filed, every entry of which was published into the table before it was
/// filed).
pub fn published(addr: CUdeviceptr) -> bool {
    POINTERS.get(addr).is_some()
}

/// Every tracked live allocation, each address once (cold: walks the whole table and every
/// thread's held allocation).
pub fn live_pointers() -> Vec<seedance_hotpath::live::Entry> {
    let mut v = POINTERS.entries();
    let mut seen: std::collections::HashSet<u64> = v.iter().map(|e| e.key).collect();
    v.extend(
        work::held_all()
            .into_iter()
            .filter(|a| seen.insert(a.addr))
            .map(seedance_hotpath::live::Entry::from),
    );
    v
}

/// Forgets an allocation the driver released implicitly (with its context), in the table
/// and wherever a thread holds it.
pub fn forget_pointer(addr: CUdeviceptr) {
    POINTERS.forget(addr);
    work::take_held(addr);
}

/// The functions whose successful calls are counted on the calling thread's
/// held-allocation line (`seedance_hotpath::held`, in the order of [`Counted`]) instead of in the
/// call counters: their `count` clause ([`count_failure`]) counts only failures, their `ok`
/// clause ([`ok_mem_alloc_counted`], [`ok_mem_free_counted`]) the successes. The exit
/// summary adds [`work::held_counts`] to these ids.
pub const HELD_COUNTED: [HookId; 2] = [HookId::cuMemAlloc_v2, HookId::cuMemFree_v2];

/// The `count` clause of [`HELD_COUNTED`]'s functions: a failure is counted as every call
/// is; a success is left to the `ok` clause (no other clause repairs a failed allocation or
/// free into a success, so each call is counted once).
#[inline(always)]
pub fn count_failure(id: HookId, r: CUresult) {
    if r.0 != 0 {
        crate::rt::output::count(id, r);
    }
}

/// Records a new live allocation (held by the calling thread: [`work::hold_alloc`]); an
/// address the driver hands out again is no longer dead. `counted`: the call is
/// `cuMemAlloc_v2`'s, counted here ([`HELD_COUNTED`]).
#[inline(always)]
fn record(addr: CUdeviceptr, bytes: u64, counted: bool) {
    // The size travels with the library that asked (one stack walk per allocation).
    let bytes = seedance_hotpath::live::size_word(bytes, holder::caller());
    let tp = crate::platform::thread_pointer();
    if !work::hold_alloc(tp, &POINTERS, addr, bytes, counted, file_previous) {
        if counted {
            crate::rt::output::count(
                HELD_COUNTED[Counted::Alloc as usize],
                CUresult::CUDA_SUCCESS,
            );
        }
        unheld(addr, bytes)
    }
    crate::faults::lifetime::memory::note_device_alloc(addr);
}

/// The thread's previous allocation `a` entered the live table: filed on its ring. Out of
/// line (called from the path that publishes), so that an allocation that publishes
/// nothing (after a free) saves only the registers it uses.
#[inline(never)]
fn file_previous(a: seedance_hotpath::held::Allocation) {
    crate::faults::lifetime::memory::file_published(a.ctx, a.addr);
}

/// An allocation made while the thread's local storage is torn down: straight into the
/// table (`bytes` a size word), filed under no context.
#[cold]
#[inline(never)]
fn unheld(addr: CUdeviceptr, bytes: u64) {
    if POINTERS.insert(addr, bytes, None) {
        crate::faults::lifetime::memory::file_published(0, addr);
    }
}

/// NVML, opened at the first explanation that needs it; `None` without NVML, or when it
/// did not answer in time ([`crate::driver::nvml`]).
pub fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceCell<Option<Nvml>> = OnceCell::new();
    // dlopen waits for the loader's lock: opened outside the cell's initialiser.
    crate::driver::real::once_outside_loader_lock(&NVML, crate::driver::nvml::open).as_ref()
}

/// What this process holds on each device now: `device -> (allocations, bytes)`, from the
/// tracked live addresses (device asked of the driver, at most 4096) and `cuMemCreate`
/// handles. Cold: a driver query per address.
pub fn live_by_device() -> std::collections::BTreeMap<i32, (u64, u64)> {
    let mut out: std::collections::BTreeMap<i32, (u64, u64)> = std::collections::BTreeMap::new();
    for e in live_pointers().into_iter().take(MAX_ATTRIBUTED) {
        if let Ok(d) = query::pointer_device(e.key) {
            let g = out.entry(d).or_default();
            g.0 += 1;
            g.1 += e.bytes;
        }
    }
    for e in HANDLES.entries() {
        if let Some(d) = e.device {
            let g = out.entry(i32::from(d)).or_default();
            g.0 += 1;
            g.1 += e.bytes;
        }
    }
    out
}

/// What each library holds now ([`holder`]), by device: `(device, library file) ->
/// (allocations, bytes)`, device `None` where the driver no longer places the address (at
/// exit, after its teardown). Allocations whose library is unknown are left out. Cold: a
/// driver query per address (at most 4096).
pub fn holders_by_device() -> std::collections::BTreeMap<(Option<i32>, String), (u64, u64)> {
    let mut out: std::collections::BTreeMap<(Option<i32>, String), (u64, u64)> =
        std::collections::BTreeMap::new();
    let mut add = |device: Option<i32>, e: &seedance_hotpath::live::Entry| {
        if let Some((file, _)) = holder::named(e.holder) {
            let g = out.entry((device, file)).or_default();
            g.0 += 1;
            g.1 += e.bytes;
        }
    };
    for e in live_pointers().into_iter().take(MAX_ATTRIBUTED) {
        add(query::pointer_device(e.key).ok(), &e);
    }
    for e in HANDLES.entries() {
        add(e.device.map(i32::from), &e);
    }
    out
}

/// Whether `SEEDANCE_VALIDATE=pre` checks run: the same switch as
/// `crate::faults::launch::pre_enabled` (one relaxed load of the configuration word).
#[inline(always)]
fn pre_enabled() -> bool {
    config::switches() & config::sw::PRE != 0
}

/// Reads the address the driver wrote on success.
///
/// # Safety
/// `p` is null or the out-pointer the driver just wrote.
unsafe fn written<T: Copy + Default>(p: *mut T) -> T {
    if p.is_null() {
        T::default()
    } else {
        // SAFETY: non-null, written by the driver that just returned success.
        unsafe { p.read() }
    }
}

/// Before `cuMemAlloc_v2` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_alloc(id: HookId, bytesize: usize) -> Option<CUresult> {
    if !pre_enabled() {
        return None;
    }
    pre(id, Request::new(AllocKind::Device, bytesize as u64))
}

/// After a failed `cuMemAlloc_v2`: `true` when explained (an `alloc_fault` replaces the
/// plain `call_failed`).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc(id: HookId, r: CUresult, bytesize: usize) -> bool {
    fault(id, r, Request::new(AllocKind::Device, bytesize as u64))
}

/// After a successful `cuMemAllocAsync(_ptsz)` or `cuMemAllocManaged`: records the live
/// allocation.
///
/// # Safety
/// `dptr` is null or the out-pointer the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc(dptr: *mut CUdeviceptr, bytesize: usize) {
    // SAFETY: the driver wrote *dptr on success.
    record(unsafe { written(dptr) }, bytesize as u64, false);
}

/// After a successful `cuMemAlloc_v2`: records the live allocation and counts the call
/// ([`HELD_COUNTED`]).
///
/// # Safety
/// `dptr` is null or the out-pointer the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc_counted(dptr: *mut CUdeviceptr, bytesize: usize) {
    // SAFETY: the driver wrote *dptr on success.
    record(unsafe { written(dptr) }, bytesize as u64, true);
}

fn pitch_bytes(width: usize, height: usize) -> u64 {
    (width as u64).saturating_mul(height as u64)
}

/// Before `cuMemAllocPitch_v2` with `SEEDANCE_VALIDATE=pre` (size = `WidthInBytes x Height`).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_alloc_pitch(id: HookId, width: usize, height: usize) -> Option<CUresult> {
    if !pre_enabled() {
        return None;
    }
    pre(
        id,
        Request::new(AllocKind::Pitch, pitch_bytes(width, height)),
    )
}

/// After a failed `cuMemAllocPitch_v2`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_pitch(id: HookId, r: CUresult, width: usize, height: usize) -> bool {
    fault(
        id,
        r,
        Request::new(AllocKind::Pitch, pitch_bytes(width, height)),
    )
}

/// After a successful `cuMemAllocPitch_v2`: records `pitch x height` bytes.
///
/// # Safety
/// `dptr` and `p_pitch` are null or the out-pointers the driver just wrote.
#[inline(always)]
pub unsafe fn ok_mem_alloc_pitch(dptr: *mut CUdeviceptr, p_pitch: *mut usize, height: usize) {
    // SAFETY: the driver wrote both on success.
    let (p, pitch) = unsafe { (written(dptr), written(p_pitch)) };
    record(p, pitch_bytes(pitch, height), false);
}

/// After a failed `cuMemAllocAsync(_ptsz)`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_async(id: HookId, r: CUresult, bytesize: usize) -> bool {
    fault(id, r, Request::new(AllocKind::Async, bytesize as u64))
}

/// After a failed `cuMemAllocManaged`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_alloc_managed(id: HookId, r: CUresult, bytesize: usize) -> bool {
    fault(id, r, Request::new(AllocKind::Managed, bytesize as u64))
}

/// After a failed `cuMemHostAlloc` (pinned host memory: zero size and host memory state).
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_host_alloc(id: HookId, r: CUresult, bytesize: usize) -> bool {
    fault(id, r, Request::new(AllocKind::Host, bytesize as u64))
}

/// The properties a `cuMemCreate` was given.
///
/// # Safety
/// `prop` is null or valid (the driver's contract).
unsafe fn physical(size: usize, prop: *const CUmemAllocationProp) -> Request {
    Request {
        kind: AllocKind::Physical,
        bytes: size as u64,
        // SAFETY: null or valid, per the caller's contract; read unaligned to be safe.
        prop: (!prop.is_null()).then(|| unsafe { prop.read_unaligned() }),
    }
}

/// Before `cuMemCreate` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
#[inline(always)]
pub unsafe fn pre_mem_create(
    id: HookId,
    size: usize,
    prop: *const CUmemAllocationProp,
) -> Option<CUresult> {
    if !pre_enabled() || prop.is_null() {
        return None;
    }
    // SAFETY: forwarded caller contract.
    pre(id, unsafe { physical(size, prop) })
}

/// After a failed `cuMemCreate`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them.
pub unsafe fn fault_mem_create(
    id: HookId,
    r: CUresult,
    size: usize,
    prop: *const CUmemAllocationProp,
) -> bool {
    // SAFETY: forwarded caller contract.
    fault(id, r, unsafe { physical(size, prop) })
}

/// After a successful `cuMemCreate`: records the handle with its device.
///
/// # Safety
/// `handle` is null or the out-pointer the driver just wrote; `prop` null or valid.
#[inline(always)]
pub unsafe fn ok_mem_create(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
) {
    // SAFETY: forwarded caller contract; the driver wrote *handle on success.
    let (h, req) = unsafe { (written(handle), physical(size, prop)) };
    let device = req
        .prop
        .filter(|p| p.location.type_ == CU_MEM_LOCATION_TYPE_DEVICE)
        .and_then(|p| u8::try_from(p.location.id).ok());
    let word = seedance_hotpath::live::size_word(size as u64, holder::caller());
    HANDLES.insert(h, word, device);
}

/// After a successful `cuMemFreeAsync(_ptsz)`: forgets the allocation.
///
/// # Safety
/// None beyond the wrapper's: the address is only a key.
#[inline(always)]
pub unsafe fn ok_mem_free(dptr: CUdeviceptr) {
    work::free_alloc(crate::platform::thread_pointer(), &POINTERS, dptr, false);
}

/// After a successful `cuMemFree_v2`: forgets the allocation and counts the call
/// ([`HELD_COUNTED`]).
///
/// # Safety
/// None beyond the wrapper's: the address is only a key.
#[inline(always)]
pub unsafe fn ok_mem_free_counted(dptr: CUdeviceptr) {
    if !work::free_alloc(crate::platform::thread_pointer(), &POINTERS, dptr, true) {
        crate::rt::output::count(HELD_COUNTED[Counted::Free as usize], CUresult::CUDA_SUCCESS);
    }
}

/// After a successful `cuMemRelease`: forgets the handle.
///
/// # Safety
/// None beyond the wrapper's: the handle is only a key.
#[inline(always)]
pub unsafe fn ok_mem_release(handle: CUmemGenericAllocationHandle) {
    HANDLES.forget(handle);
}
