//! The ways a program reaches the driver other than the exported symbols: `dlsym` look-ups
//! of driver names ([`dlsym`], on the trampoline of [`crate::platform`]), the driver's
//! `cuGetProcAddress` ([`procaddr`]) and the runtime's `cudaSetDevice` ([`runtime`]).
//! docs/design.md ("How programs reach the driver") says why each is needed.

pub mod dlsym;
pub mod procaddr;
pub mod runtime;
