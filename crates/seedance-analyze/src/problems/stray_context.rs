//! Stray contexts across a fleet (trace schema 5): one `stray_context` problem per device
//! ordinal, from the report's `device_contexts` section ([`crate::report::device_contexts`]).

use crate::aggregate::proc::Proc;
use crate::problems::parts::{plural, processes_on_hosts, MAX_EXPLANATIONS};
use crate::report::device_contexts::{memory_words, strays_of};
use crate::report::DeviceContexts;
use crate::report::{host_label, Problem, ProblemDetail, Severity, StrayContextDetail};
use std::collections::{BTreeMap, BTreeSet};

/// One `stray_context` problem per device ordinal: the processes that made a context on
/// it while working elsewhere, over all hosts.
pub(crate) fn stray_problems(procs: &[Proc], devices: &[DeviceContexts], out: &mut Vec<Problem>) {
    let mut by: BTreeMap<i32, Vec<&DeviceContexts>> = BTreeMap::new();
    for d in devices {
        by.entry(d.device).or_default().push(d);
    }
    for (device, ds) in by {
        let stray: u64 = ds.iter().map(|d| d.stray).sum();
        let bytes: u64 = ds.iter().map(|d| d.stray_bytes).sum();
        let unknown: u64 = ds.iter().map(|d| d.stray_bytes_unknown).sum();
        let hosts: BTreeSet<String> = ds.iter().map(|d| host_label(&d.hostname)).collect();
        let mut explanations: BTreeMap<String, u64> = BTreeMap::new();
        let mut context = Vec::new();
        for d in &ds {
            let works: BTreeSet<i32> = d
                .stray_processes
                .iter()
                .flat_map(|s| s.works_on.iter().copied())
                .collect();
            context.push(format!(
                "device {device} of {}: {} of the {} {} that made a context there {} on other \
                 devices ({}); {}",
                host_label(&d.hostname),
                d.stray,
                d.processes,
                plural(d.processes, "process", "processes"),
                if d.stray == 1 { "works" } else { "work" },
                works
                    .iter()
                    .map(|w| format!("device {w}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                memory_words(d.stray_bytes, d.stray_bytes_unknown, d.stray)
            ));
            if d.out_of_memory_processes > 0 {
                let mut pids = d.stray_pids_at_out_of_memory.clone();
                pids.sort_unstable();
                context.push(format!(
                    "an allocation on device {device} of {} failed for lack of memory in {} {}; \
                     NVML listed {} of the stray processes there at the failure{}",
                    host_label(&d.hostname),
                    d.out_of_memory_processes,
                    plural(d.out_of_memory_processes, "process", "processes"),
                    pids.len(),
                    if pids.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (pid {})",
                            pids.iter()
                                .map(|p| p.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ));
            }
        }
        let oom = ds.iter().any(|d| d.out_of_memory_processes > 0);
        for p in procs {
            for st in strays_of(p).into_iter().filter(|s| s.device == device) {
                *explanations.entry(st.explanation.clone()).or_default() += 1;
            }
        }
        let mut explanations: Vec<(String, u64)> = explanations.into_iter().collect();
        explanations.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.push(Problem {
            rank: 0,
            severity: if oom {
                Severity::Error
            } else {
                Severity::Warning
            },
            title: format!(
                "stray contexts on device {device}: {} that work on other devices made a \
                 context there ({})",
                processes_on_hosts(stray, hosts.len()),
                memory_words(bytes, unknown, stray)
            ),
            key: format!("stray_context/{device}"),
            count: stray,
            processes: stray,
            hosts: hosts.into_iter().collect(),
            context,
            remediation: vec![
                format!(
                    "Make each process use only its own device before any other CUDA call: \
                     torch.cuda.set_device(rank) (cudaSetDevice) before torch.distributed \
                     calls (barrier, destroy_process_group, init_process_group with \
                     device_id), no tensors on the default device cuda:{device}, or give each \
                     rank CUDA_VISIBLE_DEVICES=<its device> so that device {device} is not \
                     visible to it."
                ),
                "Until the programs are fixed, SEEDANCE_STRAY_CONTEXT=redirect (fix mode) \
                 sends a primary-context retain of device 0 by a process that works on one \
                 other device to that device (see docs/configuration.md for when it is safe)."
                    .to_string(),
            ],
            detail: ProblemDetail::StrayContext(StrayContextDetail {
                device,
                explanations: explanations
                    .into_iter()
                    .take(MAX_EXPLANATIONS)
                    .map(|(e, _)| e)
                    .collect(),
            }),
        });
    }
}
