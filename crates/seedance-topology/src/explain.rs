//! Plain-words explanations of device faults, and the parsers of the `SEEDANCE_*` values
//! that choose devices (`SEEDANCE_EXCLUDE_DEVICES`, `SEEDANCE_MIN_FREE_MEMORY`).
//!
//! Every text is one line, built only after a failure (never on a hot path).

use serde::{Deserialize, Serialize};

use crate::cvd::{and_list, assignment, describe};
use crate::model::{ComputeMode, Topology, VisibleDevice};
use crate::pci::normalize_pci_bus_id;

const GIB: f64 = (1u64 << 30) as f64;

/// A device in words: `physical GPU 1, NVIDIA H200, 0000:11:00.0`. The nvidia-smi number
/// is added when it differs from the physical index (`physical GPU 1, nvidia-smi GPU 0,
/// ...`) or the physical index is unknown.
pub fn device_label(d: &VisibleDevice) -> String {
    let mut parts = Vec::new();
    if let Some(p) = d.physical_index {
        parts.push(format!("physical GPU {p}"));
    }
    if let Some(n) = d.nvml_index {
        if d.physical_index != Some(n) {
            parts.push(format!("nvidia-smi GPU {n}"));
        }
    }
    if !d.name.is_empty() {
        parts.push(d.name.clone());
    }
    if !d.pci_bus_id.is_empty() {
        parts.push(d.pci_bus_id.clone());
    }
    parts.join(", ")
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB)
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

fn visible_list(topo: &Topology) -> String {
    let list: Vec<String> = topo
        .devices
        .iter()
        .map(|d| format!("ordinal {} = {}", d.ordinal, device_label(d)))
        .collect();
    format!(
        "{} visible ({})",
        count(topo.devices.len(), "device", "devices"),
        list.join("; ")
    )
}

/// The visible device that `CUDA_VISIBLE_DEVICES` made of the physical device whose index
/// is `requested`, when the variable is set, `requested` is not itself a visible ordinal,
/// and some visible device has that physical index (`CUDA_VISIBLE_DEVICES=1`: physical GPU
/// 1 is ordinal 0, so a request for ordinal 1 is the physical id used as an ordinal).
pub fn renumbered(requested: i32, topo: &Topology) -> Option<&VisibleDevice> {
    topo.visibility.cuda_visible_devices.as_ref()?;
    if topo.device(requested).is_some() {
        return None;
    }
    topo.devices.iter().find(|d| {
        d.physical_index
            .is_some_and(|p| i64::from(p) == i64::from(requested))
    })
}

/// Explains a request for an ordinal the program cannot have (`CUDA_ERROR_INVALID_DEVICE`
/// from `cuDeviceGet`, `cudaSetDevice`, ...). Examples:
///
/// - `CUDA_VISIBLE_DEVICES=1` on a 2-GPU host, ordinal 1 requested: `ordinal 1 requested,
///   1 device visible (ordinal 0 = physical GPU 1, NVIDIA H200, 0000:11:00.0);
///   CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or ordinal 0)`
/// - 8-GPU code on a 1-GPU host, ordinal 6: `ordinal 6 requested, 1 device visible
///   (ordinal 0 = ...); the program expects more GPUs than this host or container exposes;
///   use ordinals 0..0 or run it with fewer ranks per node`
pub fn invalid_ordinal(requested: i32, topo: &Topology) -> String {
    let n = topo.devices.len();
    let cvd = topo.visibility.cuda_visible_devices.as_deref();
    if n == 0 {
        let why = match cvd {
            Some(raw) if raw.trim().is_empty() => format!(
                "{} (set but empty) hides every GPU; unset it or list the GPUs to use (e.g. \
                 CUDA_VISIBLE_DEVICES=0)",
                assignment(raw)
            ),
            Some(_) if topo.visibility.stopped_at.is_some() => {
                format!(
                    "{}; fix CUDA_VISIBLE_DEVICES or unset it",
                    describe(&topo.visibility)
                )
            }
            Some(raw) => format!(
                "{} is set and the driver reports no GPU; check the value, or unset it",
                assignment(raw)
            ),
            None => "the driver reports no CUDA device in this host or container; check that \
                     nvidia-smi lists a GPU and that the container was given GPUs (docker --gpus, \
                     a Kubernetes nvidia.com/gpu limit)"
                .to_string(),
        };
        return format!("ordinal {requested} requested, but no device is visible: {why}");
    }
    let head = format!("ordinal {requested} requested, {}", visible_list(topo));
    let last = n - 1;
    if requested < 0 {
        return format!("{head}; ordinals start at 0; use ordinals 0..{last}");
    }
    if topo.device(requested).is_some() {
        return format!("{head}; ordinal {requested} exists, so the refusal has another cause");
    }
    let Some(_) = cvd else {
        return format!(
            "{head}; the program expects more GPUs than this host or container exposes; use \
             ordinals 0..{last} or run it with fewer ranks per node"
        );
    };
    match renumbered(requested, topo) {
        Some(d) => format!(
            "{head}; {}; use cuda:{o} (or ordinal {o})",
            describe(&topo.visibility),
            o = d.ordinal
        ),
        None => format!(
            "{head}; {}; the program expects more GPUs than CUDA_VISIBLE_DEVICES leaves visible; \
             use ordinals 0..{last} or run it with fewer ranks per node",
            describe(&topo.visibility)
        ),
    }
}

