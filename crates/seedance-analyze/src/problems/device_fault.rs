//! Device faults (trace schema 2): the `device_fault` problems. The `repairs` section is
//! [`crate::report::repairs`]'s, the problems of the session topology [`crate::problems::topology`]'s.
//!
//! A `device_fault` problem is one (fault, requested ordinal) over all processes, with the
//! shim's own explanations. A process counts as repaired when every fault of it in the
//! problem was followed by a `device_fallback` of the same function and ordinal; the
//! problem is a `warning` when all its processes were repaired (the programs ran, on
//! another device than they asked for) and an `error` otherwise.

use crate::aggregate::proc::{chosen_pci, Proc};
use crate::problems::parts::{
    cvd, listed, name_counts, plural, processes_on_hosts, ranked, repair_outcome, tally,
    MAX_EXPLANATIONS,
};
use crate::report::{DeviceFaultDetail, Problem, ProblemDetail, Severity};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

/// The fault in words, for a title.
fn fault_words(fault: &str, ordinal: i32) -> String {
    match fault {
        "invalid_ordinal" => format!("ordinal {ordinal} requested but not visible"),
        "device_unavailable" => format!("ordinal {ordinal} unavailable to the process"),
        "context_out_of_memory" => format!("no memory for a context on ordinal {ordinal}"),
        "excluded" => format!("ordinal {ordinal} excluded by SEEDANCE_EXCLUDE_DEVICES"),
        other => format!("ordinal {ordinal}: {other}"),
    }
}

fn fault_remediation(fault: &str, all_repaired: bool, some_unrepaired_fix: bool) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if all_repaired {
        v.push(
            "The program ran, but on another device than the one it asked for: fix its device \
             selection (LOCAL_RANK to device mapping, --device, cuda:N, cudaSetDevice) so that \
             it asks for a device it can have."
                .into(),
        );
    }
    match fault {
        "invalid_ordinal" => {
            v.push(
                "Ordinals count from 0 over the devices left by CUDA_VISIBLE_DEVICES, not \
                 physical GPU numbers: with CUDA_VISIBLE_DEVICES=1 the only device is ordinal 0. \
                 The explanation above names the ordinal to use."
                    .into(),
            );
            v.push(
                "A program written for more GPUs than the host or container exposes: run fewer \
                 ranks per node, or give the job more GPUs."
                    .into(),
            );
        }
        "device_unavailable" => {
            v.push(
                "The device is in Exclusive_Process compute mode and another process holds it, \
                 or it is Prohibited: check nvidia-smi (compute mode, processes) and wait for or \
                 stop the other process."
                    .into(),
            );
            v.push(
                "Give each process its own GPU (CUDA_VISIBLE_DEVICES per rank), or have an \
                 administrator set the compute mode to Default (nvidia-smi -i N -c DEFAULT)."
                    .into(),
            );
        }
        "context_out_of_memory" => {
            v.push(
                "Other processes fill the device's memory (nvidia-smi lists them): a context \
                 needs a few hundred MiB. Stop leftover processes or spread the ranks over the \
                 GPUs, one per GPU."
                    .into(),
            );
        }
        "excluded" => {
            v.push(
                "The device is listed in SEEDANCE_EXCLUDE_DEVICES: remove it from the list, or \
                 have the program select another device."
                    .into(),
            );
        }
        _ => {
            v.push(
                "A fault kind this analyzer does not know: the explanation above is the shim's \
                 own."
                    .into(),
            );
        }
    }
    if !all_repaired {
        if some_unrepaired_fix {
            v.push(
                "In fix mode no other visible device could take the work (all unusable, or \
                 SEEDANCE_FALLBACK=off): make a usable device visible to the process."
                    .into(),
            );
        } else {
            v.push(
                "Until the program is fixed, run it under seedance-fix in fix mode \
                 (SEEDANCE_MODE=fix, the default) so that the request goes to a usable \
                 device."
                    .into(),
            );
        }
    }
    v
}

/// The processes with faults of one (fault, requested ordinal).
struct Acc<'a> {
    procs: Vec<&'a Proc<'a>>,
    repaired: u64,
    unrepaired_fix: u64,
    hosts: BTreeSet<String>,
    /// Result number -> its key (name or number).
    results: BTreeMap<u32, String>,
    functions: BTreeMap<&'a str, u64>,
    explanations: BTreeMap<&'a str, u64>,
    /// "ordinal a -> b (pci)" -> processes.
    fallbacks: BTreeMap<String, u64>,
    /// Modes of the processes not repaired.
    unrepaired_modes: Vec<String>,
}

