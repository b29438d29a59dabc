//! Process-wide state of the shim: configuration, mode, the trace, and what wrappers report.
//!
//! Start-up is lazy and in stages. The configuration is read on the first intercepted
//! look-up or call (never in a library constructor, so programs that never touch CUDA pay
//! nothing and see nothing). The trace file is created on the first event: a successful
//! `cuInit` or a failed call. Its first record is always `session_start`; `exit_summary`
//! is written by the library destructor at normal exit.
//!
//! The fast path ([`active`], [`count`]) is one relaxed load and a per-thread counter bump;
//! everything else runs only after a failure or once per process.

use crate::hooks::{slots, HookId};
use crate::platform;
use crate::rt::args::ArgVal;
use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use seedance_core::{Config, Counters, ErrorTally, Mode, RawConfig};
use seedance_cuda::CUresult;
use seedance_trace::{
    CallFailed, DeviceInfo, Event, ExitSummary, FunctionStats, SessionStart, TraceFile, TraceWriter,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CStr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The bits of the configuration word ([`switches`]).
pub mod sw {
    /// The configuration has been read (until then every other bit is clear).
    pub const READ: u32 = 1;
    /// Mode `observe` or `fix`: wrappers count, explain and trace; look-ups are swapped.
    pub const ACTIVE: u32 = 1 << 1;
    /// Mode `fix`: the documented repairs.
    pub const FIX: u32 = 1 << 2;
    /// `SEEDANCE_VALIDATE=pre` (with the mode active): launches and allocations checked
    /// before the call.
    pub const PRE: u32 = 1 << 3;
    /// `SEEDANCE_LIFETIME` on (with the mode active): lifetime tracking.
    pub const LIFETIME: u32 = 1 << 4;
    /// `SEEDANCE_QUIET`: no stderr lines (the panic hook's included).
    pub const QUIET: u32 = 1 << 5;
    /// `SEEDANCE_FALLBACK` on (with `fix`): requests for unusable devices go elsewhere.
    pub const FALLBACK: u32 = 1 << 6;
    /// Some context ended with device allocations in it (set by the lifetime tracker):
    /// frees and allocations check the dead-address table.
    pub const ANY_DEAD: u32 = 1 << 7;
    /// This process is a child created by `fork()`: it only forwards.
    pub const FORKED: u32 = 1 << 8;
}

/// The configuration word: every switch a wrapper reads ([`sw`]), in one atomic, so that
/// one relaxed load answers any of them and the fork handler turns them all off in one
/// store. Written once when the configuration is read; `ANY_DEAD` is or-ed in later.
static WORD: AtomicU32 = AtomicU32::new(0);

/// The configuration word (reading the configuration first if that has not happened).
#[inline(always)]
pub fn switches() -> u32 {
    let w = WORD.load(Ordering::Relaxed);
    if w & sw::READ != 0 {
        w
    } else {
        read_switches()
    }
}

#[cold]
#[inline(never)]
fn read_switches() -> u32 {
    config();
    WORD.load(Ordering::Relaxed)
}

/// The configuration word as it is, without reading the configuration: all clear before
/// it is read (for hooks that may run first, and the panic hook).
#[inline(always)]
pub fn switches_now() -> u32 {
    WORD.load(Ordering::Relaxed)
}

/// Sets `bit` (only [`sw::ANY_DEAD`] changes after start-up). Not in a forked child.
pub fn set_switch(bit: u32) {
    let _ = WORD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
        (w & sw::FORKED == 0).then_some(w | bit)
    });
}

/// The word for a validated configuration.
fn word_of(cfg: &Config) -> u32 {
    let mut w = sw::READ;
    if cfg.quiet {
        w |= sw::QUIET;
    }
    if cfg.mode != Mode::Off {
        w |= sw::ACTIVE;
        if cfg.mode == Mode::Fix {
            w |= sw::FIX;
            if cfg.fallback {
                w |= sw::FALLBACK;
            }
        }
        if cfg.validate == seedance_core::Validate::Pre {
            w |= sw::PRE;
        }
        if cfg.lifetime {
            w |= sw::LIFETIME;
        }
    }
    w
}

