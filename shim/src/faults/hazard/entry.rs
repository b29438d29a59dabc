//! The `pre` hooks of the one-dimensional asynchronous copies: the host side(s) of each,
//! with its direction, handed to the race check ([`super::check_copy`]) when it may lie in
//! a pinned range.

use super::{check_copy, maybe_pinned, on};
use crate::hooks::ids::HookId;
use libc::c_void;
use seedance_core::hazard::Direction;
use seedance_cuda::{CUdeviceptr, CUresult, CUstream};

/// Before `cuMemcpyHtoDAsync_v2(_ptsz)`: `None` (the copy always goes ahead).
///
/// # Safety
/// None: the addresses are only compared.
#[inline(always)]
pub unsafe fn pre_copy_htod(
    id: HookId,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> Option<CUresult> {
    if maybe_pinned(src as u64) && on() {
        check_copy(id, &[(src as u64, Direction::Read)], bytes as u64, stream);
    }
    None
}

/// Before `cuMemcpyDtoHAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are only compared.
#[inline(always)]
pub unsafe fn pre_copy_dtoh(
    id: HookId,
    dst: *mut c_void,
    bytes: usize,
    stream: CUstream,
) -> Option<CUresult> {
    if maybe_pinned(dst as u64) && on() {
        check_copy(id, &[(dst as u64, Direction::Write)], bytes as u64, stream);
    }
    None
}

/// Before `cuMemcpyAsync(_ptsz)`: either side may be pinned host memory (the range table
/// decides; a pointer it does not know is not tracked).
///
/// # Safety
/// None: the addresses are only compared.
#[inline(always)]
pub unsafe fn pre_copy(
    id: HookId,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Option<CUresult> {
    if (maybe_pinned(src) || maybe_pinned(dst)) && on() {
        check_copy(
            id,
            &[(src, Direction::Read), (dst, Direction::Write)],
            bytes as u64,
            stream,
        );
    }
    None
}
