//! Reads the host description that `fake-cuda` also reads, so both fakes describe one host.
//!
//! Read at each `nvmlInit_v2`/`nvmlInitWithFlags` that starts the library (reference count
//! 0 to 1):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FAKE_CUDA_DEVICE_COUNT` | physical devices, 0..=64 | 1 |
//! | `FAKE_CUDA_TOTAL_MEM` | bytes per device (one value, or a comma list per physical device) | 85899345920 (80 GiB) |
//! | `FAKE_CUDA_FREE_MEM` | bytes free (one value or a comma list; clamped to the total) | the total |
//! | `FAKE_CUDA_NAMES` | device names (one name, or a comma list per physical device) | `Fake H200 #p` |
//! | `FAKE_CUDA_BUSY` | physical indices (comma list) held by another process | none |
//! | `FAKE_CUDA_ATTR_20` | compute mode (one value or a comma list) | 0, or 3 for a busy device |
//! | `FAKE_CUDA_ATTR_33` / `_34` / `_50` | PCI bus / device / domain | `0x10 + p` / 0 / 0 |
//! | `FAKE_CUDA_ATTR_75` / `_76` | compute capability major / minor | 9 / 0 |
//! | `FAKE_NVML_ABSENT` | `1`/`true`/`yes`/`on`: `nvmlInit*` fails with `NVML_ERROR_DRIVER_NOT_LOADED` | off |
//! | `FAKE_NVML_INIT_DELAY_MS` | milliseconds every `nvmlInit_v2`/`nvmlInitWithFlags` sleeps before it answers, holding the library's lock (every other NVML call waits for it): a wedged driver; read at each init call | 0 |
//! | `FAKE_NVML_PROCESSES` | compute processes to list, a comma list of `p:pid:bytes` (physical index, pid or `self` for the calling process, used memory in bytes); added after a busy device's process | none |
//! | `FAKE_NVML_QUERY_DELAY_MS` | milliseconds every per-device query (`nvmlDeviceGet*` on a handle: index, name, UUID, PCI info, memory, compute mode, processes, compute capability) sleeps, holding the lock; read at the init that starts the library | 0 |
//!
//! The same parsing rules as `fake-cuda` (the comma-list parsing is shared with it, in
//! `fake_support::env`): an empty or missing comma-list entry keeps the default; in the
//! index list empty entries are skipped and indices past the count ignored; an unparseable value
//! keeps the default and prints one line `fake-nvml: ignoring bad NAME="value" ...` on
//! stderr. `CUDA_VISIBLE_DEVICES` is ignored: NVML always lists every physical device, in
//! PCI bus order, which here is physical index order.

use std::collections::BTreeMap;

use fake_support::env;

pub use fake_support::env::{DEFAULT_DEVICE_COUNT, DEFAULT_TOTAL_MEM, MAX_DEVICE_COUNT};

/// `NVML_COMPUTEMODE_EXCLUSIVE_PROCESS`, the mode of a busy device.
pub const COMPUTE_MODE_EXCLUSIVE_PROCESS: i32 = 3;

/// One physical device as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Physical index `p`, the NVML index.
    pub index: u32,
    /// Marketing name.
    pub name: String,
    /// Total memory in bytes.
    pub total_mem: u64,
    /// Free memory in bytes (never above the total).
    pub free_mem: u64,
    /// `nvmlComputeMode_t` value.
    pub compute_mode: i32,
    /// Held by another process: one running compute process is reported.
    pub busy: bool,
    /// PCI domain.
    pub pci_domain: u32,
    /// PCI bus.
    pub pci_bus: u32,
    /// PCI device (slot) on the bus.
    pub pci_device: u32,
    /// CUDA compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// `FAKE_NVML_PROCESSES` entries for this device: (pid, `None` for the calling process;
    /// used bytes).
    pub processes: Vec<(Option<u32>, u64)>,
}

impl Gpu {
    /// The 16 UUID bytes, the same as `fake-cuda`'s `cuDeviceGetUuid`:
    /// `fa ce 5e ed 00 00 40 00 80 00 00 00 00 00 00 pp`.
    pub fn uuid_bytes(&self) -> [u8; 16] {
        let mut b = [
            0xfa, 0xce, 0x5e, 0xed, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0,
        ];
        b[15] = self.index as u8;
        b
    }

