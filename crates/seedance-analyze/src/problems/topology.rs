//! The problems the session topology shows: `CUDA_VISIBLE_DEVICES` read only up to an
//! invalid entry, and device order warnings.

use crate::aggregate::proc::Proc;
use crate::problems::parts::{hosts_of, listed, plural, processes_on_hosts, simple_problem, tally};
use crate::render::fmt;
use crate::report::{Problem, ProblemDetail, Severity};
use std::collections::BTreeMap;

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
            ProblemDetail::CudaVisibleDevicesInvalid,
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
            ProblemDetail::DeviceOrder,
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
