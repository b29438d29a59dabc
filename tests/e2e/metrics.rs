//! `SEEDANCE_METRICS_FILE`: Prometheus text for node_exporter's textfile collector.

use seedance_e2e::Run;

#[test]
fn metrics_file_is_written_at_exit_and_parses() {
    let dir = tempfile::tempdir().unwrap();
    let r = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .env("SEEDANCE_METRICS_FILE", dir.path().join("seedance-%p.prom"))
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = &files[0];
    let pid = name
        .strip_prefix("seedance-")
        .and_then(|n| n.strip_suffix(".prom"))
        .expect("%p replaced by the pid");
    assert!(pid.parse::<u32>().is_ok(), "{name}");
    let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("valid exposition format");
    let value = |metric: &str, labels: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                _ => f64::NAN,
            })
    };
    assert_eq!(
        value(
            "seedance_calls_total",
            &[
                ("function", "cuLaunchKernel"),
                ("exe", "linked"),
                ("pid", pid)
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            "seedance_errors_total",
            &[
                ("function", "cuDeviceGet"),
                ("result", "CUDA_ERROR_INVALID_DEVICE")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(value("seedance_info", &[("mode", "fix")]), Some(1.0));
    // The same counts as the trace's exit summary.
    assert_eq!(r.summary_count("cuLaunchKernel"), (2, 1));
}
