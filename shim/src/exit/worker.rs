//! The exit's own thread (`seedance-exit`): the exit's work (the session record's wait, the
//! lifetime confirmation, the report, the summary and the trace's flush) runs there, and the
//! exiting thread only waits for it.
//!
//! `exit()` may be called from a signal handler that interrupted the program anywhere:
//! inside `malloc` (the C library's arena lock is not re-entrant), inside a lock of the
//! shim's, inside the driver. Work done on the exiting thread itself would then wait for a
//! lock that thread holds, for ever. On a thread of its own the same work waits at worst
//! for a lock nobody will release, and the exiting thread, which waits with nothing but
//! atomics, a futex and the clock (no allocation, no lock, no descriptor), gives it up
//! once it has made no progress for [`bound`]: the exit goes on without the summary.
//!
//! The thread is started by the first `cuInit` the active shim sees (never in `off` mode,
//! never before CUDA is used, never in a forked child, whose exit does no work), with every
//! signal blocked ([`crate::platform::spawn_quiet`]), and waits parked until the exit asks
//! for a job. Without it (not started, or it could not be) the exit's work runs on the
//! exiting thread, as before. It costs nothing on the hooked calls: nothing there reads it.

use crate::platform;
use crate::rt::{config, output};
use once_cell::sync::OnceCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A job of the exit, in the order the exit asks for them.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Job {
    /// At the library's `.fini_array` entry ([`super::settle`]).
    Settle = 1,
    /// After every other destructor ([`super::shutdown`]).
    Shutdown = 2,
}

/// The thread, once started: the exit unparks it.
static THREAD: OnceCell<std::thread::Thread> = OnceCell::new();
/// Set by the first [`start`].
static STARTED: AtomicBool = AtomicBool::new(false);
/// The job the exit asked for last (0: none).
static ASKED: AtomicU32 = AtomicU32::new(0);
/// The job the thread finished last (0: none); the exiting thread waits on this word.
static DONE: AtomicU32 = AtomicU32::new(0);
/// Steps of the exit's work finished: with the trace's lines written, what the exiting
/// thread takes for progress.
static STEPS: AtomicU64 = AtomicU64::new(0);
/// Set when the exiting thread gave the work up: no later job is asked for.
static GAVE_UP: AtomicBool = AtomicBool::new(false);
/// The exiting thread's id, for the records the exit writes on its behalf.
static EXIT_TID: AtomicU64 = AtomicU64::new(0);
/// [`bound`], in milliseconds, fixed when the thread starts (the configuration is read
/// then; the exit reads only this word).
static BOUND_MS: AtomicU64 = AtomicU64::new(0);
/// The work of each job ([`Job::Settle`], [`Job::Shutdown`]), given to [`start`].
static WORK: OnceCell<[fn(); 2]> = OnceCell::new();

/// Longest the exit waits beyond `SEEDANCE_NVML_TIMEOUT` for a step of its work: the
/// session record's own wait ([`super::record::settle`]) is bounded by the same sum.
const MARGIN: Duration = Duration::from_millis(1000);

/// How often the exiting thread looks at the progress made while the work runs.
const LOOK: Duration = Duration::from_millis(20);

/// How long the exiting thread waits for the work while none of it makes progress:
/// `SEEDANCE_NVML_TIMEOUT` plus [`MARGIN`] (3 s by default).
fn bound() -> Duration {
    Duration::from_millis(BOUND_MS.load(Ordering::Relaxed))
}

/// Starts the thread, once (from the first `cuInit`'s `after` hook), to run `settle` and
/// `shutdown` when the exit asks. Nothing in a forked child; when the thread cannot be
/// started the exit's work stays on the exiting thread.
pub fn start(settle: fn(), shutdown: fn()) {
    if STARTED.load(Ordering::Acquire) || config::forked() || STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let _ = WORK.set([settle, shutdown]);
    let ms = Duration::from_millis(config::get().nvml_timeout_ms) + MARGIN;
    BOUND_MS.store(ms.as_millis() as u64, Ordering::Relaxed);
    if let Ok(handle) = platform::spawn_quiet("seedance-exit", serve) {
        let _ = THREAD.set(handle.thread().clone());
    }
}

/// The thread: runs each job the exit asks for, then says so on [`DONE`].
fn serve() {
    loop {
        let asked = ASKED.load(Ordering::Acquire);
        if asked != 0 && asked != DONE.load(Ordering::Acquire) {
            if let Some(work) = WORK.get() {
                let _ = std::panic::catch_unwind(work[asked as usize - 1]);
            }
            DONE.store(asked, Ordering::Release);
            platform::wake_word(&DONE);
            continue;
        }
        std::thread::park();
    }
}

/// Marks a step of the exit's work as done (progress for the exiting thread's wait).
pub fn step() {
    STEPS.fetch_add(1, Ordering::Release);
}

/// The exiting thread's id (the calling thread's when the work runs there).
pub fn exit_tid() -> u64 {
    match EXIT_TID.load(Ordering::Acquire) {
        0 => platform::thread_id(),
        t => t,
    }
}

/// Whether the exit gave its work up: the exit then writes nothing more.
pub fn gave_up() -> bool {
    GAVE_UP.load(Ordering::Acquire)
}

/// What the exiting thread takes for progress: steps finished, and lines the trace's
/// writer thread has written or counted as lost (a big trace takes a while to write).
fn progress() -> u64 {
    STEPS.load(Ordering::Acquire) + output::trace_writer().map_or(0, |w| w.written() + w.dropped())
}

/// Runs `job` on the exit's thread and waits for it while it makes progress, or `here` on
/// the calling thread when there is no such thread. Called on the exiting thread, possibly
/// from a signal handler that interrupted anything: past the thread's start, it allocates
/// nothing and takes no lock (atomics, `futex`, the monotonic clock).
pub fn run(job: Job, here: fn()) {
    if gave_up() {
        return;
    }
    let Some(thread) = THREAD.get() else {
        here();
        return;
    };
    EXIT_TID.store(platform::thread_id(), Ordering::Release);
    ASKED.store(job as u32, Ordering::Release);
    thread.unpark();
    let bound = bound();
    let mut seen = progress();
    let mut since = Instant::now();
    loop {
        let done = DONE.load(Ordering::Acquire);
        if done == job as u32 {
            return;
        }
        let now = Instant::now();
        let p = progress();
        if p != seen {
            seen = p;
            since = now;
        }
        let idle = now.saturating_duration_since(since);
        if idle >= bound {
            GAVE_UP.store(true, Ordering::Release);
            return;
        }
        platform::wait_word(&DONE, done, LOOK.min(bound - idle));
    }
}
