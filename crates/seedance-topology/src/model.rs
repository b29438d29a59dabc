//! The joined topology the shim records in the trace's `session_start`: what the driver
//! reports per CUDA ordinal, joined with NVML by PCI bus id, with what
//! `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` did.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cvd::{self, EntryKind, Visibility, VisibleSpec};
use crate::nvml::{NvmlSnapshot, NvmlStatus};
use crate::order::{self, DeviceOrder, IndexPair};
use crate::pci::normalize_pci_bus_id;

/// A device's compute mode (`CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`, values of `CUcomputemode`
/// in `cuda.h`; `nvmlComputeMode_t` in NVML uses the same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// 0, `CU_COMPUTEMODE_DEFAULT`: any number of contexts from any processes.
    Default,
    /// 1, exclusive-thread: removed from CUDA (CUDA 8), still reported by NVML on old
    /// setups: one context, one thread at a time.
    ExclusiveThread,
    /// 2, `CU_COMPUTEMODE_PROHIBITED`: no context may be created.
    Prohibited,
    /// 3, `CU_COMPUTEMODE_EXCLUSIVE_PROCESS`: contexts from one process only.
    ExclusiveProcess,
    /// A value this crate does not know.
    Unknown(i32),
}

impl ComputeMode {
    /// From the `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE` attribute value.
    pub fn from_attr(v: i32) -> ComputeMode {
        match v {
            0 => ComputeMode::Default,
            1 => ComputeMode::ExclusiveThread,
            2 => ComputeMode::Prohibited,
            3 => ComputeMode::ExclusiveProcess,
            other => ComputeMode::Unknown(other),
        }
    }

    /// The name nvidia-smi prints (`Default`, `Exclusive_Thread`, `Prohibited`,
    /// `Exclusive_Process`), or the number for an unknown value.
    pub fn nvidia_smi_name(self) -> String {
        match self {
            ComputeMode::Default => "Default".into(),
            ComputeMode::ExclusiveThread => "Exclusive_Thread".into(),
            ComputeMode::Prohibited => "Prohibited".into(),
            ComputeMode::ExclusiveProcess => "Exclusive_Process".into(),
            ComputeMode::Unknown(v) => v.to_string(),
        }
    }
}

