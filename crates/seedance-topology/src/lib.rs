//! Device topology for seedance-fix: which physical GPU each CUDA ordinal is, why an
//! ordinal is missing, and what to do about it.
//!
//! - [`cvd`]: `CUDA_VISIBLE_DEVICES` parsed and applied the way the driver does
//!   (stopping at the first invalid entry).
//! - [`order`]: `CUDA_DEVICE_ORDER`, and warnings when CUDA's numbering differs from
//!   nvidia-smi's.
//! - [`nvml`]: an optional NVML snapshot (loaded at run time through `nvml-wrapper`).
//! - [`model`]: the joined per-ordinal [`Topology`] recorded in the trace.
//! - [`explain`]: the one-line explanations of ordinal, availability and memory faults,
//!   and the parsers of `SEEDANCE_EXCLUDE_DEVICES` and `SEEDANCE_MIN_FREE_MEMORY`.
//!
//! This crate never calls the CUDA driver: the shim reads the driver (FFI) and passes plain
//! values ([`DriverDevice`]) in. Memory amounts are bytes throughout unless a name says
//! otherwise; texts show GiB (2^30 bytes).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cvd;
pub mod explain;
pub mod model;
pub mod nvml;
pub mod order;
pub mod pci;

pub use cvd::{
    describe, parse, resolve, resolve_by_count, PhysicalId, Stop, Visibility, VisibleSpec,
};
pub use explain::{
    context_out_of_memory, device_unavailable, fallback_applied, invalid_ordinal, parse_exclusions,
    selector_matches, DeviceSelector,
};
pub use model::{ComputeMode, DriverDevice, Topology, VisibleDevice};
pub use nvml::{Nvml, NvmlSnapshot, NvmlStatus};
pub use order::DeviceOrder;
pub use pci::normalize_pci_bus_id;