    /// `GPU-face5eed-0000-4000-8000-0000000000pp`.
    pub fn uuid(&self) -> String {
        let hex: String = self
            .uuid_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }

    /// `busId` as NVML writes it: `00000000:10:00.0` (uppercase hex).
    pub fn bus_id(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.0",
            self.pci_domain, self.pci_bus, self.pci_device
        )
    }

    /// `busIdLegacy`: `0000:10:00.0` (uppercase hex).
    pub fn bus_id_legacy(&self) -> String {
        format!(
            "{:04X}:{:02X}:{:02X}.0",
            self.pci_domain, self.pci_bus, self.pci_device
        )
    }

    /// Whether a PCI bus id string names this device: `[domain:]bus:device[.function]`,
    /// hex, any case, function 0 (as `nvmlDeviceGetHandleByPciBusId_v2` accepts).
    pub fn matches_bus_id(&self, text: &str) -> bool {
        parse_bus_id(text) == Some((self.pci_domain, self.pci_bus, self.pci_device))
    }
}

/// Parses `[domain:]bus:device[.function]` (hex) into `(domain, bus, device)`; the function,
/// when given, must be 0.
pub fn parse_bus_id(text: &str) -> Option<(u32, u32, u32)> {
    let t = text.trim();
    let (rest, function) = match t.rsplit_once('.') {
        Some((r, f)) => (r, Some(f)),
        None => (t, None),
    };
    if function.is_some_and(|f| u32::from_str_radix(f, 16).ok() != Some(0)) {
        return None;
    }
    let hex = |s: &str| {
        (!s.is_empty() && s.len() <= 8)
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    let parts: Vec<&str> = rest.split(':').collect();
    match parts[..] {
        [domain, bus, device] => Some((hex(domain)?, hex(bus)?, hex(device)?)),
        [bus, device] => Some((0, hex(bus)?, hex(device)?)),
        _ => None,
    }
}

/// The configured host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Every physical device, by index.
    pub gpus: Vec<Gpu>,
    /// One line per variable that could not be parsed.
    pub warnings: Vec<String>,
}

impl Host {
    /// Reads the process environment and prints any warnings on stderr.
    pub fn from_env() -> Host {
        let host = Host::from_vars(&env::vars(|k| {
            k.starts_with("FAKE_CUDA_") || k == "FAKE_NVML_PROCESSES"
        }));
        env::print_warnings(&host.warnings);
        host
    }

    /// Builds the host from explicit variables (the pure part of [`Host::from_env`]).
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Host {
        let mut warnings = Vec::new();
        let get = |k: &str| vars.get(k).map(String::as_str);
        let count = env::device_count(WHO, get("FAKE_CUDA_DEVICE_COUNT"), &mut warnings);
        let n = count as usize;
        let mut list_u64 =
            |name: &str| env::per_device::<u64>(WHO, name, get(name), n, &mut warnings);
        let totals = list_u64("FAKE_CUDA_TOTAL_MEM");
        let frees = list_u64("FAKE_CUDA_FREE_MEM");
        let mut list_i32 = |attr: u32| {
            let name = format!("FAKE_CUDA_ATTR_{attr}");
            env::per_device::<i32>(WHO, &name, get(&name), n, &mut warnings)
        };
        let modes = list_i32(20);
        let buses = list_i32(33);
        let slots = list_i32(34);
        let domains = list_i32(50);
        let majors = list_i32(75);
        let minors = list_i32(76);
        let busy = env::index_set(
            WHO,
            "FAKE_CUDA_BUSY",
            get("FAKE_CUDA_BUSY"),
            n,
            &mut warnings,
        );
        let names = env::names(get("FAKE_CUDA_NAMES"), n);

        let gpus = (0..n)
            .map(|i| {
                let p = i as u32;
                let total_mem = totals[i].unwrap_or(DEFAULT_TOTAL_MEM);
                let default_mode = if busy[i] {
                    COMPUTE_MODE_EXCLUSIVE_PROCESS
                } else {
                    0
                };
                Gpu {
                    index: p,
                    name: names[i]
                        .clone()
                        .unwrap_or_else(|| format!("Fake H200 #{p}")),
                    total_mem,
                    free_mem: frees[i].unwrap_or(total_mem).min(total_mem),
                    compute_mode: modes[i].unwrap_or(default_mode),
                    busy: busy[i],
                    pci_domain: domains[i].unwrap_or(0) as u32,
                    pci_bus: buses[i].unwrap_or(0x10 + p as i32) as u32,
                    pci_device: slots[i].unwrap_or(0) as u32,
                    compute_capability: (majors[i].unwrap_or(9), minors[i].unwrap_or(0)),
                    processes: Vec::new(),
                }
            })
            .collect();
        let mut host = Host { gpus, warnings };
        if let Some(raw) = get("FAKE_NVML_PROCESSES") {
            match parse_processes(raw) {
                Some(list) => {
                    for (p, pid, bytes) in list {
                        if let Some(g) = host.gpus.get_mut(p as usize) {
                            g.processes.push((pid, bytes));
                        }
                    }
                }
                None => host.warnings.push(bad("FAKE_NVML_PROCESSES", raw)),
            }
        }
        host
    }
}

