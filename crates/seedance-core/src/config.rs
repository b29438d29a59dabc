//! `SEEDANCE_*` configuration, in two steps: [`RawConfig`] holds the strings as found in
//! the environment, [`Config::from_raw`] validates them into typed values and a list of
//! warnings. A bad value never fails: it yields the default and one warning that names the
//! variable, the value and the default used. Every variable is documented in
//! `docs/configuration.md`.

use std::fmt;
use std::path::PathBuf;

/// What the shim does with intercepted calls (`SEEDANCE_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Resolve and forward only: no state, no trace, no messages.
    Off,
    /// Never change behaviour; validate, explain failures, trace.
    Observe,
    /// `Observe` plus the documented repairs (default).
    Fix,
}

impl Mode {
    /// The spelling used in `SEEDANCE_MODE` and in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Observe => "observe",
            Mode::Fix => "fix",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When launches and allocations are checked against the device's limits
/// (`SEEDANCE_VALIDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validate {
    /// No checks: a failed launch or allocation is reported as a plain `call_failed`.
    Off,
    /// Explain after the driver failed (default): a successful call costs nothing.
    Post,
    /// Check before the call as well: an invalid launch or allocation is refused with the
    /// code the driver would return, without reaching the driver. Costs a few driver
    /// queries per launch.
    Pre,
}

impl Validate {
    /// The spelling used in `SEEDANCE_VALIDATE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Validate::Off => "off",
            Validate::Post => "post",
            Validate::Pre => "pre",
        }
    }
}

/// Default of `SEEDANCE_NVML_TIMEOUT`: 2 s. `nvmlInit` took about 21 ms on an H200 (driver
/// 580.159) and can take a second or more on GPUs out of persistence mode.
pub const DEFAULT_NVML_TIMEOUT_MS: u64 = 2000;
/// Largest accepted `SEEDANCE_NVML_TIMEOUT`: 10 minutes.
pub const MAX_NVML_TIMEOUT_MS: u64 = 600_000;

/// Default of `SEEDANCE_TRACE_MAX_BYTES`: 64 MiB per process (a loop of failing calls
/// wrote about 65 MB/s of trace before repeated failures were counted instead).
pub const DEFAULT_TRACE_MAX_BYTES: u64 = 64 << 20;
/// Smallest accepted `SEEDANCE_TRACE_MAX_BYTES`: 4 KiB (about two session records).
pub const MIN_TRACE_MAX_BYTES: u64 = 4 << 10;

/// Default of `SEEDANCE_METRICS_MODE`: 0600, owner only, as the trace file.
pub const DEFAULT_METRICS_MODE: u32 = 0o600;

/// The `SEEDANCE_*` variables exactly as found (`None` = unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawConfig {
    /// `SEEDANCE_MODE`.
    pub mode: Option<String>,
    /// `SEEDANCE_TRACE_DIR`.
    pub trace_dir: Option<String>,
    /// `SEEDANCE_LIBCUDA`.
    pub libcuda: Option<String>,
    /// `SEEDANCE_QUIET`.
    pub quiet: Option<String>,
    /// `SEEDANCE_FALLBACK`.
    pub fallback: Option<String>,
    /// `SEEDANCE_EXCLUDE_DEVICES` (parsed against the topology by the shim).
    pub exclude_devices: Option<String>,
    /// `SEEDANCE_MIN_FREE_MEMORY`.
    pub min_free_memory: Option<String>,
    /// `SEEDANCE_NVML_LIB`.
    pub nvml_lib: Option<String>,
    /// `SEEDANCE_NVML_TIMEOUT`.
    pub nvml_timeout: Option<String>,
    /// `SEEDANCE_METRICS_FILE`.
    pub metrics_file: Option<String>,
    /// `SEEDANCE_METRICS_INTERVAL`.
    pub metrics_interval: Option<String>,
    /// `SEEDANCE_METRICS_MODE`.
    pub metrics_mode: Option<String>,
    /// `SEEDANCE_TRACE_MAX_BYTES`.
    pub trace_max_bytes: Option<String>,
    /// `SEEDANCE_VALIDATE`.
    pub validate: Option<String>,
    /// `SEEDANCE_LIFETIME`.
    pub lifetime: Option<String>,
}

