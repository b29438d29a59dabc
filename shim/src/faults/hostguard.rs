//! `SEEDANCE_HOST_GUARD=on`: the program's own host writes into the source of a pending
//! host-to-device copy from pinned memory.
//!
//! After such a copy is accepted by the driver, the whole pages that lie inside its source
//! bytes (which lie inside the pinned range: never a page shared with other data) are made
//! read-only (`mprotect`). The first write into them faults; the shim's `SIGSEGV` handler
//! (installed at the first guarded copy, on an alternate signal stack for the threads that
//! make guarded copies) recognises the address, asks the driver whether the copy's stream is
//! still busy (`cuStreamQuery`), and:
//!
//! * stream idle: the copy had completed; the pages are made writable again and the write
//!   proceeds, nothing is reported;
//! * busy, `fix` mode: waits for the stream (`cuStreamSynchronize`), so the copy reads the
//!   bytes from before the write, then makes the pages writable and lets the write proceed;
//! * busy, `observe` mode: makes the pages writable and lets the write proceed.
//!
//! A fault at an address the shim does not guard goes to the handler the program (or a
//! library) had installed before, or to the default action.
//!
//! The report (writing thread, the address and its offset in the pinned range, the copy,
//! and a symbolized backtrace from the `backtrace` crate) is not made in the handler: the
//! handler only stores the thread id and the return addresses of the faulting stack
//! (`backtrace::trace_unsynchronized`, into a fixed array, no allocation), and the next
//! synchronisation hook or the exit prints and traces it. Pages are made writable again
//! when the shim sees the copy complete (a synchronisation of its stream, context or an
//! event after it), before a hooked copy writes them, and before the range is freed or
//! unregistered.
//!
//! Async-signal-safety, and what is not: the handler itself calls only atomics, `mprotect`,
//! `gettid` and the stack walk, plus, for a guarded address, the two driver calls above
//! (their entry points are looked up when the handler is installed, never in it; the
//! unwinder is warmed up then too). The fault is synchronous (a store of the faulting thread into memory
//! the shim protected), so the handler interrupts that store, not arbitrary code; it can
//! deadlock only if the store was made while the thread held a lock the driver or the
//! unwinder needs: a write made by the driver itself on the CPU into a guarded page (its
//! copies use DMA, which page protection does not affect, and the shim unprotects before
//! forwarding any hooked copy that writes the range), from a host function
//! (`cuLaunchHostFunc`, where CUDA calls are forbidden anyway), or from code holding the
//! dynamic loader's lock (the stack walk's `dl_iterate_phdr`). Documented in
//! docs/configuration.md and docs/reliability.md.
//!
//! Cost, only with the setting on: two `mprotect` calls (protect, and unprotect at
//! completion) per guarded copy with at least one whole page in its source, and a fault
//! with one or two driver calls for the first write into a guarded page.

mod signal;

