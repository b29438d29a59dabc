//! The charts of the HTML page, as inline SVG: errors over time, calls and errors per
//! function, the timeline of the processes.

use super::text::{escape, host};
use crate::fmt;
use crate::report::{ProcessStatus, Report};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Functions drawn in the calls chart.
const CHART_FUNCTIONS: usize = 30;
/// Processes drawn in the timeline.
const CHART_PROCESSES: usize = 100;
/// Most bars in the errors-over-time chart.
const CHART_SLOTS: u64 = 600;
/// Result names drawn in their own colour; the rest are "other".
const PALETTE: [&str; 6] = [
    "#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b", "#e377c2",
];
const OTHER_COLOUR: &str = "#7f7f7f";

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

pub(super) fn errors_chart(h: &mut String, r: &Report) {
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
    // The axis runs from the first record to the last (at least one slot), so a run of a
    // millisecond is a millisecond wide; a bar is at its slot's time, as wide as the slot,
    // but never more than a twentieth of the plot (a slot longer than the run).
    let span = (last - first).max(1);
    let bar = (plot_w * width as f64 / span as f64)
        .min(plot_w / 20.0)
        .max(1.0);
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
        let start = base + width * i as u64;
        let x = (left + plot_w * start.saturating_sub(first) as f64 / span as f64)
            .min(left + plot_w - bar);
        let mut y = top + plot_h;
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
    let _ = write!(
        h,
        "<text x=\"{left}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">+{}</text>",
        ht - 12.0,
        fmt::timestamp(first),
        w - 10.0,
        ht - 12.0,
        fmt::duration(last - first)
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

pub(super) fn functions_chart(h: &mut String, r: &Report) {
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
             <rect x=\"{left}\" y=\"{:.1}\" width=\"{cw:.1}\" height=\"9\" fill=\"#1f77b4\"><title>{}</title></rect>\
             <rect x=\"{left}\" y=\"{:.1}\" width=\"{ew:.1}\" height=\"7\" fill=\"#d62728\"><title>{}</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}{} {}, {}</text>",
            left - 6.0,
            y + 12.0,
            escape(&f.function),
            y + 1.0,
            fmt::counted(f.calls, "call", "calls"),
            y + 11.0,
            fmt::counted(f.errors, "error", "errors"),
            left + plot_w + 6.0,
            y + 12.0,
            fmt::count(f.calls),
            if f.processes_without_exit_summary > 0 { "+" } else { "" },
            if f.calls == 1 { "call" } else { "calls" },
            fmt::counted(f.errors, "error", "errors")
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
            "<p class=\"muted\">{} more in the table below.</p>",
            fmt::counted(
                (r.functions.len() - CHART_FUNCTIONS) as u64,
                "function",
                "functions"
            )
        );
    }
}

pub(super) fn timeline_chart(h: &mut String, r: &Report) {
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
             <rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\" rx=\"2\" fill=\"{}\"><title>{}: {} .. {} ({}), {}{}</title></rect>\
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
            fmt::counted(p.errors, "error", "errors"),
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
        end_label(t0, t1)
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
            "<p class=\"muted\">First {CHART_PROCESSES} of {}.</p>",
            fmt::counted(r.processes.len() as u64, "process", "processes")
        );
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

/// The end of a time axis that starts at `t0`: its length (`+1 ms`, `+12.5 s`) for a span
/// under a minute, where a timestamp's whole seconds would hide it, else its timestamp.
fn end_label(t0: u64, t1: u64) -> String {
    if t1 - t0 < 60_000_000_000 {
        format!("+{}", fmt::duration(t1 - t0))
    } else {
        fmt::timestamp(t1)
    }
}