static CONFIG: OnceCell<Config> = OnceCell::new();
static STATE: OnceCell<State> = OnceCell::new();

struct State {
    start_ns: u64,
    tally: ErrorTally,
    trace: OnceCell<Option<TraceWriter>>,
    /// Events from before the first `cuInit` returned, held back so that the trace's
    /// session_start (written when the trace is created) can list the devices.
    pending: Mutex<Vec<(u64, Event)>>,
    /// Whether `pending` may hold events: set (under its lock) when one is queued, cleared
    /// when the queue is written out. While it is set, an event written directly would
    /// overtake the held ones, so [`emit`] writes the queue out first.
    held: AtomicBool,
    pending_dropped: std::sync::atomic::AtomicU64,
    unmatched: Mutex<BTreeSet<String>>,
    said: Mutex<BTreeSet<String>>,
    /// Failures by kind (function, result, argument names), for counting repeats past
    /// [`seedance_trace::REPEAT_RECORDS`] instead of writing each.
    repeats: Mutex<BTreeMap<RepeatKey, Repeats>>,
}

/// What makes two failures the same kind: function, result, and the names of the
/// arguments recorded (their shape; the values differ from call to call).
type RepeatKey = (usize, u32, Vec<String>);

/// One kind of failure: how many `call_failed` records were written, and the ones after.
#[derive(Default)]
struct Repeats {
    written: u64,
    later: Option<seedance_trace::CallFailedRepeats>,
}

/// The validated configuration, read from the environment on first use. Bad values are
/// announced once on stderr and replaced by defaults.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| {
        // A setuid/setgid or capability-raised process (AT_SECURE) must not let its caller
        // steer the shim: every SEEDANCE_* variable is ignored (no trace, no library path
        // override), as the dynamic loader itself ignores LD_LIBRARY_PATH there.
        crate::rt::guard::install_panic_hook();
        let raw = if platform::secure_execution() {
            RawConfig::default()
        } else if let Some(env) = platform::environment_before_libc_init() {
            // A driver call from a `.preinit_array` function: libc's `environ` is not set
            // up yet, and the configuration is read only once.
            RawConfig::from_vars(env)
        } else {
            RawConfig::from_env()
        };
        let (cfg, warnings) = Config::from_raw(&raw);
        let _cancel = crate::rt::guard::NoCancel::new();
        for w in &warnings {
            eprintln!("seedance: {w}");
        }
        let (selectors, warnings) = cfg
            .exclude_devices
            .as_deref()
            .map(seedance_topology::explain::parse_exclusions)
            .unwrap_or_default();
        for w in &warnings {
            eprintln!("seedance: {w}");
        }
        let _ = EXCLUSIONS.set(selectors);
        crate::faults::hostguard::configure(&cfg);
        let w = word_of(&cfg);
        WORD.fetch_or(w, Ordering::Release);
        if w & sw::ACTIVE != 0 {
            platform::on_fork(fork_prepare, fork_parent, forked_child);
        }
        cfg
    })
}

/// `pthread_atfork` child handler. A forked child keeps a copy of the shim's state but not
/// its threads: the trace writer's thread is gone, and a lock another thread held at the
/// fork stays held forever. So the child switches to forwarding only (as `SEEDANCE_MODE=off`:
/// no counting, no pre-checks, no lifetime tracking, no trace, no lock taken) and writes no
/// trace of its own; the parent's trace is untouched. Every switch is a bit of one word, so
/// this one store turns them all off. A child that calls `exec` starts afresh from its
/// environment.
extern "C" fn forked_child() {
    WORD.store(sw::READ | sw::FORKED, Ordering::Relaxed);
    // The child has only the forking thread: no query is running in it.
    FORK_GATE.store(0, Ordering::Release);
    let _ = CLOSED_GATE.try_with(|c| c.set(false));
}

