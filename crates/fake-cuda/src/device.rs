//! One visible device: identity (name, PCI id, UUID), attributes and memory counters.
//!
//! Default attributes (any of them, and attributes not listed, can be set with
//! `FAKE_CUDA_ATTR_<n>`; unlisted, unset attributes are `CUDA_ERROR_INVALID_VALUE`):
//!
//! | attribute | value |
//! |---|---|
//! | MAX_THREADS_PER_BLOCK (1) | 1024 |
//! | MAX_BLOCK_DIM_X/Y/Z (2/3/4) | 1024 / 1024 / 64 |
//! | MAX_GRID_DIM_X/Y/Z (5/6/7) | 2147483647 / 65535 / 65535 |
//! | MAX_SHARED_MEMORY_PER_BLOCK (8) | 49152 |
//! | MULTIPROCESSOR_COUNT (16) | 132 |
//! | COMPUTE_MODE (20) | 0; 3 (exclusive process) for a device in `FAKE_CUDA_BUSY` |
//! | PCI_BUS_ID (33) | 0x10 + physical index |
//! | PCI_DEVICE_ID (34) | 0 |
//! | PCI_DOMAIN_ID (50) | 0 |
//! | COMPUTE_CAPABILITY_MAJOR/MINOR (75/76) | 9 / 0 |
//! | MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97) | 232448 |

use std::collections::BTreeMap;

use seedance_cuda::{attr, CUresult};

use crate::config::PhysicalDevice;

/// `CU_COMPUTEMODE_EXCLUSIVE_THREAD` (no longer settable on current drivers).
pub const COMPUTE_MODE_EXCLUSIVE_THREAD: i32 = 1;
/// `CU_COMPUTEMODE_PROHIBITED`: no contexts at all.
pub const COMPUTE_MODE_PROHIBITED: i32 = 2;
/// `CU_COMPUTEMODE_EXCLUSIVE_PROCESS`: one process's contexts at a time.
pub const COMPUTE_MODE_EXCLUSIVE_PROCESS: i32 = 3;

/// The default attribute table of physical device `p`.
pub fn default_attributes(p: u32) -> BTreeMap<i32, i32> {
    BTreeMap::from([
        (attr::MAX_THREADS_PER_BLOCK, 1024),
        (attr::MAX_BLOCK_DIM_X, 1024),
        (attr::MAX_BLOCK_DIM_Y, 1024),
        (attr::MAX_BLOCK_DIM_Z, 64),
        (attr::MAX_GRID_DIM_X, 2_147_483_647),
        (attr::MAX_GRID_DIM_Y, 65535),
        (attr::MAX_GRID_DIM_Z, 65535),
        (attr::MAX_SHARED_MEMORY_PER_BLOCK, 49152),
        (attr::MULTIPROCESSOR_COUNT, 132),
        (attr::COMPUTE_MODE, 0),
        (attr::PCI_BUS_ID, 0x10 + p as i32),
        (attr::PCI_DEVICE_ID, 0),
        (attr::PCI_DOMAIN_ID, 0),
        (attr::COMPUTE_CAPABILITY_MAJOR, 9),
        (attr::COMPUTE_CAPABILITY_MINOR, 0),
        (attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232_448),
    ])
}

/// The 16 UUID bytes of physical device `p`: `fa ce 5e ed 00 00 40 00 80 00 .. 00 p`.
pub fn uuid_bytes(p: u32) -> [u8; 16] {
    let mut b = [
        0xfa, 0xce, 0x5e, 0xed, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0,
    ];
    b[15] = p as u8;
    b
}

/// The UUID of physical device `p` as `nvidia-smi -L` and `CUDA_VISIBLE_DEVICES` spell it:
/// `GPU-face5eed-0000-4000-8000-0000000000pp`.
pub fn uuid_string(p: u32) -> String {
    let hex: String = uuid_bytes(p).iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A visible device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Physical index `p`.
    pub physical: u32,
    /// Held by another process (`FAKE_CUDA_BUSY`).
    pub busy: bool,
    /// No memory left for a new context (`FAKE_CUDA_CTX_OOM`).
    pub ctx_oom: bool,
    name: String,
    /// Total memory in bytes.
    pub total_mem: u64,
    /// Bytes not yet allocated.
    pub free_mem: u64,
    attrs: BTreeMap<i32, i32>,
}

impl Device {
    /// The device for a configured physical device: defaults plus its overrides.
    pub fn new(cfg: &PhysicalDevice) -> Device {
        let mut attrs = default_attributes(cfg.index);
        if cfg.busy {
            attrs.insert(attr::COMPUTE_MODE, COMPUTE_MODE_EXCLUSIVE_PROCESS);
        }
        attrs.extend(cfg.attr_overrides.iter().map(|(k, v)| (*k, *v)));
        Device {
            physical: cfg.index,
            busy: cfg.busy,
            ctx_oom: cfg.ctx_oom,
            name: cfg
                .name
                .clone()
                .unwrap_or_else(|| format!("Fake H200 #{}", cfg.index)),
            total_mem: cfg.total_mem,
            free_mem: cfg.free_mem,
            attrs,
        }
    }

