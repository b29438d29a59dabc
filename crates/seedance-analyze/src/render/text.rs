//! The terminal form of a report: problems first (what to fix), then what the fix mode
//! repaired, then tables of hosts, processes, devices and functions, then what was read.
//! Long lists are cut (the JSON and HTML forms have everything).

use crate::render::escape;
use crate::render::fmt;
use crate::render::table::{push_wrapped, Table};
use crate::report::{ProcessStatus, Report, UNKNOWN_HOST};

/// Rows shown per table before the rest is summarized in one line.
pub const MAX_ROWS: usize = 50;
fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".to_string())
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn more(out: &mut String, total: usize, what: &str) {
    if total > MAX_ROWS {
        out.push_str(&format!(
            "  ... {} more {what} (see --format json or html)\n",
            total - MAX_ROWS
        ));
    }
}

/// A section writer: appends one section, heading first, to `out` (nothing for a section
/// that is left out).
type Section = fn(&Report, &mut String);

/// The sections of the whole report, in order; REPAIRS ends with its fallback table.
const SECTIONS: [Section; 10] = [
    summary_into,
    problems_into,
    |r, out| {
        repairs_into(r, out);
        fallbacks_into(r, out);
    },
    process_health_into,
    device_contexts_into,
    hosts_into,
    processes_into,
    devices_into,
    functions_into,
    input_into,
];

/// Renders the report for the terminal: its sections ([`summary`], [`problems`],
/// [`repairs`] and [`fallbacks`], [`process_health`], [`device_contexts`], [`hosts`],
/// [`processes`], [`devices`], [`functions`], [`input`]), each after a blank line; every
/// control character of the trace's strings escaped ([`crate::render::escape`]).
pub fn render(r: &Report) -> String {
    escaped(r, |r, out| {
        for section in SECTIONS {
            let mut s = String::new();
            section(r, &mut s);
            if s.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&s);
        }
    })
}

/// What `write` writes of `r`, with the control characters of the report's strings escaped
/// first, and those of the text once more ([`escape::terminal`]).
fn escaped(r: &Report, write: impl FnOnce(&Report, &mut String)) -> String {
    let copy = escape::strings(r);
    let mut out = String::new();
    write(copy.as_ref().unwrap_or(r), &mut out);
    escape::terminal(&out)
}

/// The SUMMARY section: processes, hosts, devices, calls and errors, the time span.
pub fn summary(r: &Report) -> String {
    escaped(r, summary_into)
}

fn summary_into(r: &Report, out: &mut String) {
    let o = &r.overview;
    out.push_str("SUMMARY\n");
    out.push_str(&format!(
        "  {} {} on {} {}, {} {}, {} {}; {}, {}\n",
        o.processes,
        plural(o.processes, "process", "processes"),
        o.hosts,
        plural(o.hosts, "host", "hosts"),
        o.devices,
        plural(o.devices, "device", "devices"),
        o.functions,
        plural(o.functions, "function", "functions"),
        plural_n(o.calls, "call", "calls"),
        plural_n(o.errors, "error", "errors"),
    ));
    if let (Some(a), Some(b), Some(fa), Some(fb)) =
        (o.first_ts_ns, o.last_ts_ns, &o.first_time, &o.last_time)
    {
        out.push_str(&format!(
            "  {fa} .. {fb} ({}, first to last record of all traces)\n",
            fmt::duration(b.saturating_sub(a))
        ));
    }
    if o.processes_without_exit_summary > 0 {
        let cut = r
            .processes
            .iter()
            .filter(|p| p.status == ProcessStatus::TraceCut)
            .count() as u64;
        if cut == 0 {
            out.push_str(&format!(
                "  {} without an exit summary (killed or still running)\n",
                plural_n(o.processes_without_exit_summary, "process", "processes")
            ));
        } else {
            out.push_str(&format!(
                "  {} without an exit summary ({cut} with a trace cut by a refused write: disk \
                 full or file size limit; the others killed or still running)\n",
                plural_n(o.processes_without_exit_summary, "process", "processes")
            ));
        }
    }
}

