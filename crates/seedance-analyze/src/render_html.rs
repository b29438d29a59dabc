//! The HTML form of a report: one self-contained page (inline CSS, a few lines of inline
//! JavaScript to sort tables, charts as inline SVG drawn here), no network access, so it
//! can be attached to a ticket or opened offline.
//!
//! Charts: errors over time (stacked by CUresult), calls and errors per function, a
//! timeline of the processes, the repairs of the fix mode, the launch and allocation faults
//! the shim explained (schema 3), and the session topology (hosts,
//! their devices with their physical identity when the traces have it, and the processes
//! that saw them). Every string from the traces is HTML-escaped.

mod charts;
mod tables;
mod text;

use crate::fmt;
use crate::report::{Problem, ProblemKind, Report};
use charts::{errors_chart, functions_chart, timeline_chart};
use std::fmt::Write;
use tables::{functions_table, input, processes_table, topology};
pub use text::escape;

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
code{font-size:12px;background:#f3f4f6;padding:1px 4px;border-radius:3px;overflow-wrap:break-word}
.scroll{overflow-x:auto;max-width:100%}
td code,th code,#processes td{white-space:nowrap}
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
    // Every table scrolls inside its card when it is wider than the card, so that
    // identifiers, paths and UUIDs stay on one line (the only `<table` and `</table>` in the
    // page are the renderers' own: text from the traces is escaped).
    let mut h = h
        .replace("<table", "<div class=\"scroll\"><table")
        .replace("</table>", "</table></div>");
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
