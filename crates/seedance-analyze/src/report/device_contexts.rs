//! The `device_contexts` section of the report (trace schema 5): per device of each host,
//! which processes made a context there and which of them did nothing there while working
//! on another device, with the memory those contexts cost where NVML gave it.
//!
//! A process's figures come from its exit summary (`device_use`, `stray_contexts`, the
//! final ones); a process without an exit summary (killed) contributes its `stray_context`
//! records, and its other devices are unknown.

use crate::aggregate::proc::Proc;
use crate::read::records::StrayInfo;
use crate::render::fmt;
use crate::report::host_label;
use crate::report::{DeviceContexts, StrayProcess};
use std::collections::{BTreeMap, BTreeSet};

/// The `device_contexts` section: devices with at least one stray context, most stray
/// memory first, then most stray processes, then host and device.
pub(crate) fn device_contexts(procs: &[Proc]) -> Vec<DeviceContexts> {
    let mut by: BTreeMap<(String, i32), DeviceContexts> = BTreeMap::new();
    for p in procs {
        let host = p.hostname();
        let exit = p.agg.exit.as_ref();
        let strays = strays_of(p);
        let stray_devices: BTreeSet<i32> = strays.iter().map(|s| s.device).collect();
        let mut seen: BTreeSet<i32> = BTreeSet::new();
        for u in exit.map(|e| e.device_use.as_slice()).unwrap_or(&[]) {
            if u.contexts == 0 && !stray_devices.contains(&u.device) {
                continue;
            }
            seen.insert(u.device);
            let d = entry(&mut by, &host, u.device);
            d.processes += 1;
            if u.worked {
                d.worked += 1;
            }
        }
        for s in strays {
            let e = entry(&mut by, &host, s.device);
            if !seen.contains(&s.device) {
                e.processes += 1;
            }
            e.stray += 1;
            let bytes = s.context_bytes.or(s.there.nvml_used_bytes);
            match bytes {
                Some(b) => e.stray_bytes = e.stray_bytes.saturating_add(b),
                None => e.stray_bytes_unknown += 1,
            }
            let mut works_on: Vec<i32> = s.working_devices.iter().map(|w| w.device).collect();
            works_on.sort_unstable();
            works_on.dedup();
            e.stray_processes.push(StrayProcess {
                file: p.agg.file.clone(),
                pid: p.agg.pid,
                executable: p.agg.session.as_ref().and_then(|s| s.executable.clone()),
                works_on,
                context_bytes: bytes,
                decided: s.decided.clone(),
            });
        }
    }
    for p in procs {
        let host = p.host();
        for (dev, pids) in &p.agg.oom_devices {
            if let Some(d) = by.get_mut(&(host.clone(), *dev)) {
                d.out_of_memory_processes += 1;
                for s in &d.stray_processes {
                    if pids.contains(&s.pid) && !d.stray_pids_at_out_of_memory.contains(&s.pid) {
                        d.stray_pids_at_out_of_memory.push(s.pid);
                    }
                }
            }
        }
    }
    let mut out: Vec<DeviceContexts> = by.into_values().filter(|d| d.stray > 0).collect();
    for d in &mut out {
        d.stray_processes.sort_by(|a, b| {
            b.context_bytes
                .cmp(&a.context_bytes)
                .then_with(|| a.file.cmp(&b.file))
                .then_with(|| a.pid.cmp(&b.pid))
        });
    }
    out.sort_by(|a, b| {
        b.stray_bytes
            .cmp(&a.stray_bytes)
            .then_with(|| b.stray.cmp(&a.stray))
            .then_with(|| host_label(&a.hostname).cmp(&host_label(&b.hostname)))
            .then_with(|| a.device.cmp(&b.device))
    });
    out
}

/// A process's stray contexts: its exit summary's list (the final figures), else its
/// `stray_context` records.
pub(crate) fn strays_of<'a>(p: &'a Proc) -> Vec<&'a StrayInfo> {
    match p.agg.exit.as_ref() {
        Some(e) if !e.stray_contexts.is_empty() => e.stray_contexts.iter().collect(),
        _ => p.agg.strays.values().collect(),
    }
}

fn entry<'m>(
    by: &'m mut BTreeMap<(String, i32), DeviceContexts>,
    host: &Option<String>,
    device: i32,
) -> &'m mut DeviceContexts {
    by.entry((host_label(host), device))
        .or_insert_with(|| DeviceContexts {
            hostname: host.clone(),
            device,
            processes: 0,
            worked: 0,
            stray: 0,
            stray_bytes: 0,
            stray_bytes_unknown: 0,
            stray_processes: Vec::new(),
            out_of_memory_processes: 0,
            stray_pids_at_out_of_memory: Vec::new(),
        })
}

/// What the memory of some stray contexts comes to, in words.
pub(crate) fn memory_words(bytes: u64, unknown: u64, stray: u64) -> String {
    match (bytes, unknown) {
        (0, _) if unknown == stray => "memory unknown (no NVML)".to_string(),
        (b, 0) => format!("{} by NVML", fmt::bytes(b)),
        (b, u) => format!("{} by NVML, {u} more unknown", fmt::bytes(b)),
    }
}

/// A stray process in words: `pid 7 (works on 0, 1, 512 MiB)` (the memory where known).
pub(crate) fn process_words(s: &StrayProcess) -> String {
    let works: Vec<String> = s.works_on.iter().map(|w| w.to_string()).collect();
    let mem = s
        .context_bytes
        .map_or(String::new(), |b| format!(", {}", fmt::bytes(b)));
    format!("pid {} (works on {}{mem})", s.pid, works.join(", "))
}
