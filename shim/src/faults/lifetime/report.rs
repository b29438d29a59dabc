//! How a lifetime finding is reported (once per function, kind and context, on stderr and
//! as a `lifetime_fault` event, with a `lifetime_repair` event for a repair), and the
//! repairs counted for the exit summary.

use crate::hooks::ids::HookId;
use crate::rt::{output, stderr};
use parking_lot::Mutex;
use seedance_core::lifetime::{Context, HandleKind, Site, StreamWork};
use seedance_core::once::ExplainOnce;
use seedance_cuda::CUresult;
use seedance_trace::{
    ContextEnd, Event, LifetimeFault, LifetimeRepair, LifetimeSite, MemoryRange, StreamPending,
};
use std::collections::BTreeMap;

/// A fault as explained once: (function, kind, context id).
type FaultKey = (usize, &'static str, u32);
/// Faults already explained.
static SEEN: ExplainOnce<FaultKey> = ExplainOnce::bounded(MAX_SEEN);
/// Most distinct faults remembered.
const MAX_SEEN: usize = 4096;
/// Repairs made, by kind.
static REPAIRS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

pub(super) fn lifetime_site(s: &Site) -> LifetimeSite {
    LifetimeSite {
        function: s.function.to_string(),
        tid: s.tid,
        ts_ns: s.ts_ns,
        seq: s.seq,
    }
}

pub(super) fn hex(v: u64) -> String {
    format!("{v:#x}")
}

pub(super) fn stream_pending(w: &StreamWork) -> StreamPending {
    StreamPending {
        stream: w.stream.map(hex),
        default_stream: w
            .stream
            .is_none()
            .then(|| if w.per_thread { "per_thread" } else { "legacy" }.to_string()),
        launches: w.counts.launches,
        copies: w.counts.copies,
        ops: w.counts.ops,
        created: w.created.as_ref().map(lifetime_site),
    }
}

/// One lifetime finding, as reported.
pub(super) struct Finding<'a> {
    pub(super) id: HookId,
    pub(super) kind: &'static str,
    pub(super) result: Option<CUresult>,
    pub(super) ctx: Option<&'a Context>,
    pub(super) handle: Option<(HandleKind, u64, Option<Site>)>,
    pub(super) streams: Vec<StreamWork>,
    pub(super) range: Option<(u64, u64)>,
    /// The repair made, by kind, with the streams it synchronised.
    pub(super) repair: Option<(&'static str, Vec<String>)>,
    pub(super) explanation: String,
}

pub(super) fn report(f: Finding<'_>) {
    if let Some(r) = f.result.filter(|r| !r.is_success()) {
        output::tally_error(f.id, r);
    }
    if let Some((kind, _)) = &f.repair {
        *REPAIRS.lock().entry(kind).or_insert(0) += 1;
    }
    let key = (f.id as usize, f.kind, f.ctx.map_or(u32::MAX, |c| c.id));
    if !SEEN.first(key) {
        return;
    }
    let line = match f.result {
        Some(r) if !r.is_success() => output::fault_line(f.id, r.name(), r, &f.explanation),
        _ => format!("{}: {}", f.id.name(), f.explanation),
    };
    stderr::say(&line);
    let end = f.ctx.and_then(|c| c.end.as_ref());
    output::emit(Event::LifetimeFault(LifetimeFault {
        function: f.id.name().to_string(),
        kind: f.kind.to_string(),
        result: f.result.map(|r| r.0),
        result_name: f.result.and_then(|r| r.name()).map(str::to_string),
        context: f.ctx.map(|c| hex(c.handle)),
        device: f.ctx.and_then(|c| c.device),
        generation: f.ctx.map(|c| c.generation),
        handle: f.handle.as_ref().map(|h| hex(h.1)),
        handle_kind: f.handle.as_ref().map(|h| h.0.as_str().replace(' ', "_")),
        created: f
            .handle
            .as_ref()
            .and_then(|h| h.2.as_ref())
            .map(lifetime_site),
        ended: end.map(|e| ContextEnd {
            how: e.how.as_str().to_string(),
            site: lifetime_site(&e.site),
            lost_launches: e.lost.launches,
            lost_copies: e.lost.copies,
            lost_ops: e.lost.ops,
        }),
        streams: f.streams.iter().map(stream_pending).collect(),
        range: f.range.map(|(lo, bytes)| MemoryRange {
            address: hex(lo),
            bytes,
        }),
        repaired: f.repair.is_some(),
        explanation: f.explanation.clone(),
    }));
    if let Some((kind, streams)) = f.repair {
        output::emit(Event::LifetimeRepair(LifetimeRepair {
            function: f.id.name().to_string(),
            kind: kind.to_string(),
            context: f.ctx.map(|c| hex(c.handle)),
            streams,
            result: match f.result {
                Some(r) => r.0,
                None => 0,
            },
            explanation: line,
        }));
    }
}

/// Counts one repair of `kind` made elsewhere (the pinned-copy ordering of
/// [`crate::faults::hazard`]) in the exit summary's `repairs`.
pub(crate) fn count_repair(kind: &'static str) {
    *REPAIRS.lock().entry(kind).or_insert(0) += 1;
}

/// Repairs made, by kind, for the exit summary.
pub fn repairs() -> BTreeMap<String, u64> {
    REPAIRS
        .lock()
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect()
}
