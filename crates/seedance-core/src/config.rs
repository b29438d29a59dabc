//! `SEEDANCE_*` configuration, in two steps: [`RawConfig`] holds the strings as found in
//! the environment, [`Config::from_raw`] validates them into typed values and a list of
//! warnings. A bad value never fails: it yields the default and one warning that names the
//! variable, the value and the default used; a value that is not UTF-8 is warned about the
//! same way, and a `SEEDANCE_*` name that is no setting gets one warning naming the closest
//! setting. A bad `SEEDANCE_MODE` means `observe`, never the repairs of the default `fix`.
//! Every variable is documented in `docs/configuration.md`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

/// Every `SEEDANCE_*` variable the shim reads, with what a value it cannot use (not UTF-8)
/// is replaced by.
pub const SETTINGS: &[(&str, &str)] = &[
    ("SEEDANCE_MODE", "observe"),
    ("SEEDANCE_TRACE_DIR", "no trace"),
    (
        "SEEDANCE_LIBCUDA",
        "the libcuda.so.1 the dynamic loader finds",
    ),
    ("SEEDANCE_QUIET", "0"),
    ("SEEDANCE_FALLBACK", "on"),
    ("SEEDANCE_EXCLUDE_DEVICES", "no exclusions"),
    ("SEEDANCE_MIN_FREE_MEMORY", "no minimum"),
    ("SEEDANCE_NVML_LIB", "libnvidia-ml.so.1"),
    ("SEEDANCE_NVML_TIMEOUT", "2000"),
    ("SEEDANCE_METRICS_FILE", "no metrics file"),
    ("SEEDANCE_METRICS_INTERVAL", "30"),
    ("SEEDANCE_VALIDATE", "post"),
    ("SEEDANCE_LIFETIME", "on"),
    ("SEEDANCE_STRAY_CONTEXT", "off"),
    ("SEEDANCE_HOST_GUARD", "off"),
    ("SEEDANCE_HOST_GUARD_POOL", "256MiB"),
    ("SEEDANCE_METRICS_MODE", "0600"),
    ("SEEDANCE_TRACE_MAX_BYTES", "64MiB"),
];

/// `SEEDANCE_*` variables of this project's tests, scripts and container build that the
/// shim does not read and does not warn about (`SEEDANCE_TEST_PANIC` is read by debug
/// builds only: `shim/src/rt/guard.rs`).
pub const TOOL_VARIABLES: &[&str] = &[
    "SEEDANCE_TEST_PANIC",
    "SEEDANCE_SHIM",
    "SEEDANCE_ANALYZE",
    "SEEDANCE_MEMCHECK_CASES",
    "SEEDANCE_REQUIRE_VALGRIND",
    "SEEDANCE_PRELOAD",
    "SEEDANCE_VERSION",
    "SEEDANCE_IMAGE",
];

/// Prefixes of `SEEDANCE_*` variables that the project's tests and CI set for themselves
/// (`SEEDANCE_REQUIRE_VALGRIND`, `SEEDANCE_E2E_TARGET`, `SEEDANCE_TEST_EXEC_VIA`, ...) and
/// of the wheel build's (`SEEDANCE_WHEEL_LINK`, `SEEDANCE_WHEEL_TARGET`:
/// packaging/seedance_build.py, exported in a shell that builds wheels): never a setting,
/// never warned about.
pub const TOOL_PREFIXES: &[&str] = &[
    "SEEDANCE_REQUIRE_",
    "SEEDANCE_E2E_",
    "SEEDANCE_TEST_",
    "SEEDANCE_WHEEL_",
];

