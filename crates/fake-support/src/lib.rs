//! `fake-support`: the helpers that the test fakes `fake-cuda` (a fake `libcuda.so.1`) and
//! `fake-nvml` (a fake `libnvidia-ml.so.1`) share, so that both read the environment and
//! record calls the same way.
//!
//! * [`env`]: the comma-list environment parsing (per-device values, names, index sets,
//!   on/off flags) and the "ignoring bad" warning line.
//! * [`log`]: the call-log line format and the append-only log file writer.
//!
//! Every function takes the fake's name (`"fake-cuda"`, `"fake-nvml"`) where it writes a
//! message, so each fake keeps its own message prefix.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod env;
pub mod log;