impl RawConfig {
    /// Reads the variables through `get` (normally `std::env::var`), so tests can supply
    /// their own environment.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> RawConfig {
        RawConfig {
            mode: get("SEEDANCE_MODE"),
            trace_dir: get("SEEDANCE_TRACE_DIR"),
            libcuda: get("SEEDANCE_LIBCUDA"),
            quiet: get("SEEDANCE_QUIET"),
            fallback: get("SEEDANCE_FALLBACK"),
            exclude_devices: get("SEEDANCE_EXCLUDE_DEVICES"),
            min_free_memory: get("SEEDANCE_MIN_FREE_MEMORY"),
            nvml_lib: get("SEEDANCE_NVML_LIB"),
            nvml_timeout: get("SEEDANCE_NVML_TIMEOUT"),
            metrics_file: get("SEEDANCE_METRICS_FILE"),
            metrics_interval: get("SEEDANCE_METRICS_INTERVAL"),
            metrics_mode: get("SEEDANCE_METRICS_MODE"),
            trace_max_bytes: get("SEEDANCE_TRACE_MAX_BYTES"),
            validate: get("SEEDANCE_VALIDATE"),
            lifetime: get("SEEDANCE_LIFETIME"),
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> RawConfig {
        RawConfig::from_lookup(|k| std::env::var(k).ok())
    }
}

/// Validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Mode in force (default [`Mode::Fix`]).
    pub mode: Mode,
    /// Directory for the per-process trace file; `None` (default) writes no trace.
    pub trace_dir: Option<PathBuf>,
    /// Path of the real driver library to use instead of the `libcuda.so.1` the dynamic
    /// loader finds (default `None`).
    pub libcuda: Option<PathBuf>,
    /// Suppress the shim's stderr lines (default `false`); the trace is unaffected.
    pub quiet: bool,
    /// In `fix` mode, send requests for unusable devices to the next available device
    /// (default `true`); `false` keeps the explanations but not the repair.
    pub fallback: bool,
    /// Raw `SEEDANCE_EXCLUDE_DEVICES` (ordinals, `GPU-` UUID prefixes, PCI bus ids), parsed
    /// against the devices by the shim; `None` when unset or empty.
    pub exclude_devices: Option<String>,
    /// A device with less free memory than this (bytes) is not a fallback target
    /// (default: no minimum).
    pub min_free_memory: Option<u64>,
    /// Path of `libnvidia-ml` to use instead of `libnvidia-ml.so.1` (default `None`).
    pub nvml_lib: Option<PathBuf>,
    /// Longest wait for NVML, in milliseconds (default [`DEFAULT_NVML_TIMEOUT_MS`]): a caller
    /// that needs NVML waits at most this long, then goes on without it.
    pub nvml_timeout_ms: u64,
    /// Prometheus text file to write the counters to (`%p` becomes the pid); default `None`.
    pub metrics_file: Option<PathBuf>,
    /// Seconds between metrics file writes (default 30; 0 writes only at exit).
    pub metrics_interval_secs: u64,
    /// Most bytes of records the trace file gets (default [`DEFAULT_TRACE_MAX_BYTES`]);
    /// later records are counted in the exit summary, not written.
    pub trace_max_bytes: u64,
    /// Permission bits of the metrics file (default [`DEFAULT_METRICS_MODE`], owner only;
    /// `0644` lets a node_exporter running as another user read it). Never execute,
    /// setuid, setgid or sticky bits.
    pub metrics_mode: u32,
    /// When launches and allocations are checked (default [`Validate::Post`]).
    pub validate: Validate,
    /// Track the lifetimes of contexts, streams, events and pinned memory and the work
    /// pending on each stream, to explain (and in `fix` mode prevent) destroy-before-sync,
    /// use after destroy and frees of memory that copies still use (default `true`).
    pub lifetime: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Fix,
            trace_dir: None,
            libcuda: None,
            quiet: false,
            fallback: true,
            exclude_devices: None,
            min_free_memory: None,
            nvml_lib: None,
            nvml_timeout_ms: DEFAULT_NVML_TIMEOUT_MS,
            metrics_file: None,
            metrics_interval_secs: 30,
            metrics_mode: DEFAULT_METRICS_MODE,
            trace_max_bytes: DEFAULT_TRACE_MAX_BYTES,
            validate: Validate::Post,
            lifetime: true,
        }
    }
}

