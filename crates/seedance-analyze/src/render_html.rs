//! The HTML form of a report: one self-contained page (inline CSS, a few lines of inline
//! JavaScript to sort tables, charts as inline SVG drawn here), no network access, so it
//! can be attached to a ticket or opened offline.
//!
//! Charts: errors over time (stacked by CUresult), calls and errors per function, a
//! timeline of the processes, the repairs of the fix mode, the launch and allocation faults
//! the shim explained (schema 3), and the session topology (hosts,
//! their devices with their physical identity when the traces have it, and the processes
//! that saw them). Every string from the traces is HTML-escaped.

use crate::fmt;
use crate::report::{Problem, ProblemKind, ProcessStatus, Report, UNKNOWN_HOST};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Functions drawn in the calls chart.
const CHART_FUNCTIONS: usize = 30;
/// Processes drawn in the timeline.
const CHART_PROCESSES: usize = 100;
/// Rows of the processes table.
const TABLE_PROCESSES: usize = 2000;
/// Most bars in the errors-over-time chart.
const CHART_SLOTS: u64 = 600;
/// Result names drawn in their own colour; the rest are "other".
const PALETTE: [&str; 6] = [
    "#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b", "#e377c2",
];
const OTHER_COLOUR: &str = "#7f7f7f";

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn host(h: &Option<String>) -> &str {
    h.as_deref().unwrap_or(UNKNOWN_HOST)
}

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f7f9}
header{background:#1f2937;color:#fff;padding:16px 28px}
header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#cbd5e1}
main{padding:8px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px 18px;margin:16px 0}
h2{font-size:17px;margin:4px 0 10px}
h3{font-size:15px;margin:12px 0 6px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{background:#f3f4f6;cursor:pointer;user-select:none;white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.problem{border-left:5px solid #999;padding:6px 12px;margin:10px 0;background:#fafafa}
.problem.error{border-color:#d62728}.problem.warning{border-color:#ff9f1c}.problem.info{border-color:#1f77b4}
.problem .t{font-weight:600}
.sev{display:inline-block;font-size:11px;text-transform:uppercase;padding:1px 6px;border-radius:3px;color:#fff;margin-right:6px}
.sev.error{background:#d62728}.sev.warning{background:#e08a00}.sev.info{background:#1f77b4}
.problem ul{margin:4px 0 0 0;padding-left:20px}
code{font-size:12px;background:#f3f4f6;padding:1px 4px;border-radius:3px;word-break:break-all}
.muted{color:#6b7280}
svg text{font-size:11px;fill:#374151}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.host{border:1px solid #e5e7eb;border-radius:6px;padding:6px 12px;margin:8px 0}
.status-killed{color:#b45309;font-weight:600}
"#;

const JS: &str = r#"
document.querySelectorAll('table.sortable th').forEach(function(th,i){
  th.addEventListener('click',function(){
    var tb=th.closest('table').tBodies[0];var rows=Array.from(tb.rows);
    var asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    rows.sort(function(a,b){
      var x=a.cells[i].dataset.v||a.cells[i].textContent,y=b.cells[i].dataset.v||b.cells[i].textContent;
      var nx=parseFloat(x),ny=parseFloat(y);
      var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
      return asc?c:-c;});
    rows.forEach(function(r){tb.appendChild(r);});
  });
});
"#;

/// Renders the report as one self-contained HTML page.
pub fn render(r: &Report) -> String {
    let mut h = String::with_capacity(64 << 10);
    let o = &r.overview;
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    h.push_str("<title>seedance-analyze report</title><style>");
    h.push_str(CSS);
    h.push_str("</style></head><body>\n<header><h1>seedance-analyze report</h1><p>");
    let _ = write!(
        h,
        "{} on {} &middot; {} &middot; {} &middot; {} &middot; {}",
        fmt::counted(o.processes, "process", "processes"),
        fmt::counted(o.hosts, "host", "hosts"),
        fmt::counted(o.devices, "device", "devices"),
        fmt::counted(o.functions, "function", "functions"),
        fmt::counted(o.calls, "call", "calls"),
        fmt::counted(o.errors, "error", "errors")
    );
    if let (Some(a), Some(b)) = (&o.first_time, &o.last_time) {
        let _ = write!(h, " &middot; {} .. {}", escape(a), escape(b));
        if let (Some(x), Some(y)) = (o.first_ts_ns, o.last_ts_ns) {
            let _ = write!(
                h,
                " ({}, first to last record of all traces)",
                fmt::duration(y.saturating_sub(x))
            );
        }
    }
    h.push_str("</p></header>\n<main>\n");

    problems(&mut h, r);
    section(&mut h, "Repairs", |h| repairs(h, r));
    section(&mut h, "Launch and allocation faults", |h| explained(h, r));
    if !r.process_health.is_empty() {
        section(&mut h, "Process health", |h| process_health(h, r));
    }
    if !r.device_contexts.is_empty() {
        section(&mut h, "Device contexts", |h| device_contexts(h, r));
    }
    section(&mut h, "Errors over time", |h| errors_chart(h, r));
    section(&mut h, "Calls per function", |h| functions_chart(h, r));
    section(&mut h, "Process timeline", |h| timeline_chart(h, r));
    section(&mut h, "Session topology", |h| topology(h, r));
    section(&mut h, "Processes", |h| processes_table(h, r));
    section(&mut h, "Functions", |h| functions_table(h, r));
    section(&mut h, "Input", |h| input(h, r));

    let _ = writeln!(
        h,
        "<p class=\"muted\">report_version {} &middot; generated by seedance-analyze</p>",
        r.report_version
    );
    h.push_str("</main>\n<script>");
    h.push_str(JS);
    h.push_str("</script>\n</body></html>\n");
    h
}

fn section(h: &mut String, title: &str, body: impl FnOnce(&mut String)) {
    let id: String = title
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let _ = writeln!(h, "<section id=\"{id}\"><h2>{}</h2>", escape(title));
    body(h);
    h.push_str("</section>\n");
}

fn problems(h: &mut String, r: &Report) {
    h.push_str("<section id=\"problems\"><h2>Problems</h2>\n");
    if r.problems.is_empty() {
        h.push_str("<p>None found.</p>\n");
    }
    for p in &r.problems {
        let sev = p.severity.as_str();
        let _ = write!(
            h,
            "<div class=\"problem {sev}\"><div class=\"t\"><span class=\"sev {sev}\">{sev}</span>{}. {}</div><ul>",
            p.rank,
            escape(&p.title)
        );
        if !p.functions.is_empty() {
            let f: Vec<String> = p
                .functions
                .iter()
                .map(|f| format!("<code>{}</code> ({})", escape(&f.name), fmt::count(f.count)))
                .collect();
            let _ = write!(h, "<li>functions: {}</li>", f.join(", "));
        }
        for e in &p.examples {
            let _ = write!(
                h,
                "<li>example: <code>{} {}</code> ({}&times;)</li>",
                escape(&e.function),
                escape(&e.args.to_string()),
                fmt::count(e.count)
            );
        }
        for v in &p.values {
            let _ = write!(
                h,
                "<li>value: {}</li>",
                escape(&crate::explained::value_text(p, v))
            );
        }
        for e in &p.explanations {
            let _ = write!(h, "<li>shim said: <q>{}</q></li>", escape(e));
        }
        for e in &p.driver_messages {
            let _ = write!(h, "<li>driver said: <q>{}</q></li>", escape(e));
        }
        for c in &p.context {
            let _ = write!(h, "<li class=\"muted\">{}</li>", escape(c));
        }
        h.push_str("</ul><div><b>What to try:</b><ul>");
        for s in &p.remediation {
            let _ = write!(h, "<li>{}</li>", escape(s));
        }
        h.push_str("</ul></div></div>\n");
    }
    h.push_str("</section>\n");
}

fn repairs(h: &mut String, r: &Report) {
    let rp = &r.repairs;
    if rp.by_kind.is_empty() && rp.fallbacks.is_empty() {
        h.push_str("<p>No repairs.</p>\n");
        return;
    }
    let _ = write!(
        h,
        "<p>{} repaired in {} by the fix mode.</p>",
        fmt::counted(rp.calls_repaired, "call", "calls"),
        fmt::counted(rp.processes, "process", "processes")
    );
    h.push_str("<table><thead><tr><th>Kind</th><th class=\"n\">Calls repaired</th><th class=\"n\">Processes</th></tr></thead><tbody>");
    for k in &rp.by_kind {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&k.kind),
            fmt::count(k.calls),
            fmt::count(k.processes)
        );
    }
    h.push_str("</tbody></table>\n");
    if !rp.fallbacks.is_empty() {
        h.push_str("<h3>Fallbacks</h3><table><thead><tr><th>Requested ordinal</th><th>Chosen ordinal</th><th>Chosen PCI bus id</th><th class=\"n\">Processes</th><th>Hosts</th><th>Functions</th></tr></thead><tbody>");
        for f in &rp.fallbacks {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                f.requested_ordinal,
                f.chosen_ordinal,
                escape(f.chosen_pci_bus_id.as_deref().unwrap_or("-")),
                fmt::count(f.processes),
                escape(&f.hosts.join(", ")),
                escape(&f.functions.join(", "))
            );
        }
        h.push_str("</tbody></table>\n");
    }
}

/// What processes left behind at exit (trace schema 4), one row per process.
fn process_health(h: &mut String, r: &Report) {
    h.push_str("<p>What processes left behind at exit (resources of primary contexts still retained are not counted).</p>");
    h.push_str("<table><thead><tr><th>Process</th><th>Host</th><th class=\"n\">Live contexts</th><th class=\"n\">Leaked allocations</th><th class=\"n\">Leaked bytes</th><th class=\"n\">Unsynchronised streams</th><th class=\"n\">Calls after deinit</th><th>Details</th></tr></thead><tbody>");
    for p in &r.process_health {
        let name = p
            .executable
            .as_deref()
            .map(|e| e.rsplit('/').next().unwrap_or(e))
            .unwrap_or("?");
        let _ = write!(
            h,
            "<tr><td><code>{}</code> pid {}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(name),
            p.pid,
            escape(p.hostname.as_deref().unwrap_or("(unknown)")),
            fmt::count(p.live_contexts),
            fmt::count(p.leaked_allocations),
            fmt::bytes(p.leaked_bytes),
            fmt::count(p.unsynchronized_streams),
            fmt::count(p.calls_after_deinit),
            escape(&crate::lifetime::health_words(p).join("; "))
        );
    }
    h.push_str("</tbody></table>\n");
}

/// Per device, the processes that made a context there and the stray ones (trace schema 5).
fn device_contexts(h: &mut String, r: &Report) {
    h.push_str("<p>Devices where processes that work on other devices made a context and did nothing there (stray contexts), most memory first.</p>");
    h.push_str("<table><thead><tr><th>Host</th><th class=\"n\">Device</th><th class=\"n\">Processes</th><th class=\"n\">Worked</th><th class=\"n\">Stray</th><th>Stray memory</th><th>Stray processes</th></tr></thead><tbody>");
    for d in &r.device_contexts {
        let list: Vec<String> = d
            .stray_processes
            .iter()
            .map(crate::stray::process_words)
            .collect();
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(d.hostname.as_deref().unwrap_or("(unknown)")),
            d.device,
            fmt::count(d.processes),
            fmt::count(d.worked),
            fmt::count(d.stray),
            escape(&crate::stray::memory_words(d.stray_bytes, d.stray_bytes_unknown, d.stray)),
            escape(&list.join("; "))
        );
    }
    h.push_str("</tbody></table>\n");
}

/// The `launch_fault` and `alloc_fault` problems as one table, most errors first.
fn explained(h: &mut String, r: &Report) {
    let mut rows: Vec<&Problem> = r
        .problems
        .iter()
        .filter(|p| matches!(p.kind, ProblemKind::LaunchFault | ProblemKind::AllocFault))
        .collect();
    if rows.is_empty() {
        h.push_str("<p>No launch or allocation faults.</p>\n");
        return;
    }
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    let errors: u64 = crate::sat_sum(rows.iter().map(|p| p.count));
    let _ = write!(
        h,
        "<p>{} failed {} explained by the shim (launch_fault and alloc_fault records), in {} {}.</p>",
        fmt::count(errors),
        if errors == 1 { "call" } else { "calls" },
        rows.len(),
        if rows.len() == 1 { "kind of fault" } else { "kinds of fault" }
    );
    h.push_str("<table class=\"sortable\" id=\"explained-faults\"><thead><tr><th>Kind</th><th>Function</th><th>Check</th><th>Result</th><th class=\"n\">Errors</th><th class=\"n\">Processes</th><th>Values</th><th>Shim said</th></tr></thead><tbody>\n");
    for p in rows {
        let values: Vec<String> = p
            .values
            .iter()
            .map(|v| escape(&crate::explained::value_text(p, v)))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            if p.kind == ProblemKind::LaunchFault { "launch" } else { "allocation" },
            escape(p.functions.first().map(|f| f.name.as_str()).unwrap_or("-")),
            escape(p.check.as_deref().unwrap_or("-")),
            escape(p.result.as_deref().unwrap_or("-")),
            p.count,
            fmt::count(p.count),
            fmt::count(p.processes),
            if values.is_empty() { "-".to_string() } else { values.join("<br>") },
            escape(p.explanations.first().map(String::as_str).unwrap_or("-"))
        );
    }
    h.push_str("</tbody></table>\n");
}

fn legend(h: &mut String, items: &[(String, &str)]) {
    h.push_str("<div class=\"legend\">");
    for (name, colour) in items {
        let _ = write!(
            h,
            "<span><i style=\"background:{colour}\"></i>{}</span>",
            escape(name)
        );
    }
    h.push_str("</div>\n");
}

fn errors_chart(h: &mut String, r: &Report) {
    let t = &r.errors_over_time;
    if t.buckets.is_empty() {
        h.push_str("<p>No failed calls recorded (call_failed or fault records).</p>\n");
        return;
    }
    // Colours for the most frequent results.
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for b in &t.buckets {
        for (k, v) in &b.by_result {
            *totals.entry(k).or_default() += v;
        }
    }
    let mut order: Vec<(&str, u64)> = totals.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let named: Vec<&str> = order.iter().take(PALETTE.len()).map(|x| x.0).collect();
    let colour = |k: &str| -> &'static str {
        named
            .iter()
            .position(|n| *n == k)
            .map(|i| PALETTE[i])
            .unwrap_or(OTHER_COLOUR)
    };
    // Display slots: the report's buckets, widened so that gaps do not make thousands of bars.
    // The axis spans the whole run (first to last record), not only the buckets with
    // errors: errors in one bucket of a run of milliseconds are one narrow bar at their time.
    let first = t.buckets.first().map(|b| b.start_ns).unwrap_or(0);
    let last = t.buckets.last().map(|b| b.start_ns).unwrap_or(0);
    let first = r.overview.first_ts_ns.map_or(first, |f| f.min(first));
    let last = r.overview.last_ts_ns.map_or(last, |l| l.max(last));
    let mut width = t.bucket_ns.max(1);
    while (last - first) / width + 1 > CHART_SLOTS {
        width = width.saturating_mul(2);
    }
    let base = first - first % width;
    let nslots = ((last - base) / width + 1) as usize;
    let mut slots: Vec<BTreeMap<&str, u64>> = vec![BTreeMap::new(); nslots];
    for b in &t.buckets {
        let i = ((b.start_ns - base) / width) as usize;
        for (k, v) in &b.by_result {
            let key = if named.contains(&k.as_str()) {
                k.as_str()
            } else {
                "other"
            };
            *slots[i].entry(key).or_default() += v;
        }
    }
    let highest = slots
        .iter()
        .map(|s| crate::sat_sum(s.values().copied()))
        .max()
        .unwrap_or(1)
        .max(1);
    // Integer ticks: a step of 1, 2 or 5 times a power of ten, at most 4 steps; the axis
    // ends at the first tick at or above the highest bar.
    let step = tick_step(highest);
    let ticks = highest.div_ceil(step);
    let max = step * ticks;
    let (w, ht, left, bottom, top) = (960.0, 240.0, 56.0, 34.0, 10.0);
    let plot_w = w - left - 10.0;
    let plot_h = ht - bottom - top;
    let bar = plot_w / nslots as f64;
    let _ = write!(
        h,
        "<svg viewBox=\"0 0 {w} {ht}\" width=\"100%\" role=\"img\" aria-label=\"errors over time\">"
    );
    for i in 0..=ticks {
        let v = step * i;
        let y = top + plot_h - plot_h * i as f64 / ticks as f64;
        let _ = write!(
            h,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e7eb\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - 10.0,
            left - 4.0,
            y + 4.0,
            fmt::count(v)
        );
    }
    for (i, s) in slots.iter().enumerate() {
        let x = left + bar * i as f64;
        let mut y = top + plot_h;
        let start = base + width * i as u64;
        let mut keys: Vec<(&&str, &u64)> = s.iter().collect();
        keys.sort_by_key(|(k, _)| named.iter().position(|n| n == *k).unwrap_or(usize::MAX));
        for (k, v) in keys {
            let bh = plot_h * *v as f64 / max as f64;
            y -= bh;
            let _ = write!(
                h,
                "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{bh:.2}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                (bar - 0.5).max(0.5),
                colour(k),
                fmt::timestamp(start),
                escape(k),
                fmt::count(*v)
            );
        }
    }
    let end = base + width * nslots as u64;
    let _ = write!(
        h,
        "<text x=\"{left}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">+{}</text>",
        ht - 12.0,
        fmt::timestamp(base),
        w - 10.0,
        ht - 12.0,
        fmt::duration(end - base)
    );
    let _ = write!(
        h,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"muted\">bar = {}</text>",
        left + plot_w / 2.0,
        ht - 12.0,
        fmt::duration(width)
    );
    h.push_str("</svg>\n");
    let mut items: Vec<(String, &str)> = named.iter().map(|n| (n.to_string(), colour(n))).collect();
    if order.len() > named.len() {
        items.push(("other".to_string(), OTHER_COLOUR));
    }
    legend(h, &items);
}

fn functions_chart(h: &mut String, r: &Report) {
    if r.functions.is_empty() {
        h.push_str("<p>No functions.</p>\n");
        return;
    }
    let mut fns: Vec<_> = r.functions.iter().collect();
    fns.sort_by(|a, b| {
        b.calls
            .max(b.errors)
            .cmp(&a.calls.max(a.errors))
            .then_with(|| a.function.cmp(&b.function))
    });
    fns.truncate(CHART_FUNCTIONS);
    let max = fns
        .iter()
        .map(|f| f.calls.max(f.errors))
        .max()
        .unwrap_or(1)
        .max(1);
    let scale = |v: u64| -> f64 {
        if v == 0 {
            0.0
        } else {
            (1.0 + v as f64).log10() / (1.0 + max as f64).log10()
        }
    };
    let row = 22.0;
    let (w, left, right) = (960.0, 230.0, 150.0);
    let plot_w = w - left - right;
    let ht = row * fns.len() as f64 + 8.0;
    let _ = write!(
        h,
        "<svg viewBox=\"0 0 {w} {ht}\" width=\"100%\" role=\"img\" aria-label=\"calls per function\">"
    );
    for (i, f) in fns.iter().enumerate() {
        let y = 4.0 + row * i as f64;
        let cw = plot_w * scale(f.calls);
        let ew = plot_w * scale(f.errors);
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{left}\" y=\"{:.1}\" width=\"{cw:.1}\" height=\"9\" fill=\"#1f77b4\"><title>{} calls</title></rect>\
             <rect x=\"{left}\" y=\"{:.1}\" width=\"{ew:.1}\" height=\"7\" fill=\"#d62728\"><title>{} errors</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}{} calls, {} errors</text>",
            left - 6.0,
            y + 12.0,
            escape(&f.function),
            y + 1.0,
            fmt::count(f.calls),
            y + 11.0,
            fmt::count(f.errors),
            left + plot_w + 6.0,
            y + 12.0,
            fmt::count(f.calls),
            if f.processes_without_exit_summary > 0 { "+" } else { "" },
            fmt::count(f.errors)
        );
    }
    h.push_str("</svg>\n");
    legend(
        h,
        &[
            ("calls (log scale)".to_string(), "#1f77b4"),
            ("errors".to_string(), "#d62728"),
        ],
    );
    if r.functions.len() > CHART_FUNCTIONS {
        let _ = write!(
            h,
            "<p class=\"muted\">{} more functions in the table below.</p>",
            r.functions.len() - CHART_FUNCTIONS
        );
    }
}

fn timeline_chart(h: &mut String, r: &Report) {
    if r.processes.is_empty() {
        h.push_str("<p>No processes.</p>\n");
        return;
    }
    let mut procs: Vec<_> = r.processes.iter().collect();
    procs.sort_by_key(|p| (p.start_ts_ns, p.pid));
    procs.truncate(CHART_PROCESSES);
    let t0 = procs.iter().map(|p| p.start_ts_ns).min().unwrap_or(0);
    let t1 = procs
        .iter()
        .map(|p| p.start_ts_ns.saturating_add(p.duration_ns).max(p.end_ts_ns))
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let row = 20.0;
    let (w, left, right) = (960.0, 300.0, 120.0);
    let plot_w = w - left - right;
    let ht = row * procs.len() as f64 + 28.0;
    let x = |t: u64| left + plot_w * (t.saturating_sub(t0)) as f64 / (t1 - t0) as f64;
    let _ = write!(
        h,
        "<svg viewBox=\"0 0 {w} {ht}\" width=\"100%\" role=\"img\" aria-label=\"process timeline\">"
    );
    for (i, p) in procs.iter().enumerate() {
        let y = 4.0 + row * i as f64;
        let end = p.start_ts_ns.saturating_add(p.duration_ns).max(p.end_ts_ns);
        let (x0, x1) = (x(p.start_ts_ns), x(end));
        let killed = p.status == ProcessStatus::NoExitSummary;
        let exe = p
            .executable
            .as_deref()
            .map(|e| e.rsplit('/').next().unwrap_or(e))
            .unwrap_or("?");
        let label = format!("{} {} {}", host(&p.hostname), p.pid, exe);
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\" rx=\"2\" fill=\"{}\"><title>{}: {} .. {} ({}), {} errors{}</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\">{} err{}</text>",
            left - 6.0,
            y + 11.0,
            escape(&crate::render_text::shorten(&label, 44)),
            y + 1.0,
            (x1 - x0).max(2.0),
            if killed { "#ff9f1c" } else { "#2ca02c" },
            escape(&label),
            fmt::timestamp(p.start_ts_ns),
            fmt::timestamp(end),
            fmt::duration(p.duration_ns),
            fmt::count(p.errors),
            if killed { ", no exit summary (killed or still running)" } else { "" },
            x1.max(x0 + 2.0) + 4.0,
            y + 11.0,
            fmt::count(p.errors),
            if killed { " (killed?)" } else { "" }
        );
    }
    let yb = ht - 6.0;
    let _ = write!(
        h,
        "<text x=\"{left}\" y=\"{yb}\">{}</text><text x=\"{}\" y=\"{yb}\" text-anchor=\"end\">{}</text>",
        fmt::timestamp(t0),
        left + plot_w,
        fmt::timestamp(t1)
    );
    h.push_str("</svg>\n");
    legend(
        h,
        &[
            ("exited".to_string(), "#2ca02c"),
            (
                "no exit summary (killed or still running)".to_string(),
                "#ff9f1c",
            ),
        ],
    );
    if r.processes.len() > CHART_PROCESSES {
        let _ = write!(
            h,
            "<p class=\"muted\">First {CHART_PROCESSES} of {} processes.</p>",
            r.processes.len()
        );
    }
}

fn topology(h: &mut String, r: &Report) {
    let mut hosts: Vec<Option<String>> = r.hosts.iter().map(|x| x.hostname.clone()).collect();
    hosts.dedup();
    for name in hosts.iter().take(200) {
        let hr = r.hosts.iter().find(|x| &x.hostname == name);
        let _ = write!(h, "<div class=\"host\"><h3>{}</h3>", escape(host(name)));
        if let Some(hr) = hr {
            let _ = write!(
                h,
                "<p class=\"muted\">{} processes, driver {}</p>",
                hr.processes,
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
                let _ = write!(h, "<li class=\"muted\">{} ({n} processes)</li>", escape(&v));
            }
            h.push_str("</ul>");
        }
        h.push_str("</div>\n");
    }
}

fn processes_table(h: &mut String, r: &Report) {
    h.push_str("<table class=\"sortable\"><thead><tr><th>Host</th><th class=\"n\">PID</th><th>Executable</th><th>Start</th><th class=\"n\">Duration</th><th>Mode</th><th>Driver</th><th class=\"n\">Devices</th><th class=\"n\">Calls</th><th class=\"n\">Errors</th><th>Status</th><th>File</th></tr></thead><tbody>\n");
    for p in r.processes.iter().take(TABLE_PROCESSES) {
        let status = match p.status {
            ProcessStatus::Exited => "exited".to_string(),
            ProcessStatus::NoExitSummary => {
                "<span class=\"status-killed\">no exit summary (killed or still running)</span>"
                    .to_string()
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

fn functions_table(h: &mut String, r: &Report) {
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

/// The step of the errors chart's value axis: 1, 2 or 5 times a power of ten, the smallest
/// that covers `highest` (at least 1) in at most 4 steps.
fn tick_step(highest: u64) -> u64 {
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = m * p;
            if step.saturating_mul(4) >= highest {
                return step;
            }
        }
        p = p.saturating_mul(10);
    }
}

fn input(h: &mut String, r: &Report) {
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
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(&v));
    }
    h.push_str("</tbody></table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
