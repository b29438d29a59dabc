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

use crate::{driver::query, platform, rt::config, rt::stderr};
use seedance_cuda::CUstream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Guarded copies at a time; a copy that finds no free slot is not guarded (counted).
const SLOTS: usize = 64;
/// Return addresses kept for a reported write.
const FRAMES: usize = 48;

const FREE: u32 = 0;
const ARMED: u32 = 1;
const BUSY: u32 = 2;

struct Slot {
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
static GUARDS: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Slots armed (a relaxed filter for the hooks).
static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Copies not guarded because every slot was in use (reported once).
static NO_SLOT: AtomicU64 = AtomicU64::new(0);

/// The handler that was installed before ours.
static mut PREV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

/// The one write recorded for the next report: 0 empty, 1 being written, 2 ready.
static FAULT: AtomicU32 = AtomicU32::new(0);
static FAULT_TID: AtomicU64 = AtomicU64::new(0);
static FAULT_ADDR: AtomicUsize = AtomicUsize::new(0);
static FAULT_WAITED: AtomicBool = AtomicBool::new(false);
static FAULT_SLOT: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
static FAULT_FRAMES: [AtomicUsize; FRAMES] = [const { AtomicUsize::new(0) }; FRAMES];
static FAULT_NFRAMES: AtomicUsize = AtomicUsize::new(0);
/// Writes caught after the first one's report was queued (handled, not reported).
static MORE_FAULTS: AtomicU64 = AtomicU64::new(0);

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
    install();
    if !INSTALLED.load(Ordering::Acquire) {
        return;
    }
    alt_stack();
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
fn release(i: usize) {
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

/// Sets an alternate signal stack for the calling thread if it has none (once per thread;
/// the 64 KiB stack is kept for the thread's life, and reused by the next thread that
/// takes the thread-local slot only if the thread exits without one).
fn alt_stack() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    let _ = DONE.try_with(|d| {
        if d.get() {
            return;
        }
        d.set(true);
        // SAFETY: queries the current alternate stack into a local.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: null new stack: a query only.
        if unsafe { libc::sigaltstack(std::ptr::null(), &mut old) } != 0
            || old.ss_flags & libc::SS_DISABLE == 0
        {
            return;
        }
        const SIZE: usize = 64 * 1024;
        let mem: &'static mut [u8] = Box::leak(vec![0u8; SIZE].into_boxed_slice());
        let st = libc::stack_t {
            ss_sp: mem.as_mut_ptr().cast(),
            ss_flags: 0,
            ss_size: SIZE,
        };
        // SAFETY: a leaked buffer of SIZE bytes, never freed.
        unsafe { libc::sigaltstack(&st, std::ptr::null_mut()) };
    });
}

fn install() {
    INSTALL.call_once(|| {
        // What the handler calls is resolved and warmed up here, outside it: the driver's
        // entry points (no dlsym in the handler) and the unwinder.
        query::resolve_for_signal_handler();
        // SAFETY: an empty walk of the current stack.
        unsafe { backtrace::trace_unsynchronized(|_| false) };
        // SAFETY: a zeroed sigaction is a valid starting point; the handler has the
        // SA_SIGINFO signature.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        // SAFETY: sa_mask is a valid sigset_t inside sa.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: PREV is written once here, before the handler can run (it is installed
        // by this very call), and only read by the handler afterwards.
        let ok = unsafe {
            libc::sigaction(
                libc::SIGSEGV,
                &sa,
                std::ptr::addr_of_mut!(PREV).cast::<libc::sigaction>(),
            ) == 0
        };
        INSTALLED.store(ok, Ordering::Release);
        if !ok {
            stderr::say("SEEDANCE_HOST_GUARD: could not install a SIGSEGV handler; guard off");
        }
    });
}

/// The previous handler, for faults that are not ours.
///
/// # Safety
/// Called from the signal handler with its arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: PREV was written by `install` before our handler was installed.
    let prev = unsafe { (*std::ptr::addr_of!(PREV)).assume_init_ref() };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Restore it and return: the faulting instruction runs again and the default
        // action (a core dump) happens with the right address.
        // SAFETY: prev is a valid sigaction.
        unsafe { libc::sigaction(libc::SIGSEGV, prev, std::ptr::null_mut()) };
        if h == libc::SIG_IGN {
            // An ignored SIGSEGV would fault forever: take the default.
            // SAFETY: SIG_DFL needs no handler.
            unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        }
        return;
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this three-argument handler for SIGSEGV.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, uctx);
    } else {
        // SAFETY: the program installed this one-argument handler for SIGSEGV.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let hit = GUARDS.iter().position(|s| {
        s.state.load(Ordering::Acquire) == ARMED
            && s.lo.load(Ordering::Relaxed) <= addr
            && addr < s.hi.load(Ordering::Relaxed)
    });
    let Some(i) = hit else {
        // SAFETY: forwarded with the kernel's arguments.
        unsafe { chain(sig, info, uctx) };
        return;
    };
    let s = &GUARDS[i];
    let stream = s.stream.load(Ordering::Relaxed) as CUstream;
    let ctx = s.ctx.load(Ordering::Relaxed);
    let busy = query::with_context(ctx, || query::stream_busy(stream))
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or(true);
    if busy {
        let waited = config::switches_now() & config::sw::FIX != 0
            && query::with_context(ctx, || query::stream_synchronize(stream))
                .is_ok_and(|r| r.is_ok());
        record(i, addr, waited);
    }
    // Every slot that covers the address: the write may span them.
    for (j, t) in GUARDS.iter().enumerate() {
        if t.state.load(Ordering::Acquire) == ARMED
            && t.lo.load(Ordering::Relaxed) <= addr
            && addr < t.hi.load(Ordering::Relaxed)
        {
            release(j);
        }
    }
}

/// Stores the write for the next report (only the first while one is pending).
fn record(i: usize, addr: usize, waited: bool) {
    if FAULT
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        MORE_FAULTS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let s = &GUARDS[i];
    // SAFETY: gettid has no preconditions and is async-signal-safe.
    FAULT_TID.store(
        unsafe { libc::syscall(libc::SYS_gettid) } as u64,
        Ordering::Relaxed,
    );
    FAULT_ADDR.store(addr, Ordering::Relaxed);
    FAULT_WAITED.store(waited, Ordering::Relaxed);
    for (k, v) in [
        s.function.load(Ordering::Relaxed),
        s.stream.load(Ordering::Relaxed),
        s.tid.load(Ordering::Relaxed) as usize,
        s.src.load(Ordering::Relaxed),
        s.bytes.load(Ordering::Relaxed),
        s.key.load(Ordering::Relaxed) as usize,
    ]
    .into_iter()
    .enumerate()
    {
        FAULT_SLOT[k].store(v, Ordering::Relaxed);
    }
    let mut n = 0;
    // SAFETY: the closure only stores into fixed atomics; no allocation, no lock of ours.
    unsafe {
        backtrace::trace_unsynchronized(|f| {
            FAULT_FRAMES[n].store(f.ip() as usize, Ordering::Relaxed);
            n += 1;
            n < FRAMES
        })
    };
    FAULT_NFRAMES.store(n, Ordering::Relaxed);
    FAULT.store(2, Ordering::Release);
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
