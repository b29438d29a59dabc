//! Optional NVML snapshot, through the `nvml-wrapper` crate (which loads the library at
//! run time; nothing links against it).
//!
//! NVML sees every GPU of the host or container regardless of `CUDA_VISIBLE_DEVICES`, numbers
//! them like nvidia-smi, and adds what the CUDA driver API does not tell: free memory now
//! and the processes using a device (NVML API reference: `nvmlDeviceGetMemoryInfo_v2`,
//! `nvmlDeviceGetComputeRunningProcesses_v3`, `nvmlDeviceGetComputeMode`,
//! `nvmlDeviceGetPciInfo`, `nvmlDeviceGetUUID`).
//!
//! Loading: [`Nvml::open`] calls `nvmlInit_v2` once per call; the caller keeps the
//! returned [`Nvml`] for its lifetime rather than opening again. `nvmlInit` can take
//! seconds on a host whose GPUs are not in persistence mode (the driver brings them up)
//! and, if the driver is wedged, may not return at all; this crate sets no timeout (out of
//! scope), so call it off any path that must not block (not from a loader callback, not
//! under a lock the program needs). The shim runs every use on a helper thread and waits a
//! bounded time (`SEEDANCE_NVML_TIMEOUT`, `shim/src/driver/nvml.rs`).

use std::ffi::OsStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use nvml_wrapper::enum_wrappers::device::ComputeMode as NvmlComputeMode;
use serde::{Deserialize, Serialize};

use crate::cvd::PhysicalId;
use crate::model::ComputeMode;
use crate::pci::normalize_pci_bus_id;

/// Library names tried, in order, when no path is given: `libnvidia-ml.so.1` ships with
/// the driver; the unversioned `libnvidia-ml.so` only with development packages.
pub const NVML_LIBRARY_NAMES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// Whether NVML was available, as recorded in the trace. Serialized as
/// `{"present": true, "reason": null}` or `{"present": false, "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "NvmlStatusRepr", from = "NvmlStatusRepr")]
pub enum NvmlStatus {
    /// NVML was loaded and initialized.
    Present,
    /// NVML could not be used.
    Absent {
        /// Why, in words (library not found, init error, ...).
        reason: String,
    },
}

#[derive(Serialize, Deserialize)]
struct NvmlStatusRepr {
    present: bool,
    #[serde(default)]
    reason: Option<String>,
}

impl From<NvmlStatus> for NvmlStatusRepr {
    fn from(s: NvmlStatus) -> Self {
        match s {
            NvmlStatus::Present => NvmlStatusRepr {
                present: true,
                reason: None,
            },
            NvmlStatus::Absent { reason } => NvmlStatusRepr {
                present: false,
                reason: Some(reason),
            },
        }
    }
}

impl From<NvmlStatusRepr> for NvmlStatus {
    fn from(r: NvmlStatusRepr) -> Self {
        if r.present {
            NvmlStatus::Present
        } else {
            NvmlStatus::Absent {
                reason: r.reason.unwrap_or_default(),
            }
        }
    }
}

/// One device as NVML sees it. A query that failed leaves its field `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlDevice {
    /// NVML index, the number nvidia-smi shows (`nvmlDeviceGetHandleByIndex_v2`).
    pub index: u32,
    /// Product name, e.g. `NVIDIA H200` (`nvmlDeviceGetName`).
    pub name: Option<String>,
    /// UUID, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (`nvmlDeviceGetUUID`).
    pub uuid: Option<String>,
    /// PCI bus id normalized to `0000:1a:00.0` (NVML's `busId` is `00000000:1A:00.0`).
    pub pci_bus_id: Option<String>,
    /// Total memory in bytes (`nvmlDeviceGetMemoryInfo_v2`, driver R510 or later).
    pub total_mem_bytes: Option<u64>,
    /// Free memory in bytes at the time of the snapshot.
    pub free_mem_bytes: Option<u64>,
    /// Used memory in bytes at the time of the snapshot.
    pub used_mem_bytes: Option<u64>,
    /// Compute mode (`nvmlDeviceGetComputeMode`).
    pub compute_mode: Option<ComputeMode>,
    /// Processes with a compute context on the device
    /// (`nvmlDeviceGetComputeRunningProcesses_v3`); in a container, often only those the
    /// container can see.
    pub compute_processes: Option<u32>,
}

/// What NVML showed when [`Nvml::snapshot`] ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlSnapshot {
    /// The library that was loaded (name or path as passed to the loader).
    pub library: String,
    /// Driver version as NVML reports it, e.g. `580.159` (`nvmlSystemGetDriverVersion`).
    pub driver_version: Option<String>,
    /// Every device, by NVML index.
    pub devices: Vec<NvmlDevice>,
    /// Queries that failed, one line each (`device 1: uuid: GPU is lost`).
    pub problems: Vec<String>,
}

