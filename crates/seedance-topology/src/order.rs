//! `CUDA_DEVICE_ORDER` and the difference between CUDA's device numbers and nvidia-smi's.
//!
//! Source: CUDA C++ Programming Guide, "CUDA Environment Variables": `CUDA_DEVICE_ORDER`
//! is `FASTEST_FIRST` (the default: "CUDA will guess which device is fastest using a simple
//! heuristic, and make that device 0, leaving the order of the rest of the devices
//! unspecified") or `PCI_BUS_ID` ("orders devices by PCI bus ID in ascending order").
//! nvidia-smi and NVML number devices by PCI bus id (NVML API reference,
//! `nvmlDeviceGetIndex`). Integer `CUDA_VISIBLE_DEVICES` entries count in CUDA's order.

use serde::{Deserialize, Serialize};

use crate::pci::normalize_pci_bus_id;

/// How CUDA numbers devices (`CUDA_DEVICE_ORDER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeviceOrder {
    /// `FASTEST_FIRST` (the driver's default): a speed heuristic, ties in PCI order.
    FastestFirst,
    /// `PCI_BUS_ID`: ascending PCI bus id, the order nvidia-smi uses.
    PciBusId,
}

impl DeviceOrder {
    /// The spelling used in `CUDA_DEVICE_ORDER`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceOrder::FastestFirst => "FASTEST_FIRST",
            DeviceOrder::PciBusId => "PCI_BUS_ID",
        }
    }
}

/// Parses `CUDA_DEVICE_ORDER` (`None` = unset). Returns the order in force and, for a
/// value that is neither `FASTEST_FIRST` nor `PCI_BUS_ID` (surrounding whitespace
/// ignored), a warning; such a value is taken as the default `FASTEST_FIRST`, which is
/// what this crate assumes the driver does (not documented).
pub fn parse_order(raw: Option<&str>) -> (DeviceOrder, Option<String>) {
    match raw.map(str::trim) {
        None | Some("FASTEST_FIRST") => (DeviceOrder::FastestFirst, None),
        Some("PCI_BUS_ID") => (DeviceOrder::PciBusId, None),
        Some(other) => (
            DeviceOrder::FastestFirst,
            Some(format!(
                "CUDA_DEVICE_ORDER={} is neither FASTEST_FIRST nor PCI_BUS_ID; the driver \
                 is taken to use its default, FASTEST_FIRST",
                seedance_core::text::quoted(other)
            )),
        ),
    }
}

fn norm(s: &str) -> String {
    normalize_pci_bus_id(s).unwrap_or_else(|| s.trim().to_ascii_lowercase())
}

fn list(pairs: &[String]) -> String {
    const MAX: usize = 4;
    let mut s = pairs
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if pairs.len() > MAX {
        s.push_str(&format!(" and {} more", pairs.len() - MAX));
    }
    s
}

/// Compares CUDA's numbering with nvidia-smi's over the whole host.
///
/// `cuda_pci_ids` are the PCI bus ids by CUDA ordinal with `CUDA_VISIBLE_DEVICES` unset
/// (`cuDeviceGetPCIBusId` for ordinals 0, 1, ...); `nvml_pci_ids` are NVML's by NVML
/// index. Any spelling [`normalize_pci_bus_id`] accepts. Devices present in only one list
/// are left out. Returns `None` when the two orders agree, else the warning text.
pub fn order_warning(
    order: DeviceOrder,
    cuda_pci_ids: &[String],
    nvml_pci_ids: &[String],
) -> Option<String> {
    let nvml: Vec<String> = nvml_pci_ids.iter().map(|s| norm(s)).collect();
    let mut differing = Vec::new();
    for (ordinal, id) in cuda_pci_ids.iter().map(|s| norm(s)).enumerate() {
        if let Some(n) = nvml.iter().position(|x| *x == id) {
            if n != ordinal {
                differing.push(format!(
                    "CUDA ordinal {ordinal} is nvidia-smi GPU {n} ({id})"
                ));
            }
        }
    }
    if differing.is_empty() {
        return None;
    }
    Some(match order {
        DeviceOrder::FastestFirst => format!(
            "CUDA numbers devices fastest first; nvidia-smi numbers them by PCI bus id, and the two \
             orders differ here: {}; set CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA ordinals and \
             CUDA_VISIBLE_DEVICES indices mean nvidia-smi's numbers",
            list(&differing)
        ),
        DeviceOrder::PciBusId => format!(
            "CUDA_DEVICE_ORDER=PCI_BUS_ID is set, yet CUDA's numbers differ from nvidia-smi's here: \
             {}; identify devices by PCI bus id or UUID rather than by number",
            list(&differing)
        ),
    })
}

/// One integer `CUDA_VISIBLE_DEVICES` entry and the device the driver made of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPair {
    /// The integer written in `CUDA_VISIBLE_DEVICES` (CUDA's numbering).
    pub cuda_index: u32,
    /// NVML's (nvidia-smi's) index of the device the driver made visible for it, found by
    /// PCI bus id.
    pub nvml_index: u32,
    /// That device's PCI bus id.
    pub pci_bus_id: String,
}

