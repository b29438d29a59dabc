//! Device faults, repairs and the session topology (trace schema 2): the `repairs` section
//! of the report, the `device_fault` problems, and the problems the topology shows
//! (`CUDA_VISIBLE_DEVICES` read only up to an invalid entry, device order warnings).
//!
//! A `device_fault` problem is one (fault, requested ordinal) over all processes, with the
//! shim's own explanations. A process counts as repaired when every fault of it in the
//! problem was followed by a `device_fallback` of the same function and ordinal; the
//! problem is a `warning` when all its processes were repaired (the programs ran, on
//! another device than they asked for) and an `error` otherwise.

use crate::fmt;
use crate::parts::{
    cvd, hosts_of, listed, name_counts, plural, processes_on_hosts, ranked, repair_outcome,
    simple_problem, tally, MAX_EXPLANATIONS,
};
use crate::proc::Proc;
use crate::report::{FallbackReport, Problem, ProblemKind, RepairKind, RepairsReport, Severity};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) fn repairs_report(procs: &[Proc]) -> RepairsReport {
    let mut kinds: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    type FallbackKey = (i32, i32, Option<String>);
    struct Acc {
        processes: u64,
        hosts: BTreeSet<String>,
        functions: BTreeSet<String>,
    }
    let mut fallbacks: BTreeMap<FallbackKey, Acc> = BTreeMap::new();
    let mut processes = 0;
    for p in procs {
        if p.repairs.values().any(|n| *n > 0) {
            processes += 1;
        }
        for (k, n) in &p.repairs {
            let e = kinds.entry(k).or_default();
            e.0.sat_add(n);
            e.1 += 1;
        }
        // This process's fallbacks: from the records (with the functions), then the exit
        // summary's choices the records lack.
        let mut mine: BTreeMap<FallbackKey, BTreeSet<&str>> = BTreeMap::new();
        for ((f, req, chosen), fb) in &p.agg.fallbacks {
            let pci = fb
                .chosen_pci_bus_id
                .as_ref()
                .map(|s| s.to_ascii_lowercase())
                .or_else(|| chosen_pci(p, *chosen));
            mine.entry((*req, *chosen, pci)).or_default().insert(f);
        }
        if let Some(e) = &p.agg.exit {
            for (req, chosen) in &e.fallbacks {
                let Ok(req) = req.trim().parse::<i32>() else {
                    continue;
                };
                if !mine.keys().any(|(r, c, _)| *r == req && c == chosen) {
                    mine.entry((req, *chosen, chosen_pci(p, *chosen)))
                        .or_default();
                }
            }
        }
        for (key, functions) in mine {
            let a = fallbacks.entry(key).or_insert_with(|| Acc {
                processes: 0,
                hosts: BTreeSet::new(),
                functions: BTreeSet::new(),
            });
            a.processes += 1;
            a.hosts.insert(p.host());
            a.functions
                .extend(functions.into_iter().map(str::to_string));
        }
    }
    let mut by_kind: Vec<RepairKind> = kinds
        .into_iter()
        .map(|(k, (calls, processes))| RepairKind {
            kind: k.to_string(),
            calls,
            processes,
        })
        .collect();
    by_kind.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.kind.cmp(&b.kind)));
    let mut fallbacks: Vec<FallbackReport> = fallbacks
        .into_iter()
        .map(|((req, chosen, pci), a)| FallbackReport {
            requested_ordinal: req,
            chosen_ordinal: chosen,
            chosen_pci_bus_id: pci,
            processes: a.processes,
            hosts: a.hosts.into_iter().collect(),
            functions: a.functions.into_iter().collect(),
        })
        .collect();
    fallbacks.sort_by(|a, b| {
        b.processes.cmp(&a.processes).then_with(|| {
            (a.requested_ordinal, a.chosen_ordinal, &a.chosen_pci_bus_id).cmp(&(
                b.requested_ordinal,
                b.chosen_ordinal,
                &b.chosen_pci_bus_id,
            ))
        })
    });
    RepairsReport {
        calls_repaired: crate::sat_sum(by_kind.iter().map(|k| k.calls)),
        processes,
        by_kind,
        fallbacks,
    }
}

/// PCI bus id of `ordinal` in the process's session start.
fn chosen_pci(p: &Proc, ordinal: i32) -> Option<String> {
    let s = p.agg.session.as_ref()?;
    crate::proc::topology_device(s, ordinal)
        .and_then(|d| d.pci_bus_id.clone())
        .or_else(|| {
            s.devices
                .iter()
                .find(|d| d.ordinal == ordinal)
                .and_then(|d| d.pci_bus_id.clone())
        })
        .map(|s| s.to_ascii_lowercase())
}

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