/// The fork gate: [`GATE_FORKING`] while a thread is forking, and below it the number of
/// the shim's own bursts of driver queries in flight ([`hold_fork`]).
///
/// The shim queries the driver on threads of its own (the session record's, started by the
/// first `cuInit`: device count, names, PCI bus ids, memory, version). Were the program to
/// fork while such a query is inside the driver, the child would inherit the driver's lock
/// taken by a thread it does not have, and its first driver call would wait forever (seen
/// under qemu-user, where that thread is slow: the fake driver's lock; docs/reliability.md).
/// Without the shim the program has no such thread. So a fork waits, in its prepare
/// handler, until the queries in flight are done, and no new one starts until it is over.
static FORK_GATE: AtomicU32 = AtomicU32::new(0);

/// The bit of [`FORK_GATE`] set from a fork's prepare handler to its parent handler.
const GATE_FORKING: u32 = 1 << 31;

/// Longest a fork waits for the shim's queries in flight (natively they take microseconds),
/// and a query for a fork; past it each goes on as without the gate (fail open: a query
/// that cannot finish, e.g. waiting for a driver lock the forking thread holds, never
/// blocks the fork for longer).
const FORK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How often a waiter looks at the gate again.
const GATE_POLL: std::time::Duration = std::time::Duration::from_micros(200);