/// The PROBLEMS section: each problem with its facts and what to try.
pub fn problems(r: &Report) -> String {
    escaped(r, problems_into)
}

fn problems_into(r: &Report, out: &mut String) {
    out.push_str("PROBLEMS\n");
    if r.problems.is_empty() {
        out.push_str("  none found\n");
    }
    for p in &r.problems {
        out.push_str(&format!(
            "  {:>2}. [{}] {}\n",
            p.rank,
            p.severity.as_str(),
            p.title
        ));
        let label = |name: &str| format!("        {name:<10} ");
        if !p.functions().is_empty() {
            let f: Vec<String> = p
                .functions()
                .iter()
                .map(|f| format!("{} ({})", f.name, fmt::count(f.count)))
                .collect();
            push_wrapped(out, &label("functions:"), &f.join(", "));
        }
        for e in p.examples() {
            push_wrapped(
                out,
                &label("example:"),
                &format!("{} {} ({}x)", e.function, e.args, fmt::count(e.count)),
            );
        }
        for v in crate::problems::launch_alloc::value_texts(p) {
            push_wrapped(out, &label("value:"), &v);
        }
        for e in p.explanations() {
            push_wrapped(out, &label("shim said:"), e);
        }
        for e in p.driver_messages() {
            push_wrapped(out, &label("driver:"), e);
        }
        for c in &p.context {
            push_wrapped(out, &label("context:"), c);
        }
        for (i, s) in p.remediation.iter().enumerate() {
            let l = if i == 0 { label("try:") } else { label("") };
            push_wrapped(out, &format!("{l}- "), s);
        }
    }
}

/// The REPAIRS section without its fallback table ([`fallbacks`]): calls the fix mode
/// repaired, by kind.
pub fn repairs(r: &Report) -> String {
    escaped(r, repairs_into)
}

fn repairs_into(r: &Report, out: &mut String) {
    out.push_str("REPAIRS\n");
    let rp = &r.repairs;
    if rp.by_kind.is_empty() && rp.fallbacks.is_empty() {
        out.push_str("  none\n");
    } else {
        out.push_str(&format!(
            "  {} repaired in {} by the fix mode\n",
            plural_n(rp.calls_repaired, "call", "calls"),
            plural_n(rp.processes, "process", "processes")
        ));
        if !rp.by_kind.is_empty() {
            let mut t = Table::new(&["KIND", ">CALLS REPAIRED", ">PROCESSES"]);
            for k in rp.by_kind.iter().take(MAX_ROWS) {
                t.row(vec![
                    k.kind.clone(),
                    fmt::count(k.calls),
                    fmt::count(k.processes),
                ]);
            }
            out.push_str(&t.render("  "));
            more(out, rp.by_kind.len(), "repair kinds");
        }
    }
}

/// The fallback table that ends the REPAIRS section (requested ordinal -> the one used),
/// after a blank line; empty when there was no fallback.
pub fn fallbacks(r: &Report) -> String {
    escaped(r, fallbacks_into)
}

fn fallbacks_into(r: &Report, out: &mut String) {
    let rp = &r.repairs;
    if rp.fallbacks.is_empty() {
        return;
    }
    out.push('\n');
    let mut t = Table::new(&[
        "FALLBACK",
        "CHOSEN PCI BUS ID",
        ">PROCESSES",
        "HOSTS",
        "FUNCTIONS",
    ]);
    for f in rp.fallbacks.iter().take(MAX_ROWS) {
        t.row(vec![
            format!("ordinal {} -> {}", f.requested_ordinal, f.chosen_ordinal),
            opt(&f.chosen_pci_bus_id),
            fmt::count(f.processes),
            f.hosts.join(","),
            if f.functions.is_empty() {
                "-".to_string()
            } else {
                f.functions.join(",")
            },
        ]);
    }
    out.push_str(&t.render("  "));
    more(out, rp.fallbacks.len(), "fallbacks");
}

/// The PROCESS HEALTH section; empty when no process has a lifetime problem.
pub fn process_health(r: &Report) -> String {
    escaped(r, process_health_into)
}

