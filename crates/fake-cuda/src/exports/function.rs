//! Kernels: `cuFuncGetAttribute`, `cuFuncSetAttribute`,
//! `cuOccupancyMaxActiveBlocksPerMultiprocessor`. Any non-null `CUfunction` is a kernel;
//! its attributes are modelled in [`crate::launch`]. The device is the current context's
//! (201/709 without a live one).

use std::ffi::c_int;

use seedance_cuda::{CUfunction, CUresult};

use super::non_null;
use crate::global::{call_driver, current};
use crate::launch::{occupancy, LaunchLimits};

/// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
pub const FUNC_MAX_THREADS_PER_BLOCK: c_int = 0;
/// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`.
pub const FUNC_SHARED_SIZE_BYTES: c_int = 1;
/// `CU_FUNC_ATTRIBUTE_NUM_REGS`.
pub const FUNC_NUM_REGS: c_int = 4;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
pub const FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT: c_int = 9;
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
pub const FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: c_int = 14;

/// `cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)`: attributes
/// 0 (max threads per block), 1 (static shared, 0), 2 and 3 (0), 4 (registers), 5 and 6
/// (90), 7 (0), 8 (max dynamic shared), 9 (-1), 10 to 13 (0), 14 (non-portable cluster
/// size allowed), 15 (0); `INVALID_HANDLE` for a null function, `INVALID_VALUE` for other
/// attributes.
///
/// # Safety
///
/// `pi` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: c_int,
    hfunc: CUfunction,
) -> CUresult {
    call_driver(
        "cuFuncGetAttribute",
        || format!("attrib={attrib} f={:#x}", hfunc as usize),
        |d| {
            non_null(&[pi.cast()])?;
            let device = d.ctx_device(current())?;
            if hfunc.is_null() {
                return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
            }
            let f = d.func_limits(hfunc as usize, device);
            let clamp = |v: u64| c_int::try_from(v).unwrap_or(c_int::MAX);
            let v = match attrib {
                FUNC_MAX_THREADS_PER_BLOCK => clamp(f.max_threads),
                FUNC_SHARED_SIZE_BYTES => clamp(f.static_shared),
                FUNC_NUM_REGS => clamp(f.num_regs),
                5 | 6 => 90,
                FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES => clamp(f.max_dynamic_shared),
                FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT => -1,
                FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED => c_int::from(f.non_portable_cluster),
                2 | 3 | 7 | 10..=13 | 15 => 0,
                _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
            };
            // SAFETY: non-null, and the caller guarantees it points to a writable int.
            unsafe { pi.write(v) };
            Ok(())
        },
    )
}

/// `cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)`:
/// attribute 8 (max dynamic shared memory, `0..=` the device's opt-in maximum minus the
/// static shared memory), 14 (non-portable cluster size allowed, 0 or 1) and 9 (carveout,
/// -1 to 100, ignored); anything else is `INVALID_VALUE`.
///
/// # Safety
///
/// None: the function handle is only used as a key.
#[no_mangle]
pub unsafe extern "C" fn cuFuncSetAttribute(
    hfunc: CUfunction,
    attrib: c_int,
    value: c_int,
) -> CUresult {
    call_driver(
        "cuFuncSetAttribute",
        || format!("f={:#x} attrib={attrib} value={value}", hfunc as usize),
        |d| {
            let device = d.ctx_device(current())?;
            if hfunc.is_null() {
                return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
            }
            let limits = LaunchLimits::of(d.device_at(device));
            let static_shared = d.func_limits(hfunc as usize, device).static_shared;
            let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            match attrib {
                FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES => {
                    let Ok(v) = u64::try_from(value) else {
                        return invalid;
                    };
                    if v + static_shared > limits.max_shared_mem_optin {
                        return invalid;
                    }
                    d.func_settings(hfunc as usize).max_dynamic_shared = Some(v);
                }
                FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED if value == 0 || value == 1 => {
                    d.func_settings(hfunc as usize).non_portable_cluster = value == 1;
                }
                FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT if (-1..=100).contains(&value) => {}
                _ => return invalid,
            }
            Ok(())
        },
    )
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
/// int blockSize, size_t dynamicSMemSize)`: blocks resident per SM (see
/// [`crate::launch::occupancy`]); `blockSize <= 0` is `INVALID_VALUE`.
///
/// # Safety
///
/// `num_blocks` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    num_blocks: *mut c_int,
    func: CUfunction,
    block_size: c_int,
    dynamic_smem_size: usize,
) -> CUresult {
    call_driver(
        "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        || {
            format!(
                "f={:#x} block={block_size} shmem={dynamic_smem_size}",
                func as usize
            )
        },
        |d| {
            non_null(&[num_blocks.cast()])?;
            let device = d.ctx_device(current())?;
            if func.is_null() {
                return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
            }
            let Ok(threads) = u64::try_from(block_size) else {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            };
            if threads == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let f = d.func_limits(func as usize, device);
            let n = occupancy(&f, threads, dynamic_smem_size as u64);
            // SAFETY: non-null, and the caller guarantees it points to a writable int.
            unsafe { num_blocks.write(n as c_int) };
            Ok(())
        },
    )
}