pub(crate) fn device_fault_problems(procs: &[Proc], out: &mut Vec<Problem>) {
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
            kind: ProblemKind::DeviceFault,
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
            code,
            result,
            count: nprocs,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            functions,
            examples: Vec::new(),
            context,
            remediation: fault_remediation(fault, all_repaired, a.unrepaired_fix > 0),
            fault: Some(fault.to_string()),
            requested_ordinal: Some(ord),
            processes_repaired: Some(a.repaired),
            explanations,
            check: None,
            unit: None,
            values: Vec::new(),
            driver_messages: Vec::new(),
            processes_refused: None,
        });
    }
}

pub(crate) fn topology_problems(procs: &[Proc], out: &mut Vec<Problem>) {
    let mut sorted: Vec<&Proc> = procs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.hostname(), a.start(), a.agg.pid, &a.agg.file).cmp(&(
            b.hostname(),
            b.start(),
            b.agg.pid,
            &b.agg.file,
        ))
    });

    // CUDA_VISIBLE_DEVICES read up to an invalid entry.
    type StopKey = (Option<String>, u64, String, String);
    let mut stops: BTreeMap<StopKey, Vec<&Proc>> = BTreeMap::new();
    for p in &sorted {
        let Some(t) = p.agg.session.as_ref().and_then(|s| s.topology.as_ref()) else {
            continue;
        };
        if let Some(st) = &t.visibility.stopped_at {
            let raw = t.visibility.cuda_visible_devices.clone().or_else(|| {
                p.agg
                    .session
                    .as_ref()
                    .and_then(|s| s.cuda_visible_devices.clone())
            });
            stops
                .entry((raw, st.position, st.entry.clone(), st.reason.clone()))
                .or_default()
                .push(p);
        }
    }
    for ((raw, position, entry, reason), affected) in stops {
        let hosts = hosts_of(&affected);
        let n = affected.len() as u64;
        let visible = tally(affected.iter().map(|p| {
            p.agg
                .session
                .as_ref()
                .map(|s| s.devices.len().to_string())
                .unwrap_or_default()
        }));
        let mut context = vec![format!("devices left visible: {visible}")];
        context.extend(listed(&affected));
        let mut problem = simple_problem(
            ProblemKind::CudaVisibleDevicesInvalid,
            Severity::Warning,
            format!(
                "CUDA_VISIBLE_DEVICES={}: the driver stopped at entry {position} ({entry:?}), \
                 which {reason}, and ignored it and every entry after it, in {}",
                raw.as_deref()
                    .map(|r| format!("{r:?}"))
                    .unwrap_or_else(|| "(unknown)".into()),
                processes_on_hosts(n, hosts.len())
            ),
            n,
            &affected,
            context,
            &[
                "Fix CUDA_VISIBLE_DEVICES: every entry must be a GPU index below the host's GPU \
                 count, a GPU UUID (GPU-...) or a MIG UUID. The driver stops at the first invalid \
                 entry, so the program sees fewer GPUs than the variable lists.",
                "Check what sets it (the scheduler, the container runtime, a launch script): it \
                 should list the GPUs actually allocated to the job on this host.",
            ],
        );
        problem.key = format!(
            "cuda_visible_devices_invalid/{}/{position}",
            raw.unwrap_or_default()
        );
        out.push(problem);
    }

    // Order warnings: one problem, the distinct warnings as context.
    let mut warned: Vec<&Proc> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for p in &sorted {
        if let Some(w) = p
            .agg
            .session
            .as_ref()
            .and_then(|s| s.topology.as_ref())
            .and_then(|t| t.order_warning.as_ref())
        {
            warned.push(p);
            texts.push(w.clone());
        }
    }
    if !warned.is_empty() {
        let hosts = hosts_of(&warned);
        let n = warned.len() as u64;
        let mut by_text: BTreeMap<String, u64> = BTreeMap::new();
        for t in texts {
            *by_text.entry(t).or_default() += 1;
        }
        let mut by_text: Vec<(String, u64)> = by_text.into_iter().collect();
        by_text.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut context: Vec<String> = by_text
            .into_iter()
            .map(|(t, k)| {
                format!(
                    "{t} ({} {})",
                    fmt::count(k),
                    plural(k, "process", "processes")
                )
            })
            .collect();
        context.extend(listed(&warned));
        out.push(simple_problem(
            ProblemKind::DeviceOrder,
            Severity::Warning,
            format!(
                "CUDA's device numbering may not be the one the job expects (CUDA_DEVICE_ORDER) \
                 in {}",
                processes_on_hosts(n, hosts.len())
            ),
            n,
            &warned,
            context,
            &[
                "Set CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA ordinals and the indices of \
                 CUDA_VISIBLE_DEVICES follow nvidia-smi's numbering, or select GPUs by UUID.",
                "CUDA_DEVICE_ORDER takes FASTEST_FIRST or PCI_BUS_ID only; any other value is \
                 taken as FASTEST_FIRST.",
            ],
        ));
    }
}
