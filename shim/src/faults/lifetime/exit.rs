//! Calls after deinitialisation and the exit report.

use super::*;
use crate::faults::alloc;

/// Counts a call that got `CUDA_ERROR_DEINITIALIZED`: made after the driver shut down.
/// The runtime's own final `cuDevicePrimaryCtxRelease`, which gets it in every healthy
/// runtime program (measured on an H200, driver 580.159), is not counted.
#[cold]
pub fn after_deinit(id: HookId) {
    if matches!(
        id,
        HookId::cuDevicePrimaryCtxRelease | HookId::cuDevicePrimaryCtxRelease_v2
    ) || !on()
    {
        return;
    }
    *LATE.lock().entry(id.name()).or_insert(0) += 1;
}

/// At the shim's `.fini_array` entry, while the driver is still up: confirms with the
/// driver which streams still have work, and asks it which context each live allocation
/// belongs to (for the exit report, written after the driver shut down).
pub fn settle() {
    if !on() {
        return;
    }
    tell_tracker_size();
    super::stray::at_exit();
    cold(|| {
        let shards = work::shards();
        let pending = {
            let mut t = TRACKER.lock();
            if t.live_contexts().is_empty() {
                return;
            }
            learn_keys(&mut t, &shards);
            t.pending(&shards, |_| true)
        };
        let idle: HashSet<u64> = pending
            .iter()
            .filter(|p| !still_running(p))
            .map(|p| p.key)
            .collect();
        TRACKER.lock().retire(&shards, |k| idle.contains(&k));
        let t = TRACKER.lock();
        let mut attribution = ATTRIBUTION.lock();
        for e in alloc::live_pointers().into_iter().take(MAX_ATTRIBUTED) {
            let ctx = query::pointer_context(e.key)
                .ok()
                .and_then(|c| t.live_context(c as u64).map(|c| c.id));
            attribution.insert(e.key, ctx);
        }
    });
}

/// What the exit report found, in trace form.
#[derive(Default)]
pub struct ExitReport {
    /// Contexts alive at exit.
    pub live_contexts: Vec<LiveContext>,
    /// Memory never freed, per context.
    pub leaked_allocations: Vec<LeakedAllocations>,
    /// Streams with work never synchronised.
    pub unsynchronized_streams: Vec<UnsynchronizedStream>,
    /// Calls after the driver shut down, by function.
    pub calls_after_deinit: BTreeMap<String, u64>,
}

/// The exit report, computed once.
static EXIT: once_cell::sync::OnceCell<ExitReport> = once_cell::sync::OnceCell::new();

/// The exit report (computed once, at the end of the process): prints the one stderr line
/// when work is still queued on a stream (everything else it finds goes only to the trace).
/// `None` when lifetime tracking is off.
pub fn exit_report() -> Option<&'static ExitReport> {
    if !on() {
        return None;
    }
    Some(EXIT.get_or_init(|| cold(build_exit_report)))
}

/// The report if it was computed already (for the periodic metrics file: nothing then).
pub fn exit_report_if_ready() -> Option<&'static ExitReport> {
    EXIT.get()
}

fn build_exit_report() -> ExitReport {
    let shards = work::shards();
    let t = TRACKER.lock();
    let live: Vec<Context> = t.live_contexts().into_iter().cloned().collect();
    let retained = |id: Option<u32>| {
        id.and_then(|i| t.context(i))
            .is_some_and(|c| c.primary && c.end.is_none())
    };
    // Device memory, grouped by the context the driver named at exit.
    let attribution = ATTRIBUTION.lock();
    let mut by_ctx: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
    for e in alloc::live_pointers() {
        let ctx = attribution.get(&e.key).copied().flatten();
        let g = by_ctx.entry(ctx).or_insert((0, 0));
        g.0 += 1;
        g.1 += e.bytes;
    }
    let mut leaks: Vec<Leak> = by_ctx
        .into_iter()
        .map(|(ctx, (n, b))| Leak {
            ctx,
            host: false,
            allocations: n,
            bytes: b,
        })
        .collect();
    // Pinned host memory, grouped by the context current when it was allocated (a caching
    // host allocator's blocks belong with the runtime's primary context).
    let mut pinned: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
    for p in t.pinned_ranges() {
        if p.kind == PinnedKind::Allocated {
            let g = pinned.entry(p.ctx).or_insert((0, 0));
            g.0 += 1;
            g.1 += p.bytes;
        }
    }
    leaks.extend(pinned.into_iter().map(|(ctx, (n, b))| Leak {
        ctx,
        host: true,
        allocations: n,
        bytes: b,
    }));
    let unsynced: Vec<(Option<u32>, StreamWork)> = t
        .pending(&shards, |k| {
            t.key_owner(k)
                .and_then(|c| t.context(c))
                .is_some_and(|c| c.end.is_none())
        })
        .iter()
        .map(|p| (t.key_owner(p.key), stream_work(&t, p)))
        .collect();
    let after_deinit: BTreeMap<String, u64> = LATE
        .lock()
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    let findings = ExitFindings {
        live: live.clone(),
        leaks: leaks.clone(),
        unsynchronized: unsynced.clone(),
        after_deinit: after_deinit.clone(),
    };
    if let Some(text) = exit_line(&findings, |id| t.context(id).cloned()) {
        stderr::say(&text);
    }
    let ctx_hex = |id: Option<u32>| id.and_then(|i| t.context(i)).map(|c| hex(c.handle));
    ExitReport {
        live_contexts: live
            .iter()
            .map(|c| LiveContext {
                context: hex(c.handle),
                device: c.device,
                primary: c.primary,
                generation: c.generation,
                retained: c.retained,
                created: lifetime_site(&c.created),
            })
            .collect(),
        leaked_allocations: leaks
            .iter()
            .map(|l| LeakedAllocations {
                device: if l.host {
                    None
                } else {
                    l.ctx.and_then(|i| t.context(i)).and_then(|c| c.device)
                },
                context: ctx_hex(l.ctx),
                primary_retained: retained(l.ctx),
                host: l.host,
                allocations: l.allocations,
                bytes: l.bytes,
            })
            .collect(),
        unsynchronized_streams: unsynced
            .iter()
            .map(|(c, w)| UnsynchronizedStream {
                context: ctx_hex(*c),
                primary_retained: retained(*c),
                work: stream_pending(w),
            })
            .collect(),
        calls_after_deinit: after_deinit,
    }
}

/// Debug builds, `SEEDANCE_TEST_TRACKER_SIZE` set: one stderr line with the contexts the
/// tracker remembers at exit, for the end-to-end test that context churn keeps its size
/// (`e2e::lifetime::context_churn_on_two_devices_keeps_the_trackers_size`).
#[cfg(debug_assertions)]
fn tell_tracker_size() {
    if std::env::var_os("SEEDANCE_TEST_TRACKER_SIZE").is_some() {
        let n = TRACKER.lock().contexts_remembered();
        crate::rt::stderr::say(&format!("test: the tracker remembers {n} contexts"));
    }
}

#[cfg(not(debug_assertions))]
fn tell_tracker_size() {}