    /// `"Fake H200 #p"`, or the name from `FAKE_CUDA_NAMES`.
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// Why a new context (created or primary) cannot be made on this device, if it cannot:
    ///
    /// * `CUDA_ERROR_DEVICE_UNAVAILABLE` when the compute mode (attribute 20) is prohibited,
    ///   or when the device is busy (`FAKE_CUDA_BUSY`) and its mode is exclusive (thread or
    ///   process; a busy device whose mode is overridden to default can be shared);
    /// * else `CUDA_ERROR_OUT_OF_MEMORY` for a device in `FAKE_CUDA_CTX_OOM`.
    pub fn context_refusal(&self) -> Option<CUresult> {
        let mode = self.attribute(attr::COMPUTE_MODE).unwrap_or(0);
        let exclusive =
            mode == COMPUTE_MODE_EXCLUSIVE_THREAD || mode == COMPUTE_MODE_EXCLUSIVE_PROCESS;
        if mode == COMPUTE_MODE_PROHIBITED || (self.busy && exclusive) {
            Some(CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE)
        } else if self.ctx_oom {
            Some(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
        } else {
            None
        }
    }

    /// `domain:bus:device.0` in lowercase hex from the PCI attributes, e.g. `0000:10:00.0`.
    pub fn pci_bus_id(&self) -> String {
        let a = |k| self.attribute(k).unwrap_or(0);
        format!(
            "{:04x}:{:02x}:{:02x}.0",
            a(attr::PCI_DOMAIN_ID),
            a(attr::PCI_BUS_ID),
            a(attr::PCI_DEVICE_ID)
        )
    }

    /// The UUID bytes, see [`uuid_bytes`].
    pub fn uuid(&self) -> [u8; 16] {
        uuid_bytes(self.physical)
    }

    /// An attribute's value, `None` when not modelled.
    pub fn attribute(&self, attrib: i32) -> Option<i32> {
        self.attrs.get(&attrib).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phys(p: u32, overrides: &[(i32, i32)]) -> PhysicalDevice {
        PhysicalDevice {
            index: p,
            total_mem: 100,
            free_mem: 50,
            attr_overrides: overrides.iter().copied().collect(),
            name: None,
            busy: false,
            ctx_oom: false,
        }
    }

    #[test]
    fn identity() {
        let d = Device::new(&phys(0, &[]));
        assert_eq!(d.name(), "Fake H200 #0");
        assert_eq!(d.pci_bus_id(), "0000:10:00.0");
        let d = Device::new(&phys(10, &[]));
        assert_eq!(d.name(), "Fake H200 #10");
        assert_eq!(d.pci_bus_id(), "0000:1a:00.0");
        assert_eq!(
            d.uuid(),
            [0xfa, 0xce, 0x5e, 0xed, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 10]
        );
        assert_eq!(uuid_string(10), "GPU-face5eed-0000-4000-8000-00000000000a");
        assert_eq!((d.total_mem, d.free_mem), (100, 50));
    }

    #[test]
    fn attributes_and_overrides() {
        let d = Device::new(&phys(1, &[]));
        assert_eq!(d.attribute(attr::MAX_THREADS_PER_BLOCK), Some(1024));
        assert_eq!(d.attribute(attr::MAX_BLOCK_DIM_Z), Some(64));
        assert_eq!(d.attribute(attr::MAX_GRID_DIM_X), Some(2_147_483_647));
        assert_eq!(d.attribute(attr::MULTIPROCESSOR_COUNT), Some(132));
        assert_eq!(d.attribute(attr::PCI_BUS_ID), Some(0x11));
        assert_eq!(d.attribute(attr::COMPUTE_CAPABILITY_MAJOR), Some(9));
        assert_eq!(d.attribute(attr::COMPUTE_CAPABILITY_MINOR), Some(0));
        assert_eq!(
            d.attribute(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            Some(232_448)
        );
        assert_eq!(d.attribute(12345), None);
        let d = Device::new(&phys(
            1,
            &[
                (attr::MAX_THREADS_PER_BLOCK, 512),
                (attr::PCI_DOMAIN_ID, 2),
                (12345, 7),
            ],
        ));
        assert_eq!(d.attribute(attr::MAX_THREADS_PER_BLOCK), Some(512));
        assert_eq!(d.attribute(12345), Some(7));
        assert_eq!(d.pci_bus_id(), "0002:11:00.0");
    }

    #[test]
    fn names_and_context_refusal() {
        const UNAVAILABLE: Option<CUresult> = Some(CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE);
        let mut cfg = phys(2, &[]);
        assert_eq!(Device::new(&cfg).context_refusal(), None);
        cfg.name = Some("NVIDIA H200".into());
        assert_eq!(Device::new(&cfg).name(), "NVIDIA H200");

        cfg.busy = true;
        let d = Device::new(&cfg);
        assert_eq!(d.attribute(attr::COMPUTE_MODE), Some(3));
        assert_eq!(d.context_refusal(), UNAVAILABLE);
        cfg.attr_overrides.insert(attr::COMPUTE_MODE, 1);
        assert_eq!(Device::new(&cfg).context_refusal(), UNAVAILABLE);
        cfg.attr_overrides.insert(attr::COMPUTE_MODE, 0);
        let d = Device::new(&cfg);
        assert_eq!(d.attribute(attr::COMPUTE_MODE), Some(0));
        assert_eq!(d.context_refusal(), None, "default mode is shared");

        let d = Device::new(&phys(0, &[(attr::COMPUTE_MODE, 2)]));
        assert_eq!(d.context_refusal(), UNAVAILABLE);
        let d = Device::new(&phys(0, &[(attr::COMPUTE_MODE, 3)]));
        assert_eq!(d.context_refusal(), None, "exclusive but not held");

        let mut cfg = phys(0, &[]);
        cfg.ctx_oom = true;
        assert_eq!(
            Device::new(&cfg).context_refusal(),
            Some(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
        );
        cfg.attr_overrides.insert(attr::COMPUTE_MODE, 2);
        assert_eq!(Device::new(&cfg).context_refusal(), UNAVAILABLE);
    }
}