thread_local! {
    /// This thread's prepare handler set [`GATE_FORKING`]: its parent handler clears it.
    static CLOSED_GATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A burst of the shim's own driver queries in flight: a fork waits for its end
/// ([`FORK_GATE`]). Taken by [`hold_fork`], released when dropped.
pub struct ForkHold(bool);

impl Drop for ForkHold {
    fn drop(&mut self) {
        if self.0 {
            FORK_GATE.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Marks the start of a burst of the shim's own driver queries (held until the returned
/// value is dropped). Waits while another thread forks (at most [`FORK_WAIT`]).
pub fn hold_fork() -> ForkHold {
    let started = std::time::Instant::now();
    loop {
        let g = FORK_GATE.load(Ordering::Acquire);
        if g & GATE_FORKING == 0 {
            if FORK_GATE
                .compare_exchange_weak(g, g + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return ForkHold(true);
            }
            continue;
        }
        if started.elapsed() >= FORK_WAIT {
            return ForkHold(false);
        }
        std::thread::sleep(GATE_POLL);
    }
}

/// `pthread_atfork` prepare handler: closes the gate, then waits until the shim's queries in
/// flight are done (each at most [`FORK_WAIT`]).
extern "C" fn fork_prepare() {
    let started = std::time::Instant::now();
    loop {
        let g = FORK_GATE.load(Ordering::Acquire);
        if g & GATE_FORKING == 0 {
            if FORK_GATE
                .compare_exchange_weak(g, g | GATE_FORKING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                break;
            }
            continue;
        }
        // Another thread forks at the same time.
        if started.elapsed() >= FORK_WAIT {
            return;
        }
        std::thread::sleep(GATE_POLL);
    }
    let _ = CLOSED_GATE.try_with(|c| c.set(true));
    while FORK_GATE.load(Ordering::Acquire) & !GATE_FORKING != 0 && started.elapsed() < FORK_WAIT {
        std::thread::sleep(GATE_POLL);
    }
}

/// `pthread_atfork` parent handler: opens the gate this thread's prepare handler closed.
extern "C" fn fork_parent() {
    if CLOSED_GATE.try_with(|c| c.replace(false)).unwrap_or(false) {
        FORK_GATE.fetch_and(!GATE_FORKING, Ordering::Release);
    }
}

fn forked() -> bool {
    switches_now() & sw::FORKED != 0
}

/// The parsed `SEEDANCE_EXCLUDE_DEVICES` selectors (bad entries announced once and skipped).
pub fn exclusions() -> &'static [seedance_topology::DeviceSelector] {
    config();
    EXCLUSIONS.get().map_or(&[], Vec::as_slice)
}

/// `SEEDANCE_EXCLUDE_DEVICES`, parsed with the rest of the configuration so that a bad
/// entry is announced at start-up with the other bad values.
static EXCLUSIONS: OnceCell<Vec<seedance_topology::DeviceSelector>> = OnceCell::new();

/// `true` unless `SEEDANCE_MODE=off`: wrappers count and report, look-ups are swapped.
#[inline(always)]
pub fn active() -> bool {
    switches() & sw::ACTIVE != 0
}

/// `true` when `dlsym` and `cuGetProcAddress` look-ups should be answered with wrappers.
/// In `off` mode they pass through untouched, so only `-lcuda` callers reach a wrapper,
/// which then only forwards.
#[inline]
pub fn interposing() -> bool {
    active()
}

fn state() -> &'static State {
    STATE.get_or_init(|| State {
        start_ns: seedance_trace::writer::now_ns(),
        tally: ErrorTally::new(),
        trace: OnceCell::new(),
        pending: Mutex::new(Vec::new()),
        held: AtomicBool::new(false),
        pending_dropped: std::sync::atomic::AtomicU64::new(0),
        unmatched: Mutex::new(BTreeSet::new()),
        repeats: Mutex::new(BTreeMap::new()),
        said: Mutex::new(BTreeSet::new()),
    })
}

/// Counts one call of `id` (and an error if `r` is not success). Hot path.
#[inline(always)]
pub fn count(id: HookId, r: CUresult) {
    Counters::global().record(id as usize, r.0 != 0);
}

/// One line on stderr, `seedance: ...`, unless `SEEDANCE_QUIET` is set.
pub fn say(msg: &str) {
    if switches() & sw::QUIET == 0 {
        // `write` is a cancellation point: a thread with a pending cancel must not be
        // unwound from inside the shim (`guard::NoCancel`).
        let _cancel = crate::rt::guard::NoCancel::new();
        eprintln!("seedance: {msg}");
    }
}

/// Like [`say`], but only the first time `key` is seen in this process.
pub fn say_once(key: &str, msg: &str) {
    if state().said.lock().insert(key.to_string()) {
        say(msg);
    }
}

/// A wrapper was called but the real function cannot be found (no libcuda, or a driver
/// without this entry point). Returns `CUDA_ERROR_NOT_FOUND` (500); one stderr line per
/// function when a driver is loaded but lacks it, none when no driver could be loaded (that
/// was said once already).
#[cold]
pub fn missing(id: HookId) -> CUresult {
    let r = CUresult::CUDA_ERROR_NOT_FOUND;
    if active() {
        count(id, r);
        let Some(_inside) = crate::rt::guard::enter() else {
            return r;
        };
        if crate::driver::real::libcuda().is_null() {
            // No driver at all: `real::libcuda` said so once; a line per function would
            // blame a driver that is not there. A `cuInit` still starts the trace, so the
            // process's record shows the failed calls (session_start without a driver).
            if id == HookId::cuInit {
                on_init(r);
            }
            return r;
        }
        say_once(
            &format!("missing:{}", id.name()),
            &format!(
                "{} is not provided by the loaded CUDA driver; returning CUDA_ERROR_NOT_FOUND",
                id.name()
            ),
        );
    }
    r
}

/// Reports a failed call: counted by result, an event in the trace, and one stderr line per
/// distinct (function, result). Never panics into the caller.
#[cold]
#[inline(never)]
pub fn failed(id: HookId, r: CUresult, args: &[(&str, ArgVal)]) {
    // A failure inside a signal handler that interrupted the shim's own work on this
    // thread (which may hold the tally's lock): counted by the wrapper, not reported.
    let Some(_inside) = crate::rt::guard::enter() else {
        return;
    };
    let _ = std::panic::catch_unwind(|| report_failure(id, r, args));
}

fn report_failure(id: HookId, r: CUresult, args: &[(&str, ArgVal)]) {
    crate::rt::guard::test_panic("call_failed");
    let st = state();
    let first = st.tally.add(id as usize, r.0);
    if first && announce(id, r) {
        let shown: Vec<String> = args
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_json()))
            .collect();
        let what = match r.info() {
            Some(i) => format!("{} ({}): {}", i.name, i.code, i.description),
            None => format!("{} (not in the CUDA 13.0 table)", r.0),
        };
        say(&format!(
            "{}({}) returned {what}",
            id.name(),
            shown.join(", ").replace('"', "")
        ));
        if r == CUresult::CUDA_ERROR_STUB_LIBRARY {
            let path =
                crate::driver::real::library_path_of(slots::cuInit.get()).unwrap_or_default();
            say_once(
                "stub",
                &format!(
                    "the libcuda in use ({path}) is the CUDA toolkit's stub library, not the \
                     NVIDIA driver: put the driver's libcuda.so.1 first on the library path, \
                     or set SEEDANCE_LIBCUDA to it"
                ),
            );
        }
    }
    let result_name = if id == HookId::cudaSetDevice {
        None
    } else {
        r.name().map(str::to_string)
    };
    if config().trace_dir.is_none() {
        return;
    }
    let json: BTreeMap<String, serde_json::Value> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .collect();
    // The first REPEAT_RECORDS failures of a kind are written one by one; later ones are
    // counted, with the first and last kept, and written at exit (`write_repeats`).
    let key: RepeatKey = (
        id as usize,
        r.0,
        args.iter().map(|(k, _)| k.to_string()).collect(),
    );
    {
        let mut repeats = st.repeats.lock();
        let kind = repeats.entry(key).or_default();
        if kind.written >= seedance_trace::REPEAT_RECORDS {
            let now = seedance_trace::writer::now_ns();
            let tid = platform::thread_id();
            match &mut kind.later {
                Some(l) => {
                    l.count += 1;
                    l.last_ts_ns = now;
                    l.last_tid = tid;
                    l.last_args = json;
                }
                None => {
                    kind.later = Some(seedance_trace::CallFailedRepeats {
                        function: id.name().to_string(),
                        result: r.0,
                        result_name,
                        count: 1,
                        first_ts_ns: now,
                        last_ts_ns: now,
                        last_tid: tid,
                        first_args: json.clone(),
                        last_args: json,
                    })
                }
            }
            return;
        }
        kind.written += 1;
    }
    emit(Event::CallFailed(CallFailed {
        function: id.name().to_string(),
        result: r.0,
        result_name,
        args: json,
    }));
}

