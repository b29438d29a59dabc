//! Lifetime faults (trace schema 4): the `lifetime_fault` problems. The `process_health`
//! section of the report is [`crate::report::health`]'s.
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
use crate::report::{LifetimeFaultDetail, Problem, ProblemDetail, Severity};
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