fn process_health_into(r: &Report, out: &mut String) {
    if !r.process_health.is_empty() {
        out.push_str("PROCESS HEALTH\n");
        let mut t = Table::new(&[
            "PROCESS",
            "HOST",
            ">LIVE CTX",
            ">LEAKED ALLOCS",
            ">LEAKED BYTES",
            ">UNSYNCED STREAMS",
            ">AFTER DEINIT",
        ]);
        for p in r.process_health.iter().take(MAX_ROWS) {
            t.row(vec![
                format!(
                    "{} pid {}",
                    p.executable.as_deref().map(basename).unwrap_or("?"),
                    p.pid
                ),
                opt(&p.hostname),
                fmt::count(p.live_contexts),
                fmt::count(p.leaked_allocations),
                fmt::bytes(p.leaked_bytes),
                fmt::count(p.unsynchronized_streams),
                fmt::count(p.calls_after_deinit),
            ]);
        }
        out.push_str(&t.render("  "));
        more(out, r.process_health.len(), "processes");
        for p in r.process_health.iter().take(MAX_ROWS) {
            let name = p.executable.as_deref().map(basename).unwrap_or("?");
            for w in crate::report::health::health_words(p) {
                push_wrapped(out, "  ", &format!("{name} pid {}: {w}", p.pid));
            }
        }
    }
}

/// The DEVICE CONTEXTS section (stray contexts); empty when there is none.
pub fn device_contexts(r: &Report) -> String {
    escaped(r, device_contexts_into)
}

fn device_contexts_into(r: &Report, out: &mut String) {
    if !r.device_contexts.is_empty() {
        out.push_str(
            "DEVICE CONTEXTS (stray: a context on a device the process did nothing on while \
             it worked on another)\n",
        );
        let mut t = Table::new(&[
            "HOST",
            ">DEVICE",
            ">PROCESSES",
            ">WORKED",
            ">STRAY",
            "STRAY MEMORY",
        ]);
        for d in r.device_contexts.iter().take(MAX_ROWS) {
            t.row(vec![
                opt(&d.hostname),
                d.device.to_string(),
                fmt::count(d.processes),
                fmt::count(d.worked),
                fmt::count(d.stray),
                crate::report::device_contexts::memory_words(
                    d.stray_bytes,
                    d.stray_bytes_unknown,
                    d.stray,
                ),
            ]);
        }
        out.push_str(&t.render("  "));
        more(out, r.device_contexts.len(), "devices");
        for d in r.device_contexts.iter().take(MAX_ROWS) {
            let list: Vec<String> = d
                .stray_processes
                .iter()
                .map(|s| {
                    format!(
                        "{} {}",
                        s.executable.as_deref().map(basename).unwrap_or("?"),
                        crate::report::device_contexts::process_words(s)
                    )
                })
                .collect();
            push_wrapped(
                out,
                "  ",
                &format!(
                    "device {} of {}, stray contexts: {}",
                    d.device,
                    opt(&d.hostname),
                    list.join("; ")
                ),
            );
        }
    }
}

/// The HOSTS section: one row per host.
pub fn hosts(r: &Report) -> String {
    escaped(r, hosts_into)
}

fn hosts_into(r: &Report, out: &mut String) {
    out.push_str("HOSTS\n");
    let mut t = Table::new(&[
        "HOST",
        ">PROCESSES",
        ">NO EXIT SUMMARY",
        "DRIVER",
        ">DEVICES",
        ">CALLS",
        ">ERRORS",
    ]);
    for h in r.hosts.iter().take(MAX_ROWS) {
        t.row(vec![
            h.hostname
                .clone()
                .unwrap_or_else(|| UNKNOWN_HOST.to_string()),
            fmt::count(h.processes),
            fmt::count(h.processes_without_exit_summary),
            if h.driver_versions.is_empty() {
                "-".to_string()
            } else {
                h.driver_versions.join(",")
            },
            fmt::count(h.devices),
            fmt::count(h.calls),
            fmt::count(h.errors),
        ]);
    }
    out.push_str(&t.render("  "));
    more(out, r.hosts.len(), "hosts");
}

