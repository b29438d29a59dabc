//! The tables of the HTML page: the session topology, the processes, the functions and
//! the input read.

use super::text::{escape, host};
use crate::fmt;
use crate::report::{ProcessStatus, Report};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Rows of the processes table.
const TABLE_PROCESSES: usize = 2000;

pub(super) fn topology(h: &mut String, r: &Report) {
    let mut hosts: Vec<Option<String>> = r.hosts.iter().map(|x| x.hostname.clone()).collect();
    hosts.dedup();
    for name in hosts.iter().take(200) {
        let hr = r.hosts.iter().find(|x| &x.hostname == name);
        let _ = write!(h, "<div class=\"host\"><h3>{}</h3>", escape(host(name)));
        if let Some(hr) = hr {
            let _ = write!(
                h,
                "<p class=\"muted\">{}, driver {}</p>",
                fmt::counted(hr.processes, "process", "processes"),
                escape(&if hr.driver_versions.is_empty() {
                    "unknown".to_string()
                } else {
                    hr.driver_versions.join(", ")
                })
            );
        }
        let devs: Vec<_> = r.devices.iter().filter(|d| &d.hostname == name).collect();
        if devs.is_empty() {
            h.push_str("<p>No devices reported.</p>");
        } else {
            let topo = devs.iter().any(|d| {
                d.uuid.is_some() || d.physical_index.is_some() || d.compute_mode.is_some()
            });
            h.push_str("<table><thead><tr><th>PCI bus id</th><th>Name</th><th class=\"n\">Memory</th><th>Ordinals seen</th><th class=\"n\">Processes</th>");
            if topo {
                h.push_str("<th class=\"n\" title=\"the index CUDA_VISIBLE_DEVICES uses\">Physical index</th><th class=\"n\" title=\"nvidia-smi's index\">NVML index</th><th>UUID</th><th>Compute mode</th>");
            }
            h.push_str("</tr></thead><tbody>");
            let num = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
            for d in devs {
                let _ = write!(
                    h,
                    "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>",
                    escape(d.pci_bus_id.as_deref().unwrap_or("-")),
                    escape(d.name.as_deref().unwrap_or("-")),
                    d.total_mem_bytes.map(fmt::bytes).unwrap_or_else(|| "-".into()),
                    d.ordinals.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", "),
                    d.processes
                );
                if topo {
                    let _ = write!(
                        h,
                        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td><code>{}</code></td><td>{}</td>",
                        num(d.physical_index),
                        num(d.nvml_index),
                        escape(d.uuid.as_deref().unwrap_or("-")),
                        escape(d.compute_mode.as_deref().unwrap_or("-"))
                    );
                }
                h.push_str("</tr>");
            }
            h.push_str("</tbody></table>");
        }
        // NVML absent: nvidia-smi indices, free memory and busy processes are unknown.
        let mut no_nvml: BTreeMap<String, u64> = BTreeMap::new();
        for p in r.processes.iter().filter(|p| &p.hostname == name) {
            if let Some(t) = p.topology.as_ref().filter(|t| !t.nvml_present) {
                *no_nvml
                    .entry(
                        t.nvml_reason
                            .clone()
                            .unwrap_or_else(|| "no reason given".into()),
                    )
                    .or_default() += 1;
            }
        }
        for (reason, n) in no_nvml {
            let _ = write!(
                h,
                "<p class=\"muted\">NVML absent in {n} {} (nvidia-smi indices, free memory and busy processes unknown): {}</p>",
                if n == 1 { "process" } else { "processes" },
                escape(&reason)
            );
        }
        // How the processes on this host saw the devices.
        let mut views: BTreeMap<String, u64> = BTreeMap::new();
        for p in r.processes.iter().filter(|p| &p.hostname == name) {
            let v = format!(
                "CUDA_VISIBLE_DEVICES={} -> {} visible",
                p.cuda_visible_devices
                    .as_deref()
                    .map(|v| format!("{v:?}"))
                    .unwrap_or_else(|| "unset".into()),
                p.devices.len()
            );
            *views.entry(v).or_default() += 1;
        }
        if !views.is_empty() {
            h.push_str("<ul>");
            for (v, n) in views {
                let _ = write!(
                    h,
                    "<li class=\"muted\">{} ({})</li>",
                    escape(&v),
                    fmt::counted(n, "process", "processes")
                );
            }
            h.push_str("</ul>");
        }
        h.push_str("</div>\n");
    }
}