fn nvidia_smi_id(d: &VisibleDevice) -> String {
    match d.nvml_index {
        Some(n) => n.to_string(),
        None if !d.uuid.is_empty() => d.uuid.clone(),
        None => d.pci_bus_id.clone(),
    }
}

fn default_mode_others(ordinal: i32, topo: &Topology) -> String {
    let others: Vec<String> = topo
        .devices
        .iter()
        .filter(|d| d.ordinal != ordinal && d.compute_mode == ComputeMode::Default)
        .map(|d| d.ordinal.to_string())
        .collect();
    match others.as_slice() {
        [] => "pick another device (no other visible device is in Default mode)".to_string(),
        [one] => format!("pick another device (ordinal {one} is in Default mode)"),
        many => format!(
            "pick another device (ordinals {} are in Default mode)",
            and_list(many)
        ),
    }
}

/// Explains `CUDA_ERROR_DEVICE_UNAVAILABLE` (46) for a device, from its compute mode
/// (`CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`) and NVML's count of compute processes on it.
/// seedance-fix never changes a compute mode (that takes `nvidia-smi -c` as root).
pub fn device_unavailable(ordinal: i32, topo: &Topology) -> String {
    let Some(d) = topo.device(ordinal) else {
        return format!(
            "ordinal {ordinal} is unavailable (CUDA_ERROR_DEVICE_UNAVAILABLE) and is not among the \
             {} visible",
            count(topo.devices.len(), "device", "devices")
        );
    };
    let head = format!(
        "ordinal {ordinal} ({}) is unavailable (CUDA_ERROR_DEVICE_UNAVAILABLE)",
        device_label(d)
    );
    let admin = format!(
        "have an administrator change its compute mode (nvidia-smi -i {} -c DEFAULT); \
         seedance-fix never changes it",
        nvidia_smi_id(d)
    );
    let others = default_mode_others(ordinal, topo);
    let mode = d.compute_mode.nvidia_smi_name();
    match d.compute_mode {
        ComputeMode::Prohibited => format!(
            "{head}: its compute mode is Prohibited, so no process may use it; {others} or {admin}"
        ),
        ComputeMode::ExclusiveProcess | ComputeMode::ExclusiveThread => match d.busy_processes {
            Some(0) => format!(
                "{head}: its compute mode is {mode} and NVML shows no compute process on it now, so \
                 the process that held it has probably just exited; retry, {others} or {admin}"
            ),
            Some(k) => format!(
                "{head}: its compute mode is {mode} and {} already {} it; wait for or stop {} \
                 (nvidia-smi lists {}), {others} or {admin}",
                count(k as usize, "other process", "other processes"),
                if k == 1 { "holds" } else { "hold" },
                if k == 1 { "that process" } else { "those processes" },
                if k == 1 { "it" } else { "them" },
            ),
            None => format!(
                "{head}: its compute mode is {mode}, so another process most likely holds it \
                 (NVML is not available to count them; nvidia-smi lists them); {others} or {admin}"
            ),
        },
        ComputeMode::Default => format!(
            "{head}: its compute mode is Default, so the compute mode is not the cause; the GPU may \
             be lost, being reset or in MIG mode; check nvidia-smi and the kernel log (Xid errors), \
             or {others}"
        ),
        ComputeMode::Unknown(v) => format!(
            "{head}: its compute mode is {v}, a value this tool does not know; check nvidia-smi -q, \
             or {others}"
        ),
    }
}

