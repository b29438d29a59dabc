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
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the metrics file unless `SEEDANCE_METRICS_MODE` says otherwise: owner only, as
/// the trace file.
pub const DEFAULT_FILE_MODE: u32 = 0o600;

/// Why the metrics file was not written.
#[derive(Debug)]
pub enum MetricsFileError {
    /// The directory is world-writable and lacks the sticky bit: another user could
    /// replace the file or plant a link at the temporary name.
    UnsafeDirectory(PathBuf),
    /// Something other than a regular file is at the path (a symbolic link, a device, a
    /// FIFO, a socket, a directory): it is left as it is. The `&str` says what it is.
    NotRegularFile(PathBuf, &'static str),
    /// Inspecting the directory, creating or writing the temporary file, or renaming it
    /// failed; an existing file at the temporary name (a planted symbolic link) fails here.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for MetricsFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricsFileError::UnsafeDirectory(p) => write!(
                f,
                "{} is world-writable without the sticky bit; refusing to write the metrics file there",
                crate::writer::shown(p)
            ),
            MetricsFileError::NotRegularFile(p, what) => write!(
                f,
                "{} is {what}, not a regular file; refusing to replace it with the metrics file",
                crate::writer::shown(p)
            ),
            MetricsFileError::Io(p, e) => {
                write!(f, "cannot write {}: {e}", crate::writer::shown(p))
            }
        }
    }
}

impl std::error::Error for MetricsFileError {}

/// What kind of thing `meta` describes, for [`MetricsFileError::NotRegularFile`].
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// `<path with its extension replaced by tmp.<pid>>`: in the same directory (so the rename
/// is atomic), and not ending in `.prom` (node_exporter's textfile collector reads only
/// those).
pub fn temporary_path(path: &Path, pid: u32) -> PathBuf {
    path.with_extension(format!("tmp.{pid}"))
}

/// Writes `text` to `path` atomically, with the trace file's rules (`crate::writer`): the
/// directory must not be world-writable without the sticky bit; whatever is at `path`
/// must be a regular file or nothing (a symbolic link, a device or a FIFO there is refused
/// and left alone, never followed or replaced); the text goes to [`temporary_path`],
/// created with `O_CREAT | O_EXCL | O_NOFOLLOW` and given exactly `mode` (permission bits,
/// not reduced by the umask), which is then renamed over `path`. A regular file of this
/// user left at the temporary name (a process of the same pid that died mid-write) is
/// removed first; anything else there (a planted symbolic link) is refused.
///
/// Errors: see [`MetricsFileError`]; the temporary file is removed after a failure.
pub fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), MetricsFileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let meta = std::fs::metadata(dir).map_err(|e| MetricsFileError::Io(dir.to_path_buf(), e))?;
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(MetricsFileError::UnsafeDirectory(dir.to_path_buf()));
    }
    let check_target = || match std::fs::symlink_metadata(path) {
        Ok(m) => match kind_of(&m) {
            Some(what) => Err(MetricsFileError::NotRegularFile(path.to_path_buf(), what)),
            None => Ok(()),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(MetricsFileError::Io(path.to_path_buf(), e)),
    };
    check_target()?;
    let tmp = temporary_path(path, std::process::id());
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode & 0o777)
            .custom_flags(o_nofollow())
            .open(&tmp)
    };
    let file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let stale = std::fs::symlink_metadata(&tmp)
                .is_ok_and(|m| m.file_type().is_file() && m.uid() == effective_uid());
            if !stale {
                return Err(MetricsFileError::Io(tmp, e));
            }
            std::fs::remove_file(&tmp).and_then(|_| create())
        }
        other => other,
    }
    .map_err(|e| MetricsFileError::Io(tmp.clone(), e))?;
    let result = file
        .set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
        .and_then(|_| (&file).write_all(text.as_bytes()))
        .map_err(|e| MetricsFileError::Io(tmp.clone(), e))
        .and_then(|_| check_target())
        .and_then(|_| {
            std::fs::rename(&tmp, path).map_err(|e| MetricsFileError::Io(path.to_path_buf(), e))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// This process's effective user id (the owner of the files it creates), from
/// `/proc/self/status` (std has no `geteuid`); `u32::MAX`, which owns nothing, where that
/// cannot be read (macOS), so a leftover temporary file is then refused, not removed.
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

#[cfg(target_os = "linux")]
fn o_nofollow() -> i32 {
    0o400_000
}

#[cfg(target_os = "macos")]
fn o_nofollow() -> i32 {
    0x0100
}

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
                ..FunctionStats::default()
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

    fn mode_of(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn writes_atomically_with_mode_0600_or_the_configured_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.prom");
        write_file(&path, "a 1\n", DEFAULT_FILE_MODE).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 1\n");
        assert_eq!(mode_of(&path), 0o600);
        // Rewritten (a regular file is replaced), with a configured mode, umask or not.
        write_file(&path, "a 2\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        assert_eq!(mode_of(&path), 0o644);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn a_symlink_planted_at_the_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.prom");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp = temporary_path(&path, std::process::id());
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let err = write_file(&path, "a 1\n", DEFAULT_FILE_MODE).unwrap_err();
        assert!(
            matches!(err, MetricsFileError::Io(ref p, _) if *p == tmp),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(&tmp)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!path.exists());
    }

    #[test]
    fn a_stale_temporary_file_of_our_own_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.prom");
        std::fs::write(temporary_path(&path, std::process::id()), "half").unwrap();
        write_file(&path, "a 1\n", DEFAULT_FILE_MODE).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 1\n");
    }

    #[test]
    fn a_target_that_is_not_a_regular_file_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link.prom");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = write_file(&link, "a 1\n", DEFAULT_FILE_MODE).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is a symbolic link, not a regular file; refusing to replace it with the \
                 metrics file",
                link.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());

        let fifo = dir.path().join("fifo.prom");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let err = write_file(&fifo, "a 1\n", DEFAULT_FILE_MODE).unwrap_err();
        assert!(
            matches!(err, MetricsFileError::NotRegularFile(_, "a FIFO")),
            "{err}"
        );
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 3, "no temporary file left behind");
    }

    /// A character device (a copy of /dev/null's, 1:3, made with mknod in a temporary
    /// directory, so a regression cannot touch the real one) stays one: before the fix it
    /// was replaced by a regular file. mknod needs root: skipped, saying so, otherwise.
    #[test]
    fn a_character_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("null.prom");
        let made = std::process::Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .stderr(std::process::Stdio::null())
            .status();
        if !made.is_ok_and(|s| s.success()) {
            let _ = writeln!(
                io::stderr(),
                "metrics::tests::a_character_device_is_refused: skipped: mknod failed (not root?)"
            );
            return;
        }
        let err = write_file(&dev, "a 1\n", DEFAULT_FILE_MODE).unwrap_err();
        assert!(
            matches!(
                err,
                MetricsFileError::NotRegularFile(_, "a character device")
            ),
            "{err}"
        );
        assert!(std::fs::symlink_metadata(&dev)
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn a_world_writable_directory_without_the_sticky_bit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = write_file(&dir.path().join("m.prom"), "a 1\n", DEFAULT_FILE_MODE).unwrap_err();
        assert!(matches!(err, MetricsFileError::UnsafeDirectory(_)), "{err}");
    }
}
