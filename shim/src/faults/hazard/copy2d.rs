//! `cuMemcpy2DAsync_v2(_ptsz)` as a pinned-memory access: when both sides are one
//! contiguous run (one row, or rows whose pitch is the width) its host side is checked and
//! kept like a 1D copy's; a strided 2D copy is not tracked (a race through it goes
//! unreported: a bounding range could overlap bytes the rows never touch, and the model
//! must not invent a race).

use super::{check_copy, maybe_pinned, ok_copy, on};
use crate::hooks::ids::HookId;
use libc::c_void;
use seedance_core::hazard::Direction;
use seedance_cuda::{CUresult, CUstream, CUDA_MEMCPY2D, CU_MEMORYTYPE_DEVICE};

/// The descriptor's host-side candidates (address, direction) and the bytes, for a
/// contiguous copy; a unified side may be host memory (the range table decides).
fn sides(c: &CUDA_MEMCPY2D) -> Option<([(u64, Direction); 2], u64)> {
    let bytes = c.contiguous_bytes()?;
    let (src, sk) = c.src_start()?;
    let (dst, dk) = c.dst_start()?;
    // A host side, or a unified one that may be host memory.
    let host = |k: u32| k != CU_MEMORYTYPE_DEVICE;
    let s = if host(sk) { src } else { 0 };
    let d = if host(dk) { dst } else { 0 };
    Some(([(s, Direction::Read), (d, Direction::Write)], bytes))
}

/// Reads the program's descriptor.
///
/// # Safety
/// `p` is null or points to a `CUDA_MEMCPY2D` (the driver function's contract).
unsafe fn read(p: *const c_void) -> Option<CUDA_MEMCPY2D> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null, and the program passes a CUDA_MEMCPY2D under the call's contract.
    Some(unsafe { p.cast::<CUDA_MEMCPY2D>().read_unaligned() })
}

/// Before `cuMemcpy2DAsync_v2(_ptsz)`: `None` (the copy always goes ahead).
///
/// # Safety
/// `p` is null or points to a `CUDA_MEMCPY2D`.
pub unsafe fn pre_copy_2d(id: HookId, p: *const c_void, stream: CUstream) -> Option<CUresult> {
    if !on() {
        return None;
    }
    // SAFETY: as this function's contract.
    let (s, bytes) = unsafe { read(p) }.as_ref().and_then(sides)?;
    if s.iter().any(|&(a, _)| a != 0 && maybe_pinned(a)) {
        let live: Vec<(u64, Direction)> = s.iter().copied().filter(|&(a, _)| a != 0).collect();
        check_copy(id, &live, bytes, stream);
    }
    None
}

/// After a successful `cuMemcpy2DAsync_v2(_ptsz)`: its accesses are pending.
///
/// # Safety
/// `p` is null or points to a `CUDA_MEMCPY2D`.
pub unsafe fn ok_copy_2d(_id: HookId, p: *const c_void) {
    if !on() {
        return;
    }
    // SAFETY: as this function's contract.
    if let Some((s, _)) = unsafe { read(p) }.as_ref().and_then(sides) {
        ok_copy(s[0].0, s[1].0);
    }
}
