//! The seedance-fix trace: one JSON object per line, one file per process.
//!
//! This crate is shared by the shim (which writes) and `seedance-analyze` (which reads), so
//! both agree on one definition of every event. The schema is versioned by
//! [`SCHEMA_VERSION`]; fields are only ever added, never renamed or removed, so a reader of
//! version N reads every version <= N. Readers must skip unknown event kinds.
//!
//! Wire format (documented for users in `docs/trace-schema.md`): each line is a [`Record`],
//! an envelope (`v`, `seq`, `ts_ns`, `pid`, `tid`) flattened together with one [`Event`],
//! whose kind is named by the `event` field.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod direct;
pub mod metrics;
pub mod schema;
pub mod writer;

pub use schema::*;
pub use writer::{TraceFile, TraceWriter, WriterError};