/// A `FAKE_NVML_*_DELAY_MS` value: whole milliseconds, 0 when unset. A bad value is 0 with
/// the usual warning line (`fake-nvml: ignoring bad NAME="value" (using the default)`).
pub fn delay_ms(name: &str, raw: Option<&str>) -> (std::time::Duration, Option<String>) {
    match raw.map(|r| (r, r.trim().parse::<u64>())) {
        None => (std::time::Duration::ZERO, None),
        Some((_, Ok(ms))) => (std::time::Duration::from_millis(ms), None),
        Some((r, Err(_))) => (std::time::Duration::ZERO, Some(bad(name, r))),
    }
}

/// Whether a `FAKE_NVML_ABSENT` value turns absent mode on: `1`, `true`, `yes` or `on`
/// (case-insensitive).
pub fn flag_enabled(raw: Option<&str>) -> bool {
    env::flag_enabled(raw)
}

/// `FAKE_NVML_PROCESSES`: `p:pid:bytes` entries (pid `self` = `None`); empty entries
/// skipped; `None` when any entry does not parse.
fn parse_processes(raw: &str) -> Option<Vec<(u32, Option<u32>, u64)>> {
    raw.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut it = e.split(':').map(str::trim);
            let p = it.next()?.parse::<u32>().ok()?;
            let pid = match it.next()? {
                "self" => None,
                n => Some(n.parse::<u32>().ok()?),
            };
            let bytes = it.next()?.parse::<u64>().ok()?;
            it.next().is_none().then_some((p, pid, bytes))
        })
        .collect()
}

/// The name that prefixes this fake's messages.
const WHO: &str = "fake-nvml";