/// Explains `CUDA_ERROR_OUT_OF_MEMORY` when creating a context: free and total memory of
/// the device in GiB (2^30 bytes) with one decimal, the processes on it, and the visible
/// device with the most free memory as an alternative.
pub fn context_out_of_memory(ordinal: i32, topo: &Topology) -> String {
    let Some(d) = topo.device(ordinal) else {
        return format!(
            "ordinal {ordinal} is out of memory for a new context (CUDA_ERROR_OUT_OF_MEMORY) and is \
             not among the {} visible",
            count(topo.devices.len(), "device", "devices")
        );
    };
    let memory = match d.free_mem_bytes {
        Some(f) => format!("{} free of {}", gib(f), gib(d.total_mem_bytes)),
        None => format!(
            "{} total, free memory unknown (NVML is not available)",
            gib(d.total_mem_bytes)
        ),
    };
    let procs = match d.busy_processes {
        Some(0) | None => String::new(),
        Some(1) => "; 1 other compute process uses it".to_string(),
        Some(k) => format!("; {k} other compute processes use it"),
    };
    let best = topo
        .devices
        .iter()
        .filter(|o| o.ordinal != ordinal)
        .filter_map(|o| o.free_mem_bytes.map(|f| (f, o)))
        .filter(|(f, _)| match d.free_mem_bytes {
            Some(mine) => *f > mine,
            None => true,
        })
        .max_by_key(|(f, o)| (*f, std::cmp::Reverse(o.ordinal)));
    let alternative = match best {
        Some((f, o)) => format!(
            "pick another device (ordinal {}: {} free)",
            o.ordinal,
            gib(f)
        ),
        None => "pick another device".to_string(),
    };
    format!(
        "ordinal {ordinal} ({}) has no room for a new context (CUDA_ERROR_OUT_OF_MEMORY): \
         {memory}{procs}; free memory on it (nvidia-smi shows which processes hold it) or \
         {alternative}",
        device_label(d)
    )
}

/// Announces a device fallback made in fix mode:
/// `fix: ordinal 1 -> ordinal 0 (physical GPU 1, NVIDIA H200, 0000:11:00.0); set
/// SEEDANCE_FALLBACK=off to keep the error`. A non-empty `reason` follows the device after
/// a colon.
pub fn fallback_applied(requested: i32, chosen: i32, reason: &str, topo: &Topology) -> String {
    let device = topo
        .device(chosen)
        .map(|d| format!(" ({})", device_label(d)))
        .unwrap_or_default();
    let reason = if reason.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", reason.trim())
    };
    format!(
        "fix: ordinal {requested} -> ordinal {chosen}{device}{reason}; set SEEDANCE_FALLBACK=off to \
         keep the error"
    )
}

/// One entry of `SEEDANCE_EXCLUDE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceSelector {
    /// A CUDA ordinal, `1`.
    Ordinal(u32),
    /// A UUID or a prefix of one, lower case: `gpu-8f2a`.
    UuidPrefix(String),
    /// A PCI bus id, normalized `0000:1a:00.0`.
    PciBusId(String),
}

