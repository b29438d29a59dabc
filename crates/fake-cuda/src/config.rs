//! Parses the environment into the fake's topology.
//!
//! Read once, at the first `cuInit`:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FAKE_CUDA_DEVICE_COUNT` | physical devices, 0..=64 | 1 |
//! | `FAKE_CUDA_TOTAL_MEM` | bytes per device (one value, or a comma list per physical device) | 85899345920 (80 GiB) |
//! | `FAKE_CUDA_FREE_MEM` | bytes free at start (one value, or a comma list per physical device; clamped to the total) | the total |
//! | `FAKE_CUDA_ATTR_<n>` | value of device attribute `n` (one value, or a comma list per physical device) | see [`crate::device`] |
//! | `FAKE_CUDA_NAMES` | device names (one name for every device, or a comma list per physical device) | `Fake H200 #p` |
//! | `FAKE_CUDA_BUSY` | physical indices (comma list) of devices held by another process in exclusive-process compute mode, see [`crate::device::Device::context_refusal`] | none |
//! | `FAKE_CUDA_CTX_OOM` | physical indices (comma list) of devices whose memory is full of another process's allocations: context creation fails with `CUDA_ERROR_OUT_OF_MEMORY` | none |
//! | `FAKE_CUDA_FUNC_MAX_THREADS` | threads per block that kernels with a function handle `>= 0x2000` can run with (register-limited kernels: `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`), see [`crate::launch`] | the device's maximum |
//! | `CUDA_VISIBLE_DEVICES` | visible physical devices, see [`parse_visible`] | all |
//! | `FAKE_CUDA_RAISE` | `<signal>:<entry point>[:<times>]`: the first `times` calls of that entry point raise the signal first, see `global::raise_if_asked` (read once) | off |
//! | `FAKE_CUDA_CANCEL_POINTS` | comma list of entry points (`cuCtxSynchronize`, `cuStreamSynchronize`, `cuStreamSynchronize_ptsz`) that are cancellation points, see `global::cancellation_point` (read once) | none |
//! | `FAKE_CUDA_DEVICE_COUNT_IN`, `FAKE_CUDA_STUB_IN` | `<directory>=<value>`: `FAKE_CUDA_DEVICE_COUNT` or `FAKE_CUDA_STUB` for the copy of this library loaded from that directory only, see [`for_this_copy`] | unset |
//! | `FAKE_CUDA_NAME_DELAY_MS` | milliseconds `cuDeviceGetName` sleeps holding the driver's lock, see [`crate::global::name_delay`] (read at each call) | 0 |
//! | `FAKE_CUDA_RELEASE_NO_WAIT` | `1`: `cuMemFreeHost` and `cuMemHostUnregister` release at once instead of first running the queued copies of their range as driver 580 does, see [`crate::global::release_waits`] (read at each call) | off |
//! | `FAKE_CUDA_DEAD_HANDLE_CRASH` | `1`: a synchronize or destroy of a stream or event whose context was destroyed dies with `SIGSEGV`, see [`crate::global::crash_if_dead`] (read at each call) | off |
//!
//! In a comma list an empty entry, or a missing one, keeps the default for that device.
//! In the index lists (`FAKE_CUDA_BUSY`, `FAKE_CUDA_CTX_OOM`) empty entries are skipped and
//! indices past the device count are ignored; a non-number makes the whole variable ignored.
//! Names are trimmed of surrounding blanks.
//! Unparseable values keep the default and produce one warning line per variable,
//! `fake-cuda: ignoring bad FAKE_CUDA_...`, which [`Topology::from_env`] prints on stderr.
//!
//! `FAKE_CUDA_STUB` and `FAKE_CUDA_LOG` are read separately (before `cuInit`), see
//! [`stub_enabled`] and [`crate::log`]; so is `FAKE_CUDA_DRIVER_VERSION` (the version
//! `cuDriverGetVersion` reports, default 13000; `cuGetProcAddress` answers names it lacks
//! asked for with a higher `cudaVersion` as version-not-sufficient), see
//! [`crate::exports::init::driver_version`].

use std::collections::BTreeMap;

use fake_support::env;

use crate::device::uuid_string;

pub use fake_support::env::{DEFAULT_DEVICE_COUNT, DEFAULT_TOTAL_MEM, MAX_DEVICE_COUNT};

