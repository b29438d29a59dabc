//! The output path: what the wrappers and fault modules report, and where it goes: the
//! trace ([`emit`]: events held back until the trace starts), the call counters ([`count`],
//! hot path), and the generic failure report ([`failed`]: the one formatter of a failed
//! call, `function(args) returned NAME (code): description`). Stderr lines, and the one
//! deduplication of repeated messages, are [`crate::rt::stderr`]'s.
//!
//! The trace file is created on the first event that needs it: a `cuInit` (the session
//! record, `shim/src/exit/record.rs`, hands its `session_start` to [`start_trace`]) or
//! exit. Its first record is always `session_start`; `exit_summary` is written at normal
//! exit (`shim/src/exit.rs`).
//!
//! The fast path ([`count`]) is a per-thread counter bump; everything else runs only after
//! a failure or once per process.

use crate::hooks::ids::{slots, HookId};
use crate::platform;
use crate::rt::args::ArgVal;
use crate::rt::config;
use crate::rt::stderr;
use crate::rt::stderr::{say, say_once};
use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use seedance_core::ErrorTally;
use seedance_cuda::CUresult;
use seedance_hotpath::Counters;
use seedance_trace::{CallFailed, Event, SessionStart, TraceFile, TraceWriter};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

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

fn state() -> &'static State {
    STATE.get_or_init(|| State {
        start_ns: stderr::began(),
        tally: ErrorTally::new(),
        trace: OnceCell::new(),
        pending: Mutex::new(Vec::new()),
        held: AtomicBool::new(false),
        pending_dropped: std::sync::atomic::AtomicU64::new(0),
        unmatched: Mutex::new(BTreeSet::new()),
        repeats: Mutex::new(BTreeMap::new()),
    })
}

/// Counts one call of `id` (and an error if `r` is not success). Hot path.
#[inline(always)]
pub fn count(id: HookId, r: CUresult) {
    Counters::global().record(id as usize, r.0 != 0);
}

/// The first line of a fault explained by a fault module: `function: NAME (code):
/// explanation`, with `name` the result's name as the caller knows it (`error` when there is
/// none). The one format of every device, launch, allocation and lifetime fault line.
pub fn fault_line(id: HookId, name: Option<&str>, r: CUresult, explanation: &str) -> String {
    format!(
        "{}: {} ({}): {explanation}",
        id.name(),
        name.unwrap_or("error"),
        r.0
    )
}

/// Prints the stderr line of a checked launch or allocation: `fault_line`, then
/// "[refused before reaching the driver: SEEDANCE_VALIDATE=pre]" when the shim answered
/// without calling the driver, then "[driver: M]" when the driver's error log gave message
/// `M` (docs/configuration.md, SEEDANCE_VALIDATE).
pub fn say_checked_fault(
    id: HookId,
    r: CUresult,
    explanation: &str,
    refused: bool,
    driver_message: Option<&str>,
) {
    let mut line = fault_line(id, r.name(), r, explanation);
    if refused {
        line.push_str(" [refused before reaching the driver: SEEDANCE_VALIDATE=pre]");
    }
    if let Some(m) = driver_message {
        line.push_str(&format!(" [driver: {m}]"));
    }
    crate::rt::stderr::say(&line);
}

