//! Texts for lifetime faults: a destroy or reset with work still pending, a handle used
//! after its context ended, pinned or device memory freed under pending work, and the exit
//! line. Pure functions of tracker data, tested without a driver.

use super::{Context, EndKind, Pinned, Site};
use crate::alloc::show;
use seedance_hotpath::work::Counts;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How and where a context ended, for explanations of calls made in it later:
/// `context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 on thread 7
/// (lifetime call #1)) was destroyed by cuCtxDestroy_v2 on thread 8 (lifetime call #4)`.
/// `None` while the context is alive.
pub fn describe_end(ctx: &Context) -> Option<String> {
    let e = ctx.end.as_ref()?;
    let mut s = format!(
        "{} was {} by {}",
        ctx.describe(),
        e.how.as_str(),
        e.site.describe()
    );
    if !e.lost.is_zero() {
        let _ = write!(s, " with {} still unfinished (lost)", counted(e.lost));
    }
    Some(s)
}

/// One stream in an explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWork {
    /// The stream handle, or `None` for a default stream.
    pub stream: Option<u64>,
    /// For a default stream: `true` for the per-thread one.
    pub per_thread: bool,
    /// Launches, copies and other operations since its last synchronisation.
    pub counts: Counts,
    /// Where it was created, when known.
    pub created: Option<Site>,
}