/// The setting whose name is closest to `name`: one that begins with the other's part after
/// `SEEDANCE_` first (`SEEDANCE_EXCLUDE`, `SEEDANCE_NVML_TIMEOUT_MS`), then the smallest
/// Levenshtein distance; the first of equals.
pub fn closest_setting(name: &str) -> &'static str {
    let tail = name.strip_prefix("SEEDANCE_").unwrap_or(name);
    SETTINGS
        .iter()
        .map(|(n, _)| *n)
        .min_by_key(|n| {
            let t = &n["SEEDANCE_".len()..];
            let prefix = !tail.is_empty() && (t.starts_with(tail) || tail.starts_with(t));
            (!prefix, strsim::levenshtein(t, tail))
        })
        .unwrap_or("SEEDANCE_MODE")
}

/// `s` with bytes that are not printable ASCII written as `\xNN`.
fn escaped(s: &OsStr) -> String {
    s.as_encoded_bytes().escape_ascii().to_string()
}

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

/// Default of `SEEDANCE_HOST_GUARD_POOL`: 256 MiB of pinned staging memory for the
/// host-write guard's snapshots in `fix` mode, allocated only as copies need it
/// (`shim/src/faults/hostguard/pool.rs`).
pub const DEFAULT_HOST_GUARD_POOL: u64 = 256 << 20;

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
    /// `SEEDANCE_*` names in the environment that are neither a setting ([`SETTINGS`]) nor
    /// one of [`TOOL_VARIABLES`], with bytes outside printable ASCII escaped; sorted.
    pub unknown: Vec<String>,
    /// Settings whose value is not UTF-8: the name and the value, escaped. Their field is
    /// `None`.
    pub not_utf8: Vec<(&'static str, String)>,
    /// `SEEDANCE_STRAY_CONTEXT`.
    pub stray_context: Option<String>,
    /// `SEEDANCE_HOST_GUARD`.
    pub host_guard: Option<String>,
    /// `SEEDANCE_HOST_GUARD_POOL`.
    pub host_guard_pool: Option<String>,
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
            unknown: Vec::new(),
            not_utf8: Vec::new(),
            stray_context: get("SEEDANCE_STRAY_CONTEXT"),
            host_guard: get("SEEDANCE_HOST_GUARD"),
            host_guard_pool: get("SEEDANCE_HOST_GUARD_POOL"),
        }
    }

    /// Reads a whole environment (name, value pairs, as `std::env::vars_os` gives them):
    /// the settings, the names that are no setting, and the values that are not UTF-8.
    /// Where a name appears twice, the first is used, as `getenv` does.
    pub fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> RawConfig {
        let mut known: Vec<(&'static str, String)> = Vec::new();
        let mut unknown = Vec::new();
        let mut not_utf8 = Vec::new();
        for (k, v) in vars {
            if !k.as_encoded_bytes().starts_with(b"SEEDANCE_") {
                continue;
            }
            let setting = SETTINGS.iter().find(|(n, _)| OsStr::new(n) == k);
            match setting {
                Some((name, _)) => {
                    if known.iter().any(|(n, _)| n == name)
                        || not_utf8.iter().any(|(n, _)| n == name)
                    {
                        continue;
                    }
                    match v.into_string() {
                        Ok(s) => known.push((name, s)),
                        Err(v) => not_utf8.push((*name, escaped(&v))),
                    }
                }
                None if TOOL_VARIABLES.iter().any(|n| OsStr::new(n) == k)
                    || TOOL_PREFIXES
                        .iter()
                        .any(|p| k.as_encoded_bytes().starts_with(p.as_bytes())) => {}
                None => {
                    let name = escaped(&k);
                    if !unknown.contains(&name) {
                        unknown.push(name);
                    }
                }
            }
        }
        let mut raw =
            RawConfig::from_lookup(|k| known.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()));
        unknown.sort();
        raw.unknown = unknown;
        raw.not_utf8 = not_utf8;
        raw
    }

    /// Reads the process environment.
    pub fn from_env() -> RawConfig {
        RawConfig::from_vars(std::env::vars_os())
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
    /// What `fix` mode does with a primary-context retain of device 0 by a process that
    /// works on exactly one other device and never used device 0
    /// (`SEEDANCE_STRAY_CONTEXT`, default [`StrayRepair::Off`]: nothing; see
    /// [`crate::stray`]).
    pub stray_context: StrayRepair,
    /// Watch the sources of host-to-device copies from pinned memory: a digest at
    /// submission compared when the copy is known complete (host writes during the copy are
    /// reported), and in `fix` mode a snapshot the copy is sent from (default `false`: it
    /// reads every such copy's source, and copies it in `fix` mode).
    pub host_guard: bool,
    /// Most bytes of pinned staging memory the snapshots may hold
    /// (`SEEDANCE_HOST_GUARD_POOL`, default [`DEFAULT_HOST_GUARD_POOL`]; 0: no snapshots).
    pub host_guard_pool: u64,
}

