//! The `SIGSEGV` handler of the host-write guard: installed at the first guarded copy (on
//! an alternate signal stack for the threads that make guarded copies), it recognises a
//! write into a guarded page, asks the driver whether the copy's stream is still busy (in
//! `fix` mode waits for it), records the write for the next report and makes the pages
//! writable again; a fault the shim does not guard goes to the handler installed before.
//! What it calls and why that is async-signal-safe: the parent module's documentation.

use super::{
    release, ARMED, FAULT, FAULT_ADDR, FAULT_FRAMES, FAULT_NFRAMES, FAULT_SLOT, FAULT_TID,
    FAULT_WAITED, FRAMES, GUARDS, MORE_FAULTS,
};
use crate::{driver::query, rt::config, rt::stderr};
use seedance_cuda::CUstream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static INSTALL: Once = Once::new();
/// Whether the handler is installed (set once, by [`install`]).
pub(super) static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The handler that was installed before ours.
static mut PREV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

/// Sets an alternate signal stack for the calling thread if it has none (once per thread;
/// the 64 KiB stack is kept for the thread's life, and reused by the next thread that
/// takes the thread-local slot only if the thread exits without one).
pub(super) fn alt_stack() {
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

pub(super) fn install() {
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
