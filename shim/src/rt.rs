//! The shim's runtime: the configuration and its switch word ([`config`]), the output path
//! (trace, counters, failure reports: [`output`]; stderr lines: [`stderr`], written through
//! [`fd2`] only while descriptor 2 is the program's stderr of the start; failures whose line
//! waits for what the program does next: [`deferred`]), the panic and re-entry guard ([`guard`]),
//! argument capture and names. Below the fault modules: nothing here imports them or the
//! wrappers, only the hook ids.

pub mod args;
pub mod config;
pub mod deferred;
pub mod fd2;
pub mod guard;
pub mod hot;
pub mod lineage;
pub mod names;
pub mod output;
pub mod probes;
pub mod stderr;