use crate::{platform, rt::config, rt::stderr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Guarded copies at a time; a copy that finds no free slot is not guarded (counted).
pub(super) const SLOTS: usize = 64;
/// Return addresses kept for a reported write.
pub(super) const FRAMES: usize = 48;

pub(super) const FREE: u32 = 0;
pub(super) const ARMED: u32 = 1;
pub(super) const BUSY: u32 = 2;

pub(super) struct Slot {
    state: AtomicU32,
    lo: AtomicUsize,
    hi: AtomicUsize,
    /// The stream argument as the copy had it, converted for the plain entry points.
    stream: AtomicUsize,
    /// The context current at the copy (for the stream's legacy default).
    ctx: AtomicUsize,
    /// Stream key, for completion by the synchronisation hooks.
    key: AtomicU64,
    /// Thread that made the copy.
    tid: AtomicU64,
    /// Index of the copy's hook (`HookId as usize`).
    function: AtomicUsize,
    /// First byte of the copy's source.
    src: AtomicUsize,
    /// Bytes of the copy.
    bytes: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    lo: AtomicUsize::new(0),
    hi: AtomicUsize::new(0),
    stream: AtomicUsize::new(0),
    ctx: AtomicUsize::new(0),
    key: AtomicU64::new(0),
    tid: AtomicU64::new(0),
    function: AtomicUsize::new(0),
    src: AtomicUsize::new(0),
    bytes: AtomicUsize::new(0),
};
pub(super) static GUARDS: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Slots armed (a relaxed filter for the hooks).
static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Copies not guarded because every slot was in use (reported once).
static NO_SLOT: AtomicU64 = AtomicU64::new(0);

/// The one write recorded for the next report: 0 empty, 1 being written, 2 ready.
pub(super) static FAULT: AtomicU32 = AtomicU32::new(0);
pub(super) static FAULT_TID: AtomicU64 = AtomicU64::new(0);
pub(super) static FAULT_ADDR: AtomicUsize = AtomicUsize::new(0);
pub(super) static FAULT_WAITED: AtomicBool = AtomicBool::new(false);
pub(super) static FAULT_SLOT: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
pub(super) static FAULT_FRAMES: [AtomicUsize; FRAMES] = [const { AtomicUsize::new(0) }; FRAMES];
pub(super) static FAULT_NFRAMES: AtomicUsize = AtomicUsize::new(0);
/// Writes caught after the first one's report was queued (handled, not reported).
pub(super) static MORE_FAULTS: AtomicU64 = AtomicU64::new(0);

/// Whether the guard is on: a bit of the configuration word (`SEEDANCE_HOST_GUARD` with
/// lifetime tracking; a forked child clears it).
#[inline(always)]
pub fn on() -> bool {
    config::switches_now() & config::sw::HOST_GUARD != 0
}

fn page() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let p = if p > 0 { p as usize } else { 4096 };
            PAGE.store(p, Ordering::Relaxed);
            p
        }
        p => p,
    }
}

fn protect(lo: usize, hi: usize, writable: bool) -> bool {
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: [lo, hi) are whole pages of a pinned range the program gave a copy; only
    // their protection changes, and only between read-only and read-write.
    unsafe { libc::mprotect(lo as *mut libc::c_void, hi - lo, prot) == 0 }
}

/// Guards the source of a host-to-device copy just accepted by the driver: `src`, `bytes`
/// on `stream` (as the plain entry points name it), made by hook `function` in context
/// `ctx` with stream key `key`.
pub fn arm(function: usize, src: u64, bytes: u64, stream: usize, ctx: usize, key: u64) {
    if !on() {
        return;
    }
    let p = page();
    let lo = (src as usize).div_ceil(p) * p;
    let hi = ((src as usize).saturating_add(bytes as usize) / p) * p;
    if lo >= hi {
        return;
    }
    signal::install();
    if !signal::INSTALLED.load(Ordering::Acquire) {
        return;
    }
    signal::alt_stack();
    let Some(i) = (0..SLOTS).find(|&i| {
        GUARDS[i]
            .state
            .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }) else {
        if NO_SLOT.fetch_add(1, Ordering::Relaxed) == 0 {
            stderr::say(&format!(
                "SEEDANCE_HOST_GUARD: {SLOTS} copies guarded at once already; later ones are \
                 not guarded until one completes"
            ));
        }
        return;
    };
    let s = &GUARDS[i];
    s.lo.store(lo, Ordering::Relaxed);
    s.hi.store(hi, Ordering::Relaxed);
    s.stream.store(stream, Ordering::Relaxed);
    s.ctx.store(ctx, Ordering::Relaxed);
    s.key.store(key, Ordering::Relaxed);
    s.tid.store(platform::thread_id(), Ordering::Relaxed);
    s.function.store(function, Ordering::Relaxed);
    s.src.store(src as usize, Ordering::Relaxed);
    s.bytes.store(bytes as usize, Ordering::Relaxed);
    s.state.store(ARMED, Ordering::Release);
    ARMED_COUNT.fetch_add(1, Ordering::Relaxed);
    if !protect(lo, hi, false) {
        let e = std::io::Error::last_os_error();
        release(i);
        stderr::say_once(
            "host_guard_mprotect",
            &format!(
                "SEEDANCE_HOST_GUARD: mprotect of pinned pages at {lo:#x} failed ({e}); \
                 those copies are not guarded"
            ),
        );
    }
}

