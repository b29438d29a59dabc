//! Everything in seedance-fix that decides, with no FFI: configuration, modes, the
//! per-function call counters, the device-fallback policy (and which failed device requests
//! are questions it leaves alone, [`probe`]), the record of faults already explained
//! ([`once`]), and the launch and allocation
//! checks ([`launch`], [`alloc`], [`live`]), and the lifetimes of contexts, streams, events
//! and pinned memory with the work pending on each stream ([`lifetime`], [`work`]).
//!
//! The shim converts raw driver arguments into plain values and asks this crate what to
//! do; this crate never touches a raw pointer, so all of it is unit-testable without a
//! driver. Hot-path pieces ([`counters`]) take no lock and allocate nothing after a
//! thread's first call; so do the launch and copy counters of [`work`].
#![deny(missing_docs)]

pub mod alloc;
pub mod bytes;
pub mod config;
pub mod counters;
pub mod fallback;
pub mod fork;
pub mod hazard;
pub mod held;
pub mod holders;
pub mod held_lines;
pub mod hostguard;
pub mod launch;
pub mod libraries;
pub mod lifetime;
pub mod line;
pub mod live;
pub mod once;
pub mod owners;
pub mod probe;
pub mod stray;
pub mod tally;
pub mod text;
mod thread;
pub mod work;

pub use config::{Config, Mode, RawConfig, StrayRepair, Validate};
pub use counters::Counters;
pub use tally::ErrorTally;