impl Config {
    /// Validates `raw`. Returns the configuration and one warning per bad value.
    pub fn from_raw(raw: &RawConfig) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let mut cfg = Config::default();
        if let Some(m) = &raw.mode {
            match m.trim().to_ascii_lowercase().as_str() {
                "off" | "0" => cfg.mode = Mode::Off,
                "observe" => cfg.mode = Mode::Observe,
                "fix" | "" => cfg.mode = Mode::Fix,
                _ => warnings.push(format!(
                    "SEEDANCE_MODE={} is not one of off, observe, fix; using fix",
                    crate::text::quoted(m)
                )),
            }
        }
        cfg.trace_dir = non_empty_path(&raw.trace_dir, "SEEDANCE_TRACE_DIR", &mut warnings);
        cfg.libcuda = non_empty_path(&raw.libcuda, "SEEDANCE_LIBCUDA", &mut warnings);
        if let Some(q) = &raw.quiet {
            match parse_bool(q) {
                Some(b) => cfg.quiet = b,
                None => warnings.push(format!(
                    "SEEDANCE_QUIET={} is not a boolean (1/0, true/false, yes/no, on/off); using 0",
                    crate::text::quoted(q)
                )),
            }
        }
        if let Some(f) = &raw.fallback {
            match parse_bool(f) {
                Some(b) => cfg.fallback = b,
                None => warnings.push(format!(
                    "SEEDANCE_FALLBACK={} is not a boolean (1/0, true/false, yes/no, on/off); using on",
                    crate::text::quoted(f)
                )),
            }
        }
        cfg.exclude_devices = raw
            .exclude_devices
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if let Some(m) = &raw.min_free_memory {
            match crate::bytes::parse_bytes(m) {
                Ok(0) => {}
                Ok(n) => cfg.min_free_memory = Some(n),
                Err(e) => warnings.push(format!(
                    "SEEDANCE_MIN_FREE_MEMORY={} is not a size ({e}); using no minimum",
                    crate::text::quoted(m)
                )),
            }
        }
        cfg.nvml_lib = non_empty_path(&raw.nvml_lib, "SEEDANCE_NVML_LIB", &mut warnings);
        if let Some(t) = &raw.nvml_timeout {
            match t.trim().parse::<u64>() {
                Ok(n) if (1..=MAX_NVML_TIMEOUT_MS).contains(&n) => cfg.nvml_timeout_ms = n,
                _ => warnings.push(format!(
                    "SEEDANCE_NVML_TIMEOUT={} is not a number of milliseconds from 1 to \
                     {MAX_NVML_TIMEOUT_MS}; using {DEFAULT_NVML_TIMEOUT_MS}",
                    crate::text::quoted(t)
                )),
            }
        }
        cfg.metrics_file =
            non_empty_path(&raw.metrics_file, "SEEDANCE_METRICS_FILE", &mut warnings);
        if let Some(i) = &raw.metrics_interval {
            match i.trim().parse::<u64>() {
                Ok(n) if n <= 86_400 => cfg.metrics_interval_secs = n,
                _ => warnings.push(format!(
                    "SEEDANCE_METRICS_INTERVAL={} is not a number of seconds from 0 to 86400; using 30",
                    crate::text::quoted(i)
                )),
            }
        }
        if let Some(m) = &raw.trace_max_bytes {
            match crate::bytes::parse_bytes(m) {
                Ok(n) if n >= MIN_TRACE_MAX_BYTES => cfg.trace_max_bytes = n,
                _ => warnings.push(format!(
                    "SEEDANCE_TRACE_MAX_BYTES={} is not a size of at least 4KiB (4096, 16MiB, \
                     1GiB); using 64MiB",
                    crate::text::quoted(m)
                )),
            }
        }
        if let Some(m) = &raw.metrics_mode {
            let t = m.trim();
            let digits = t.strip_prefix("0o").unwrap_or(t);
            match u32::from_str_radix(digits, 8) {
                Ok(n) if (3..=4).contains(&digits.len()) && n & !0o666 == 0 && n & 0o200 != 0 => {
                    cfg.metrics_mode = n
                }
                _ => warnings.push(format!(
                    "SEEDANCE_METRICS_MODE={} is not an octal file mode of read and write bits \
                     with the owner's write bit (0600, 0640, 0644, ...); using 0600",
                    crate::text::quoted(m)
                )),
            }
        }
        if let Some(v) = &raw.validate {
            match v.trim().to_ascii_lowercase().as_str() {
                "post" | "" => cfg.validate = Validate::Post,
                "pre" => cfg.validate = Validate::Pre,
                "off" | "0" => cfg.validate = Validate::Off,
                _ => warnings.push(format!(
                    "SEEDANCE_VALIDATE={} is not one of pre, post, off; using post",
                    crate::text::quoted(v)
                )),
            }
        }
        if let Some(l) = &raw.lifetime {
            match parse_bool(l) {
                Some(b) => cfg.lifetime = b,
                None => warnings.push(format!(
                    "SEEDANCE_LIFETIME={} is not a boolean (1/0, true/false, yes/no, on/off); using on",
                    crate::text::quoted(l)
                )),
            }
        }
        (cfg, warnings)
    }
}

