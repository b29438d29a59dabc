//! The driver side: the real driver's symbols, the shim's own driver queries, the driver's
//! messages, NVML and the device topology.

pub mod driverlog;
pub mod missing;
pub mod nvml;
pub mod query;
pub mod real;
pub mod topo;