/// Prefix of the per-attribute override variables, `FAKE_CUDA_ATTR_<number>`.
pub const ATTR_PREFIX: &str = "FAKE_CUDA_ATTR_";

/// One physical device as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalDevice {
    /// Physical index `p` (0-based), the number `CUDA_VISIBLE_DEVICES` uses.
    pub index: u32,
    /// Total memory in bytes.
    pub total_mem: u64,
    /// Free memory at start in bytes (never above `total_mem`).
    pub free_mem: u64,
    /// Attribute values from `FAKE_CUDA_ATTR_<n>` that replace or add to the defaults.
    pub attr_overrides: BTreeMap<i32, i32>,
    /// Name from `FAKE_CUDA_NAMES`, `None` for the default `Fake H200 #p`.
    pub name: Option<String>,
    /// Listed in `FAKE_CUDA_BUSY`: held by another process (exclusive-process mode).
    pub busy: bool,
    /// Listed in `FAKE_CUDA_CTX_OOM`: no memory left for a new context.
    pub ctx_oom: bool,
}

/// The whole configured topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Every physical device, by physical index.
    pub physical: Vec<PhysicalDevice>,
    /// Visible devices in ordinal order: `visible[ordinal]` is a physical index.
    pub visible: Vec<u32>,
    /// `FAKE_CUDA_FUNC_MAX_THREADS`: the thread limit of register-limited kernels
    /// (function handles `>= 0x2000`); `None` when unset.
    pub func_max_threads: Option<u32>,
    /// One line per variable that could not be parsed.
    pub warnings: Vec<String>,
}

impl Topology {
    /// Reads the process environment and prints any warnings on stderr.
    /// Variables whose name or value is not UTF-8 are skipped.
    pub fn from_env() -> Topology {
        let mut vars = env::vars(|k| k.starts_with("FAKE_CUDA_") || k == "CUDA_VISIBLE_DEVICES");
        if let Some(n) = for_this_copy("FAKE_CUDA_DEVICE_COUNT_IN") {
            vars.insert("FAKE_CUDA_DEVICE_COUNT".to_string(), n);
        }
        let topo = Topology::from_vars(&vars);
        env::print_warnings(&topo.warnings);
        topo
    }

    /// Builds the topology from explicit variables (the pure part of [`Topology::from_env`]).
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Topology {
        let mut warnings = Vec::new();
        let get = |k: &str| vars.get(k).map(String::as_str);

        let count = env::device_count(WHO, get("FAKE_CUDA_DEVICE_COUNT"), &mut warnings);
        let n = count as usize;
        let totals = env::per_device::<u64>(
            WHO,
            "FAKE_CUDA_TOTAL_MEM",
            get("FAKE_CUDA_TOTAL_MEM"),
            n,
            &mut warnings,
        );
        let frees = env::per_device::<u64>(
            WHO,
            "FAKE_CUDA_FREE_MEM",
            get("FAKE_CUDA_FREE_MEM"),
            n,
            &mut warnings,
        );

        let mut physical: Vec<PhysicalDevice> = (0..count)
            .map(|p| {
                let total_mem = totals[p as usize].unwrap_or(DEFAULT_TOTAL_MEM);
                let free_mem = frees[p as usize].unwrap_or(total_mem).min(total_mem);
                PhysicalDevice {
                    index: p,
                    total_mem,
                    free_mem,
                    attr_overrides: BTreeMap::new(),
                    name: None,
                    busy: false,
                    ctx_oom: false,
                }
            })
            .collect();

        for (key, raw) in vars.range(ATTR_PREFIX.to_string()..) {
            let Some(num) = key.strip_prefix(ATTR_PREFIX) else {
                break;
            };
            let Ok(attr) = num.parse::<i32>() else {
                warnings.push(bad(key, raw));
                continue;
            };
            let values = env::per_device::<i32>(WHO, key, Some(raw), n, &mut warnings);
            for (dev, v) in physical.iter_mut().zip(values) {
                if let Some(v) = v {
                    dev.attr_overrides.insert(attr, v);
                }
            }
        }

        let names = env::names(get("FAKE_CUDA_NAMES"), n);
        let busy = env::index_set(
            WHO,
            "FAKE_CUDA_BUSY",
            get("FAKE_CUDA_BUSY"),
            n,
            &mut warnings,
        );
        let oom = env::index_set(
            WHO,
            "FAKE_CUDA_CTX_OOM",
            get("FAKE_CUDA_CTX_OOM"),
            n,
            &mut warnings,
        );
        for (dev, name) in physical.iter_mut().zip(names) {
            dev.name = name;
            dev.busy = busy[dev.index as usize];
            dev.ctx_oom = oom[dev.index as usize];
        }

        let func_max_threads = match get("FAKE_CUDA_FUNC_MAX_THREADS") {
            None => None,
            Some(raw) => match raw.trim().parse::<u32>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    warnings.push(bad("FAKE_CUDA_FUNC_MAX_THREADS", raw));
                    None
                }
            },
        };
        let uuids: Vec<String> = (0..count).map(uuid_string).collect();
        let visible = parse_visible(get("CUDA_VISIBLE_DEVICES"), count, &uuids);
        Topology {
            physical,
            visible,
            func_max_threads,
            warnings,
        }
    }
}