fn non_empty_path(v: &Option<String>, name: &str, warnings: &mut Vec<String>) -> Option<PathBuf> {
    match v.as_deref().map(str::trim) {
        None => None,
        Some("") => {
            warnings.push(format!("{name} is set but empty; ignoring it"));
            None
        }
        Some(s) if s.contains('\0') => {
            warnings.push(format!("{name} contains a NUL byte; ignoring it"));
            None
        }
        Some(s) => Some(PathBuf::from(s)),
    }
}

/// Parses the usual spellings of a boolean; `None` for anything else.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(pairs: &[(&str, &str)]) -> RawConfig {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RawConfig::from_lookup(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_when_unset() {
        let (cfg, w) = Config::from_raw(&raw(&[]));
        assert_eq!(cfg, Config::default());
        assert_eq!(cfg.mode, Mode::Fix);
        assert!(w.is_empty());
    }

    #[test]
    fn each_mode() {
        for (s, m) in [
            ("off", Mode::Off),
            ("OBSERVE", Mode::Observe),
            (" fix ", Mode::Fix),
        ] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_MODE", s)]));
            assert_eq!(cfg.mode, m, "{s}");
            assert!(w.is_empty());
        }
    }

    #[test]
    fn trace_max_bytes_is_a_size_of_at_least_4_kib() {
        for (v, want) in [("1GiB", 1 << 30), ("4096", 4096), ("16M", 16 << 20)] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_TRACE_MAX_BYTES", v)]));
            assert_eq!((cfg.trace_max_bytes, w.len()), (want, 0), "{v}");
        }
        for v in ["0", "4095", "lots", "-1"] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_TRACE_MAX_BYTES", v)]));
            assert_eq!(cfg.trace_max_bytes, DEFAULT_TRACE_MAX_BYTES, "{v}");
            assert_eq!(w.len(), 1, "{v}");
            assert!(w[0].ends_with("using 64MiB"), "{}", w[0]);
        }
    }

    #[test]
    fn metrics_mode_is_octal_read_write_bits_only() {
        for (v, want) in [
            ("0644", 0o644),
            ("640", 0o640),
            ("0o600", 0o600),
            (" 0660 ", 0o660),
        ] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_METRICS_MODE", v)]));
            assert_eq!((cfg.metrics_mode, w.len()), (want, 0), "{v}");
        }
        for v in ["0755", "4600", "0400", "rw", "", "06444", "0999"] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_METRICS_MODE", v)]));
            assert_eq!(cfg.metrics_mode, DEFAULT_METRICS_MODE, "{v}");
            assert_eq!(w.len(), 1, "{v}");
            assert!(w[0].ends_with("using 0600"), "{}", w[0]);
        }
    }

    #[test]
    fn bad_values_warn_and_default() {
        let (cfg, w) = Config::from_raw(&raw(&[
            ("SEEDANCE_MODE", "turbo"),
            ("SEEDANCE_QUIET", "maybe"),
            ("SEEDANCE_TRACE_DIR", "  "),
        ]));
        assert_eq!(cfg, Config::default());
        assert_eq!(
            w,
            vec![
                "SEEDANCE_MODE=\"turbo\" is not one of off, observe, fix; using fix".to_string(),
                "SEEDANCE_TRACE_DIR is set but empty; ignoring it".to_string(),
                "SEEDANCE_QUIET=\"maybe\" is not a boolean (1/0, true/false, yes/no, on/off); using 0"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn paths_are_kept() {
        let (cfg, _) = Config::from_raw(&raw(&[
            ("SEEDANCE_TRACE_DIR", "/tmp/t"),
            ("SEEDANCE_LIBCUDA", "/opt/x/libcuda.so.1"),
        ]));
        assert_eq!(cfg.trace_dir, Some(PathBuf::from("/tmp/t")));
        assert_eq!(cfg.libcuda, Some(PathBuf::from("/opt/x/libcuda.so.1")));
    }

    #[test]
    fn metrics_values() {
        let (cfg, w) = Config::from_raw(&raw(&[
            (
                "SEEDANCE_METRICS_FILE",
                "/var/lib/node_exporter/seedance-%p.prom",
            ),
            ("SEEDANCE_METRICS_INTERVAL", "0"),
        ]));
        assert!(w.is_empty());
        assert_eq!(
            cfg.metrics_file,
            Some(PathBuf::from("/var/lib/node_exporter/seedance-%p.prom"))
        );
        assert_eq!(cfg.metrics_interval_secs, 0);
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_METRICS_INTERVAL", "-1")]));
        assert_eq!(cfg.metrics_interval_secs, 30);
        assert_eq!(
            w,
            vec!["SEEDANCE_METRICS_INTERVAL=\"-1\" is not a number of seconds from 0 to 86400; using 30".to_string()]
        );
    }

    #[test]
    fn device_policy_values() {
        let (cfg, w) = Config::from_raw(&raw(&[
            ("SEEDANCE_FALLBACK", "off"),
            ("SEEDANCE_MIN_FREE_MEMORY", "1.5GiB"),
            ("SEEDANCE_EXCLUDE_DEVICES", " 1,GPU-8f "),
        ]));
        assert!(w.is_empty(), "{w:?}");
        assert!(!cfg.fallback);
        assert_eq!(cfg.min_free_memory, Some(1_610_612_736));
        assert_eq!(cfg.exclude_devices.as_deref(), Some("1,GPU-8f"));
        let (cfg, w) = Config::from_raw(&raw(&[
            ("SEEDANCE_FALLBACK", "sometimes"),
            ("SEEDANCE_MIN_FREE_MEMORY", "-5G"),
        ]));
        assert!(cfg.fallback);
        assert_eq!(cfg.min_free_memory, None);
        assert_eq!(
            w,
            vec![
                "SEEDANCE_FALLBACK=\"sometimes\" is not a boolean (1/0, true/false, yes/no, on/off); using on".to_string(),
                "SEEDANCE_MIN_FREE_MEMORY=\"-5G\" is not a size (\"-5G\" is negative; expected a byte count such as 512MiB); using no minimum".to_string(),
            ]
        );
    }

    #[test]
    fn nvml_timeout_values() {
        for (s, ms) in [("300", 300), (" 1 ", 1), ("600000", 600_000)] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_NVML_TIMEOUT", s)]));
            assert_eq!(cfg.nvml_timeout_ms, ms, "{s:?}");
            assert!(w.is_empty(), "{w:?}");
        }
        assert_eq!(Config::default().nvml_timeout_ms, 2000);
        for bad in ["0", "-5", "2s", "1.5", "", "600001"] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_NVML_TIMEOUT", bad)]));
            assert_eq!(cfg.nvml_timeout_ms, 2000, "{bad:?}");
            assert_eq!(
                w,
                vec![format!(
                    "SEEDANCE_NVML_TIMEOUT={bad:?} is not a number of milliseconds from 1 to \
                     600000; using 2000"
                )]
            );
        }
    }

    #[test]
    fn validate_values() {
        for (s, v) in [
            ("pre", Validate::Pre),
            (" POST ", Validate::Post),
            ("off", Validate::Off),
            ("0", Validate::Off),
            ("", Validate::Post),
        ] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_VALIDATE", s)]));
            assert_eq!(cfg.validate, v, "{s:?}");
            assert!(w.is_empty(), "{w:?}");
        }
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_VALIDATE", "always")]));
        assert_eq!(cfg.validate, Validate::Post);
        assert_eq!(
            w,
            vec![
                "SEEDANCE_VALIDATE=\"always\" is not one of pre, post, off; using post".to_string()
            ]
        );
        assert_eq!(Validate::Pre.as_str(), "pre");
    }

    #[test]
    fn lifetime_values() {
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_LIFETIME", "off")]));
        assert!(w.is_empty());
        assert!(!cfg.lifetime);
        assert!(Config::default().lifetime);
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_LIFETIME", "later")]));
        assert!(cfg.lifetime);
        assert_eq!(
            w,
            vec!["SEEDANCE_LIFETIME=\"later\" is not a boolean (1/0, true/false, yes/no, on/off); using on".to_string()]
        );
    }

    proptest! {
        #[test]
        fn any_value_gives_a_config(mode in ".*", quiet in ".*", dir in ".*") {
            let r = RawConfig {
                mode: Some(mode),
                trace_dir: Some(dir.clone()),
                quiet: Some(quiet),
                fallback: Some(dir.clone()),
                exclude_devices: Some(dir.clone()),
                nvml_timeout: Some(dir.clone()),
                min_free_memory: Some(dir),
                ..RawConfig::default()
            };
            let (cfg, warnings) = Config::from_raw(&r);
            // A warning is given exactly when a value was rejected.
            if warnings.is_empty() {
                prop_assert!(r.quiet.as_deref().and_then(parse_bool).is_some());
            }
            let _ = cfg.mode.as_str();
        }
    }
}
