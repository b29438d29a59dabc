//! Everything in seedance-fix that decides, with no FFI: configuration, modes, the
//! per-function call counters, the device-fallback policy, and the launch and allocation
//! checks ([`launch`], [`alloc`], [`live`]).
//!
//! The shim converts raw driver arguments into plain values and asks this crate what to
//! do; this crate never touches a raw pointer, so all of it is unit-testable without a
//! driver. Hot-path pieces ([`counters`]) take no lock and allocate nothing after a
//! thread's first call.
#![deny(missing_docs)]

pub mod alloc;
pub mod bytes;
pub mod config;
pub mod counters;
pub mod fallback;
pub mod launch;
pub mod live;
pub mod tally;

pub use config::{Config, Mode, RawConfig, Validate};
pub use counters::Counters;
pub use tally::ErrorTally;