/// The name that prefixes this fake's messages.
const WHO: &str = "fake-cuda";

/// The warning line for an unparseable variable.
fn bad(name: &str, raw: &str) -> String {
    env::bad_value(WHO, name, raw)
}

/// Parses `CUDA_VISIBLE_DEVICES` the way the driver does.
///
/// * unset (`None`): every physical device, in order;
/// * otherwise comma-separated entries, each a physical index (`"1"`, surrounding blanks
///   allowed) or a unique prefix of a device UUID string (`"GPU-face5eed-..."`);
/// * parsing stops at the first entry that is invalid, out of range or a repeat; the entries
///   before it stay visible. So `""` and `"-1"` hide every device.
pub fn parse_visible(raw: Option<&str>, count: u32, uuids: &[String]) -> Vec<u32> {
    let Some(raw) = raw else {
        return (0..count).collect();
    };
    let mut out = Vec::new();
    for entry in raw.split(',') {
        let e = entry.trim();
        let idx = if let Ok(i) = e.parse::<u32>() {
            i
        } else if e.len() > 4 && e[..4].eq_ignore_ascii_case("GPU-") {
            let lower = e.to_ascii_lowercase();
            let mut hits = uuids
                .iter()
                .enumerate()
                .filter(|(_, u)| u.to_ascii_lowercase().starts_with(&lower));
            match (hits.next(), hits.next()) {
                (Some((i, _)), None) => i as u32,
                _ => break,
            }
        } else {
            break;
        };
        if idx >= count || out.contains(&idx) {
            break;
        }
        out.push(idx);
    }
    out
}

/// `<VAR>=<directory>=<value>` (`FAKE_CUDA_DEVICE_COUNT_IN`, `FAKE_CUDA_STUB_IN`): the
/// value when this copy of the library was loaded from that directory, so that a test can
/// load two copies that answer differently (a stub and a driver, or two device counts).
pub fn for_this_copy(var: &str) -> Option<String> {
    let raw = std::env::var(var).ok()?;
    let (dir, value) = raw.rsplit_once('=')?;
    let own = crate::global::own_path()?;
    let own_dir = std::path::Path::new(&own).parent()?.to_path_buf();
    (own_dir == std::path::Path::new(dir)).then(|| value.to_string())
}