impl StreamWork {
    /// `stream 0x5eed50000100 (made by cuStreamCreate on thread 7 (lifetime call #3)): 1
    /// launch and 2 copies`.
    pub fn describe(&self) -> String {
        let name = match self.stream {
            Some(h) => format!("stream {h:#x}"),
            None if self.per_thread => "the per-thread default stream".to_string(),
            None => "the default stream".to_string(),
        };
        let made = self
            .created
            .as_ref()
            .map(|s| format!(" (made by {})", s.describe()))
            .unwrap_or_default();
        format!("{name}{made}: {}", counted(self.counts))
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 launch and 2 copies`, `1 copy`, `3 launches`, `1 launch and 1 stream operation (a
/// memset, graph launch or host function)` (`no work` for none).
pub fn counted(c: Counts) -> String {
    let mut parts = Vec::new();
    if c.launches > 0 {
        parts.push(plural(c.launches, "launch", "launches"));
    }
    if c.copies > 0 {
        parts.push(plural(c.copies, "copy", "copies"));
    }
    if c.ops > 0 {
        parts.push(plural(
            c.ops,
            "stream operation (a memset, graph launch or host function)",
            "stream operations (memsets, graph launches or host functions)",
        ));
    }
    match parts.split_last() {
        None => "no work".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn total(streams: &[StreamWork]) -> Counts {
    streams
        .iter()
        .fold(Counts::default(), |a, s| a.plus(s.counts))
}

/// A context about to be destroyed, reset or released with work its streams have not
/// finished (`cuStreamQuery` said so). `repaired`: the shim synchronised it first.
pub fn explain_pending_at_end(
    how: EndKind,
    ctx: &Context,
    streams: &[StreamWork],
    repaired: bool,
) -> String {
    let verb = match how {
        EndKind::Destroyed => "destroying",
        EndKind::Reset => "resetting",
        EndKind::Released => "releasing the last reference to",
    };
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    let mut s = format!(
        "{verb} {} while its streams still have unfinished work ({} submitted since they were \
         last synchronised: {}); ",
        ctx.describe(),
        counted(total(streams)),
        list.join("; ")
    );
    if repaired {
        s.push_str(
            "fix: the shim synchronised the context first (cuCtxSynchronize), so the work \
             completed; ",
        );
    } else {
        s.push_str(
            "the work is abandoned: its results are lost and later calls on these streams get \
             CUDA_ERROR_CONTEXT_IS_DESTROYED (709) or CUDA_ERROR_INVALID_HANDLE (400); ",
        );
    }
    s.push_str(
        "synchronise before tearing a context down (cuCtxSynchronize / cudaDeviceSynchronize, \
         or cuStreamSynchronize on each stream)",
    );
    s
}

/// What kind of handle a call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleKind {
    /// A `CUcontext`.
    Context,
    /// A `CUstream`.
    Stream,
    /// A `CUevent`.
    Event,
    /// A device address.
    DeviceMemory,
    /// A pinned host address.
    PinnedMemory,
}

impl HandleKind {
    /// `context`, `stream`, `event`, `device memory`, `pinned memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandleKind::Context => "context",
            HandleKind::Stream => "stream",
            HandleKind::Event => "event",
            HandleKind::DeviceMemory => "device memory",
            HandleKind::PinnedMemory => "pinned memory",
        }
    }
}

/// A call with a handle whose context is gone. `repaired`: in fix mode the shim answered a
/// free or destroy itself (the driver already released the handle with its context), or a
/// synchronize of a handle whose work had all completed before the context ended.
pub fn explain_dead_handle(
    kind: HandleKind,
    handle: u64,
    created: Option<&Site>,
    ctx: &Context,
    repaired: Option<&str>,
) -> String {
    dead_handle(kind, handle, created, ctx, repaired.map(Answer::Repaired))
}

/// A call with a stream or event whose context is gone that the shim did not send to the
/// driver, in any mode: the driver dereferences the handle, whose memory it released with
/// the context (driver 580.159 on an H200 crashed with SIGSEGV in `cuStreamSynchronize` and
/// `cuStreamDestroy` of such a stream: docs/validation.md). `code` names what the call
/// returned instead (`CUDA_ERROR_CONTEXT_IS_DESTROYED`).
pub fn explain_dead_handle_not_forwarded(
    kind: HandleKind,
    handle: u64,
    created: Option<&Site>,
    ctx: &Context,
    code: &str,
) -> String {
    dead_handle(kind, handle, created, ctx, Some(Answer::NotForwarded(code)))
}

/// What the shim did with a call on a dead handle, when not just forwarded.
enum Answer<'a> {
    /// Fix mode answered for the driver (the text says how).
    Repaired(&'a str),
    /// Returned this code without calling the driver.
    NotForwarded(&'a str),
}

fn dead_handle(
    kind: HandleKind,
    handle: u64,
    created: Option<&Site>,
    ctx: &Context,
    answer: Option<Answer<'_>>,
) -> String {
    let end = ctx.end.as_ref();
    let how = end.map_or("ended", |e| e.how.as_str());
    let made = created
        .map(|s| format!(", made by {},", s.describe()))
        .unwrap_or_default();
    let mut s = if kind == HandleKind::Context {
        format!("{} was already {how}", ctx.describe())
    } else {
        format!(
            "{} {handle:#x}{made} belonged to {}, which was {how}",
            kind.as_str(),
            ctx.describe()
        )
    };
    if let Some(e) = end {
        let _ = write!(s, " by {}", e.site.describe());
        if !e.lost.is_zero() {
            let _ = write!(s, " with {} still unfinished (lost)", counted(e.lost));
        }
    }
    s.push_str("; ");
    match (kind, answer) {
        (_, Some(Answer::Repaired(what))) => {
            let _ = write!(s, "fix: {what}; ");
        }
        (_, Some(Answer::NotForwarded(code))) => {
            let _ = write!(
                s,
                "the driver released the {} with its context, and a call with it is undefined \
                 (the driver may crash): returned {code} without calling the driver; ",
                kind.as_str()
            );
        }
        (HandleKind::Context, None) => {}
        _ => {
            let _ = write!(
                s,
                "the driver released the {} with its context; ",
                kind.as_str()
            );
        }
    }
    s.push_str(match kind {
        HandleKind::Context => {
            "do not use a context after destroying or resetting it; retain or create a new one"
        }
        _ => {
            "release handles before their context (destroy streams and events, free memory, then \
             destroy the context or reset the device), and do not call CUDA from static \
             destructors or atexit handlers that run after the runtime tore the context down"
        }
    });
    s
}

/// A free or unregister of host memory that returned while copies that read or write it
/// were still running (`what` names the call's effect: "freeing", "unregistering"): the
/// driver released the memory under them.
pub fn explain_pinned_in_use(
    what: &str,
    range: (u64, u64),
    pinned: Option<&Pinned>,
    streams: &[StreamWork],
) -> String {
    let (memory, list) = pinned_release(what, range, pinned, streams);
    format!(
        "{memory} returned while asynchronous copies that read or write it were still running \
         ({list}; the driver reported the streams busy after the call): the copies may read \
         freed or reused memory (corrupted data) or write into memory that belongs to \
         something else; synchronise the stream (or record an event after the copy and \
         synchronise it) before freeing or reusing the buffer"
    )
}

/// A free or unregister of host memory that the driver delayed until the copies that read
/// or write it had finished (`function` is the call, `what` its effect: "freeing",
/// "unregistering"; `blocked` how long the call took): the data is intact, but the call
/// was a hidden synchronisation of those streams.
pub fn explain_pinned_release_waited(
    function: &str,
    what: &str,
    range: (u64, u64),
    pinned: Option<&Pinned>,
    streams: &[StreamWork],
    blocked: std::time::Duration,
) -> String {
    let (memory, list) = pinned_release(what, range, pinned, streams);
    format!(
        "{memory} while asynchronous copies that read or write it had not finished ({list}): \
         {function} waited {} for them before releasing the memory (the streams were idle when \
         it returned), so the copies completed with the data intact, but the call stalled this \
         thread until the streams' earlier work was done (a hidden synchronisation); to keep \
         the thread running, synchronise the stream (or record an event after the copy and \
         synchronise it) where the wait suits the program, or free the buffer later",
        duration(blocked)
    )
}

/// The two parts of a pinned release's explanation: "freeing pinned host memory 0x.. (size,
/// made by ..)" and the streams' work, listed.
fn pinned_release(
    what: &str,
    (lo, bytes): (u64, u64),
    pinned: Option<&Pinned>,
    streams: &[StreamWork],
) -> (String, String) {
    let made = pinned
        .map(|p| format!(", made by {}", p.created.describe()))
        .unwrap_or_default();
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    (
        format!("{what} pinned host memory {lo:#x} ({}{made})", show(bytes)),
        list.join("; "),
    )
}

/// A call's duration as a person reads it: `850 us`, `12.3 ms`, `1.02 s`.
fn duration(d: std::time::Duration) -> String {
    let us = d.as_micros();
    if us < 1_000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// A stream-ordered free of device memory that copies on other streams still use.
pub fn explain_device_in_use(
    addr: u64,
    bytes: Option<u64>,
    streams: &[StreamWork],
    repaired: bool,
) -> String {
    let list: Vec<String> = streams.iter().map(StreamWork::describe).collect();
    let size = bytes.map(|b| format!(" ({})", show(b))).unwrap_or_default();
    let mut s = format!(
        "freeing device memory {addr:#x}{size} on one stream while asynchronous copies on other \
         streams still use it ({}); the free is ordered only on its own stream; ",
        list.join("; ")
    );
    if repaired {
        s.push_str("fix: the shim waited for those streams first (cuStreamSynchronize); ");
    }
    s.push_str(
        "make the freeing stream wait for the others (cuEventRecord + cuStreamWaitEvent) before \
         the free",
    );
    s
}

/// Leaked memory of one context, for the exit report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// The owning context, when known (for pinned host memory: the context current when
    /// it was allocated).
    pub ctx: Option<u32>,
    /// `true` for pinned host memory.
    pub host: bool,
    /// Allocations.
    pub allocations: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What the exit report found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExitFindings {
    /// Contexts alive at exit.
    pub live: Vec<Context>,
    /// Memory never freed, per context.
    pub leaks: Vec<Leak>,
    /// Streams with work never synchronised: (context id, stream work).
    pub unsynchronized: Vec<(Option<u32>, StreamWork)>,
    /// Calls that got `CUDA_ERROR_DEINITIALIZED`, by function (the runtime's own
    /// `cuDevicePrimaryCtxRelease` at teardown excluded).
    pub after_deinit: BTreeMap<String, u64>,
}

/// The one stderr line at exit, `None` when nothing is worth saying: work still queued on
/// a stream when the process ends (the driver answered `CUDA_ERROR_NOT_READY` for it at
/// exit, or could not be asked), whose results nothing waited for. What the process leaves
/// to the driver at exit (contexts never destroyed, memory never freed, calls after the
/// driver shut down) costs the program nothing: the driver reclaims it when the process
/// ends, so it goes to the exit summary (trace) and the analyzer's process-health table,
/// never here. Work of a primary context still retained at exit is left out: the CUDA
/// runtime keeps its primary contexts (and their streams) until its own teardown, which
/// comes after the driver's (measured on an H200, driver 580.159), so a healthy runtime
/// program always exits that way. It stays in the trace.
pub fn exit_line(f: &ExitFindings, ctx: impl Fn(u32) -> Option<Context>) -> Option<String> {
    // Work whose context the driver could not name counts as the runtime's when every live
    // context is a retained primary context.
    let only_primaries = !f.live.is_empty() && f.live.iter().all(|c| c.primary);
    let runtime_owned = |id: Option<u32>| match id {
        Some(i) => ctx(i).is_some_and(|c| c.primary && c.end.is_none()),
        None => only_primaries,
    };
    let unsynced: Vec<String> = f
        .unsynchronized
        .iter()
        .filter(|(c, _)| !runtime_owned(*c))
        .map(|(_, w)| w.describe())
        .collect();
    if unsynced.is_empty() {
        return None;
    }
    Some(format!(
        "at exit: work never synchronised ({}): it was still queued on the device when the \
         process exited, and nothing waited for its results. Synchronise the stream \
         (cuStreamSynchronize or cudaStreamSynchronize) before exit",
        unsynced.join("; ")
    ))
}