/// Parses `SEEDANCE_EXCLUDE_DEVICES`: a comma list of CUDA ordinals (`1`), GPU UUIDs or
/// prefixes of one (`GPU-8f2a`, case-insensitive), and PCI bus ids (`0000:1a:00.0`, NVML's
/// `00000000:1A:00.0`, or the short `1a:00.0`; case-insensitive). Empty entries are
/// skipped silently; a bad entry is skipped with a warning (the first
/// [`seedance_core::text::MAX_WARNINGS_PER_SETTING`], each showing at most
/// [`seedance_core::text::MAX_SHOWN`] bytes of the entry, then one line counting the rest).
/// Never panics.
pub fn parse_exclusions(raw: &str) -> (Vec<DeviceSelector>, Vec<String>) {
    let mut selectors = Vec::new();
    let mut warnings = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let sel = if entry.bytes().all(|b| b.is_ascii_digit()) {
            entry.parse::<u32>().ok().map(DeviceSelector::Ordinal)
        } else if entry.len() > 4
            && entry.is_char_boundary(4)
            && entry[..4].eq_ignore_ascii_case("gpu-")
        {
            let body = &entry[4..];
            (body.bytes().any(|b| b.is_ascii_hexdigit())
                && body.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
            .then(|| DeviceSelector::UuidPrefix(entry.to_ascii_lowercase()))
        } else {
            normalize_pci_bus_id(entry).map(DeviceSelector::PciBusId)
        };
        match sel {
            Some(s) => selectors.push(s),
            None => warnings.push(format!(
                "SEEDANCE_EXCLUDE_DEVICES: {} is not an ordinal, a GPU- UUID (or prefix) or a \
                 PCI bus id (0000:1a:00.0); skipped",
                seedance_core::text::quoted(entry)
            )),
        }
    }
    (
        selectors,
        seedance_core::text::cap_warnings("SEEDANCE_EXCLUDE_DEVICES", warnings),
    )
}