/// Whether a `FAKE_CUDA_STUB` value turns stub mode on: `1`, `true`, `yes` or `on`
/// (case-insensitive). Anything else, or unset, is off.
pub fn stub_enabled(raw: Option<&str>) -> bool {
    env::flag_enabled(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn uuids(n: u32) -> Vec<String> {
        (0..n).map(uuid_string).collect()
    }

    #[test]
    fn visible_unset_is_all() {
        assert_eq!(parse_visible(None, 4, &uuids(4)), vec![0, 1, 2, 3]);
        assert_eq!(parse_visible(None, 0, &uuids(0)), Vec::<u32>::new());
    }

    #[test]
    fn visible_empty_is_none() {
        assert_eq!(parse_visible(Some(""), 4, &uuids(4)), Vec::<u32>::new());
        assert_eq!(parse_visible(Some(" "), 4, &uuids(4)), Vec::<u32>::new());
        assert_eq!(parse_visible(Some("-1"), 4, &uuids(4)), Vec::<u32>::new());
    }

    #[test]
    fn visible_order_and_stop_at_first_invalid() {
        assert_eq!(parse_visible(Some("2,0"), 4, &uuids(4)), vec![2, 0]);
        assert_eq!(parse_visible(Some(" 3 , 1 "), 4, &uuids(4)), vec![3, 1]);
        assert_eq!(parse_visible(Some("1,foo,2"), 4, &uuids(4)), vec![1]);
        assert_eq!(parse_visible(Some("1,,2"), 4, &uuids(4)), vec![1]);
        assert_eq!(parse_visible(Some("0,7,1"), 4, &uuids(4)), vec![0]);
        assert_eq!(parse_visible(Some("4"), 4, &uuids(4)), Vec::<u32>::new());
        assert_eq!(parse_visible(Some("1,-1,0"), 4, &uuids(4)), vec![1]);
        assert_eq!(parse_visible(Some("1,1,0"), 4, &uuids(4)), vec![1]);
        assert_eq!(parse_visible(Some("0,1,"), 4, &uuids(4)), vec![0, 1]);
        assert_eq!(parse_visible(Some("0"), 0, &uuids(0)), Vec::<u32>::new());
    }

    #[test]
    fn visible_by_uuid_prefix() {
        let u = uuids(3);
        assert_eq!(u[2], "GPU-face5eed-0000-4000-8000-000000000002");
        assert_eq!(parse_visible(Some(&u[2]), 3, &u), vec![2]);
        assert_eq!(
            parse_visible(Some("GPU-face5eed-0000-4000-8000-000000000001,0"), 3, &u),
            vec![1, 0]
        );
        // Ambiguous prefix stops parsing.
        assert_eq!(parse_visible(Some("0,GPU-face5eed"), 3, &u), vec![0]);
        assert_eq!(parse_visible(Some("GPU-00"), 3, &u), Vec::<u32>::new());
    }

    #[test]
    fn defaults() {
        let t = Topology::from_vars(&vars(&[]));
        assert_eq!(t.physical.len(), 1);
        assert_eq!(t.physical[0].total_mem, 85_899_345_920);
        assert_eq!(t.physical[0].free_mem, 85_899_345_920);
        assert!(t.physical[0].attr_overrides.is_empty());
        assert_eq!(t.visible, vec![0]);
        assert!(t.warnings.is_empty());
    }

    #[test]
    fn counts_memory_and_visibility() {
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_TOTAL_MEM", "1000"),
            ("FAKE_CUDA_FREE_MEM", "100,,300,5000"),
            ("CUDA_VISIBLE_DEVICES", "3,1"),
        ]));
        assert_eq!(t.physical.len(), 4);
        let frees: Vec<u64> = t.physical.iter().map(|d| d.free_mem).collect();
        assert_eq!(frees, vec![100, 1000, 300, 1000]);
        assert!(t.physical.iter().all(|d| d.total_mem == 1000));
        assert_eq!(t.visible, vec![3, 1]);
        assert!(t.warnings.is_empty());
    }

    #[test]
    fn single_free_value_applies_to_all_and_short_list_keeps_defaults() {
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "3"),
            ("FAKE_CUDA_FREE_MEM", "42"),
        ]));
        assert!(t.physical.iter().all(|d| d.free_mem == 42));
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "3"),
            ("FAKE_CUDA_FREE_MEM", "1,2"),
        ]));
        let frees: Vec<u64> = t.physical.iter().map(|d| d.free_mem).collect();
        assert_eq!(frees, vec![1, 2, DEFAULT_TOTAL_MEM]);
    }

    #[test]
    fn bad_values_warn_once_and_use_defaults() {
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "two"),
            ("FAKE_CUDA_TOTAL_MEM", "lots"),
            ("FAKE_CUDA_FREE_MEM", "x,y"),
            ("FAKE_CUDA_ATTR_zz", "1"),
            ("FAKE_CUDA_ATTR_1", "big"),
        ]));
        assert_eq!(t.physical.len(), 1);
        assert_eq!(t.physical[0].total_mem, DEFAULT_TOTAL_MEM);
        assert_eq!(t.physical[0].free_mem, DEFAULT_TOTAL_MEM);
        assert!(t.physical[0].attr_overrides.is_empty());
        assert_eq!(
            t.warnings,
            vec![
                "fake-cuda: ignoring bad FAKE_CUDA_DEVICE_COUNT=\"two\" (using the default)",
                "fake-cuda: ignoring bad FAKE_CUDA_TOTAL_MEM=\"lots\" (using the default)",
                "fake-cuda: ignoring bad FAKE_CUDA_FREE_MEM=\"x,y\" (using the default)",
                "fake-cuda: ignoring bad FAKE_CUDA_ATTR_1=\"big\" (using the default)",
                "fake-cuda: ignoring bad FAKE_CUDA_ATTR_zz=\"1\" (using the default)",
            ]
        );
        let t = Topology::from_vars(&vars(&[("FAKE_CUDA_DEVICE_COUNT", "65")]));
        assert_eq!(t.physical.len(), 1);
        assert_eq!(t.warnings.len(), 1);
    }

    #[test]
    fn zero_devices_and_free_clamped_to_total() {
        let t = Topology::from_vars(&vars(&[("FAKE_CUDA_DEVICE_COUNT", "0")]));
        assert!(t.physical.is_empty());
        assert!(t.visible.is_empty());
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_TOTAL_MEM", "10"),
            ("FAKE_CUDA_FREE_MEM", "20"),
        ]));
        assert_eq!(t.physical[0].free_mem, 10);
    }

    #[test]
    fn attribute_overrides() {
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_ATTR_1", "512"),
            ("FAKE_CUDA_ATTR_20", ",3"),
        ]));
        assert_eq!(t.physical[0].attr_overrides, BTreeMap::from([(1, 512)]));
        assert_eq!(
            t.physical[1].attr_overrides,
            BTreeMap::from([(1, 512), (20, 3)])
        );
    }

    #[test]
    fn names_busy_and_ctx_oom() {
        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_NAMES", " NVIDIA H200 ,, Other GPU"),
            ("FAKE_CUDA_BUSY", "3, 1,,9"),
            ("FAKE_CUDA_CTX_OOM", "2"),
        ]));
        let names: Vec<Option<&str>> = t.physical.iter().map(|d| d.name.as_deref()).collect();
        assert_eq!(
            names,
            vec![Some("NVIDIA H200"), None, Some("Other GPU"), None]
        );
        let busy: Vec<bool> = t.physical.iter().map(|d| d.busy).collect();
        assert_eq!(busy, vec![false, true, false, true]);
        let oom: Vec<bool> = t.physical.iter().map(|d| d.ctx_oom).collect();
        assert_eq!(oom, vec![false, false, true, false]);
        assert!(t.warnings.is_empty());

        let t = Topology::from_vars(&vars(&[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_NAMES", "Same"),
            ("FAKE_CUDA_BUSY", ""),
            ("FAKE_CUDA_CTX_OOM", "0,x"),
        ]));
        assert!(t.physical.iter().all(|d| d.name.as_deref() == Some("Same")));
        assert!(t.physical.iter().all(|d| !d.busy && !d.ctx_oom));
        assert_eq!(
            t.warnings,
            ["fake-cuda: ignoring bad FAKE_CUDA_CTX_OOM=\"0,x\" (using the default)"]
        );
    }

    #[test]
    fn func_max_threads() {
        let t = Topology::from_vars(&vars(&[("FAKE_CUDA_FUNC_MAX_THREADS", " 256 ")]));
        assert_eq!(t.func_max_threads, Some(256));
        assert!(t.warnings.is_empty());
        let t = Topology::from_vars(&vars(&[]));
        assert_eq!(t.func_max_threads, None);
        let t = Topology::from_vars(&vars(&[("FAKE_CUDA_FUNC_MAX_THREADS", "0")]));
        assert_eq!(t.func_max_threads, None);
        assert_eq!(
            t.warnings,
            ["fake-cuda: ignoring bad FAKE_CUDA_FUNC_MAX_THREADS=\"0\" (using the default)"]
        );
    }

    #[test]
    fn stub_values() {
        assert!(stub_enabled(Some("1")));
        assert!(stub_enabled(Some("TRUE")));
        assert!(!stub_enabled(Some("0")));
        assert!(!stub_enabled(Some("")));
        assert!(!stub_enabled(None));
    }
}
