//! `fake-cuda`: a fake `libcuda.so.1` for testing seedance-fix on machines without a GPU.
//!
//! The library exports a subset of the CUDA 13.0 driver API with the exact `cuda.h` ABIs and
//! models the real driver's observable behaviour: initialisation, a topology read from the
//! environment (`FAKE_CUDA_*`, `CUDA_VISIBLE_DEVICES`), contexts, memory accounting, launch
//! limit checks, `cuGetProcAddress` variant selection, and asynchrony: launches and copies
//! wait in per-stream queues until something synchronises them, copies then move real
//! bytes (device memory touched by copies is backed), and destroying a context loses its
//! queued work. Nothing runs on a device: launches only validate their configuration.
//!
//! Module map, one job each:
//!
//! * [`config`]: parses the environment into a topology.
//! * [`device`]: one visible device: name, PCI id, UUID, attributes.
//! * [`launch`]: launch-configuration limit checks, kernels (function handles) and
//!   occupancy.
//! * [`state`]: the driver state: devices, contexts, allocations, streams, events, pinned
//!   memory.
//! * [`queue`]: asynchrony: the work queued per stream until a synchronisation runs it.
//! * [`global`]: the process-wide state, the current context, the entry-point guard.
//! * [`procaddr`]: which variant `cuGetProcAddress` picks.
//! * [`errstr`]: the static strings `cuGetErrorName`/`cuGetErrorString` hand out.
//! * [`log`]: the call recorder (`FAKE_CUDA_LOG`); its format is documented there.
//! * [`logs`]: the driver's error log (`cuLogsRegisterCallback`) and what it reports.
//! * [`exports`]: the `extern "C"` entry points.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod config;
pub mod device;
pub mod errstr;
pub mod exports;
pub mod global;
pub mod launch;
pub mod log;
pub mod logs;
pub mod procaddr;
pub mod queue;
pub mod state;

pub use exports::*;