pub(super) fn processes_table(h: &mut String, r: &Report) {
    h.push_str("<table class=\"sortable\"><thead><tr><th>Host</th><th class=\"n\">PID</th><th>Executable</th><th>Start</th><th class=\"n\">Duration</th><th>Mode</th><th>Driver</th><th class=\"n\">Devices</th><th class=\"n\">Calls</th><th class=\"n\">Errors</th><th>Status</th><th>File</th></tr></thead><tbody>\n");
    for p in r.processes.iter().take(TABLE_PROCESSES) {
        let status = match p.status {
            ProcessStatus::Exited => "exited".to_string(),
            ProcessStatus::ForkedChild => {
                "forked after CUDA was initialised (traced at its first failing call)".to_string()
            }
            ProcessStatus::NoExitSummary => {
                "<span class=\"status-killed\">no exit summary (killed or still running)</span>"
                    .to_string()
            }
            ProcessStatus::TraceCut => {
                "trace cut by a refused write (disk full or file size limit)".to_string()
            }
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td title=\"{}\">{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            escape(host(&p.hostname)),
            p.pid,
            escape(&p.argv.join(" ")),
            escape(p.executable.as_deref().unwrap_or("-")),
            escape(&p.start_time),
            p.duration_ns,
            fmt::duration(p.duration_ns),
            escape(p.mode.as_deref().unwrap_or("-")),
            p.driver_version.map(fmt::driver_version).unwrap_or_else(|| "-".into()),
            p.devices.len(),
            p.calls.unwrap_or(0),
            p.calls.map(fmt::count).unwrap_or_else(|| "-".into()),
            p.errors,
            fmt::count(p.errors),
            status,
            escape(&p.file)
        );
    }
    h.push_str("</tbody></table>\n");
    if r.processes.len() > TABLE_PROCESSES {
        let _ = write!(h, "<p class=\"muted\">First {TABLE_PROCESSES} of {} processes; the JSON report has all.</p>", r.processes.len());
    }
}

pub(super) fn functions_table(h: &mut String, r: &Report) {
    h.push_str("<table class=\"sortable\"><thead><tr><th>Function</th><th class=\"n\">Calls</th><th class=\"n\">Errors</th><th class=\"n\">Processes</th><th>Errors by result</th></tr></thead><tbody>\n");
    for f in &r.functions {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td class=\"n\" data-v=\"{}\">{}{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&f.function),
            f.calls,
            fmt::count(f.calls),
            if f.processes_without_exit_summary > 0 { "+" } else { "" },
            f.errors,
            fmt::count(f.errors),
            f.processes,
            escape(
                &f.errors_by_result
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
    }
    h.push_str("</tbody></table>\n");
    if r.functions
        .iter()
        .any(|f| f.processes_without_exit_summary > 0)
    {
        h.push_str("<p class=\"muted\">+ : some processes had no exit summary, their calls are unknown.</p>\n");
    }
}

pub(super) fn input(h: &mut String, r: &Report) {
    let i = &r.input;
    h.push_str("<table><tbody>");
    let rows: Vec<(&str, String)> = vec![
        ("paths", i.paths.join(" ")),
        (
            "files read (gzip)",
            format!("{} ({})", i.files_read, i.gzip_files),
        ),
        ("files skipped (not traces)", i.files_skipped.to_string()),
        (
            "empty / unreadable / read errors",
            format!(
                "{} / {} / {}",
                i.empty_files, i.unreadable_files, i.files_with_read_errors
            ),
        ),
        (
            "bytes read (uncompressed)",
            format!(
                "{} ({})",
                fmt::bytes(i.bytes),
                fmt::bytes(i.bytes_uncompressed)
            ),
        ),
        (
            "lines / records",
            format!("{} / {}", fmt::count(i.lines), fmt::count(i.records)),
        ),
        (
            "malformed / truncated / oversized lines",
            format!(
                "{} / {} / {}",
                i.malformed_lines, i.truncated_lines, i.oversized_lines
            ),
        ),
        (
            "unknown event kinds",
            i.unknown_event_kinds
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("skipped files", i.skipped_files.join(", ")),
        (
            "errors",
            i.errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.error))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    ];
    for (k, v) in rows {
        // An empty list is none of them: 0, as the counts around it.
        let v = if v.is_empty() { "0".to_string() } else { v };
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(&v));
    }
    h.push_str("</tbody></table>\n");
}
