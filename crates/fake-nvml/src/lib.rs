//! `fake-nvml`: a fake `libnvidia-ml.so.1` for testing seedance-fix on machines without a
//! GPU.
//!
//! It exports the small part of the NVML API that device selection needs, with the exact
//! `nvml.h` ABIs, and reads the same environment as `fake-cuda` (`FAKE_CUDA_*`, see
//! [`config`]) so that the two fakes describe one host: the same devices, names, UUIDs, PCI
//! bus ids, memory and compute modes. Unlike CUDA, NVML ignores `CUDA_VISIBLE_DEVICES` and
//! always lists every physical device, in PCI bus order (= physical index order here).
//!
//! Module map:
//!
//! * [`config`]: parses the environment into a [`config::Host`].
//! * [`global`]: the initialisation reference count, the device handles, the entry guard.
//! * [`log`]: the call recorder (`FAKE_NVML_LOG`); its format is documented there.
//! * [`exports`]: the `extern "C"` entry points and the `nvml.h` structs they fill.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod config;
pub mod exports;
pub mod global;
pub mod log;

pub use exports::*;
