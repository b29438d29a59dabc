//! How a race on pinned host memory between two copies is reported, once per pair of call
//! sites, on stderr and as a `host_hazard` event (a host write into a pending copy's source
//! is reported by `crate::faults::hostguard`).

use crate::rt::{output, stderr};
use seedance_core::hazard::{explain_hazard, Access, Direction, Hazard};
use seedance_core::once::ExplainOnce;
use seedance_hotpath::work::{key_kind, KeyKind};
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