impl NvmlSnapshot {
    /// Opens NVML ([`Nvml::open`], same `path` rule), takes one snapshot and shuts NVML
    /// down again. For callers that need no later [`Nvml::free_memory`]. The error is the
    /// reason for [`NvmlStatus::Absent`] (pass it to
    /// [`crate::model::Topology::join_with_status`]).
    pub fn take(path: Option<&Path>) -> Result<NvmlSnapshot, String> {
        Nvml::open(path).map(|n| n.snapshot())
    }

    /// The device with this PCI bus id (any spelling [`normalize_pci_bus_id`] accepts).
    pub fn by_pci_bus_id(&self, pci_bus_id: &str) -> Option<&NvmlDevice> {
        let want = normalize_pci_bus_id(pci_bus_id)?;
        self.devices
            .iter()
            .find(|d| d.pci_bus_id.as_deref() == Some(want.as_str()))
    }

    /// The devices as [`PhysicalId`]s in NVML (nvidia-smi) order, for
    /// [`crate::cvd::resolve`]; a missing UUID or PCI id becomes an empty string.
    pub fn physical_ids(&self) -> Vec<PhysicalId> {
        self.devices
            .iter()
            .map(|d| PhysicalId {
                index: d.index,
                uuid: d.uuid.clone().unwrap_or_default(),
                pci_bus_id: d.pci_bus_id.clone().unwrap_or_default(),
            })
            .collect()
    }
}

/// An initialized NVML library, kept for on-demand queries ([`Nvml::free_memory`]).
/// Dropping it shuts NVML down (`nvmlShutdown`).
pub struct Nvml {
    inner: nvml_wrapper::Nvml,
    library: String,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml")
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

fn convert_mode(m: NvmlComputeMode) -> ComputeMode {
    match m {
        NvmlComputeMode::Default => ComputeMode::Default,
        NvmlComputeMode::ExclusiveThread => ComputeMode::ExclusiveThread,
        NvmlComputeMode::Prohibited => ComputeMode::Prohibited,
        NvmlComputeMode::ExclusiveProcess => ComputeMode::ExclusiveProcess,
    }
}

fn keep<T>(
    problems: &mut Vec<String>,
    what: &str,
    r: Result<T, nvml_wrapper::error::NvmlError>,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(format!("{what}: {e}"));
            None
        }
    }
}

impl Nvml {
    /// Loads and initializes NVML. With `path` (the shim's `SEEDANCE_NVML_LIB`) only that
    /// file is tried; without, each of [`NVML_LIBRARY_NAMES`] in turn. Never panics: the
    /// error is the reason for [`NvmlStatus::Absent`], naming every attempt.
    pub fn open(path: Option<&Path>) -> Result<Nvml, String> {
        let candidates: Vec<&OsStr> = match path {
            Some(p) => vec![p.as_os_str()],
            None => NVML_LIBRARY_NAMES.iter().map(OsStr::new).collect(),
        };
        let mut failures = Vec::new();
        for lib in candidates {
            let attempt = catch_unwind(AssertUnwindSafe(|| {
                nvml_wrapper::Nvml::builder().lib_path(lib).init()
            }));
            match attempt {
                Ok(Ok(inner)) => {
                    return Ok(Nvml {
                        inner,
                        library: lib.to_string_lossy().into_owned(),
                    })
                }
                Ok(Err(e)) => failures.push(format!(
                    "{}: {}",
                    seedance_core::text::clip(&lib.to_string_lossy()),
                    seedance_core::text::clip(&e.to_string())
                )),
                Err(_) => failures.push(format!(
                    "{}: NVML initialization panicked",
                    seedance_core::text::clip(&lib.to_string_lossy())
                )),
            }
        }
        Err(format!(
            "NVML could not be loaded ({})",
            failures.join("; ")
        ))
    }

    /// The library that was loaded.
    pub fn library(&self) -> &str {
        &self.library
    }

    /// Reads every device. Never panics; a failed query leaves its field `None` and adds a
    /// line to [`NvmlSnapshot::problems`].
    pub fn snapshot(&self) -> NvmlSnapshot {
        let mut snap = NvmlSnapshot {
            library: self.library.clone(),
            driver_version: None,
            devices: Vec::new(),
            problems: Vec::new(),
        };
        if catch_unwind(AssertUnwindSafe(|| self.fill(&mut snap))).is_err() {
            snap.problems
                .push("an NVML query panicked; the snapshot is incomplete".into());
        }
        snap
    }

    fn fill(&self, snap: &mut NvmlSnapshot) {
        let problems = &mut snap.problems;
        snap.driver_version = keep(problems, "driver version", self.inner.sys_driver_version());
        let Some(count) = keep(problems, "device count", self.inner.device_count()) else {
            return;
        };
        for index in 0..count {
            let Some(dev) = keep(
                problems,
                &format!("device {index}"),
                self.inner.device_by_index(index),
            ) else {
                continue;
            };
            let what = |q: &str| format!("device {index}: {q}");
            let memory = keep(problems, &what("memory"), dev.memory_info());
            let pci = keep(problems, &what("PCI info"), dev.pci_info());
            snap.devices.push(NvmlDevice {
                index,
                name: keep(problems, &what("name"), dev.name()),
                uuid: keep(problems, &what("uuid"), dev.uuid()),
                pci_bus_id: pci.map(|p| normalize_pci_bus_id(&p.bus_id).unwrap_or(p.bus_id)),
                total_mem_bytes: memory.as_ref().map(|m| m.total),
                free_mem_bytes: memory.as_ref().map(|m| m.free),
                used_mem_bytes: memory.as_ref().map(|m| m.used),
                compute_mode: keep(problems, &what("compute mode"), dev.compute_mode())
                    .map(convert_mode),
                compute_processes: keep(
                    problems,
                    &what("compute processes"),
                    dev.running_compute_processes_count(),
                ),
            });
        }
    }

