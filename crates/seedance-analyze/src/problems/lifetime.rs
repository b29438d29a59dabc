//! Lifetime faults and process health (trace schema 4): the `lifetime_fault` problems and
//! the `process_health` section of the report.
//!
//! A `lifetime_fault` problem is one fault kind (`pending_work_at_destroy`,
//! `use_after_destroy`, `pinned_memory_in_use`, `device_memory_in_use`, ...) over all
//! processes, with the shim's own explanations. A process counts as repaired when every
//! function of it with the fault has a `lifetime_repair` record of the same function; the
//! problem is a `warning` when all its processes were repaired, an `error` otherwise.

use crate::aggregate::proc::Proc;
use crate::aggregate::LifetimeAgg;
use crate::problems::parts::{
    listed, name_counts, plural, processes_on_hosts, ranked, repair_outcome, tally,
    MAX_EXPLANATIONS,
};
use crate::render::fmt;
use crate::report::{
    DeviceLeak, LifetimeFaultDetail, NameCount, Problem, ProblemDetail, ProcessHealth, Severity,
};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

fn kind_words(kind: &str) -> String {
    match kind {
        "pending_work_at_destroy" => "context ended with work still pending".into(),
        "use_after_destroy" => "handle used after its context ended".into(),
        "pinned_memory_in_use" => "pinned host memory freed while streams used it".into(),
        "pinned_release_waited" => {
            "pinned host memory release waited for pending copies (a hidden synchronisation)".into()
        }
        "device_memory_in_use" => "device memory freed while streams used it".into(),
        "pinned_copy_race" => {
            "asynchronous copies racing on pinned host memory from unordered streams".into()
        }
        "host_write_race" => "host writes into the source of a pending pinned copy".into(),
        "forked_after_init" => "CUDA used in a child forked after the parent initialised it".into(),
        other => other.replace('_', " "),
    }
}

/// Kinds the driver itself handled safely, where no repair is needed and the program's
/// results are not at risk: at most a warning, never "not repaired".
fn handled_by_driver(kind: &str) -> bool {
    kind == "pinned_release_waited"
}

fn remediation(kind: &str, all_repaired: bool) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if handled_by_driver(kind) {
        v.push(
            "The driver waited for the copies before it released the memory, so the data is \
             intact; the free or unregister stalled its thread until the streams' earlier work \
             was done. Synchronise the stream (or an event recorded after the copy) where the \
             wait suits the program, or release the buffer later."
                .into(),
        );
        return v;
    }
    if all_repaired {
        v.push(
            "The fix mode repaired it, at the cost of a synchronisation or of hiding the \
             program's mistake: fix the program so that it runs correctly without it."
                .into(),
        );
    }
    v.push(match kind {
        "pending_work_at_destroy" => "Synchronise (cuCtxSynchronize, cudaDeviceSynchronize or \
             cuStreamSynchronize on every stream used) before destroying, resetting or \
             releasing the context: the work still queued is lost."
            .into(),
        "use_after_destroy" => "A stream, event or memory handle outlived its context: \
             destroy or free it before the context is destroyed or reset, and do not keep \
             handles across cudaDeviceReset."
            .into(),
        "pinned_memory_in_use" | "device_memory_in_use" => "Synchronise the streams that \
             read or write the memory (or record an event and wait for it) before freeing \
             it: an asynchronous copy or kernel still using it reads or writes freed memory."
            .into(),
        "pinned_copy_race" => "Order the second copy after the first: record an event after \
             the first copy (cuEventRecord / cudaEventRecord on its stream) and make the \
             second stream wait for it (cuStreamWaitEvent / cudaStreamWaitEvent) before the \
             second copy, or keep the pinned buffer (do not return it to a pool or reuse it) \
             until the first copy completes: the second copy may run before the first one \
             reads or writes the host memory."
            .into(),
        "host_write_race" => "Write a pinned staging buffer only after the copy from it \
             completed (cuStreamSynchronize, or an event recorded after the copy and \
             synchronised), or stage into another buffer: the copy may send the new bytes."
            .into(),
        "forked_after_init" => "The driver cannot be used in a process forked after its \
             parent initialised CUDA: every call there returns CUDA_ERROR_NOT_INITIALIZED (3), \
             cuInit included. Start worker processes with the spawn or forkserver method \
             (multiprocessing.set_start_method(\"spawn\"), torch.multiprocessing, a \
             DataLoader's multiprocessing_context=\"spawn\"), or initialise CUDA only in \
             the children, after the fork. No mode of the shim can repair it."
            .into(),
        _ => "A lifetime fault kind this analyzer does not know: the explanation above is \
             the shim's own."
            .into(),
    });
    // The fix mode does not synchronise before a pinned free or unregister (the driver
    // waits itself on driver 580; the shim judges what it did afterwards).
    if !all_repaired && kind != "pinned_memory_in_use" && kind != "forked_after_init" {
        v.push(if kind == "pinned_copy_race" {
            "Until the program is fixed, run it under seedance-fix in fix mode \
             (SEEDANCE_MODE=fix) so that the shim orders the second copy after the first."
                .into()
        } else if kind == "host_write_race" {
            "Until the program is fixed, run it under seedance-fix in fix mode with \
             SEEDANCE_HOST_GUARD=on: each such copy is then sent from the shim's snapshot \
             of the bytes at submission (a copy of the source per copy, within \
             SEEDANCE_HOST_GUARD_POOL), so later host writes do not reach the device."
                .into()
        } else {
            "Until the program is fixed, run it under seedance-fix in fix mode \
             (SEEDANCE_MODE=fix) so that the shim synchronises before the destroy or free."
                .into()
        });
    }
    v
}