/// The PROCESSES section: one row per process.
pub fn processes(r: &Report) -> String {
    escaped(r, processes_into)
}

fn processes_into(r: &Report, out: &mut String) {
    out.push_str("PROCESSES\n");
    let mut t = Table::new(&[
        "HOST",
        ">PID",
        "EXECUTABLE",
        "START",
        ">DURATION",
        "MODE",
        "DRIVER",
        ">DEVICES",
        ">CALLS",
        ">ERRORS",
        "STATUS",
    ]);
    for p in r.processes.iter().take(MAX_ROWS) {
        let status = match (p.status, p.has_session_start) {
            (ProcessStatus::Exited, true) => "exited".to_string(),
            (ProcessStatus::Exited, false) => "exited (no session start)".to_string(),
            (ProcessStatus::NoExitSummary, true) => {
                "no exit summary (killed or still running)".to_string()
            }
            (ProcessStatus::NoExitSummary, false) => {
                "no exit summary, no session start".to_string()
            }
            (ProcessStatus::ForkedChild, _) => {
                "forked after CUDA was initialised (traced at its first failing call)".to_string()
            }
            (ProcessStatus::TraceCut, _) => {
                "trace cut by a refused write (disk full or file size limit)".to_string()
            }
        };
        t.row(vec![
            p.hostname
                .clone()
                .unwrap_or_else(|| UNKNOWN_HOST.to_string()),
            p.pid.to_string(),
            p.executable
                .as_deref()
                .map(basename)
                .unwrap_or("-")
                .to_string(),
            p.start_time.clone(),
            fmt::duration(p.duration_ns),
            opt(&p.mode),
            p.driver_version
                .map(fmt::driver_version)
                .unwrap_or_else(|| "-".to_string()),
            if p.has_session_start {
                p.devices.len().to_string()
            } else {
                "-".to_string()
            },
            p.calls.map(fmt::count).unwrap_or_else(|| "-".to_string()),
            fmt::count(p.errors),
            status,
        ]);
    }
    out.push_str(&t.render("  "));
    more(out, r.processes.len(), "processes");
}

/// The DEVICES section: one row per device, then the processes without NVML.
pub fn devices(r: &Report) -> String {
    escaped(r, devices_into)
}

fn devices_into(r: &Report, out: &mut String) {
    out.push_str("DEVICES\n");
    if r.devices.is_empty() {
        out.push_str("  none reported\n");
    } else {
        // The topology columns only when some trace has a session topology (schema 2).
        let topo = r
            .devices
            .iter()
            .any(|d| d.uuid.is_some() || d.physical_index.is_some() || d.compute_mode.is_some());
        let mut headers = vec![
            "HOST",
            "PCI BUS ID",
            "NAME",
            ">MEMORY",
            "ORDINALS",
            ">PROCESSES",
        ];
        if topo {
            headers.extend([">PHYSICAL", ">NVML", "UUID", "COMPUTE MODE"]);
        }
        let mut t = Table::new(&headers);
        let num = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        for d in r.devices.iter().take(MAX_ROWS) {
            let mut row = vec![
                d.hostname
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_HOST.to_string()),
                opt(&d.pci_bus_id),
                opt(&d.name),
                d.total_mem_bytes
                    .map(fmt::bytes)
                    .unwrap_or_else(|| "-".to_string()),
                d.ordinals
                    .iter()
                    .map(|o| o.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                fmt::count(d.processes),
            ];
            if topo {
                row.extend([
                    num(d.physical_index),
                    num(d.nvml_index),
                    opt(&d.uuid),
                    opt(&d.compute_mode),
                ]);
            }
            t.row(row);
        }
        out.push_str(&t.render("  "));
        more(out, r.devices.len(), "devices");
        if topo {
            out.push_str(
                "  PHYSICAL: the index CUDA_VISIBLE_DEVICES uses; NVML: nvidia-smi's index\n",
            );
        }
    }
    // NVML absent: nvidia-smi indices, free memory and busy processes are unknown.
    let mut no_nvml: std::collections::BTreeMap<(String, String), u64> = Default::default();
    for p in &r.processes {
        if let Some(t) = p.topology.as_ref().filter(|t| !t.nvml_present) {
            let host = p
                .hostname
                .clone()
                .unwrap_or_else(|| UNKNOWN_HOST.to_string());
            let reason = t
                .nvml_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into());
            *no_nvml.entry((host, reason)).or_default() += 1;
        }
    }
    for ((host, reason), n) in &no_nvml {
        push_wrapped(
            out,
            "  note: ",
            &format!(
                "NVML absent in {} on {host} (nvidia-smi indices, free memory and busy processes \
                 unknown): {reason}",
                plural_n(*n, "process", "processes")
            ),
        );
    }
}

