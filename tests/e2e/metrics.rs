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

/// The metrics file is created mode 0600 (owner only, as the trace), or with the bits
/// `SEEDANCE_METRICS_MODE` gives; before, it was 0644 less the umask.
#[test]
fn metrics_file_is_owner_only_unless_configured() {
    use std::os::unix::fs::PermissionsExt;
    for (mode, want) in [(None, 0o600), (Some("0644"), 0o644)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.prom");
        let mut run = Run::new("linked", true)
            .env("SEEDANCE_FALLBACK", "off")
            .env("SEEDANCE_METRICS_FILE", &path);
        if let Some(m) = mode {
            run = run.env("SEEDANCE_METRICS_MODE", m);
        }
        let r = run.finish();
        assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
        let got = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(got, want, "{mode:?}");
    }
}

/// A symbolic link, a FIFO or a character device at `SEEDANCE_METRICS_FILE` is left as it
/// is, with one stderr line; the program's output is as without a metrics file. Before,
/// the link was replaced by a regular file (and so was a device: `SEEDANCE_METRICS_FILE`
/// naming a character device turned it into a file). The device is made with mknod, which
/// needs root: without it that case is skipped, saying so.
#[test]
fn a_metrics_path_that_is_not_a_regular_file_is_refused_with_one_line() {
    use std::os::unix::fs::FileTypeExt;
    let plain = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let link = dir.path().join("link.prom");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.path().join("fifo.prom");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let device = dir.path().join("null.prom");
    let mut cases = vec![(link.clone(), "a symbolic link"), (fifo.clone(), "a FIFO")];
    let made = std::process::Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if made {
        cases.push((device.clone(), "a character device"));
    } else {
        seedance_e2e::say_skipped(
            "metrics::a_metrics_path_that_is_not_a_regular_file_is_refused_with_one_line \
             (character device case)",
            "mknod failed (not root?)",
        );
    }
    for (path, what) in cases {
        let r = Run::new("linked", true)
            .env("SEEDANCE_FALLBACK", "off")
            .env("SEEDANCE_METRICS_FILE", &path)
            .finish();
        assert_eq!(r.output.status.code(), plain.output.status.code());
        assert_eq!(r.stdout(), plain.stdout());
        assert_eq!(
            r.stderr(),
            format!(
                "{}seedance: metrics file not written: {} is {what}, not a regular file; \
                 refusing to replace it with the metrics file\n",
                plain.stderr(),
                path.display()
            )
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    if made {
        assert!(std::fs::symlink_metadata(&device)
            .unwrap()
            .file_type()
            .is_char_device());
    }
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want = vec!["fifo.prom", "link.prom", "victim"];
    if made {
        want.insert(2, "null.prom");
    }
    assert_eq!(left, want, "no temporary file left behind");
}