/// Writes one `call_failed_repeats` record per kind of failure that went past
/// [`seedance_trace::REPEAT_RECORDS`], in a fixed order (by the function's place in the hook
/// table, `shim/src/hooks.rs`, then result and argument names).
fn write_repeats(st: &State, w: &TraceWriter) {
    let repeats = std::mem::take(&mut *st.repeats.lock());
    for (_, kind) in repeats {
        if let Some(later) = kind.later {
            w.emit(platform::thread_id(), Event::CallFailedRepeats(later));
        }
    }
}

/// Whether a failure deserves a stderr line. Not announced (still counted and traced):
/// `cuGetProcAddress` misses, which are how the runtime probes for optional entry points,
/// and `CUDA_ERROR_DEINITIALIZED`, which the runtime's own teardown gets at every exit
/// (measured on an H200, driver 580.159: cudart's final `cuDevicePrimaryCtxRelease`).
fn announce(id: HookId, r: CUresult) -> bool {
    let is_probe = matches!(id, HookId::cuGetProcAddress | HookId::cuGetProcAddress_v2);
    !is_probe && r != CUresult::CUDA_ERROR_DEINITIALIZED
}

/// Called after every `cuInit`. The first call, success or not, starts the trace: its
/// session_start lists the devices when the driver initialised, and the events held back
/// until then follow it.
///
/// The session record needs device queries and NVML, which took about 21 ms on an H200
/// (driver 580.159), mostly `nvmlInit`; so it is built on a short-lived thread and `cuInit`
/// returns at once. Events meanwhile wait in the pending queue; a device fault that needs
/// the topology, or the exit summary, waits for the thread. NVML's part waits at most
/// `SEEDANCE_NVML_TIMEOUT` ([`crate::driver::nvml`]), so a hung NVML delays neither for longer.
pub fn on_init(_r: CUresult) {
    crate::rt::metrics::start();
    let st = state();
    if st.trace.get().is_some() || config().trace_dir.is_none() {
        return;
    }
    if INIT_STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let start = || {
        let _ = std::panic::catch_unwind(|| {
            if let Some(w) = trace() {
                flush_pending(w);
            }
        });
    };
    if std::thread::Builder::new()
        .name("seedance-init".into())
        .spawn(start)
        .is_err()
    {
        start();
    }
}

