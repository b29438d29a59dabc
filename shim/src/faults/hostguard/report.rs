//! How the host-write guard reports a copy whose source changed while it was pending: one
//! stderr line per distinct fault (the copy's entry point, stream and pinned range) and a
//! `host_hazard` record of kind `host_write_race` (docs/trace-schema.md); in `fix` mode,
//! when the copy was sent from a snapshot, the write did not reach the device and the
//! repair is counted every time (`repairs.snapshot_before_copy`).

use crate::hooks::ids::HookId;
use crate::rt::{output, stderr};
use seedance_core::hazard::{describe_key, Range};
use seedance_core::once::ExplainOnce;
use seedance_hotpath::work::{key_kind, KeyKind};
use seedance_trace::{Event, HostAccess, HostHazard, MemoryRange};

/// Distinct faults already explained: (entry point, stream key, pinned range).
static SEEN: ExplainOnce<(&'static str, u64, u64)> = ExplainOnce::bounded(4096);

/// A copy whose source changed while it was pending.
pub(super) struct Write<'a> {
    pub function: HookId,
    pub key: u64,
    /// Thread that submitted the copy.
    pub tid: u64,
    pub src: u64,
    pub bytes: u64,
    pub range: &'a Range,
    /// First changed chunk found: address, bytes.
    pub changed: (u64, u64),
    /// The copy was sent from the shim's snapshot (`fix` mode).
    pub snapshot: bool,
}

fn stream_fields(key: u64) -> (Option<String>, Option<String>) {
    match key_kind(key) {
        KeyKind::Stream(h) => (Some(format!("{h:#x}")), None),
        KeyKind::Legacy(_) => (None, Some("legacy".to_string())),
        KeyKind::PerThread(_) => (None, Some("per_thread".to_string())),
    }
}

pub(super) fn host_write(w: &Write) {
    if w.snapshot {
        crate::faults::lifetime::report::count_repair("snapshot_before_copy");
    }
    let function = w.function.name();
    if !SEEN.first((function, w.key, w.range.lo)) {
        return;
    }
    let lo = w.range.lo;
    let (at, len) = w.changed;
    let what = if w.snapshot {
        "; fix mode: the copy was sent from the shim's snapshot of the bytes taken at \
         submission, so the new bytes did not reach the device"
    } else {
        ""
    };
    let explanation = format!(
        "host write into pinned memory during a copy: bytes {}..{} of pinned range {lo:#x} \
         ({}, made by {}) changed while {function} on {} (thread {}) was pending with bytes \
         {}..{} of that range as its source: the device may have got the new bytes instead \
         of the ones the copy was given; fix: write the buffer only after the copy completed \
         (cuStreamSynchronize, or an event recorded after the copy and synchronised), or copy \
         from another buffer{what}",
        at - lo,
        at - lo + len,
        seedance_core::alloc::short(w.range.bytes),
        w.range.made_by,
        describe_key(w.key),
        w.tid,
        w.src - lo,
        w.src - lo + w.bytes,
    );
    stderr::say(&format!("{function}: {explanation}"));
    let (stream, default_stream) = stream_fields(w.key);
    output::emit(Event::HostHazard(HostHazard {
        function: "host write".to_string(),
        kind: "host_write_race".to_string(),
        range: MemoryRange {
            address: format!("{lo:#x}"),
            bytes: w.range.bytes,
        },
        made_by: w.range.made_by.to_string(),
        first: HostAccess {
            function: function.to_string(),
            stream,
            default_stream,
            tid: w.tid,
            access: "read".to_string(),
            offset: w.src - lo,
            bytes: w.bytes,
        },
        second: HostAccess {
            function: "host write".to_string(),
            stream: None,
            default_stream: None,
            tid: 0,
            access: "write".to_string(),
            offset: at - lo,
            bytes: len,
        },
        repaired: w.snapshot,
        repair: w.snapshot.then(|| "snapshot".to_string()),
        explanation,
        backtrace: None,
    }));
}