/// Makes slot `i`'s pages writable again and frees it.
pub(super) fn release(i: usize) {
    let s = &GUARDS[i];
    if s.state
        .compare_exchange(ARMED, BUSY, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        protect(
            s.lo.load(Ordering::Relaxed),
            s.hi.load(Ordering::Relaxed),
            true,
        );
        s.state.store(FREE, Ordering::Release);
        ARMED_COUNT.fetch_sub(1, Ordering::Relaxed);
    }
}

fn release_where(f: impl Fn(&Slot) -> bool) {
    if ARMED_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    for (i, s) in GUARDS.iter().enumerate() {
        if s.state.load(Ordering::Acquire) == ARMED && f(s) {
            release(i);
        }
    }
}

/// The copies on stream key `key` completed.
pub fn key_completed(key: u64) {
    release_where(|s| s.key.load(Ordering::Relaxed) == key);
}

/// The copies in context `ctx` completed (or the context ended).
pub fn context_completed(ctx: usize) {
    release_where(|s| s.ctx.load(Ordering::Relaxed) == ctx);
}

/// Host memory `[lo, hi)` is about to be written by a hooked copy, freed or unregistered.
pub fn release_range(lo: u64, hi: u64) {
    release_where(|s| {
        (s.lo.load(Ordering::Relaxed) as u64) < hi && (s.hi.load(Ordering::Relaxed) as u64) > lo
    });
}

pub use crate::faults::guarded_write::Write;

/// Takes the recorded write, if any, and symbolizes its stack (outside the handler).
pub fn take() -> Option<Write> {
    if FAULT.load(Ordering::Acquire) != 2 {
        return None;
    }
    let n = FAULT_NFRAMES.load(Ordering::Relaxed);
    let mut frames = Vec::new();
    let mut ours = true;
    for f in FAULT_FRAMES.iter().take(n) {
        let ip = f.load(Ordering::Relaxed);
        let mut line = format!("{ip:#x}");
        let mut shim = false;
        backtrace::resolve(ip as *mut libc::c_void, |sym| {
            if let Some(name) = sym.name() {
                let name = name.to_string();
                shim |= name.contains("hostguard") || name.contains("trace_unsynchronized");
                line = format!("{ip:#x} {name}");
            }
            if let (Some(file), Some(l)) = (sym.filename(), sym.lineno()) {
                line.push_str(&format!(" ({}:{l})", file.display()));
            }
        });
        // Frames of the handler itself and the kernel's signal trampoline (often without a
        // symbol) come first; a null address ends the walk.
        if ip == 0 || (ours && (shim || !line.contains(' '))) {
            continue;
        }
        ours = false;
        frames.push(line);
    }
    let w = Write {
        tid: FAULT_TID.load(Ordering::Relaxed),
        addr: FAULT_ADDR.load(Ordering::Relaxed) as u64,
        waited: FAULT_WAITED.load(Ordering::Relaxed),
        function: FAULT_SLOT[0].load(Ordering::Relaxed),
        copy_tid: FAULT_SLOT[2].load(Ordering::Relaxed) as u64,
        src: FAULT_SLOT[3].load(Ordering::Relaxed) as u64,
        bytes: FAULT_SLOT[4].load(Ordering::Relaxed) as u64,
        key: FAULT_SLOT[5].load(Ordering::Relaxed) as u64,
        frames,
        more: MORE_FAULTS.load(Ordering::Relaxed),
    };
    FAULT.store(0, Ordering::Release);
    Some(w)
}

/// Whether a write waits to be reported (one relaxed load).
#[inline(always)]
pub fn pending_report() -> bool {
    FAULT.load(Ordering::Relaxed) == 2
}
