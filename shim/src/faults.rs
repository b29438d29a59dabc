//! Fault handling per kind of mistake: each module gathers facts from the driver, asks
//! seedance-core what they mean, and acts (reports, repairs, counts).

pub mod alloc;
pub mod capture;
pub mod devices;
pub mod hazard;
#[cfg(target_os = "linux")]
pub mod hostguard;
#[cfg(not(target_os = "linux"))]
#[path = "faults/hostguard_other.rs"]
pub mod hostguard;
pub mod launch;
pub mod lifetime;