/// `SEEDANCE_STRAY_CONTEXT`: the opt-in repair of a stray primary context on device 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StrayRepair {
    /// Report only (the default).
    #[default]
    Off,
    /// Retain the working device's primary context instead (and send the matching
    /// releases of device 0 there too).
    Redirect,
    /// Return `CUDA_ERROR_DEVICE_UNAVAILABLE` (46) without reaching the driver.
    Refuse,
}

impl StrayRepair {
    /// `off`, `redirect`, `refuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            StrayRepair::Off => "off",
            StrayRepair::Redirect => "redirect",
            StrayRepair::Refuse => "refuse",
        }
    }
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
            stray_context: StrayRepair::Off,
            host_guard: false,
            host_guard_pool: DEFAULT_HOST_GUARD_POOL,
        }
    }
}

impl Config {
    /// Validates `raw`. Returns the configuration and one warning per bad value.
    pub fn from_raw(raw: &RawConfig) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let mut cfg = Config::default();
        for (name, value) in &raw.not_utf8 {
            let default = SETTINGS
                .iter()
                .find(|(n, _)| n == name)
                .map_or("the default", |(_, d)| d);
            warnings.push(format!(
                "{name}=\"{value}\" is not valid UTF-8; using {default}"
            ));
            if *name == "SEEDANCE_MODE" {
                cfg.mode = Mode::Observe;
            }
        }
        if let Some(m) = &raw.mode {
            match m.trim().to_ascii_lowercase().as_str() {
                "off" => cfg.mode = Mode::Off,
                "observe" => cfg.mode = Mode::Observe,
                "fix" | "" => cfg.mode = Mode::Fix,
                // Whoever set a mode wanted something other than the default; a value we
                // cannot read must not turn the repairs on.
                _ => {
                    cfg.mode = Mode::Observe;
                    warnings.push(format!(
                        "SEEDANCE_MODE={} is not one of off, observe, fix; using observe",
                        crate::text::quoted(m)
                    ))
                }
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
        for name in &raw.unknown {
            warnings.push(format!(
                "{name} is not a seedance setting; did you mean {}?",
                closest_setting(name)
            ));
        }
        if let Some(v) = &raw.stray_context {
            match v.trim().to_ascii_lowercase().as_str() {
                "off" | "0" | "" => cfg.stray_context = StrayRepair::Off,
                "redirect" => cfg.stray_context = StrayRepair::Redirect,
                "refuse" => cfg.stray_context = StrayRepair::Refuse,
                _ => warnings.push(format!(
                    "SEEDANCE_STRAY_CONTEXT={} is not one of off, redirect, refuse; using off",
                    crate::text::quoted(v)
                )),
            }
        }
        if let Some(g) = &raw.host_guard {
            match parse_bool(g) {
                Some(b) => cfg.host_guard = b,
                None => warnings.push(format!(
                    "SEEDANCE_HOST_GUARD={} is not a boolean (1/0, true/false, yes/no, on/off); using off",
                    crate::text::quoted(g)
                )),
            }
        }
        if let Some(m) = &raw.host_guard_pool {
            match crate::bytes::parse_bytes(m) {
                Ok(n) => cfg.host_guard_pool = n,
                Err(_) => warnings.push(format!(
                    "SEEDANCE_HOST_GUARD_POOL={} is not a size (0, 64MiB, 1GiB); using 256MiB",
                    crate::text::quoted(m)
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
        assert_eq!(
            cfg,
            Config {
                mode: Mode::Observe,
                ..Config::default()
            }
        );
        assert_eq!(
            w,
            vec![
                "SEEDANCE_MODE=\"turbo\" is not one of off, observe, fix; using observe"
                    .to_string(),
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
    fn stray_context_values() {
        let parse = |v: &str| {
            Config::from_raw(&RawConfig {
                stray_context: Some(v.into()),
                ..RawConfig::default()
            })
        };
        assert_eq!(Config::default().stray_context, StrayRepair::Off);
        assert_eq!(parse("redirect").0.stray_context, StrayRepair::Redirect);
        assert_eq!(parse(" Refuse ").0.stray_context, StrayRepair::Refuse);
        assert_eq!(parse("off").0.stray_context, StrayRepair::Off);
        let (cfg, w) = parse("move");
        assert_eq!(cfg.stray_context, StrayRepair::Off);
        assert_eq!(
            w,
            ["SEEDANCE_STRAY_CONTEXT=\"move\" is not one of off, redirect, refuse; using off"]
        );
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

    fn os(pairs: &[(&[u8], &[u8])]) -> Vec<(OsString, OsString)> {
        use std::os::unix::ffi::OsStrExt;
        pairs
            .iter()
            .map(|(k, v)| (OsStr::from_bytes(k).into(), OsStr::from_bytes(v).into()))
            .collect()
    }

    #[test]
    fn a_misspelt_mode_means_observe() {
        // `0` too: the documented values are the three words (an `off` by number would be
        // a fourth spelling the documentation does not promise).
        for bad in ["obsrve", "fixx", "on", "1", "0", "observe,fix"] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_MODE", bad)]));
            assert_eq!(cfg.mode, Mode::Observe, "{bad:?}");
            assert_eq!(
                w,
                vec![format!(
                    "SEEDANCE_MODE={bad:?} is not one of off, observe, fix; using observe"
                )]
            );
        }
    }

    #[test]
    fn values_that_are_not_utf8_are_warned_and_replaced() {
        let r = RawConfig::from_vars(os(&[
            (b"SEEDANCE_MODE", b"fi\xffx"),
            (b"SEEDANCE_TRACE_DIR", b"/tmp/\xe9t\xe9"),
            (b"SEEDANCE_QUIET", b"1"),
            (b"PATH", b"/bin\xff"),
        ]));
        assert_eq!(r.mode, None);
        assert_eq!(r.quiet.as_deref(), Some("1"));
        assert_eq!(
            r.not_utf8,
            vec![
                ("SEEDANCE_MODE", "fi\\xffx".to_string()),
                ("SEEDANCE_TRACE_DIR", "/tmp/\\xe9t\\xe9".to_string()),
            ]
        );
        let (cfg, w) = Config::from_raw(&r);
        assert_eq!(cfg.mode, Mode::Observe);
        assert_eq!(cfg.trace_dir, None);
        assert!(cfg.quiet);
        assert_eq!(
            w,
            vec![
                "SEEDANCE_MODE=\"fi\\xffx\" is not valid UTF-8; using observe".to_string(),
                "SEEDANCE_TRACE_DIR=\"/tmp/\\xe9t\\xe9\" is not valid UTF-8; using no trace"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn unknown_names_get_one_warning_with_the_closest_setting() {
        let r = RawConfig::from_vars(os(&[
            (b"SEEDANCE_TRACEDIR", b"/tmp/t"),
            (b"SEEDANCE_MOD", b"fix"),
            (b"SEEDANCE_TRACEDIR", b"/tmp/u"),
            (b"SEEDANCE_TEST_PANIC", b"x"),
            (b"SEEDANCE_MEMCHECK_CASES", b"x"),
            (b"SEEDANCE_\xff", b"x"),
            (b"SEEDANCEMODE", b"x"),
            (b"SEEDANCE_MODE", b"observe"),
            (b"SEEDANCE_MODE", b"off"),
        ]));
        assert_eq!(r.mode.as_deref(), Some("observe"));
        assert_eq!(
            r.unknown,
            ["SEEDANCE_MOD", "SEEDANCE_TRACEDIR", "SEEDANCE_\\xff"]
        );
        let (cfg, w) = Config::from_raw(&r);
        assert_eq!(cfg.mode, Mode::Observe);
        assert_eq!(cfg.trace_dir, None);
        assert_eq!(
            w,
            vec![
                "SEEDANCE_MOD is not a seedance setting; did you mean SEEDANCE_MODE?",
                "SEEDANCE_TRACEDIR is not a seedance setting; did you mean SEEDANCE_TRACE_DIR?",
                "SEEDANCE_\\xff is not a seedance setting; did you mean SEEDANCE_MODE?",
            ]
        );
        assert_eq!(closest_setting("SEEDANCE_VALIDATION"), "SEEDANCE_VALIDATE");
        assert_eq!(
            closest_setting("SEEDANCE_NVML_TIMEOUT_MS"),
            "SEEDANCE_NVML_TIMEOUT"
        );
        assert_eq!(
            closest_setting("SEEDANCE_EXCLUDE"),
            "SEEDANCE_EXCLUDE_DEVICES"
        );
    }

    #[test]
    fn host_guard_values() {
        assert!(!Config::default().host_guard);
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_HOST_GUARD", "on")]));
        assert!(w.is_empty() && cfg.host_guard);
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_HOST_GUARD", "sometimes")]));
        assert!(!cfg.host_guard);
        assert_eq!(
            w,
            vec!["SEEDANCE_HOST_GUARD=\"sometimes\" is not a boolean (1/0, true/false, yes/no, on/off); using off".to_string()]
        );
    }

    #[test]
    fn host_guard_pool_is_a_size() {
        assert_eq!(Config::default().host_guard_pool, 256 << 20);
        for (v, want) in [("0", 0), ("64MiB", 64 << 20), ("4096", 4096)] {
            let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_HOST_GUARD_POOL", v)]));
            assert_eq!((cfg.host_guard_pool, w.len()), (want, 0), "{v}");
        }
        let (cfg, w) = Config::from_raw(&raw(&[("SEEDANCE_HOST_GUARD_POOL", "lots")]));
        assert_eq!(cfg.host_guard_pool, DEFAULT_HOST_GUARD_POOL);
        assert_eq!(
            w,
            vec!["SEEDANCE_HOST_GUARD_POOL=\"lots\" is not a size (0, 64MiB, 1GiB); using 256MiB"]
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

    #[test]
    fn every_variable_read_is_a_known_setting() {
        let asked = std::cell::RefCell::new(Vec::new());
        let _ = RawConfig::from_lookup(|k| {
            asked.borrow_mut().push(k.to_string());
            None
        });
        let asked = asked.into_inner();
        assert!(!asked.is_empty());
        for name in &asked {
            assert!(
                SETTINGS.iter().any(|(n, _)| n == name),
                "{name} is read but missing from SETTINGS: it would be warned about as unknown"
            );
        }
    }

    #[test]
    fn tool_prefixes_are_not_warned_about() {
        let vars = [
            ("SEEDANCE_REQUIRE_CHROMIUM", "1"),
            ("SEEDANCE_E2E_TARGET", "aarch64-unknown-linux-gnu"),
            ("SEEDANCE_WHEEL_LINK", "zig"),
            ("SEEDANCE_WHEEL_TARGET", "aarch64-unknown-linux-gnu"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let raw = RawConfig::from_vars(vars);
        assert!(raw.unknown.is_empty(), "{:?}", raw.unknown);
    }
}