/// The warning line for an unparseable variable.
fn bad(name: &str, raw: &str) -> String {
    env::bad_value(WHO, name, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(pairs: &[(&str, &str)]) -> Host {
        Host::from_vars(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn defaults() {
        let h = host(&[]);
        assert!(h.warnings.is_empty());
        assert_eq!(
            h.gpus,
            vec![Gpu {
                index: 0,
                name: "Fake H200 #0".into(),
                total_mem: DEFAULT_TOTAL_MEM,
                free_mem: DEFAULT_TOTAL_MEM,
                compute_mode: 0,
                busy: false,
                pci_domain: 0,
                pci_bus: 0x10,
                pci_device: 0,
                compute_capability: (9, 0),
                processes: vec![],
            }]
        );
        let g = &h.gpus[0];
        assert_eq!(g.uuid(), "GPU-face5eed-0000-4000-8000-000000000000");
        assert_eq!(g.bus_id(), "00000000:10:00.0");
        assert_eq!(g.bus_id_legacy(), "0000:10:00.0");
    }

    #[test]
    fn scripted_processes() {
        let h = host(&[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_NVML_PROCESSES", "0:self:100, 0:5001:200,,1:7:3,9:1:1"),
        ]);
        assert!(h.warnings.is_empty(), "{:?}", h.warnings);
        assert_eq!(h.gpus[0].processes, vec![(None, 100), (Some(5001), 200)]);
        assert_eq!(h.gpus[1].processes, vec![(Some(7), 3)]);
        let h = host(&[("FAKE_NVML_PROCESSES", "0:x:1")]);
        assert_eq!(h.warnings.len(), 1, "{:?}", h.warnings);
        assert!(h.gpus[0].processes.is_empty());
    }

    #[test]
    fn full_topology() {
        let h = host(&[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_TOTAL_MEM", "1000"),
            ("FAKE_CUDA_FREE_MEM", "100,,3000"),
            ("FAKE_CUDA_NAMES", "NVIDIA H200, ,Other"),
            ("FAKE_CUDA_BUSY", "1,3,17"),
            ("FAKE_CUDA_ATTR_20", ",,2,0"),
            ("FAKE_CUDA_ATTR_33", ",,,250"),
            ("FAKE_CUDA_ATTR_50", "1"),
            ("FAKE_CUDA_ATTR_75", "8"),
        ]);
        assert!(h.warnings.is_empty(), "{:?}", h.warnings);
        let g = &h.gpus;
        assert_eq!(g.len(), 4);
        let frees: Vec<u64> = g.iter().map(|d| d.free_mem).collect();
        assert_eq!(frees, [100, 1000, 1000, 1000]);
        let names: Vec<&str> = g.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["NVIDIA H200", "Fake H200 #1", "Other", "Fake H200 #3"]
        );
        let modes: Vec<i32> = g.iter().map(|d| d.compute_mode).collect();
        assert_eq!(modes, [0, 3, 2, 0]);
        let busy: Vec<bool> = g.iter().map(|d| d.busy).collect();
        assert_eq!(busy, [false, true, false, true]);
        assert_eq!(g[3].bus_id(), "00000001:FA:00.0");
        assert_eq!(g[3].uuid(), "GPU-face5eed-0000-4000-8000-000000000003");
        assert_eq!(g[0].compute_capability, (8, 0));
    }

    #[test]
    fn bad_values_warn() {
        let h = host(&[
            ("FAKE_CUDA_DEVICE_COUNT", "99"),
            ("FAKE_CUDA_BUSY", "one"),
            ("FAKE_CUDA_ATTR_20", "x"),
        ]);
        assert_eq!(h.gpus.len(), 1);
        assert!(!h.gpus[0].busy);
        assert_eq!(
            h.warnings,
            [
                "fake-nvml: ignoring bad FAKE_CUDA_DEVICE_COUNT=\"99\" (using the default)",
                "fake-nvml: ignoring bad FAKE_CUDA_ATTR_20=\"x\" (using the default)",
                "fake-nvml: ignoring bad FAKE_CUDA_BUSY=\"one\" (using the default)",
            ]
        );
        assert!(host(&[("FAKE_CUDA_DEVICE_COUNT", "0")]).gpus.is_empty());
    }

    #[test]
    fn bus_ids() {
        assert_eq!(parse_bus_id("00000000:10:00.0"), Some((0, 0x10, 0)));
        assert_eq!(parse_bus_id("0000:1a:00.0"), Some((0, 0x1a, 0)));
        assert_eq!(parse_bus_id("1A:00.0"), Some((0, 0x1a, 0)));
        assert_eq!(parse_bus_id("0001:1a:02"), Some((1, 0x1a, 2)));
        assert_eq!(parse_bus_id("0000:10:00.1"), None);
        assert_eq!(parse_bus_id("10"), None);
        assert_eq!(parse_bus_id("0000:zz:00.0"), None);
        assert_eq!(parse_bus_id(""), None);
        let g = &host(&[("FAKE_CUDA_DEVICE_COUNT", "2")]).gpus[1];
        assert!(g.matches_bus_id("0000:11:00.0"));
        assert!(g.matches_bus_id("00000000:11:00.0"));
        assert!(!g.matches_bus_id("0000:10:00.0"));
    }

    #[test]
    fn delays() {
        use std::time::Duration;
        let d = |raw| delay_ms("FAKE_NVML_INIT_DELAY_MS", raw);
        assert_eq!(d(None), (Duration::ZERO, None));
        assert_eq!(d(Some("60000")), (Duration::from_secs(60), None));
        assert_eq!(d(Some(" 100 ")), (Duration::from_millis(100), None));
        assert_eq!(d(Some("0")), (Duration::ZERO, None));
        for bad in ["-1", "1.5", "soon", ""] {
            assert_eq!(
                d(Some(bad)),
                (
                    Duration::ZERO,
                    Some(format!(
                        "fake-nvml: ignoring bad FAKE_NVML_INIT_DELAY_MS={bad:?} (using the default)"
                    ))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn absent_flag() {
        assert!(flag_enabled(Some("1")));
        assert!(flag_enabled(Some(" Yes ")));
        assert!(!flag_enabled(Some("0")));
        assert!(!flag_enabled(None));
    }
}
