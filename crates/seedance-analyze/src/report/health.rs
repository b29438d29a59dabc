//! The `process_health` section of the report (trace schema 4): processes whose exit
//! summary shows contexts left alive, memory never freed, streams never synchronised or
//! calls after the driver shut down.

use crate::aggregate::proc::Proc;
use crate::problems::parts::plural;
use crate::render::fmt;
use crate::report::{DeviceLeak, NameCount, ProcessHealth};
use std::collections::BTreeMap;

/// The `process_health` section: one entry per process whose exit summary shows something
/// left behind, worst first.
pub(crate) fn process_health(procs: &[Proc]) -> Vec<ProcessHealth> {
    let mut out = Vec::new();
    for p in procs {
        let Some(e) = &p.agg.exit else { continue };
        let live_contexts = e.live_contexts.iter().filter(|c| !c.primary).count() as u64;
        // The shim's own rule (its exit paragraph): what belongs to a primary context still
        // retained at exit is the CUDA runtime's, and so is what the driver could no longer
        // attribute at exit (it had shut down before the shim asked: no context) when every
        // live context is a retained primary context.
        let only_primaries =
            !e.live_contexts.is_empty() && e.live_contexts.iter().all(|c| c.primary);
        let runtime_owned = |context: &Option<String>, primary_retained: bool| {
            if context.is_some() {
                primary_retained
            } else {
                only_primaries
            }
        };
        let mut leaks: BTreeMap<(bool, Option<i32>), (u64, u64)> = BTreeMap::new();
        for l in e
            .leaked_allocations
            .iter()
            .filter(|l| !runtime_owned(&l.context, l.primary_retained))
        {
            let x = leaks.entry((l.host, l.device)).or_default();
            x.0 = x.0.saturating_add(l.allocations);
            x.1 = x.1.saturating_add(l.bytes);
        }
        let streams: Vec<_> = e
            .unsynchronized_streams
            .iter()
            .filter(|s| {
                !runtime_owned(&s.context, s.primary_retained)
                    && s.launches.saturating_add(s.copies).saturating_add(s.ops) > 0
            })
            .collect();
        let mut after: Vec<NameCount> = e
            .calls_after_deinit
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(f, n)| NameCount {
                name: f.clone(),
                count: *n,
            })
            .collect();
        after.sort_by(|x, y| y.count.cmp(&x.count).then_with(|| x.name.cmp(&y.name)));
        let h = ProcessHealth {
            file: p.agg.file.clone(),
            pid: p.agg.pid,
            hostname: p.hostname(),
            executable: p.agg.session.as_ref().and_then(|s| s.executable.clone()),
            live_contexts,
            leaked_allocations: leaks.values().map(|v| v.0).fold(0, u64::saturating_add),
            leaked_bytes: leaks.values().map(|v| v.1).fold(0, u64::saturating_add),
            leaks: leaks
                .into_iter()
                .map(|((host, device), (allocations, bytes))| DeviceLeak {
                    device,
                    host,
                    allocations,
                    bytes,
                })
                .collect(),
            unsynchronized_streams: streams.len() as u64,
            unsynchronized_work: streams
                .iter()
                .map(|s| s.launches.saturating_add(s.copies).saturating_add(s.ops))
                .fold(0, u64::saturating_add),
            unsynchronized_ops: streams.iter().map(|s| s.ops).fold(0, u64::saturating_add),
            calls_after_deinit: after.iter().map(|n| n.count).fold(0, u64::saturating_add),
            calls_after_deinit_by_function: after,
        };
        if h.live_contexts + h.leaked_allocations + h.unsynchronized_streams + h.calls_after_deinit
            > 0
        {
            out.push(h);
        }
    }
    out.sort_by(|a, b| {
        let w = |h: &ProcessHealth| {
            h.live_contexts + h.leaked_allocations + h.unsynchronized_streams + h.calls_after_deinit
        };
        w(b).cmp(&w(a))
            .then_with(|| b.leaked_bytes.cmp(&a.leaked_bytes))
            .then_with(|| (&a.file, a.pid).cmp(&(&b.file, b.pid)))
    });
    out
}

/// One process's figures in words, for the text report.
pub(crate) fn health_words(h: &ProcessHealth) -> Vec<String> {
    let mut v = Vec::new();
    if h.live_contexts > 0 {
        v.push(format!(
            "{} {} never destroyed",
            fmt::count(h.live_contexts),
            plural(h.live_contexts, "context", "contexts")
        ));
    }
    for l in &h.leaks {
        let place = match (l.host, l.device) {
            (true, _) => "pinned host memory".to_string(),
            (false, Some(d)) => format!("device {d}"),
            (false, None) => "unknown device".to_string(),
        };
        v.push(format!(
            "{} {} never freed ({}) on {place}",
            fmt::count(l.allocations),
            plural(l.allocations, "allocation", "allocations"),
            fmt::bytes(l.bytes)
        ));
    }
    if h.unsynchronized_streams > 0 {
        v.push(format!(
            "{} {} never synchronised ({} unfinished {})",
            fmt::count(h.unsynchronized_streams),
            plural(h.unsynchronized_streams, "stream", "streams"),
            fmt::count(h.unsynchronized_work),
            if h.unsynchronized_ops > 0 {
                plural(
                    h.unsynchronized_work,
                    "launch, copy or other stream operation",
                    "launches, copies and other stream operations",
                )
            } else {
                plural(
                    h.unsynchronized_work,
                    "launch or copy",
                    "launches and copies",
                )
            }
        ));
    }
    if h.calls_after_deinit > 0 {
        v.push(format!(
            "{} {} after the driver shut down: {}",
            fmt::count(h.calls_after_deinit),
            plural(h.calls_after_deinit, "call", "calls"),
            h.calls_after_deinit_by_function
                .iter()
                .map(|n| format!("{} ({})", n.name, n.count))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    v
}