    /// Free memory of one device now, in bytes (`nvmlDeviceGetMemoryInfo_v2`); `None` if
    /// the index is unknown or the query fails. For out-of-memory decisions, so it asks
    /// NVML afresh on every call (a few microseconds; not for a hot path).
    pub fn free_memory(&self, nvml_index: u32) -> Option<u64> {
        catch_unwind(AssertUnwindSafe(|| {
            self.inner
                .device_by_index(nvml_index)
                .and_then(|d| d.memory_info())
                .ok()
                .map(|m| m.free)
        }))
        .ok()
        .flatten()
    }
}

impl Nvml {
    /// The compute processes on one device now, as `(pid, used bytes)`
    /// (`nvmlDeviceGetComputeRunningProcesses_v3`); the bytes are `None` where NVML does not
    /// report them. `None` if the index is unknown or the query fails. The pids are in the
    /// PID namespace of the host's driver, not necessarily the caller's (a container's
    /// process sees host pids). Cold paths only: it asks NVML afresh.
    pub fn running_processes(&self, nvml_index: u32) -> Option<Vec<(u32, Option<u64>)>> {
        catch_unwind(AssertUnwindSafe(|| {
            let procs = self
                .inner
                .device_by_index(nvml_index)
                .and_then(|d| d.running_compute_processes())
                .ok()?;
            Some(
                procs
                    .into_iter()
                    .map(|p| {
                        let used = match p.used_gpu_memory {
                            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                        };
                        (p.pid, used)
                    })
                    .collect(),
            )
        }))
        .ok()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handle_can_be_shared_between_threads() {
        assert_send_sync::<Nvml>();
    }

    #[test]
    fn status_serializes_as_present_reason() {
        assert_eq!(
            serde_json::to_string(&NvmlStatus::Present).unwrap(),
            r#"{"present":true,"reason":null}"#
        );
        let absent = NvmlStatus::Absent {
            reason: "no library".into(),
        };
        let json = serde_json::to_string(&absent).unwrap();
        assert_eq!(json, r#"{"present":false,"reason":"no library"}"#);
        assert_eq!(serde_json::from_str::<NvmlStatus>(&json).unwrap(), absent);
        assert_eq!(
            serde_json::from_str::<NvmlStatus>(r#"{"present":true}"#).unwrap(),
            NvmlStatus::Present
        );
    }

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        let err = Nvml::open(Some(Path::new("/nonexistent/libnvidia-ml.so.1"))).unwrap_err();
        assert!(
            err.starts_with("NVML could not be loaded (/nonexistent/libnvidia-ml.so.1: "),
            "{err}"
        );
    }

    #[test]
    fn default_names_do_not_panic() {
        // No GPU on the build machines: expect Err; on a GPU host Ok. Either is fine.
        match Nvml::open(None) {
            Ok(n) => {
                let s = n.snapshot();
                for d in &s.devices {
                    if let Some(id) = &d.pci_bus_id {
                        assert_eq!(normalize_pci_bus_id(id).as_deref(), Some(id.as_str()));
                    }
                    let _ = n.free_memory(d.index);
                }
                assert_eq!(n.free_memory(u32::MAX), None);
            }
            Err(e) => assert!(
                e.contains("libnvidia-ml.so.1") && e.contains("libnvidia-ml.so:"),
                "{e}"
            ),
        }
    }

    #[test]
    fn snapshot_lookups() {
        let snap = NvmlSnapshot {
            library: "libnvidia-ml.so.1".into(),
            driver_version: Some("580.159".into()),
            devices: vec![NvmlDevice {
                index: 0,
                name: Some("NVIDIA H200".into()),
                uuid: Some("GPU-aa".into()),
                pci_bus_id: Some("0000:1a:00.0".into()),
                total_mem_bytes: Some(10),
                free_mem_bytes: Some(5),
                used_mem_bytes: Some(5),
                compute_mode: Some(ComputeMode::Default),
                compute_processes: Some(0),
            }],
            problems: vec![],
        };
        assert_eq!(
            snap.by_pci_bus_id("00000000:1A:00.0").map(|d| d.index),
            Some(0)
        );
        assert_eq!(snap.by_pci_bus_id("0000:1b:00.0"), None);
        assert_eq!(
            snap.physical_ids(),
            vec![PhysicalId {
                index: 0,
                uuid: "GPU-aa".into(),
                pci_bus_id: "0000:1a:00.0".into()
            }]
        );
    }
}