/// Set once the session record's thread has been started by the first `cuInit`.
static INIT_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Waits for the session record, if the first `cuInit` started one. Called from the
/// library's `.fini_array` entry, while libcuda and libnvidia-ml are still initialised.
pub fn settle() {
    if INIT_STARTED.load(Ordering::Acquire) && !forked() {
        let _ = std::panic::catch_unwind(|| {
            if let Some(w) = trace() {
                flush_pending(w);
            }
        });
    }
}

/// Most events held back before the first `cuInit`; more are counted as dropped.
const MAX_PENDING: usize = 256;

/// Writes the held-back events, in the order they came. The queue's lock is held while
/// they are written, so no event emitted meanwhile lands in the trace before them.
fn flush_pending(w: &TraceWriter) {
    let st = state();
    write_held(st, w, &mut st.pending.lock());
}

fn write_held(st: &State, w: &TraceWriter, pending: &mut Vec<(u64, Event)>) {
    for (tid, event) in pending.drain(..) {
        emit_to(w, tid, event);
    }
    st.held.store(false, Ordering::Release);
}

/// Notes a base name whose `cuGetProcAddress` pointer matched none of our variants.
pub fn note_unmatched(base: &CStr) {
    // A look-up made from a signal handler that interrupted this very insert finds the
    // lock taken by its own thread: the name is left out rather than waited for.
    if let Some(mut set) = state()
        .unmatched
        .try_lock_for(std::time::Duration::from_millis(50))
    {
        set.insert(base.to_string_lossy().into_owned());
    }
}

/// Queues `event` with `w`; the first record past the trace's size limit says so, once.
fn emit_to(w: &TraceWriter, tid: u64, event: Event) {
    w.emit(tid, event);
    if w.take_limit_reached() {
        say(&format!(
            "the trace reached its size limit (SEEDANCE_TRACE_MAX_BYTES={} bytes); later \
             records are counted in its exit summary (records_over_limit), not written",
            w.max_bytes()
        ));
    }
}