/// Whether `sel` names device `d` (UUID prefixes and PCI ids compare case-insensitively).
pub fn selector_matches(sel: &DeviceSelector, d: &VisibleDevice) -> bool {
    match sel {
        DeviceSelector::Ordinal(o) => i64::from(*o) == i64::from(d.ordinal),
        DeviceSelector::UuidPrefix(p) => {
            d.uuid.len() >= p.len()
                && d.uuid.is_char_boundary(p.len())
                && d.uuid[..p.len()].eq_ignore_ascii_case(p)
        }
        DeviceSelector::PciBusId(id) => {
            normalize_pci_bus_id(&d.pci_bus_id).as_deref() == Some(id.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{driver, snapshot, GIB};
    use crate::model::DriverDevice;

    fn topo(physical_shown: &[u32], nvml_n: Option<u32>, cvd: Option<&str>) -> Topology {
        let snap = nvml_n.map(snapshot);
        Topology::join(&driver(physical_shown), snap.as_ref(), cvd, None)
    }

    #[test]
    fn invalid_ordinal_cvd_renumbered() {
        // CUDA_VISIBLE_DEVICES=1 on a 2-GPU host; physical GPU 1 sits at 0000:11:00.0 here.
        let mut d = driver(&[0]);
        d[0].pci_bus_id = "0000:11:00.0".into();
        let t = Topology::join(&d, None, Some("1"), None);
        assert_eq!(
            invalid_ordinal(1, &t),
            "ordinal 1 requested, 1 device visible (ordinal 0 = physical GPU 1, NVIDIA H200, \
             0000:11:00.0); CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or \
             ordinal 0)"
        );
        // Same with NVML present.
        let t = topo(&[1], Some(2), Some("1"));
        assert_eq!(
            invalid_ordinal(1, &t),
            "ordinal 1 requested, 1 device visible (ordinal 0 = physical GPU 1, NVIDIA H200, \
             0000:21:00.0); CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or \
             ordinal 0)"
        );
    }

    #[test]
    fn invalid_ordinal_too_few_gpus() {
        let t = topo(&[0], None, None);
        assert_eq!(
            invalid_ordinal(6, &t),
            "ordinal 6 requested, 1 device visible (ordinal 0 = physical GPU 0, NVIDIA H200, \
             0000:11:00.0); the program expects more GPUs than this host or container exposes; use \
             ordinals 0..0 or run it with fewer ranks per node"
        );
        let t = topo(&[0, 1], Some(2), None);
        assert_eq!(
            invalid_ordinal(2, &t),
            "ordinal 2 requested, 2 devices visible (ordinal 0 = physical GPU 0, NVIDIA H200, \
             0000:11:00.0; ordinal 1 = physical GPU 1, NVIDIA H200, 0000:21:00.0); the program \
             expects more GPUs than this host or container exposes; use ordinals 0..1 or run it \
             with fewer ranks per node"
        );
    }

    #[test]
    fn invalid_ordinal_cvd_too_narrow() {
        let t = topo(&[0, 1], Some(4), Some("0,1"));
        assert_eq!(
            invalid_ordinal(3, &t),
            "ordinal 3 requested, 2 devices visible (ordinal 0 = physical GPU 0, NVIDIA H200, \
             0000:11:00.0; ordinal 1 = physical GPU 1, NVIDIA H200, 0000:21:00.0); \
             CUDA_VISIBLE_DEVICES=0,1 made physical GPU 0 ordinal 0 and physical GPU 1 ordinal 1; \
             the program expects more GPUs than CUDA_VISIBLE_DEVICES leaves visible; use ordinals \
             0..1 or run it with fewer ranks per node"
        );
    }

    #[test]
    fn invalid_ordinal_negative_and_in_range() {
        let t = topo(&[0], None, None);
        assert_eq!(
            invalid_ordinal(-1, &t),
            "ordinal -1 requested, 1 device visible (ordinal 0 = physical GPU 0, NVIDIA H200, \
             0000:11:00.0); ordinals start at 0; use ordinals 0..0"
        );
        assert_eq!(
            invalid_ordinal(0, &t),
            "ordinal 0 requested, 1 device visible (ordinal 0 = physical GPU 0, NVIDIA H200, \
             0000:11:00.0); ordinal 0 exists, so the refusal has another cause"
        );
    }

    #[test]
    fn invalid_ordinal_none_visible() {
        let t = topo(&[], Some(2), Some(""));
        assert_eq!(
            invalid_ordinal(0, &t),
            "ordinal 0 requested, but no device is visible: CUDA_VISIBLE_DEVICES=\"\" (set but \
             empty) hides every GPU; unset it or list the GPUs to use (e.g. CUDA_VISIBLE_DEVICES=0)"
        );
        let t = topo(&[], Some(2), Some("7,0"));
        assert_eq!(
            invalid_ordinal(0, &t),
            "ordinal 0 requested, but no device is visible: CUDA_VISIBLE_DEVICES=7,0: entry \"7\" \
             (position 1) is out of range for 2 GPUs; the driver ignores it and everything after \
             it, so no GPU is visible; fix CUDA_VISIBLE_DEVICES or unset it"
        );
        let t = topo(&[], None, Some("7"));
        assert_eq!(
            invalid_ordinal(0, &t),
            "ordinal 0 requested, but no device is visible: CUDA_VISIBLE_DEVICES=7: entry \"7\" \
             (position 1) was rejected by the driver (no GPU has index 7 here); the driver ignores \
             it and everything after it, so no GPU is visible; fix CUDA_VISIBLE_DEVICES or unset it"
        );
        let t = topo(&[], None, None);
        assert_eq!(
            invalid_ordinal(0, &t),
            "ordinal 0 requested, but no device is visible: the driver reports no CUDA device in \
             this host or container; check that nvidia-smi lists a GPU and that the container was \
             given GPUs (docker --gpus, a Kubernetes nvidia.com/gpu limit)"
        );
    }

    fn with_modes(modes: &[(i32, Option<u32>)]) -> Topology {
        let mut d: Vec<DriverDevice> = driver(&(0..modes.len() as u32).collect::<Vec<_>>());
        for (dev, (m, _)) in d.iter_mut().zip(modes) {
            dev.compute_mode = *m;
        }
        let mut t = Topology::join(&d, Some(&snapshot(modes.len() as u32)), None, None);
        for (dev, (_, busy)) in t.devices.iter_mut().zip(modes) {
            dev.busy_processes = *busy;
        }
        t
    }

    #[test]
    fn unavailable_texts() {
        let t = with_modes(&[(2, Some(0)), (0, Some(0)), (0, Some(0))]);
        assert_eq!(
            device_unavailable(0, &t),
            "ordinal 0 (physical GPU 0, NVIDIA H200, 0000:11:00.0) is unavailable \
             (CUDA_ERROR_DEVICE_UNAVAILABLE): its compute mode is Prohibited, so no process may use \
             it; pick another device (ordinals 1 and 2 are in Default mode) or have an administrator \
             change its compute mode (nvidia-smi -i 0 -c DEFAULT); seedance-fix never changes it"
        );
        let t = with_modes(&[(0, Some(0)), (3, Some(2))]);
        assert_eq!(
            device_unavailable(1, &t),
            "ordinal 1 (physical GPU 1, NVIDIA H200, 0000:21:00.0) is unavailable \
             (CUDA_ERROR_DEVICE_UNAVAILABLE): its compute mode is Exclusive_Process and 2 other \
             processes already hold it; wait for or stop those processes (nvidia-smi lists them), \
             pick another device (ordinal 0 is in Default mode) or have an administrator change its \
             compute mode (nvidia-smi -i 1 -c DEFAULT); seedance-fix never changes it"
        );
        let t = with_modes(&[(3, Some(1))]);
        assert_eq!(
            device_unavailable(0, &t),
            "ordinal 0 (physical GPU 0, NVIDIA H200, 0000:11:00.0) is unavailable \
             (CUDA_ERROR_DEVICE_UNAVAILABLE): its compute mode is Exclusive_Process and 1 other \
             process already holds it; wait for or stop that process (nvidia-smi lists it), pick \
             another device (no other visible device is in Default mode) or have an administrator \
             change its compute mode (nvidia-smi -i 0 -c DEFAULT); seedance-fix never changes it"
        );
        let t = with_modes(&[(3, Some(0))]);
        assert!(device_unavailable(0, &t).contains(
            "its compute mode is Exclusive_Process and NVML shows no compute process on it now, so \
             the process that held it has probably just exited; retry, pick another device"
        ));
        let mut d = driver(&[0]);
        d[0].compute_mode = 3;
        let t = Topology::join(&d, None, None, None);
        assert_eq!(
            device_unavailable(0, &t),
            "ordinal 0 (physical GPU 0, NVIDIA H200, 0000:11:00.0) is unavailable \
             (CUDA_ERROR_DEVICE_UNAVAILABLE): its compute mode is Exclusive_Process, so another \
             process most likely holds it (NVML is not available to count them; nvidia-smi lists \
             them); pick another device (no other visible device is in Default mode) or have an \
             administrator change its compute mode (nvidia-smi -i \
             GPU-0000aaaa-0000-0000-0000-000000000000 -c DEFAULT); seedance-fix never changes it"
        );
        let t = with_modes(&[(0, Some(0))]);
        assert!(device_unavailable(0, &t)
            .contains("its compute mode is Default, so the compute mode is not the cause"));
        let t = with_modes(&[(7, None)]);
        assert!(device_unavailable(0, &t)
            .contains("its compute mode is 7, a value this tool does not know"));
        assert_eq!(
            device_unavailable(4, &t),
            "ordinal 4 is unavailable (CUDA_ERROR_DEVICE_UNAVAILABLE) and is not among the 1 device visible"
        );
    }

    #[test]
    fn out_of_memory_texts() {
        let mut t = topo(&[0, 1], Some(2), None);
        t.devices[0].free_mem_bytes = Some(GIB * 3 / 10);
        t.devices[0].busy_processes = Some(3);
        assert_eq!(
            context_out_of_memory(0, &t),
            "ordinal 0 (physical GPU 0, NVIDIA H200, 0000:11:00.0) has no room for a new context \
             (CUDA_ERROR_OUT_OF_MEMORY): 0.3 GiB free of 140.0 GiB; 3 other compute processes use \
             it; free memory on it (nvidia-smi shows which processes hold it) or pick another device \
             (ordinal 1: 101.0 GiB free)"
        );
        let t = topo(&[0], None, None);
        assert_eq!(
            context_out_of_memory(0, &t),
            "ordinal 0 (physical GPU 0, NVIDIA H200, 0000:11:00.0) has no room for a new context \
             (CUDA_ERROR_OUT_OF_MEMORY): 140.0 GiB total, free memory unknown (NVML is not \
             available); free memory on it (nvidia-smi shows which processes hold it) or pick \
             another device"
        );
    }

    #[test]
    fn fallback_text() {
        let mut d = driver(&[0]);
        d[0].pci_bus_id = "0000:11:00.0".into();
        let t = Topology::join(&d, None, Some("1"), None);
        assert_eq!(
            fallback_applied(1, 0, "", &t),
            "fix: ordinal 1 -> ordinal 0 (physical GPU 1, NVIDIA H200, 0000:11:00.0); set \
             SEEDANCE_FALLBACK=off to keep the error"
        );
        assert_eq!(
            fallback_applied(1, 0, "ordinal 1 does not exist", &t),
            "fix: ordinal 1 -> ordinal 0 (physical GPU 1, NVIDIA H200, 0000:11:00.0): ordinal 1 \
             does not exist; set SEEDANCE_FALLBACK=off to keep the error"
        );
        assert_eq!(
            fallback_applied(1, 5, "", &t),
            "fix: ordinal 1 -> ordinal 5; set SEEDANCE_FALLBACK=off to keep the error"
        );
    }

    #[test]
    fn label_shows_nvidia_smi_number_when_it_differs() {
        let t = topo(&[0], Some(2), Some("1"));
        assert_eq!(
            device_label(&t.devices[0]),
            "physical GPU 1, nvidia-smi GPU 0, NVIDIA H200, 0000:11:00.0"
        );
        let t = topo(&[0], Some(1), Some("GPU-0"));
        assert_eq!(
            device_label(&t.devices[0]),
            "physical GPU 0, NVIDIA H200, 0000:11:00.0"
        );
        let t = topo(&[0], None, Some("GPU-0"));
        assert_eq!(device_label(&t.devices[0]), "NVIDIA H200, 0000:11:00.0");
    }

    #[test]
    fn exclusions() {
        let (sel, warn) = parse_exclusions(
            " 1, GPU-8F2a ,0000:1A:00.0,1a:00.0,00000000:1B:00.0,,bogus,GPU-,GPU-xyz",
        );
        assert_eq!(
            sel,
            vec![
                DeviceSelector::Ordinal(1),
                DeviceSelector::UuidPrefix("gpu-8f2a".into()),
                DeviceSelector::PciBusId("0000:1a:00.0".into()),
                DeviceSelector::PciBusId("0000:1a:00.0".into()),
                DeviceSelector::PciBusId("0000:1b:00.0".into()),
            ]
        );
        assert_eq!(
            warn,
            vec![
                "SEEDANCE_EXCLUDE_DEVICES: \"bogus\" is not an ordinal, a GPU- UUID (or prefix) or a PCI bus id (0000:1a:00.0); skipped",
                "SEEDANCE_EXCLUDE_DEVICES: \"GPU-\" is not an ordinal, a GPU- UUID (or prefix) or a PCI bus id (0000:1a:00.0); skipped",
                "SEEDANCE_EXCLUDE_DEVICES: \"GPU-xyz\" is not an ordinal, a GPU- UUID (or prefix) or a PCI bus id (0000:1a:00.0); skipped",
            ]
        );
        assert_eq!(parse_exclusions(""), (vec![], vec![]));
        assert_eq!(parse_exclusions("99999999999").1.len(), 1);
    }

    #[test]
    fn selectors_match() {
        let t = topo(&[0, 1], Some(2), None);
        let d1 = &t.devices[1];
        assert!(selector_matches(&DeviceSelector::Ordinal(1), d1));
        assert!(!selector_matches(&DeviceSelector::Ordinal(0), d1));
        let (s, _) = parse_exclusions("GPU-1111AAAA,21:00.0,GPU-0000");
        assert!(selector_matches(&s[0], d1));
        assert!(selector_matches(&s[1], d1));
        assert!(!selector_matches(&s[2], d1));
        assert!(selector_matches(&s[2], &t.devices[0]));
        let long = DeviceSelector::UuidPrefix(format!("{}0", d1.uuid.to_lowercase()));
        assert!(!selector_matches(&long, d1));
    }
}