/// Warns when integer `CUDA_VISIBLE_DEVICES` entries selected devices whose nvidia-smi
/// number differs from the integer written (the user most likely read the number off
/// nvidia-smi). `None` when every pair agrees.
pub fn index_mismatch_warning(
    order: DeviceOrder,
    cvd_raw: &str,
    pairs: &[IndexPair],
) -> Option<String> {
    let differing: Vec<String> = pairs
        .iter()
        .filter(|p| p.cuda_index != p.nvml_index)
        .map(|p| {
            format!(
                "entry {} selected nvidia-smi GPU {} ({})",
                p.cuda_index,
                p.nvml_index,
                norm(&p.pci_bus_id)
            )
        })
        .collect();
    if differing.is_empty() {
        return None;
    }
    let set = crate::cvd::assignment(&seedance_core::text::clip(cvd_raw));
    Some(match order {
        DeviceOrder::FastestFirst => format!(
            "{set} counts GPUs in CUDA's order (fastest first), which differs from nvidia-smi's PCI \
             bus order here: {}; set CUDA_DEVICE_ORDER=PCI_BUS_ID so the indices mean nvidia-smi's \
             numbers, or list GPU UUIDs instead",
            list(&differing)
        ),
        DeviceOrder::PciBusId => format!(
            "{set} counts GPUs in PCI bus order, yet the devices differ from nvidia-smi's numbers \
             here: {}; list GPU UUIDs instead of indices",
            list(&differing)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses() {
        assert_eq!(parse_order(None), (DeviceOrder::FastestFirst, None));
        assert_eq!(
            parse_order(Some("FASTEST_FIRST")),
            (DeviceOrder::FastestFirst, None)
        );
        assert_eq!(
            parse_order(Some(" PCI_BUS_ID ")),
            (DeviceOrder::PciBusId, None)
        );
        assert_eq!(
            parse_order(Some("pci")),
            (
                DeviceOrder::FastestFirst,
                Some(
                    "CUDA_DEVICE_ORDER=\"pci\" is neither FASTEST_FIRST nor PCI_BUS_ID; the driver \
                     is taken to use its default, FASTEST_FIRST"
                        .into()
                )
            )
        );
        assert_eq!(DeviceOrder::PciBusId.as_str(), "PCI_BUS_ID");
    }

    #[test]
    fn same_order_no_warning() {
        let cuda = ids(&["0000:11:00.0", "0000:21:00.0"]);
        let nvml = ids(&["00000000:11:00.0", "00000000:21:00.0"]);
        assert_eq!(order_warning(DeviceOrder::FastestFirst, &cuda, &nvml), None);
        assert_eq!(
            order_warning(DeviceOrder::FastestFirst, &cuda[..1], &nvml),
            None
        );
    }

    #[test]
    fn swapped_order_warns() {
        let cuda = ids(&["0000:21:00.0", "0000:11:00.0"]);
        let nvml = ids(&["00000000:11:00.0", "00000000:21:00.0"]);
        assert_eq!(
            order_warning(DeviceOrder::FastestFirst, &cuda, &nvml).unwrap(),
            "CUDA numbers devices fastest first; nvidia-smi numbers them by PCI bus id, and the two \
             orders differ here: CUDA ordinal 0 is nvidia-smi GPU 1 (0000:21:00.0), CUDA ordinal 1 \
             is nvidia-smi GPU 0 (0000:11:00.0); set CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA \
             ordinals and CUDA_VISIBLE_DEVICES indices mean nvidia-smi's numbers"
        );
        assert!(order_warning(DeviceOrder::PciBusId, &cuda, &nvml)
            .unwrap()
            .starts_with("CUDA_DEVICE_ORDER=PCI_BUS_ID is set, yet"));
    }

    #[test]
    fn long_lists_are_cut() {
        let nvml: Vec<String> = (0..6).map(|i| format!("0000:{:02x}:00.0", i + 1)).collect();
        let cuda: Vec<String> = nvml.iter().rev().cloned().collect();
        let w = order_warning(DeviceOrder::FastestFirst, &cuda, &nvml).unwrap();
        assert!(
            w.contains("CUDA ordinal 3 is nvidia-smi GPU 2 (0000:03:00.0) and 2 more;"),
            "{w}"
        );
    }

    #[test]
    fn index_mismatch() {
        let ok = [IndexPair {
            cuda_index: 1,
            nvml_index: 1,
            pci_bus_id: "0000:21:00.0".into(),
        }];
        assert_eq!(
            index_mismatch_warning(DeviceOrder::FastestFirst, "1", &ok),
            None
        );
        let bad = [IndexPair {
            cuda_index: 1,
            nvml_index: 0,
            pci_bus_id: "0000:11:00.0".into(),
        }];
        assert_eq!(
            index_mismatch_warning(DeviceOrder::FastestFirst, "1", &bad).unwrap(),
            "CUDA_VISIBLE_DEVICES=1 counts GPUs in CUDA's order (fastest first), which differs from \
             nvidia-smi's PCI bus order here: entry 1 selected nvidia-smi GPU 0 (0000:11:00.0); set \
             CUDA_DEVICE_ORDER=PCI_BUS_ID so the indices mean nvidia-smi's numbers, or list GPU \
             UUIDs instead"
        );
    }
}