/// Queues an event for the trace (held back until the trace starts, dropped without one).
pub fn emit(event: Event) {
    let st = state();
    match st.trace.get() {
        Some(Some(w)) => {
            // The trace is set before the session record's thread writes out the events
            // held back until then: an event of this thread must not overtake them (it
            // happened after them). Under emulation (docs/reliability.md) that thread is
            // slow enough for this to show.
            let _in_order = st.held.load(Ordering::Acquire).then(|| {
                let mut pending = st.pending.lock();
                write_held(st, w, &mut pending);
                pending
            });
            emit_to(w, platform::thread_id(), event);
        }
        Some(None) => {}
        None => {
            if config().trace_dir.is_none() {
                return;
            }
            let mut pending = st.pending.lock();
            if pending.len() < MAX_PENDING {
                pending.push((platform::thread_id(), event));
                st.held.store(true, Ordering::Release);
            } else {
                st.pending_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The trace writer, created (with its session_start record) on first use, which is the
/// first `cuInit` or, for a process that never calls it, exit; `None` when no trace
/// directory is configured or the file cannot be created (said once).
fn trace() -> Option<&'static TraceWriter> {
    let st = state();
    st.trace
        .get_or_init(|| {
            let dir = config().trace_dir.as_ref()?;
            let host = hostname().unwrap_or_else(|| "unknown".into());
            match TraceFile::create(dir, &host, std::process::id(), st.start_ns) {
                Ok(file) => {
                    let path = file.path.display().to_string();
                    let w = TraceWriter::start_with_limit(
                        file,
                        Box::new(move |e| {
                            say(&format!(
                                "writing the trace {path} failed ({e}); nothing more is written \
                                 to it and the records are counted as dropped"
                            ))
                        }),
                        config().trace_max_bytes,
                    );
                    w.emit(
                        platform::thread_id(),
                        Event::SessionStart(Box::new(session_start(host))),
                    );
                    Some(w)
                }
                Err(e) => {
                    say(&format!("no trace will be written: {e}"));
                    None
                }
            }
        })
        .as_ref()
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
}

fn session_start(host: String) -> SessionStart {
    let init = slots::cuInit.get();
    let devices = crate::driver::query::devices();
    SessionStart {
        shim_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: config().mode.as_str().to_string(),
        executable: std::env::current_exe()
            .ok()
            .map(|p| p.to_string_lossy().into_owned()),
        argv: program_arguments(),
        hostname: Some(host),
        driver_version: crate::driver::query::driver_version(),
        libcuda_path: if init.is_null() {
            None
        } else {
            crate::driver::real::library_path_of(init)
        },
        // At most MAX_SHOWN bytes of each, as in the messages: a hostile value must not
        // make every trace line of a fleet 128 KiB long.
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        cuda_device_order: std::env::var("CUDA_DEVICE_ORDER")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        topology: (!devices.is_empty()).then(|| crate::driver::topo::get().clone()),
        devices: devices
            .into_iter()
            .map(|d| DeviceInfo {
                ordinal: d.ordinal,
                name: d.name,
                pci_bus_id: d.pci_bus_id,
                total_mem_bytes: d.total_mem_bytes,
            })
            .collect(),
    }
}

/// The program's arguments. `std::env::args` is filled by an initialiser of this library,
/// which has not run yet when the first driver call comes from the program's
/// `.preinit_array` or a constructor that runs before ours, and the session record is built
/// on its own thread at once: then it is empty, and the kernel's copy is read instead.
fn program_arguments() -> Vec<String> {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !args.is_empty() {
        return args;
    }
    let Ok(raw) = std::fs::read("/proc/self/cmdline") else {
        return args;
    };
    let raw = raw.strip_suffix(&[0]).unwrap_or(&raw);
    if raw.is_empty() {
        return args;
    }
    raw.split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Writes the exit summary and flushes the trace. Called once, from the library destructor.
pub fn shutdown() {
    if forked() {
        return;
    }
    // The lifetime report (and its one stderr paragraph) comes first: it is printed
    // whether or not a trace is written.
    let _ = crate::faults::lifetime::exit_report();
    let Some(st) = STATE.get() else { return };
    crate::rt::metrics::write(&build_summary(st, 0));
    if st.trace.get().is_none() && st.pending.lock().is_empty() {
        return;
    }
    let Some(w) = trace() else { return };
    flush_pending(w);
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| write_repeats(st, w)));
    // A failure while building the summary must not keep what was written from the file.
    let summary = std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("exit_summary");
        let mut s = build_summary(st, w.dropped());
        s.cuda_libraries = cuda_libraries();
        s.records_over_limit = w.over_limit();
        s
    }));
    if let Ok(summary) = summary {
        w.emit(platform::thread_id(), Event::ExitSummary(summary));
    }
    w.close();
}

