//! The `repairs` section of a report: calls the fix mode repaired, by kind, and the device
//! fallbacks (requested ordinal -> the one used), over all processes.

use crate::aggregate::proc::{chosen_pci, Proc};
use crate::report::{FallbackReport, RepairKind, RepairsReport};
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