/// Reports a failed call: counted by result, an event in the trace, and one stderr line per
/// distinct (function, result); for the allocation and creation calls of
/// [`crate::rt::deferred`], that line only if the program does not recover (the record is
/// written at once either way). Never panics into the caller.
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
    let line = |id: HookId, r: CUresult| {
        let shown: Vec<String> = args
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_json()))
            .collect();
        // The words of the one table, which the analyzer's problem repeats.
        let what = r.said();
        format!(
            "{}({}) returned {what}",
            id.name(),
            shown.join(", ").replace('"', "")
        )
    };
    let stub = || {
        let path = platform::object_of(slots::ALL.cuInit.get())
            .and_then(|o| o.path)
            .unwrap_or_default();
        format!(
            "the libcuda in use ({path}) is the CUDA toolkit's stub library, not the \
             NVIDIA driver: put the driver's libcuda.so.1 first on the library path, \
             or set SEEDANCE_LIBCUDA to it"
        )
    };
    if crate::rt::deferred::defers(id) {
        // Said only if the program gives up (`crate::rt::deferred`); the record below is
        // written now either way.
        let announced = announce(id, r);
        crate::rt::deferred::failed(
            id,
            r.0,
            announced.then(|| line(id, r)),
            (announced && r == CUresult::CUDA_ERROR_STUB_LIBRARY).then(stub),
        );
    } else if first && announce(id, r) {
        say(&line(id, r));
        if r == CUresult::CUDA_ERROR_STUB_LIBRARY {
            say_once("stub", &stub());
        }
    }
    let result_name = if id == HookId::cudaSetDevice {
        None
    } else {
        r.name().map(str::to_string)
    };
    if config::get().trace_dir.is_none() {
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
/// table, `shim/src/hooks.rs`, then result and argument names). At exit.
pub fn write_repeats(w: &TraceWriter) {
    let st = state();
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

/// Most events held back before the first `cuInit`; more are counted as dropped.
const MAX_PENDING: usize = 256;

/// Writes the held-back events, in the order they came. The queue's lock is held while
/// they are written, so no event emitted meanwhile lands in the trace before them.
pub fn flush_pending(w: &TraceWriter) {
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
            if config::get().trace_dir.is_none() {
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

/// The trace writer, created on first use (the first `cuInit` or, for a process that never
/// calls it, exit) with `record`'s `session_start` (given the host name) as its first
/// record; `None` when no trace directory is configured or the file cannot be created (said
/// once).
pub fn start_trace(record: impl FnOnce(String) -> SessionStart) -> Option<&'static TraceWriter> {
    let st = state();
    st.trace
        .get_or_init(|| {
            let dir = config::get().trace_dir.as_ref()?;
            let host = hostname().unwrap_or_else(|| "unknown".into());
            match TraceFile::create(dir, &host, std::process::id(), st.start_ns) {
                Ok(file) => {
                    let path = seedance_trace::writer::shown(&file.path);
                    // The writer's thread is started inside: it blocks every signal.
                    let blocked = platform::SignalsBlocked::new();
                    let w = TraceWriter::start_with_limit(
                        file,
                        Box::new(move |e| {
                            say(&format!(
                                "writing the trace {path} failed ({e}); nothing more is written \
                                 to it and the records are counted as dropped"
                            ))
                        }),
                        config::get().trace_max_bytes,
                    );
                    drop(blocked);
                    w.emit(
                        platform::thread_id(),
                        Event::SessionStart(Box::new(record(host))),
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

/// Counts one failure of `id` with `code` for the exit summary; `true` the first time this
/// (function, code) pair is seen.
pub fn tally_error(id: HookId, code: CUresult) -> bool {
    state().tally.add(id as usize, code.0)
}

/// Whether the trace has been started (or found impossible): then a `cuInit` has nothing
/// more to start.
pub fn trace_begun() -> bool {
    state().trace.get().is_some()
}

/// The trace writer if the trace has been started (and could be created).
pub fn trace_writer() -> Option<&'static TraceWriter> {
    STATE.get()?.trace.get()?.as_ref()
}

/// Whether exit has nothing to write: no trace was started and no event is held back.
pub fn nothing_to_write() -> bool {
    let st = state();
    st.trace.get().is_none() && st.pending.lock().is_empty()
}

/// What the output path collected, for the exit summary ([`collected`]).
pub struct Collected {
    /// When the session's state was created (the first report or `cuInit`), trace clock.
    pub start_ns: u64,
    /// Failures by (function index, result code): how many.
    pub errors: Vec<((usize, u32), u64)>,
    /// Events dropped because too many were held back before the trace started.
    pub held_dropped: u64,
    /// Base names whose `cuGetProcAddress` pointer matched none of our variants, sorted.
    pub unmatched: Vec<String>,
}

/// What the output path collected so far; `None` when nothing was ever reported (the
/// session has not begun, [`stderr::has_begun`]).
pub fn collected() -> Option<Collected> {
    if !stderr::has_begun() {
        return None;
    }
    let st = state();
    Some(Collected {
        start_ns: st.start_ns,
        errors: st.tally.snapshot(),
        held_dropped: st.pending_dropped.load(Ordering::Relaxed),
        unmatched: st.unmatched.lock().iter().cloned().collect(),
    })
}

/// The host name (`/proc/sys/kernel/hostname`), for the trace's file name and record.
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
}
