//! Everything in seedance-fix that decides, with no FFI and no unsafe code: configuration,
//! modes, the device-fallback policy (and which failed device requests are questions it
//! leaves alone, [`probe`]), the record of faults already explained ([`once`]), the launch
//! and allocation checks ([`launch`], [`alloc`]), the lifetimes of contexts, streams, events
//! and pinned memory ([`lifetime`]) and the pinned-copy race model ([`hazard`]).
//!
//! The shim converts raw driver arguments into plain values and asks this crate what to
//! do; this crate never touches a raw pointer, so all of it is unit-testable without a
//! driver. The state the hot path writes on every call (per-thread shards of counts and
//! pending work, held allocations, the live-allocation table) is `seedance-hotpath`, below
//! this crate.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod alloc;
pub mod bytes;
pub mod config;
pub mod fallback;
pub mod fork;
pub mod hazard;
pub mod holders;
pub mod hostguard;
pub mod launch;
pub mod libraries;
pub mod lifetime;
pub mod once;
pub mod probe;
pub mod stray;
pub mod tally;
pub mod text;

pub use config::{Config, Mode, RawConfig, StrayRepair, Validate};
pub use tally::ErrorTally;
