//! The shim's runtime: configuration switches, the output path (messages, trace, counters),
//! the panic and re-entry guard, argument capture and names.

pub mod args;
pub mod guard;
pub mod metrics;
pub mod names;
pub mod session;