/// The faults of `procs` grouped by (fault, requested ordinal).
fn group_faults<'a>(procs: &'a [Proc<'a>]) -> BTreeMap<(&'a str, i32), Acc<'a>> {
    let mut groups: BTreeMap<(&str, i32), Acc> = BTreeMap::new();
    for p in procs {
        // (fault, ordinal) -> (all repaired, functions with their result keys, explanations)
        type Mine<'a> = (
            bool,
            BTreeSet<(&'a str, String)>,
            BTreeSet<&'a str>,
            Vec<(u32, String)>,
        );
        let mut mine: BTreeMap<(&str, i32), Mine> = BTreeMap::new();
        for ((f, ord, r), fa) in &p.agg.faults {
            let e = mine
                .entry((fa.fault.as_str(), *ord))
                .or_insert_with(|| (true, BTreeSet::new(), BTreeSet::new(), Vec::new()));
            e.0 &= p.repaired(f, *ord);
            e.1.insert((f.as_str(), fa.result_key(*r)));
            if !fa.explanation.is_empty() {
                e.2.insert(fa.explanation.as_str());
            }
            e.3.push((*r, fa.result_key(*r)));
        }
        for ((fault, ord), (repaired, functions, explanations, results)) in mine {
            let a = groups.entry((fault, ord)).or_insert_with(|| Acc {
                procs: Vec::new(),
                repaired: 0,
                unrepaired_fix: 0,
                hosts: BTreeSet::new(),
                results: BTreeMap::new(),
                functions: BTreeMap::new(),
                explanations: BTreeMap::new(),
                fallbacks: BTreeMap::new(),
                unrepaired_modes: Vec::new(),
            });
            a.procs.push(p);
            a.hosts.insert(p.host());
            let mode = p.agg.session.as_ref().map(|s| s.mode.clone());
            if repaired {
                a.repaired += 1;
            } else {
                if mode.as_deref() == Some("fix") {
                    a.unrepaired_fix += 1;
                }
                a.unrepaired_modes
                    .push(mode.unwrap_or_else(|| "unknown".into()));
            }
            for (f, key) in &functions {
                let n = p
                    .by_function
                    .get(f)
                    .and_then(|(_, _, by)| by.get(key.as_str()))
                    .copied()
                    .unwrap_or(0);
                a.functions.entry(f).or_default().sat_add(n);
            }
            for (r, key) in results {
                a.results.entry(r).or_insert(key);
            }
            for e in explanations {
                *a.explanations.entry(e).or_default() += 1;
            }
            let mut targets: BTreeSet<String> = BTreeSet::new();
            for ((f, req, chosen), fb) in &p.agg.fallbacks {
                if *req == ord && functions.iter().any(|(ff, _)| ff == f) {
                    let pci = fb
                        .chosen_pci_bus_id
                        .as_ref()
                        .map(|s| s.to_ascii_lowercase())
                        .or_else(|| chosen_pci(p, *chosen));
                    targets.insert(match pci {
                        Some(pci) => format!("ordinal {req} -> {chosen} ({pci})"),
                        None => format!("ordinal {req} -> {chosen}"),
                    });
                }
            }
            for t in targets {
                *a.fallbacks.entry(t).or_default() += 1;
            }
        }
    }
    groups
}

/// The `device_fault` problems: one per (fault, requested ordinal).
pub(crate) fn device_fault_problems(procs: &[Proc], out: &mut Vec<Problem>) {
    let groups = group_faults(procs);
    for ((fault, ord), a) in groups {
        let nprocs = a.procs.len() as u64;
        let all_repaired = a.repaired == nprocs;
        let (code, result) = a
            .results
            .iter()
            .next()
            .map(|(c, k)| (Some(*c), Some(k.clone())))
            .unwrap_or((None, None));
        let result_label = match (&result, code) {
            (Some(r), Some(c)) if *r != c.to_string() => format!(", {r} {c}"),
            (Some(r), _) => format!(", {r}"),
            _ => String::new(),
        };
        let outcome = repair_outcome(
            all_repaired,
            a.repaired,
            "repaired by fallback, ran on another device",
            "repaired by fallback",
        );
        let functions = name_counts(&a.functions);
        let explanations = ranked(a.explanations, MAX_EXPLANATIONS);
        let mut context = Vec::new();
        for (t, n) in &a.fallbacks {
            context.push(format!(
                "repaired by fallback: {t} in {n} {}",
                plural(*n, "process", "processes")
            ));
        }
        if !all_repaired {
            context.push(format!(
                "not repaired in {} {}; their mode: {}",
                nprocs - a.repaired,
                plural(nprocs - a.repaired, "process", "processes"),
                tally(a.unrepaired_modes.iter().cloned())
            ));
        }
        context.push(format!(
            "CUDA_VISIBLE_DEVICES in the affected processes: {}",
            tally(a.procs.iter().map(|p| cvd(p)))
        ));
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
                "device fault: {} ({fault}{result_label}) in {}; {outcome}",
                fault_words(fault, ord),
                processes_on_hosts(nprocs, a.hosts.len())
            ),
            key: format!("device_fault/{fault}/{ord}"),
            count: nprocs,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            context,
            remediation: fault_remediation(fault, all_repaired, a.unrepaired_fix > 0),
            detail: ProblemDetail::DeviceFault(DeviceFaultDetail {
                code,
                result,
                functions,
                fault: fault.to_string(),
                requested_ordinal: ord,
                processes_repaired: a.repaired,
                explanations,
            }),
        });
    }
}
