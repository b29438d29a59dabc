//! `SEEDANCE_HOST_GUARD` on platforms other than Linux: not available (the guard reads the
//! program's memory through Linux's `process_vm_readv`, and has only been written and
//! tested there). Asking for it gives one line at start-up (`shim/src/rt/config.rs`);
//! everything else is a no-op.

use crate::hooks::ids::HookId;
use seedance_cuda::{CUdeviceptr, CUresult, CUstream};

/// Never on.
#[inline(always)]
pub fn on() -> bool {
    false
}

/// The source unchanged.
///
/// # Safety
/// None.
#[inline(always)]
pub unsafe fn source(
    _id: HookId,
    src: *const libc::c_void,
    _bytes: usize,
    _stream: CUstream,
) -> *const libc::c_void {
    src
}

/// The source unchanged.
///
/// # Safety
/// None.
#[inline(always)]
pub unsafe fn source_unified(
    _id: HookId,
    src: CUdeviceptr,
    _bytes: usize,
    _stream: CUstream,
) -> CUdeviceptr {
    src
}

/// Nothing watched.
#[inline(always)]
pub fn submitted(_r: CUresult) {}

/// Nothing watched.
#[inline(always)]
pub fn completed() {}

/// Nothing watched.
pub fn release_range(_lo: u64, _hi: u64) {}

/// Nothing watched.
pub fn release_pinned(_lo: u64) {}

/// Nothing watched.
pub fn context_ended(_ctx: u64) {}
