//! The shim's runtime: the configuration and its switch word ([`config`]), the output path
//! (trace, counters, failure reports: [`output`]; stderr lines: [`stderr`]), the panic and re-entry guard ([`guard`]),
//! argument capture and names. Below the fault modules: nothing here imports them or the
//! wrappers, only the hook ids.

pub mod args;
pub mod config;
pub mod guard;
pub mod hot;
pub mod lineage;
pub mod names;
pub mod output;
pub mod probes;
pub mod stderr;