/// Most bytes of `/proc/self/maps` read for the library list (a process maps a few hundred
/// files; a pathological one cannot make the exit read without end).
const MAX_MAPS_BYTES: u64 = 4 << 20;

/// The CUDA libraries mapped into the process now, with their file-name versions
/// ([`seedance_core::libraries`]). Cold: once, at exit.
fn cuda_libraries() -> Vec<seedance_trace::CudaLibrary> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let Ok(f) = std::fs::File::open("/proc/self/maps") else {
        return Vec::new();
    };
    if f.take(MAX_MAPS_BYTES).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    seedance_core::libraries::from_maps(&String::from_utf8_lossy(&bytes))
        .into_iter()
        .map(|l| seedance_trace::CudaLibrary {
            name: l.name.to_string(),
            path: l.path,
            version: l.version,
        })
        .collect()
}

/// The counters as an exit summary (also what the metrics file shows). `dropped` is the
/// writer's count of dropped records.
fn build_summary(st: &State, dropped: u64) -> ExitSummary {
    let counts = Counters::global().snapshot();
    let mut functions: BTreeMap<String, FunctionStats> = BTreeMap::new();
    for id in HookId::ALL {
        let c = counts[*id as usize];
        if c.calls > 0 {
            functions.insert(
                id.name().to_string(),
                FunctionStats {
                    calls: c.calls,
                    errors: c.errors,
                    errors_by_result: BTreeMap::new(),
                },
            );
        }
    }
    for ((fid, code), n) in st.tally.snapshot() {
        let Some(id) = HookId::ALL.get(fid) else {
            continue;
        };
        let key = match CUresult(code).name() {
            Some(name) if *id != HookId::cudaSetDevice => name.to_string(),
            _ => code.to_string(),
        };
        let stats = functions.entry(id.name().to_string()).or_default();
        *stats.errors_by_result.entry(key).or_insert(0) += n;
    }
    let mut repairs = crate::faults::devices::repairs();
    repairs.extend(crate::faults::lifetime::repairs());
    let mut summary = ExitSummary {
        duration_ns: seedance_trace::writer::now_ns().saturating_sub(st.start_ns),
        functions,
        dropped_records: dropped + st.pending_dropped.load(Ordering::Relaxed),
        procaddr_unmatched: st.unmatched.lock().iter().cloned().collect(),
        repairs,
        fallbacks: crate::faults::devices::fallbacks(),
        device_questions: crate::faults::devices::questions(),
        ..ExitSummary::default()
    };
    if let Some(r) = crate::faults::lifetime::exit_report_if_ready() {
        summary.live_contexts = r.live_contexts.clone();
        summary.leaked_allocations = r.leaked_allocations.clone();
        summary.unsynchronized_streams = r.unsynchronized_streams.clone();
        summary.calls_after_deinit = r.calls_after_deinit.clone();
    }
    (summary.device_use, summary.stray_contexts) = crate::faults::lifetime::stray_summary();
    summary.runtime_probes = crate::interpose::procaddr::probes();
    summary
}

/// At the library's `.fini_array` entry, while the driver is still up: lets the lifetime
/// tracker confirm pending work and attribute live allocations for the exit report.
pub fn settle_lifetimes() {
    if !forked() {
        crate::faults::lifetime::settle();
    }
}

/// The current counters as a summary, for the periodic metrics file; `None` before the
/// session exists or in a forked child.
pub fn current_summary() -> Option<ExitSummary> {
    if forked() {
        return None;
    }
    let st = STATE.get()?;
    let dropped = match st.trace.get() {
        Some(Some(w)) => w.dropped(),
        _ => 0,
    };
    Some(build_summary(st, dropped))
}

/// Counts one failure of `id` with `code` for the exit summary; `true` the first time this
/// (function, code) pair is seen.
pub fn tally_error(id: HookId, code: CUresult) -> bool {
    state().tally.add(id as usize, code.0)
}
