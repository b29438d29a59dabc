//! Fleet metrics: the exit summary's counters in the Prometheus text exposition format
//! (version 0.0.4), for node_exporter's textfile collector.
//!
//! Every series carries the process's labels (`pid`, `exe`, `host`), so the files of many
//! processes on one node can be collected side by side without duplicate series.
//!
//! Families (all counters are totals since the process started):
//! - `seedance_calls_total{function}`: hooked calls, by exported symbol;
//! - `seedance_errors_total{function,result}`: failed calls, by CUresult name (or number);
//! - `seedance_repairs_total{kind}`: calls repaired in fix mode, by kind;
//! - `seedance_fallback_info{requested,chosen}`: 1 for each device fallback in force;
//! - `seedance_dropped_records_total`: trace records that could not be written;
//! - `seedance_info{version,mode}`: always 1, carries the shim version and mode.

use crate::schema::ExitSummary;
use std::fmt::Write;

/// Escapes a label value: backslash, double quote and newline (exposition format 0.0.4).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(base: &[(&str, String)], extra: &[(&str, &str)]) -> String {
    let all: Vec<String> = base
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .chain(extra.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))))
        .collect();
    format!("{{{}}}", all.join(","))
}

/// Renders `summary` with the process labels `base` (e.g. pid, exe, host) and the shim's
/// `version` and `mode`.
pub fn render_prometheus(
    summary: &ExitSummary,
    base: &[(&str, String)],
    version: &str,
    mode: &str,
) -> String {
    let mut out = String::new();
    let push = |out: &mut String, name: &str, kind: &str, help: &str, rows: Vec<String>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for r in rows {
            out.push_str(&r);
            out.push('\n');
        }
    };
    push(
        &mut out,
        "seedance_info",
        "gauge",
        "seedance-fix shim in this process (always 1).",
        vec![format!(
            "seedance_info{} 1",
            labels(base, &[("version", version), ("mode", mode)])
        )],
    );
    let calls = summary
        .functions
        .iter()
        .map(|(f, s)| {
            format!(
                "seedance_calls_total{} {}",
                labels(base, &[("function", f)]),
                s.calls
            )
        })
        .collect();
    push(
        &mut out,
        "seedance_calls_total",
        "counter",
        "Hooked CUDA driver calls, by exported symbol.",
        calls,
    );
    let errors = summary
        .functions
        .iter()
        .flat_map(|(f, s)| {
            s.errors_by_result.iter().map(move |(r, n)| {
                format!(
                    "seedance_errors_total{} {n}",
                    labels(base, &[("function", f), ("result", r)])
                )
            })
        })
        .collect();
    push(
        &mut out,
        "seedance_errors_total",
        "counter",
        "Failed hooked calls, by exported symbol and CUresult name.",
        errors,
    );
    let repairs = summary
        .repairs
        .iter()
        .map(|(k, n)| format!("seedance_repairs_total{} {n}", labels(base, &[("kind", k)])))
        .collect();
    push(
        &mut out,
        "seedance_repairs_total",
        "counter",
        "Calls repaired in fix mode, by kind of repair.",
        repairs,
    );
    let fallbacks = summary
        .fallbacks
        .iter()
        .map(|(req, chosen)| {
            let chosen = chosen.to_string();
            format!(
                "seedance_fallback_info{} 1",
                labels(base, &[("requested", req), ("chosen", &chosen)])
            )
        })
        .collect();
    push(
        &mut out,
        "seedance_fallback_info",
        "gauge",
        "Device fallbacks in force: requested ordinal -> chosen ordinal.",
        fallbacks,
    );
    push(
        &mut out,
        "seedance_dropped_records_total",
        "counter",
        "Trace records that could not be written.",
        vec![format!(
            "seedance_dropped_records_total{} {}",
            labels(base, &[]),
            summary.dropped_records
        )],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FunctionStats;
    use std::collections::BTreeMap;

    fn summary() -> ExitSummary {
        let mut s = ExitSummary::default();
        s.functions.insert(
            "cuDeviceGet".into(),
            FunctionStats {
                calls: 3,
                errors: 1,
                errors_by_result: BTreeMap::from([("CUDA_ERROR_INVALID_DEVICE".into(), 1)]),
            },
        );
        s.functions.insert(
            "cuLaunchKernel".into(),
            FunctionStats {
                calls: 1000,
                ..FunctionStats::default()
            },
        );
        s.repairs.insert("device_fallback".into(), 1);
        s.fallbacks.insert("1".into(), 0);
        s.dropped_records = 2;
        s
    }

    #[test]
    fn parses_with_a_real_prometheus_parser() {
        let base = [
            ("pid", "42".to_string()),
            ("exe", "/opt/app/train.py".to_string()),
            ("host", "node-1".to_string()),
        ];
        let text = render_prometheus(&summary(), &base, "0.1.0", "fix");
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
        let find = |name: &str, label: (&str, &str)| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Untyped(v) => v,
                    _ => f64::NAN,
                })
        };
        assert_eq!(
            find("seedance_calls_total", ("function", "cuLaunchKernel")),
            Some(1000.0)
        );
        assert_eq!(
            find(
                "seedance_errors_total",
                ("result", "CUDA_ERROR_INVALID_DEVICE")
            ),
            Some(1.0)
        );
        assert_eq!(
            find("seedance_repairs_total", ("kind", "device_fallback")),
            Some(1.0)
        );
        assert_eq!(
            find("seedance_fallback_info", ("requested", "1")),
            Some(1.0)
        );
        assert_eq!(
            find("seedance_dropped_records_total", ("pid", "42")),
            Some(2.0)
        );
        assert_eq!(find("seedance_info", ("mode", "fix")), Some(1.0));
        let exe = scrape
            .samples
            .iter()
            .find(|s| s.metric == "seedance_info")
            .unwrap()
            .labels
            .get("exe")
            .unwrap()
            .to_string();
        assert_eq!(exe, "/opt/app/train.py");
        assert_eq!(scrape.samples.len(), 7);
    }

    #[test]
    fn label_values_are_escaped() {
        // prometheus-parse does not unescape, so the escaping is checked on the text.
        let text = render_prometheus(
            &ExitSummary::default(),
            &[("exe", "a\\b \"c\"\nd".to_string())],
            "0.1.0",
            "fix",
        );
        assert!(
            text.contains(r#"seedance_info{exe="a\\b \"c\"\nd",version="0.1.0",mode="fix"} 1"#),
            "{text}"
        );
    }
}
