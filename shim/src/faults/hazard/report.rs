//! How a race on pinned host memory is reported: a pinned-copy race (two copies), or a host
//! write the guard caught (`SEEDANCE_HOST_GUARD`), once per pair of call sites, on stderr and
//! as a `host_hazard` event.

use crate::hooks::ids::HookId;
use crate::rt::{output, stderr};
use seedance_core::hazard::shared::Shared;
use seedance_core::hazard::{explain_hazard, Access, Direction, Hazard};
use seedance_core::once::ExplainOnce;
use seedance_core::work::{key_kind, KeyKind};
use seedance_trace::{Event, HostAccess, HostHazard, MemoryRange};

/// Pairs of call sites already explained.
type SiteKey = (&'static str, Direction, &'static str, Direction);
static SEEN: ExplainOnce<SiteKey> = ExplainOnce::bounded(4096);

fn trace_access(a: &Access, lo: u64) -> HostAccess {
    let (stream, default_stream) = match key_kind(a.key) {
        KeyKind::Stream(h) => (Some(format!("{h:#x}")), None),
        KeyKind::Legacy(_) => (None, Some("legacy".to_string())),
        KeyKind::PerThread(_) => (None, Some("per_thread".to_string())),
    };
    HostAccess {
        function: a.function.to_string(),
        stream,
        default_stream,
        tid: a.tid,
        access: a.dir.as_str().to_string(),
        offset: a.addr - lo,
        bytes: a.bytes,
    }
}

pub(super) fn report(h: &Hazard, repaired: Option<String>) {
    if !SEEN.first(h.site_key()) {
        return;
    }
    let explanation = explain_hazard(h, repaired.as_deref());
    stderr::say(&format!("{}: {}", h.second.function, explanation));
    output::emit(Event::HostHazard(HostHazard {
        function: h.second.function.to_string(),
        kind: "pinned_copy_race".to_string(),
        range: MemoryRange {
            address: format!("{:#x}", h.range.lo),
            bytes: h.range.bytes,
        },
        made_by: h.range.made_by.to_string(),
        first: trace_access(&h.first, h.range.lo),
        second: trace_access(&h.second, h.range.lo),
        repaired: repaired.is_some(),
        repair: repaired.is_some().then(|| {
            if h.first_destroyed {
                "context_synchronize"
            } else {
                "event_wait"
            }
            .to_string()
        }),
        explanation,
        backtrace: None,
    }));
}

/// Reports the host write the guard caught (`SEEDANCE_HOST_GUARD`), with the copy it raced
/// with and the pinned range from `table`.
pub(super) fn report_write(table: &Shared) {
    let Some(w) = crate::faults::hostguard::take() else {
        return;
    };
    let function = HookId::ALL.get(w.function).map_or("?", |h| h.name());
    let range = table.pinned_at(w.src);
    let (lo, bytes, made_by) = range
        .as_ref()
        .map_or((w.src, w.bytes, "?"), |r| (r.lo, r.bytes, r.made_by));
    let copy = Access {
        function,
        key: w.key,
        stream: 0,
        per_thread: false,
        ctx: 0,
        tid: w.copy_tid,
        dir: Direction::Read,
        addr: w.src,
        bytes: w.bytes,
        range_lo: lo,
        seq: 0,
    };
    let what = if w.waited {
        "; fix mode: the write waited until the copy completed (cuStreamSynchronize), so the \
         copy sent the bytes from before it"
    } else {
        ""
    };
    let explanation = format!(
        "host write into pinned memory at {:#x} (byte {} of pinned range {lo:#x}, {}, made \
         by {made_by}) by thread {} while {function} on {} (thread {}) still reads bytes \
         {}..{} of that range: the copy may send the new bytes instead of the ones it was \
         given; fix: write the buffer only after the copy completed (cuStreamSynchronize, or \
         an event recorded after the copy and synchronised), or copy from another buffer{what}",
        w.addr,
        w.addr - lo,
        seedance_core::alloc::short(bytes),
        w.tid,
        copy.describe_stream(),
        w.copy_tid,
        w.src - lo,
        w.src - lo + w.bytes,
    );
    let mut text = format!("host write: {explanation}");
    if w.more > 0 {
        text.push_str(&format!(" ({} more writes caught)", w.more));
    }
    text.push_str("; the writing thread's stack:");
    for f in &w.frames {
        text.push_str("\n    ");
        text.push_str(f);
    }
    stderr::say(&text);
    if w.waited {
        crate::faults::lifetime::report::count_repair("wait_before_host_write");
    }
    output::emit(Event::HostHazard(HostHazard {
        function: "host write".to_string(),
        kind: "host_write_race".to_string(),
        range: MemoryRange {
            address: format!("{lo:#x}"),
            bytes,
        },
        made_by: made_by.to_string(),
        first: trace_access(&copy, lo),
        second: HostAccess {
            function: "host write".to_string(),
            stream: None,
            default_stream: None,
            tid: w.tid,
            access: "write".to_string(),
            offset: w.addr - lo,
            bytes: 1,
        },
        repaired: w.waited,
        repair: w.waited.then(|| "wait_before_host_write".to_string()),
        explanation,
        backtrace: Some(w.frames),
    }));
}
