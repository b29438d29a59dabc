//! The Prometheus metrics file (`SEEDANCE_METRICS_FILE`): the exit summary's counters in the
//! text exposition format, for node_exporter's textfile collector. Written atomically (a
//! temporary file in the same directory, then `rename`), every `SEEDANCE_METRICS_INTERVAL`
//! seconds from a background thread started by the first `cuInit`, and once more at exit,
//! with the trace file's safety rules (`seedance_trace::metrics::write_file`: no symbolic
//! link followed, nothing but a regular file replaced, mode `SEEDANCE_METRICS_MODE`). A
//! refusal or failure is said once per process.

use crate::rt::{config, stderr};
use once_cell::sync::OnceCell;
use seedance_trace::ExitSummary;
use std::path::PathBuf;
use std::time::Duration;

/// The metrics file path with `%p` replaced by this process's id; `None` when unset.
fn path() -> Option<PathBuf> {
    let raw = config::get().metrics_file.as_ref()?;
    let text = raw
        .to_string_lossy()
        .replace("%p", &std::process::id().to_string());
    Some(PathBuf::from(text))
}

fn labels() -> Vec<(&'static str, String)> {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    vec![
        ("pid", std::process::id().to_string()),
        ("exe", exe),
        ("host", host),
    ]
}

/// Writes `summary` to the metrics file, if one is configured. Errors are announced once.
pub fn write(summary: &ExitSummary) {
    let Some(path) = path() else { return };
    let text = seedance_trace::metrics::render_prometheus(
        summary,
        &labels(),
        env!("CARGO_PKG_VERSION"),
        config::get().mode.as_str(),
    );
    if let Err(e) = seedance_trace::metrics::write_file(&path, &text, config::get().metrics_mode) {
        stderr::say_once("metrics", &format!("metrics file not written: {e}"));
    }
}

/// Starts the periodic writer once (no-op without a metrics file or with an interval of 0).
pub fn start() {
    static STARTED: OnceCell<()> = OnceCell::new();
    let cfg = config::get();
    if cfg.metrics_file.is_none() || cfg.metrics_interval_secs == 0 {
        return;
    }
    STARTED.get_or_init(|| {
        let every = Duration::from_secs(cfg.metrics_interval_secs);
        let _ = crate::platform::spawn_quiet("seedance-metrics", move || loop {
            std::thread::sleep(every);
            // The summary's figures query the driver: only the copy held now, on this
            // thread of the shim's own (crate::driver::real::hold_driver).
            let s = {
                let _driver = crate::driver::real::hold_driver();
                super::summary::current()
            };
            if let Some(s) = s {
                let _ = std::panic::catch_unwind(|| write(&s));
            }
        });
    });
}