/// The FUNCTIONS section: calls and errors per hooked function.
pub fn functions(r: &Report) -> String {
    escaped(r, functions_into)
}

fn functions_into(r: &Report, out: &mut String) {
    out.push_str("FUNCTIONS\n");
    if r.functions.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut t = Table::new(&[
            "FUNCTION",
            ">CALLS",
            ">ERRORS",
            ">ERROR RATE",
            "ERRORS BY RESULT",
        ]);
        let mut partial = false;
        for f in r.functions.iter().take(MAX_ROWS) {
            let star = if f.processes_without_exit_summary > 0 {
                partial = true;
                "*"
            } else {
                ""
            };
            t.row(vec![
                f.function.clone(),
                format!("{}{star}", fmt::count(f.calls)),
                fmt::count(f.errors),
                if star.is_empty() {
                    fmt::percent(f.errors, f.calls)
                } else {
                    "-".to_string()
                },
                f.errors_by_result
                    .iter()
                    .map(|(k, v)| format!("{k} {}", fmt::count(*v)))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]);
        }
        out.push_str(&t.render("  "));
        more(out, r.functions.len(), "functions");
        if partial {
            out.push_str("  * plus the unknown calls of processes without an exit summary\n");
        }
    }
}

/// The INPUT section: what was read and what was skipped.
pub fn input(r: &Report) -> String {
    escaped(r, input_into)
}

fn input_into(r: &Report, out: &mut String) {
    let i = &r.input;
    out.push_str("INPUT\n");
    out.push_str(&format!(
        "  files: {} read{}, {} skipped (not traces), {} empty, {} unreadable, {} with read errors\n",
        i.files_read,
        if i.gzip_files > 0 { format!(" ({} gzip)", i.gzip_files) } else { String::new() },
        i.files_skipped,
        i.empty_files,
        i.unreadable_files,
        i.files_with_read_errors
    ));
    out.push_str(&format!(
        "  {} lines, {} records, {} read ({} uncompressed)\n",
        fmt::count(i.lines),
        fmt::count(i.records),
        fmt::bytes(i.bytes),
        fmt::bytes(i.bytes_uncompressed)
    ));
    out.push_str(&format!(
        "  malformed lines: {}, truncated last lines: {}, oversized lines: {}\n",
        fmt::count(i.malformed_lines),
        fmt::count(i.truncated_lines),
        fmt::count(i.oversized_lines)
    ));
    if !i.unknown_event_kinds.is_empty() {
        let k: Vec<String> = i
            .unknown_event_kinds
            .iter()
            .map(|(k, v)| format!("{k} ({})", fmt::count(*v)))
            .collect();
        push_wrapped(out, "  unknown event kinds (skipped): ", &k.join(", "));
    }
    if i.newer_schema_records > 0 {
        out.push_str(&format!(
            "  records of a newer schema: {}\n",
            fmt::count(i.newer_schema_records)
        ));
    }
    for s in &i.skipped_files {
        out.push_str(&format!("  skipped: {s}\n"));
    }
    for e in &i.errors {
        out.push_str(&format!("  error: {}: {}\n", e.path, e.error));
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn plural_n(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", fmt::count(n), plural(n, one, many))
}
