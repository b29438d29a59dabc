//! The repair of a pinned-copy race in `fix` mode: the shim's own event (one per context)
//! recorded on the first copy's stream, and the second copy's stream made to wait for it;
//! a context synchronisation when the first stream was destroyed.

use crate::driver::query;
use crate::platform;
use parking_lot::Mutex;
use seedance_core::hazard::shared::Shared;
use seedance_core::hazard::{Access, Hazard};
use seedance_cuda::{CUevent, CUstream, CU_STREAM_PER_THREAD};
use seedance_hotpath::work::{key_kind, KeyKind};

/// The shim's own events, one per context (context handle, event).
static EVENTS: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());
/// Most contexts with an event of the shim's.
const MAX_EVENTS: usize = 16;
/// `CU_EVENT_DISABLE_TIMING` (cuda.h).
const DISABLE_TIMING: u32 = 2;

/// The shim's event in context `ctx`, made on first use.
fn own_event(ctx: u64) -> Option<CUevent> {
    let mut ev = EVENTS.lock();
    if let Some(&(_, e)) = ev.iter().find(|(c, _)| *c == ctx) {
        return Some(e as CUevent);
    }
    if ev.len() >= MAX_EVENTS {
        return None;
    }
    let e = query::with_context(ctx as usize, || query::event_create(DISABLE_TIMING))
        .ok()?
        .ok()?;
    ev.push((ctx, e as usize));
    Some(e)
}

/// The stream argument that names `a`'s stream from the calling thread, for the plain
/// (legacy-default-stream) entry points; `None` for another thread's per-thread default
/// stream, which cannot be named.
fn stream_arg(a: &Access) -> Option<CUstream> {
    match key_kind(a.key) {
        KeyKind::Stream(h) => Some(h as CUstream),
        KeyKind::Legacy(_) => Some(std::ptr::null_mut()),
        KeyKind::PerThread(_) => {
            (a.tid == platform::thread_id()).then_some(CU_STREAM_PER_THREAD as CUstream)
        }
    }
}

/// Orders `h.second` after `h.first`: the shim's event recorded on the first stream, the
/// second stream made to wait for it; when the program destroyed the first stream (its
/// work still runs, but the handle must not be used), the first copy's context is
/// synchronised instead. `Some(what was done)` on success.
pub(super) fn order(h: &Hazard, table: &Shared) -> Option<String> {
    let (a, b) = (&h.first, &h.second);
    if h.first_destroyed {
        query::with_context(a.ctx as usize, query::ctx_synchronize)
            .ok()?
            .ok()?;
        super::context_completed(a.ctx);
        crate::faults::lifetime::report::count_repair("order_pinned_copies");
        return Some(format!(
            "{} was destroyed, so the shim synchronised its context (cuCtxSynchronize) before \
             the second copy",
            a.describe_stream()
        ));
    }
    let first = stream_arg(a)?;
    let second = stream_arg(b)?;
    let ev = own_event(a.ctx)?;
    query::with_context(a.ctx as usize, || query::event_record(ev, first))
        .ok()?
        .ok()?;
    query::stream_wait_event(second, ev).ok()?;
    table.order(b.key, b.tid, a.key, a.tid);
    crate::faults::lifetime::report::count_repair("order_pinned_copies");
    Some(format!(
        "the shim recorded its own event on {} and made {} wait for it before the second copy",
        a.describe_stream(),
        b.describe_stream()
    ))
}

/// Context `ctx` ended: its event of the shim's went with it.
pub(super) fn context_ended(ctx: u64) {
    EVENTS.lock().retain(|(c, _)| *c != ctx);
}
