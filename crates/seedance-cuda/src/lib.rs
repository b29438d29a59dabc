//! FFI types of the CUDA driver API, as the shim and the fake driver see them.
//!
//! Design rules (see `docs/design.md`):
//!
//! * [`CUresult`] is a `#[repr(transparent)]` newtype over `u32`, never a Rust enum: a real
//!   driver may return codes newer than our table, and an enum value outside its variants is
//!   undefined behaviour.
//! * Opaque handles are pointers to zero-sized `#[repr(C)]` structs, as in `cuda.h`
//!   (`typedef struct CUctx_st *CUcontext`). `CUdeviceptr` is a 64-bit integer
//!   (`unsigned long long` on 64-bit hosts since CUDA 3.2, the `_v2` ABI).
//! * Nothing here calls the driver; this crate only describes it.
//! * [`abi`] is the one table of the driver entry points the shim hooks and the fake driver
//!   exports: their ABI variants, the versions `cuGetProcAddress` hands each out for, and
//!   their argument layouts.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod abi;
mod result;
mod types;

pub use result::{CUresult, ResultInfo};
pub use types::*;