/// What the shim reads from the driver for one CUDA ordinal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverDevice {
    /// CUDA ordinal (`cuDeviceGet`).
    pub ordinal: i32,
    /// Product name (`cuDeviceGetName`), e.g. `NVIDIA H200`.
    pub name: String,
    /// PCI bus id (`cuDeviceGetPCIBusId`), e.g. `0000:1a:00.0`; any case.
    pub pci_bus_id: String,
    /// UUID (`cuDeviceGetUuid_v2`) formatted like nvidia-smi, `GPU-xxxxxxxx-...`; see
    /// [`format_uuid`].
    pub uuid: String,
    /// Total memory in bytes (`cuDeviceTotalMem_v2`).
    pub total_mem_bytes: u64,
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE` (0 default, 1 exclusive-thread (legacy),
    /// 2 prohibited, 3 exclusive-process).
    pub compute_mode: i32,
}

/// Formats the 16 bytes of a `CUuuid` as nvidia-smi does:
/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lower-case hex).
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// One visible device, by CUDA ordinal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisibleDevice {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Product name from the driver.
    pub name: String,
    /// PCI bus id, normalized `0000:1a:00.0` (as given when it does not parse).
    pub pci_bus_id: String,
    /// UUID from the driver, `GPU-...`.
    pub uuid: String,
    /// NVML's (nvidia-smi's) index, found by PCI bus id; `None` without NVML.
    pub nvml_index: Option<u32>,
    /// The index an integer `CUDA_VISIBLE_DEVICES` entry uses for this device (CUDA's
    /// numbering before the variable applies); `None` when unknown.
    pub physical_index: Option<u32>,
    /// Total memory in bytes, from the driver.
    pub total_mem_bytes: u64,
    /// Free memory in bytes from NVML when the topology was taken; `None` without NVML.
    pub free_mem_bytes: Option<u64>,
    /// Compute mode, from the driver.
    pub compute_mode: ComputeMode,
    /// Processes with a compute context on the device, from NVML; `None` without NVML.
    pub busy_processes: Option<u32>,
}

/// The joined topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Visible devices, by CUDA ordinal.
    pub devices: Vec<VisibleDevice>,
    /// What `CUDA_VISIBLE_DEVICES` did.
    pub visibility: Visibility,
    /// `CUDA_DEVICE_ORDER` in force.
    pub device_order: DeviceOrder,
    /// A warning when CUDA's numbering differs from nvidia-smi's in a way that matters
    /// here, or when `CUDA_DEVICE_ORDER` has a value the driver does not know.
    pub order_warning: Option<String>,
    /// Whether NVML contributed.
    pub nvml: NvmlStatus,
}

impl Topology {
    /// Joins the driver's devices with NVML (by PCI bus id) and the environment.
    /// Same as [`Topology::join_with_status`] with, when `nvml` is `None`, the reason
    /// `no NVML snapshot was taken`.
    pub fn join(
        driver: &[DriverDevice],
        nvml: Option<&NvmlSnapshot>,
        cvd_raw: Option<&str>,
        order_raw: Option<&str>,
    ) -> Topology {
        Topology::join_with_status(
            driver,
            nvml.ok_or("no NVML snapshot was taken"),
            cvd_raw,
            order_raw,
        )
    }

    /// Joins the driver's devices with NVML and the environment; `nvml` is the snapshot
    /// or the reason there is none (the error of [`crate::nvml::Nvml::open`]).
    ///
    /// The driver's devices are the truth for what is visible. With NVML,
    /// `CUDA_VISIBLE_DEVICES` is resolved against NVML's devices ([`cvd::resolve`]) and
    /// the prediction is checked against the driver (same count, same PCI bus ids); when
    /// unset, or without NVML, or when the check fails, it is inferred from the driver's
    /// count ([`cvd::resolve_by_count`]): physical indices then come from integer entries
    /// only.
    pub fn join_with_status(
        driver: &[DriverDevice],
        nvml: Result<&NvmlSnapshot, &str>,
        cvd_raw: Option<&str>,
        order_raw: Option<&str>,
    ) -> Topology {
        let (device_order, parse_warning) = order::parse_order(order_raw);
        let spec = cvd::parse(cvd_raw);
        let mut driver: Vec<&DriverDevice> = driver.iter().collect();
        driver.sort_by_key(|d| d.ordinal);
        let pci: Vec<String> = driver.iter().map(|d| norm_pci(&d.pci_bus_id)).collect();
        let snap = nvml.ok();

        let visibility = match (&spec, snap) {
            (VisibleSpec::Set { .. }, Some(s)) if !s.devices.is_empty() => {
                let physical = s.physical_ids();
                let v = cvd::resolve(&spec, &physical);
                let agrees = v.ordinals.len() == driver.len()
                    && v.ordinals
                        .iter()
                        .zip(&pci)
                        .all(|(o, id)| match o.physical_index {
                            Some(p) => physical.iter().any(|x| x.index == p && x.pci_bus_id == *id),
                            None => true,
                        });
                if agrees {
                    v
                } else {
                    cvd::resolve_by_count(&spec, driver.len())
                }
            }
            _ => {
                let mut v = cvd::resolve_by_count(&spec, driver.len());
                if let (VisibleSpec::Unset, Some(s)) = (&spec, snap) {
                    v.physical_count = u32::try_from(s.devices.len()).ok();
                }
                v
            }
        };
        let physical_of: BTreeMap<u32, Option<u32>> = visibility
            .ordinals
            .iter()
            .map(|o| (o.ordinal, o.physical_index))
            .collect();

        let devices: Vec<VisibleDevice> = driver
            .iter()
            .zip(&pci)
            .map(|(d, id)| {
                let nv = snap.and_then(|s| s.by_pci_bus_id(id));
                VisibleDevice {
                    ordinal: d.ordinal,
                    name: d.name.clone(),
                    pci_bus_id: id.clone(),
                    uuid: d.uuid.clone(),
                    nvml_index: nv.map(|n| n.index),
                    physical_index: u32::try_from(d.ordinal)
                        .ok()
                        .and_then(|o| physical_of.get(&o).copied().flatten()),
                    total_mem_bytes: d.total_mem_bytes,
                    free_mem_bytes: nv.and_then(|n| n.free_mem_bytes),
                    compute_mode: ComputeMode::from_attr(d.compute_mode),
                    busy_processes: nv.and_then(|n| n.compute_processes),
                }
            })
            .collect();

        let mismatch = match (&spec, snap) {
            (VisibleSpec::Unset, Some(s)) => {
                let nvml_pci: Vec<String> = s
                    .devices
                    .iter()
                    .map(|d| d.pci_bus_id.clone().unwrap_or_default())
                    .collect();
                order::order_warning(device_order, &pci, &nvml_pci)
            }
            (VisibleSpec::Set { raw, entries }, Some(_)) => {
                let pairs: Vec<IndexPair> = entries
                    .iter()
                    .zip(&devices)
                    .filter_map(|(e, d)| match (&e.kind, d.nvml_index) {
                        (EntryKind::Index(i), Some(n)) => Some(IndexPair {
                            cuda_index: *i,
                            nvml_index: n,
                            pci_bus_id: d.pci_bus_id.clone(),
                        }),
                        _ => None,
                    })
                    .collect();
                order::index_mismatch_warning(device_order, raw, &pairs)
            }
            _ => None,
        };
        let order_warning = match (parse_warning, mismatch) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };

        Topology {
            devices,
            visibility,
            device_order,
            order_warning,
            nvml: match nvml {
                Ok(_) => NvmlStatus::Present,
                Err(reason) => NvmlStatus::Absent {
                    reason: reason.to_string(),
                },
            },
        }
    }

    /// The device with this CUDA ordinal.
    pub fn device(&self, ordinal: i32) -> Option<&VisibleDevice> {
        self.devices.iter().find(|d| d.ordinal == ordinal)
    }
}

fn norm_pci(s: &str) -> String {
    normalize_pci_bus_id(s).unwrap_or_else(|| s.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nvml::NvmlDevice;

    pub(crate) const GIB: u64 = 1 << 30;

    pub(crate) fn h200(i: u32) -> (String, String) {
        (
            format!("0000:{:02x}:00.0", 0x11 + 0x10 * i),
            format!("GPU-{i}{i}{i}{i}aaaa-0000-0000-0000-00000000000{i}"),
        )
    }

    /// The driver's view given which physical GPUs it shows, in ordinal order.
    pub(crate) fn driver(physical: &[u32]) -> Vec<DriverDevice> {
        physical
            .iter()
            .enumerate()
            .map(|(o, &p)| {
                let (pci, uuid) = h200(p);
                DriverDevice {
                    ordinal: o as i32,
                    name: "NVIDIA H200".into(),
                    pci_bus_id: pci.to_uppercase(),
                    uuid,
                    total_mem_bytes: 140 * GIB,
                    compute_mode: 0,
                }
            })
            .collect()
    }

    pub(crate) fn snapshot(n: u32) -> NvmlSnapshot {
        NvmlSnapshot {
            library: "libnvidia-ml.so.1".into(),
            driver_version: Some("580.159".into()),
            devices: (0..n)
                .map(|i| {
                    let (pci, uuid) = h200(i);
                    NvmlDevice {
                        index: i,
                        name: Some("NVIDIA H200".into()),
                        uuid: Some(uuid),
                        pci_bus_id: Some(pci),
                        total_mem_bytes: Some(140 * GIB),
                        free_mem_bytes: Some(100 * GIB + u64::from(i) * GIB),
                        used_mem_bytes: Some(40 * GIB - u64::from(i) * GIB),
                        compute_mode: Some(ComputeMode::Default),
                        compute_processes: Some(i),
                    }
                })
                .collect(),
            problems: vec![],
        }
    }

    #[test]
    fn uuid_format() {
        let b = [
            0x8f, 0x2a, 0x1c, 0x3e, 0x0b, 0x1d, 0x4c, 0x5e, 0x9f, 0x00, 0x11, 0x22, 0x33, 0x44,
            0x55, 0x66,
        ];
        assert_eq!(format_uuid(&b), "GPU-8f2a1c3e-0b1d-4c5e-9f00-112233445566");
    }

    #[test]
    fn compute_modes() {
        assert_eq!(ComputeMode::from_attr(0), ComputeMode::Default);
        assert_eq!(ComputeMode::from_attr(1), ComputeMode::ExclusiveThread);
        assert_eq!(ComputeMode::from_attr(2), ComputeMode::Prohibited);
        assert_eq!(ComputeMode::from_attr(3), ComputeMode::ExclusiveProcess);
        assert_eq!(ComputeMode::from_attr(9), ComputeMode::Unknown(9));
        assert_eq!(
            ComputeMode::ExclusiveProcess.nvidia_smi_name(),
            "Exclusive_Process"
        );
    }

    #[test]
    fn join_with_nvml_and_cvd() {
        let snap = snapshot(2);
        let t = Topology::join(&driver(&[1]), Some(&snap), Some("1"), None);
        assert_eq!(
            t.devices,
            vec![VisibleDevice {
                ordinal: 0,
                name: "NVIDIA H200".into(),
                pci_bus_id: "0000:21:00.0".into(),
                uuid: "GPU-1111aaaa-0000-0000-0000-000000000001".into(),
                nvml_index: Some(1),
                physical_index: Some(1),
                total_mem_bytes: 140 * GIB,
                free_mem_bytes: Some(101 * GIB),
                compute_mode: ComputeMode::Default,
                busy_processes: Some(1),
            }]
        );
        assert_eq!(t.visibility.physical_count, Some(2));
        assert_eq!(t.nvml, NvmlStatus::Present);
        assert_eq!(t.order_warning, None);
        assert_eq!(t.device_order, DeviceOrder::FastestFirst);
    }

    #[test]
    fn join_uuid_entry_gets_physical_index_from_nvml() {
        let snap = snapshot(3);
        let t = Topology::join(
            &driver(&[2]),
            Some(&snap),
            Some("GPU-2222,5"),
            Some("PCI_BUS_ID"),
        );
        assert_eq!(t.devices[0].physical_index, Some(2));
        assert_eq!(
            t.visibility.stopped_at.as_ref().unwrap().reason,
            "is out of range for 3 GPUs"
        );
        assert_eq!(t.device_order, DeviceOrder::PciBusId);
    }

    #[test]
    fn join_without_nvml_uses_integer_entries() {
        let t = Topology::join(&driver(&[1]), None, Some("1,GPU-zz"), None);
        assert_eq!(t.devices[0].physical_index, Some(1));
        assert_eq!(t.devices[0].nvml_index, None);
        assert_eq!(t.devices[0].free_mem_bytes, None);
        assert_eq!(t.devices[0].pci_bus_id, "0000:21:00.0");
        assert_eq!(t.visibility.physical_count, None);
        assert_eq!(t.visibility.stopped_at.as_ref().unwrap().position, 2);
        assert_eq!(
            t.nvml,
            NvmlStatus::Absent {
                reason: "no NVML snapshot was taken".into()
            }
        );
        let t = Topology::join_with_status(
            &driver(&[0]),
            Err("libnvidia-ml.so.1: not found"),
            Some("GPU-0000"),
            None,
        );
        assert_eq!(t.devices[0].physical_index, None);
        assert_eq!(
            t.nvml,
            NvmlStatus::Absent {
                reason: "libnvidia-ml.so.1: not found".into()
            }
        );
    }

    #[test]
    fn join_falls_back_when_prediction_disagrees() {
        // CUDA counted fastest first and entry 1 turned out to be NVML's GPU 0.
        let snap = snapshot(2);
        let t = Topology::join(&driver(&[0]), Some(&snap), Some("1"), None);
        assert_eq!(t.devices[0].physical_index, Some(1));
        assert_eq!(t.devices[0].nvml_index, Some(0));
        assert_eq!(t.visibility.physical_count, None);
        assert_eq!(
            t.order_warning.as_deref(),
            Some(
                "CUDA_VISIBLE_DEVICES=1 counts GPUs in CUDA's order (fastest first), which differs \
                 from nvidia-smi's PCI bus order here: entry 1 selected nvidia-smi GPU 0 \
                 (0000:11:00.0); set CUDA_DEVICE_ORDER=PCI_BUS_ID so the indices mean nvidia-smi's \
                 numbers, or list GPU UUIDs instead"
            )
        );
    }

    #[test]
    fn join_unset_compares_orders() {
        let snap = snapshot(2);
        let t = Topology::join(&driver(&[1, 0]), Some(&snap), None, Some("bogus"));
        assert_eq!(t.devices[0].physical_index, Some(0));
        assert_eq!(t.devices[0].nvml_index, Some(1));
        let w = t.order_warning.unwrap();
        assert!(
            w.starts_with("CUDA_DEVICE_ORDER=\"bogus\" is neither"),
            "{w}"
        );
        assert!(w.contains("; CUDA numbers devices fastest first;"), "{w}");
        let t = Topology::join(&driver(&[0, 1]), Some(&snap), None, None);
        assert_eq!(t.order_warning, None);
        assert_eq!(t.visibility.physical_count, Some(2));
    }

    #[test]
    fn serializes() {
        let snap = snapshot(1);
        let t = Topology::join(&driver(&[0]), Some(&snap), Some("0"), None);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v["nvml"],
            serde_json::json!({"present": true, "reason": null})
        );
        assert_eq!(v["device_order"], "FASTEST_FIRST");
        assert_eq!(v["devices"][0]["compute_mode"], "default");
        let back: Topology = serde_json::from_value(v).unwrap();
        assert_eq!(back, t);
        assert_eq!(
            serde_json::to_value(ComputeMode::Unknown(7)).unwrap(),
            serde_json::json!({"unknown": 7})
        );
    }
}
