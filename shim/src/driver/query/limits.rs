//! The limits the launch and allocation explanations compare a request with: a kernel's
//! attributes and occupancy, free memory, allocation granularity.

use super::entry::{typed, FUNC_GET_ATTRIBUTE, GRANULARITY, MEM_GET_INFO, OCCUPANCY};
use libc::c_int;
use seedance_cuda::{CUfunction, CUmemAllocationProp, CUresult};

/// `cuFuncGetAttribute(attrib, f)`, `None` if it fails.
pub fn func_attribute(attrib: i32, func: CUfunction) -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, CUfunction) -> CUresult;
    if func.is_null() {
        return None;
    }
    let p = FUNC_GET_ATTRIBUTE.get()?;
    // SAFETY: p is cuFuncGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer; the function handle is the program's own.
    unsafe { f(&mut v, attrib, func) }.is_success().then_some(v)
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: blocks of `func` resident per SM with
/// `threads` threads and `dyn_shared` bytes of dynamic shared memory per block.
pub fn occupancy(func: CUfunction, threads: u64, dyn_shared: u32) -> Option<u32> {
    type F = unsafe extern "C" fn(*mut c_int, CUfunction, c_int, usize) -> CUresult;
    let threads = c_int::try_from(threads).ok()?;
    if func.is_null() {
        return None;
    }
    let p = OCCUPANCY.get()?;
    // SAFETY: p is cuOccupancyMaxActiveBlocksPerMultiprocessor.
    let f: F = unsafe { typed(p) };
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-pointer.
    let ok = unsafe { f(&mut n, func, threads, dyn_shared as usize) }.is_success();
    ok.then(|| u32::try_from(n).unwrap_or(0))
}

/// `cuMemGetInfo_v2`: `(free, total)` bytes of the current context's device.
pub fn mem_get_info() -> Option<(u64, u64)> {
    type F = unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult;
    let p = MEM_GET_INFO.get()?;
    // SAFETY: p is cuMemGetInfo_v2.
    let f: F = unsafe { typed(p) };
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both are valid out-pointers.
    unsafe { f(&mut free, &mut total) }
        .is_success()
        .then_some((free as u64, total as u64))
}

/// `cuMemGetAllocationGranularity(prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)`, bytes.
pub fn allocation_granularity(prop: &CUmemAllocationProp) -> Option<u64> {
    type F = unsafe extern "C" fn(*mut usize, *const CUmemAllocationProp, c_int) -> CUresult;
    let p = GRANULARITY.get()?;
    // SAFETY: p is cuMemGetAllocationGranularity.
    let f: F = unsafe { typed(p) };
    let mut g: usize = 0;
    // SAFETY: g is a valid out-pointer; prop is a valid reference.
    unsafe { f(&mut g, prop, 0) }
        .is_success()
        .then_some(g as u64)
}
