//! The first stage: finding the input (files, directories, object-storage prefixes),
//! splitting it into lines of bounded length and parsing each line into a record.

mod fast;
pub mod input;
pub mod line;
pub(crate) mod parse;
pub mod reader;
pub mod records;
#[cfg(feature = "remote")]
pub mod remote;
pub mod remote_url;
