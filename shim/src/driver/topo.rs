//! The topology the explanations and the fallback choice use: the driver's view of each
//! visible device, joined with NVML's (when `libnvidia-ml` is present) and with
//! `CUDA_VISIBLE_DEVICES` / `CUDA_DEVICE_ORDER`. Taken once, at the first device fault or
//! when the trace starts, whichever comes first; never for a program that needs neither.
//! NVML's part waits at most `SEEDANCE_NVML_TIMEOUT` ([`crate::driver::nvml`]); without it the
//! topology is the driver's view alone, as with NVML absent.

use crate::{driver::query, rt::config, rt::stderr};
use once_cell::sync::OnceCell;
use seedance_core::fallback::{Candidate, Unusable};
use seedance_topology::{explain, DriverDevice, Topology, VisibleDevice};

static TOPOLOGY: OnceCell<Topology> = OnceCell::new();

/// The topology snapshot (taken on first use; the driver must be initialised by then). It
/// looks up driver entry points and opens NVML, so it is taken outside the cell's
/// initialiser ([`crate::driver::real::once_outside_loader_lock`]).
pub fn get() -> &'static Topology {
    crate::driver::real::once_outside_loader_lock(&TOPOLOGY, take)
}

fn take() -> Topology {
    let driver: Vec<DriverDevice> = query::devices()
        .into_iter()
        .map(|d| DriverDevice {
            ordinal: d.ordinal,
            name: d.name.unwrap_or_default(),
            pci_bus_id: d.pci_bus_id.unwrap_or_default(),
            uuid: d.uuid.unwrap_or_default(),
            total_mem_bytes: d.total_mem_bytes.unwrap_or(0),
            compute_mode: d.compute_mode.unwrap_or(0),
        })
        .collect();
    let nvml = crate::driver::nvml::snapshot();
    let cvd = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let order = std::env::var("CUDA_DEVICE_ORDER").ok();
    let topo = Topology::join_with_status(
        &driver,
        nvml.as_ref().map_err(String::as_str),
        cvd.as_deref(),
        order.as_deref(),
    );
    if let Some(w) = &topo.order_warning {
        stderr::say_once("order", w);
    }
    topo
}

/// Explanation of a request for an ordinal that is not visible.
pub fn explain_invalid(requested: i32, t: &Topology) -> String {
    explain::invalid_ordinal(requested, t)
}

/// Whether `CUDA_VISIBLE_DEVICES` made the physical device `requested` another ordinal
/// ([`explain::renumbered`]).
pub fn renumbered(requested: i32, t: &Topology) -> bool {
    explain::renumbered(requested, t).is_some()
}

/// Explanation of `CUDA_ERROR_DEVICE_UNAVAILABLE` on `ordinal`.
pub fn explain_unavailable(ordinal: i32, t: &Topology) -> String {
    explain::device_unavailable(ordinal, t)
}

/// Explanation of a context creation that ran out of memory on `ordinal`.
pub fn explain_oom(ordinal: i32, t: &Topology) -> String {
    explain::context_out_of_memory(ordinal, t)
}

/// The announcement of a fallback.
pub fn explain_fallback(requested: i32, chosen: i32, reason: &str, t: &Topology) -> String {
    explain::fallback_applied(requested, chosen, reason, t)
}

/// PCI bus id of `ordinal`, if known.
pub fn pci_bus_id(ordinal: i32, t: &Topology) -> Option<String> {
    t.devices
        .iter()
        .find(|d| d.ordinal == ordinal)
        .map(|d| d.pci_bus_id.clone())
        .filter(|s| !s.is_empty())
}

/// One fallback candidate per visible device, marked by `unusable` (given the device,
/// whether `SEEDANCE_EXCLUDE_DEVICES` names it, and `SEEDANCE_MIN_FREE_MEMORY`) with why it
/// cannot take work.
pub fn candidates(
    t: &Topology,
    unusable: impl Fn(&VisibleDevice, bool, Option<u64>) -> Option<Unusable>,
) -> Vec<Candidate> {
    let cfg = config::get();
    t.devices
        .iter()
        .map(|d| {
            let excluded = config::exclusions()
                .iter()
                .any(|sel| explain::selector_matches(sel, d));
            Candidate {
                ordinal: d.ordinal,
                unusable: unusable(d, excluded, cfg.min_free_memory),
            }
        })
        .collect()
}
