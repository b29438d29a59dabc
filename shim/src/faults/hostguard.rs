//! `SEEDANCE_HOST_GUARD=on`: the program's host writes into the source of a pending
//! host-to-device copy from pinned memory, found and (in `fix` mode) kept from the device
//! without touching the program's memory protection or signals (docs/design.md, "The
//! host-write guard", says why the page-protection guard was removed).
//!
//! * **Submission** ([`source`], [`source_unified`], from the copy's wrapper before the
//!   driver call, and [`submitted`] right after it): a copy whose source bytes lie in one
//!   pinned range the shim saw made, on a stream that is not capturing a graph, gets a
//!   slot: a digest of its source (`seedance_core::hostguard::sample_plan`, hashed per chunk
//!   in [`digest`]) and an event of the shim's recorded right after the copy on its stream.
//!   In `fix` mode the source is first copied into a staging buffer of the shim's own
//!   ([`pool`]) and the copy is submitted from there, so host writes made afterwards cannot
//!   reach the device; without room in the pool the copy goes from the program's buffer
//!   (one line).
//! * **Completion** ([`completed`], called wherever the shim learns work completed: a
//!   stream, context or event synchronisation, a successful query): each slot's event is
//!   queried; for a completed copy the source is digested again and a difference is
//!   reported ([`report`]) as a host write during the copy; then its staging buffer goes
//!   back to the pool and its event is destroyed. Because the shim's own event marks the
//!   copy, a completion the program learnt through any chain of events and waits is seen at
//!   the program's synchronisation call, before the program can write the buffer again.
//! * Bytes about to be written by another copy, freed or unregistered ([`release_range`],
//!   [`release_pinned`]) are compared at once and no longer watched (the slot stays, with
//!   its staging buffer, until the copy completes). A context that ended takes its slots
//!   and staging buffers with it ([`context_ended`]): nothing of it is read or freed.
//!
//! The program's memory is only ever read, through `process_vm_readv` (a read of memory
//! that was unmapped meanwhile fails instead of faulting). Staging buffers are never freed:
//! at exit nothing is done. Cost, only with the setting on: docs/performance.md.

mod digest;
mod pool;
mod report;

use crate::faults::hazard::pinned_range_at;
use crate::hooks::ids::HookId;
use crate::{driver::query, platform, rt::config, rt::stderr};
use digest::Digest;
use parking_lot::Mutex;
use seedance_core::hazard::Range;
use seedance_cuda::{CUdeviceptr, CUevent, CUresult, CUstream, CU_STREAM_PER_THREAD};
use seedance_hotpath::work;
use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Copies watched at once; a copy that finds no room is not watched (one line).
const SLOTS: usize = 256;
/// `CU_EVENT_DISABLE_TIMING` (cuda.h).
const DISABLE_TIMING: u32 = 2;

/// One watched copy.
struct Slot {
    function: HookId,
    /// Stream key (`seedance_hotpath::work::key_for`), for the report.
    key: u64,
    /// The stream as the plain entry points name it.
    stream: usize,
    /// The context current at submission: the copy's, its event's and its staging's.
    ctx: usize,
    tid: u64,
    src: u64,
    bytes: u64,
    range: Range,
    /// The shim's event recorded right after the copy (`None`: the stream's idleness is
    /// asked instead).
    event: Option<usize>,
    /// The staging buffer the copy reads (`fix` mode).
    staging: Option<usize>,
    /// The digest at submission, while the program's bytes are still watched.
    watch: Option<Digest>,
}

impl Slot {
    /// What a report needs of this slot (no event, staging buffer or digest: those stay
    /// with the slot).
    fn report_copy(&self) -> Slot {
        Slot {
            function: self.function,
            key: self.key,
            stream: self.stream,
            ctx: self.ctx,
            tid: self.tid,
            src: self.src,
            bytes: self.bytes,
            range: self.range.clone(),
            event: None,
            staging: self.staging,
            watch: None,
        }
    }
}

static TABLE: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
/// Slots in use or being prepared (a relaxed filter for the completion hooks).
static USED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The slot prepared by [`source`] for the copy this thread is submitting.
    static NEXT: RefCell<Option<Slot>> = const { RefCell::new(None) };
}

/// Whether the guard is on: a bit of the configuration word (`SEEDANCE_HOST_GUARD` with
/// lifetime tracking; a forked child clears it).
#[inline(always)]
pub fn on() -> bool {
    config::switches_now() & config::sw::HOST_GUARD != 0
}

fn fix() -> bool {
    config::switches() & config::sw::FIX != 0
}

/// Runs `f` on the cold path: with cancellation disabled (a cancelled thread never leaves
/// a slot half made or a lock held), never unwinding out. It may run inside the shim's own
/// work (a context's synchronisation or end reaches [`completed`] and [`context_ended`]
/// from the lifetime checks): it takes no lock of theirs.
fn cold<T: Default>(f: impl FnOnce() -> T) -> T {
    let _cancel = crate::rt::guard::NoCancel::new();
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("hostguard");
        f()
    }))
    .unwrap_or_default()
}