pub(crate) fn lifetime_problems(procs: &[Proc], out: &mut Vec<Problem>) {
    #[derive(Default)]
    struct Acc<'a> {
        procs: Vec<&'a Proc<'a>>,
        repaired: u64,
        records: u64,
        hosts: BTreeSet<String>,
        functions: BTreeMap<&'a str, u64>,
        results: BTreeMap<&'a str, u64>,
        explanations: BTreeMap<&'a str, u64>,
        unrepaired_modes: Vec<String>,
    }
    let mut groups: BTreeMap<&str, Acc> = BTreeMap::new();
    for p in procs {
        let repaired_functions: BTreeSet<&str> = p
            .agg
            .lifetime_repairs
            .keys()
            .map(|(_, f)| f.as_str())
            .collect();
        // kind -> (all repaired, this process's records)
        type Mine<'a> = BTreeMap<&'a str, (bool, Vec<(&'a str, &'a LifetimeAgg)>)>;
        let mut mine: Mine = BTreeMap::new();
        for ((kind, function), la) in &p.agg.lifetime_faults {
            let e = mine.entry(kind).or_insert((true, Vec::new()));
            e.0 &= repaired_functions.contains(function.as_str());
            e.1.push((function, la));
        }
        for (kind, (repaired, list)) in mine {
            let a = groups.entry(kind).or_default();
            a.procs.push(p);
            a.hosts.insert(p.host());
            if repaired {
                a.repaired += 1;
            } else {
                a.unrepaired_modes.push(
                    p.agg
                        .session
                        .as_ref()
                        .map(|s| s.mode.clone())
                        .unwrap_or_else(|| "unknown".into()),
                );
            }
            let mut explanations: BTreeSet<&str> = BTreeSet::new();
            for (function, la) in list {
                a.records.sat_add(la.records);
                a.functions.entry(function).or_default().sat_add(la.records);
                for (r, n) in &la.results {
                    a.results.entry(r).or_default().sat_add(n);
                }
                explanations.extend(la.explanations.iter().map(String::as_str));
            }
            for e in explanations {
                *a.explanations.entry(e).or_default() += 1;
            }
        }
    }
    for (kind, a) in groups {
        let nprocs = a.procs.len() as u64;
        let by_driver = handled_by_driver(kind);
        let all_repaired = a.repaired == nprocs || by_driver;
        let unrepairable = kind == "forked_after_init";
        let outcome = if by_driver {
            "handled by the driver (no repair needed)".to_string()
        } else if unrepairable {
            "no mode can repair it".to_string()
        } else {
            repair_outcome(
                all_repaired,
                a.repaired,
                "repaired by the fix mode",
                "repaired by the fix mode",
            )
        };
        let functions = name_counts(&a.functions);
        let mut context = vec![format!(
            "what the program got: {}",
            a.results
                .iter()
                .map(|(r, n)| format!("{r} ({n} {})", plural(*n, "record", "records")))
                .collect::<Vec<_>>()
                .join(", ")
        )];
        if !all_repaired && !by_driver && !unrepairable {
            context.push(format!(
                "not repaired in {} {}; their mode: {}",
                nprocs - a.repaired,
                plural(nprocs - a.repaired, "process", "processes"),
                tally(a.unrepaired_modes.iter().cloned())
            ));
        }
        if a.procs.len() > 1 {
            context.extend(listed(&a.procs));
        }
        out.push(Problem {
            rank: 0,
            severity: if all_repaired {
                Severity::Warning
            } else {
                Severity::Error
            },
            title: format!(
                "lifetime fault: {} ({kind}) in {}; {outcome}",
                kind_words(kind),
                processes_on_hosts(nprocs, a.hosts.len())
            ),
            key: format!(
                "lifetime_fault/{}",
                kind.replace('%', "%25").replace('/', "%2F")
            ),
            count: nprocs,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            context,
            remediation: remediation(kind, all_repaired),
            detail: ProblemDetail::LifetimeFault(LifetimeFaultDetail {
                fault: kind.to_string(),
                processes_repaired: a.repaired,
                functions,
                explanations: ranked(a.explanations, MAX_EXPLANATIONS),
            }),
        });
    }
}

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

#[cfg(test)]
mod tests {
    use super::remediation;

    /// The advice for an unrepaired host write recommends only the guard's snapshot (fix
    /// mode with SEEDANCE_HOST_GUARD=on), never a wait for the copy; a pinned-copy race
    /// gets the ordering repair without the guard.
    #[test]
    fn unrepaired_host_writes_are_sent_to_the_snapshot() {
        let f = remediation("forked_after_init", false).join("\n");
        assert!(f.contains("spawn or forkserver"), "{f}");
        assert!(!f.contains("SEEDANCE_MODE=fix"), "{f}");
        let w = remediation("host_write_race", false).join("\n");
        assert!(w.contains("fix mode with SEEDANCE_HOST_GUARD=on"), "{w}");
        assert!(w.contains("shim's snapshot"), "{w}");
        assert!(!w.contains("wait for the copy"), "{w}");
        let c = remediation("pinned_copy_race", false).join("\n");
        assert!(c.contains("orders the second copy after the first"), "{c}");
        assert!(!c.contains("SEEDANCE_HOST_GUARD"), "{c}");
    }
}