/// Before `cuMemcpyHtoDAsync_v2(_ptsz)`: the source the driver is given (a staging buffer
/// in `fix` mode, else `src` itself).
///
/// # Safety
/// None: `src` is only read, through `process_vm_readv`.
#[inline(always)]
pub unsafe fn source(
    id: HookId,
    src: *const libc::c_void,
    bytes: usize,
    stream: CUstream,
) -> *const libc::c_void {
    if !on() {
        return src;
    }
    match cold(|| prepare(id, src as u64, bytes as u64, stream)) {
        Some(p) => p as *const libc::c_void,
        None => src,
    }
}

/// Before `cuMemcpyAsync(_ptsz)`: as [`source`], for a source that is pinned host memory
/// (any other source is passed on unchanged).
///
/// # Safety
/// None: `src` is only read, through `process_vm_readv`.
#[inline(always)]
pub unsafe fn source_unified(
    id: HookId,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUdeviceptr {
    if !on() {
        return src;
    }
    cold(|| prepare(id, src, bytes as u64, stream)).unwrap_or(src)
}

/// Right after the driver call of a copy [`source`] saw: the slot is kept when the driver
/// accepted the copy, else dropped (its staging buffer was never read).
#[inline(always)]
pub fn submitted(r: CUresult) {
    if on() {
        cold(|| commit(r));
    }
}

/// Prepares the slot of a copy of `bytes` from `src`; `Some(staging)` when the copy is to
/// read a staging buffer instead.
fn prepare(id: HookId, src: u64, bytes: u64, stream: CUstream) -> Option<u64> {
    if let Some(left) = NEXT.with(|n| n.borrow_mut().take()) {
        // Prepared for a copy whose outcome was never seen: it may read the buffer.
        if let Some(p) = left.staging {
            pool::lose(p);
        }
        USED.fetch_sub(1, Ordering::Relaxed);
    }
    let range = pinned_range_at(src, bytes)?;
    if bytes == 0 || query::stream_capturing(stream) == Ok(true) {
        return None;
    }
    if USED.fetch_add(1, Ordering::Relaxed) >= SLOTS {
        USED.fetch_sub(1, Ordering::Relaxed);
        stderr::say_once(
            "host_guard_slots",
            &format!(
                "SEEDANCE_HOST_GUARD: {SLOTS} copies watched at once already; later ones are \
                 not watched until one completes"
            ),
        );
        return None;
    }
    let ctx = query::ctx_get_current().unwrap_or(0);
    let per_thread = id.per_thread();
    let staging = if fix() { pool::take(ctx, bytes) } else { None };
    let staging = staging.filter(|&p| {
        let ok = digest::read(src, p as *mut u8, bytes as usize);
        if !ok {
            pool::give(p);
        }
        ok
    });
    let watch = digest::take(staging.map_or(src, |p| p as u64), bytes);
    if watch.is_none() && staging.is_none() {
        let e = std::io::Error::last_os_error();
        stderr::say_once(
            "host_guard_read",
            &format!(
                "SEEDANCE_HOST_GUARD: the source of a {} copy could not be read through \
                 process_vm_readv ({e}; a seccomp profile may forbid it): such copies are not \
                 watched",
                id.name()
            ),
        );
        USED.fetch_sub(1, Ordering::Relaxed);
        return None;
    }
    let event = query::event_create(DISABLE_TIMING).ok().map(|e| e as usize);
    let key = work::key_for(stream as usize, per_thread);
    let stream = if per_thread && stream.is_null() {
        CU_STREAM_PER_THREAD
    } else {
        stream as usize
    };
    let slot = Slot {
        function: id,
        key,
        stream,
        ctx,
        tid: platform::thread_id(),
        src,
        bytes,
        range,
        event,
        staging,
        watch,
    };
    NEXT.with(|n| *n.borrow_mut() = Some(slot));
    staging.map(|p| p as u64)
}

/// A prepared slot whose copy was refused, or never reached the driver: nothing reads its
/// staging buffer.
fn drop_unsubmitted(s: Slot) {
    if let Some(p) = s.staging {
        pool::give(p);
    }
    if let Some(e) = s.event {
        let _ = query::event_destroy(e as CUevent);
    }
    USED.fetch_sub(1, Ordering::Relaxed);
}

fn commit(r: CUresult) {
    let Some(mut s) = NEXT.with(|n| n.borrow_mut().take()) else {
        return;
    };
    if r.0 != 0 {
        drop_unsubmitted(s);
        return;
    }
    if let Some(e) = s.event {
        if query::event_record(e as CUevent, s.stream as CUstream).is_err() {
            let _ = query::event_destroy(e as CUevent);
            s.event = None;
        }
    }
    TABLE.lock().push(s);
}

/// Whether slot `s`'s copy completed: `Some(true)` done, `Some(false)` pending, `None`
/// unknown (the driver refused the question: its staging buffer is never reused).
fn done(s: &Slot) -> Option<bool> {
    match s.event {
        Some(e) => query::event_done(e as CUevent).ok(),
        None => query::with_context(s.ctx, || query::stream_busy(s.stream as CUstream))
            .ok()?
            .ok()
            .map(|busy| !busy),
    }
}

/// The shim learnt that work completed (a synchronisation, a successful query): every
/// watched copy that completed is compared with its digest and its slot is freed. One
/// relaxed load while nothing is watched.
#[inline(always)]
pub fn completed() {
    // No query of the shim's events while a stream capture is open: the shim makes no call
    // of its own then (docs/design.md, the model of work); the next completion after the
    // capture ends compares them.
    if USED.load(Ordering::Relaxed) != 0 && on() && !crate::faults::capture::open() {
        cold(poll);
    }
}

/// A slot taken from the table: whether its completion is known, and the first changed
/// chunk (address, bytes) its judgement found.
type Judged = (Slot, bool, Option<(u64, u64)>);

/// Judges every watched copy that completed. The judgement (the driver's answer, then the
/// comparison of the program's bytes) is made under the table's lock, per copy: a thread
/// whose synchronisation finds its own copy already taken by another thread's waits for
/// that judgement before it returns to the program, so its next write into the buffer can
/// never be compared against the copy it already saw complete. Reports are made after the
/// lock is released.
fn poll() {
    let finished: Vec<Judged> = {
        let mut t = TABLE.lock();
        let mut out = Vec::new();
        let mut i = 0;
        while i < t.len() {
            match done(&t[i]) {
                Some(false) => i += 1,
                d => {
                    let mut s = t.swap_remove(i);
                    let known = d == Some(true);
                    let changed = if known { judge(&mut s) } else { None };
                    out.push((s, known, changed));
                }
            }
        }
        out
    };
    for (s, known, changed) in finished {
        if let Some(changed) = changed {
            report_write(&s, changed);
        }
        finish(s, known);
    }
}

/// A slot whose copy completed (`known`, already judged), or whose completion the driver
/// cannot tell: its resources go back.
fn finish(s: Slot, known: bool) {
    if let Some(p) = s.staging {
        if known {
            pool::give(p);
        } else {
            pool::lose(p);
        }
    }
    if let Some(e) = s.event {
        let _ = query::event_destroy(e as CUevent);
    }
    USED.fetch_sub(1, Ordering::Relaxed);
}

/// Compares the program's bytes with the digest at submission (once: the watch ends);
/// the first changed chunk (address, bytes) if they differ.
fn judge(s: &mut Slot) -> Option<(u64, u64)> {
    let d = s.watch.take()?;
    match digest::first_difference(s.src, &d) {
        Some(Some((off, len))) => Some((s.src + off, len)),
        _ => None,
    }
}

/// Reports the host write found in slot `s`'s source (`changed`: address, bytes).
fn report_write(s: &Slot, changed: (u64, u64)) {
    report::host_write(&report::Write {
        function: s.function,
        key: s.key,
        tid: s.tid,
        src: s.src,
        bytes: s.bytes,
        range: &s.range,
        changed,
        snapshot: s.staging.is_some(),
    });
}

/// Stops watching the program's bytes of every slot `hit` selects (compared first).
fn release_where(hit: impl Fn(&Slot) -> bool) {
    if USED.load(Ordering::Relaxed) == 0 || !on() {
        return;
    }
    cold(|| {
        let found: Vec<(Slot, (u64, u64))> = {
            let mut t = TABLE.lock();
            t.iter_mut()
                .filter(|s| s.watch.is_some() && hit(s))
                .filter_map(|s| judge(s).map(|c| (s.report_copy(), c)))
                .collect()
        };
        for (s, changed) in found {
            report_write(&s, changed);
        }
    });
}

/// Host memory `[lo, hi)` is about to be written by an asynchronous copy: its bytes
/// change through the copy, not through a host write.
pub fn release_range(lo: u64, hi: u64) {
    release_where(|s| s.src < hi && s.src + s.bytes > lo);
}

/// The pinned range starting at `lo` is about to be freed or unregistered.
pub fn release_pinned(lo: u64) {
    release_where(|s| s.range.lo == lo);
}

/// Context `ctx` ended: its copies, events and staging memory went with it (nothing of
/// it is read, queried or freed).
pub fn context_ended(ctx: u64) {
    if USED.load(Ordering::Relaxed) == 0 || !on() {
        return;
    }
    cold(|| {
        let gone = {
            let mut t = TABLE.lock();
            let before = t.len();
            t.retain(|s| s.ctx as u64 != ctx);
            before - t.len()
        };
        USED.fetch_sub(gone, Ordering::Relaxed);
        pool::context_ended(ctx as usize);
    });
}
