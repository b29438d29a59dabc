//! The `extern "C"` entry points, with the exact `cuda.h` (CUDA 13.0) ABIs, grouped by area.
//!
//! Each one runs its body through [`crate::global::call`] or [`crate::global::call_driver`]
//! (stub mode, initialisation check, panic guard, call recorder). Entry points never call
//! each other: shared logic lives in plain Rust functions, so an `LD_PRELOAD` interposer
//! that defines the same names is never re-entered from inside this library.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};

use seedance_cuda::CUresult;

pub mod capture;
pub mod context;
pub mod copy;
pub mod device;
pub mod event;
pub mod function;
pub mod init;
pub mod launch;
pub mod logs;
pub mod memory;
pub mod ops;
pub mod procaddr;
pub mod stream;

pub use capture::*;
pub use context::*;
pub use copy::*;
pub use device::*;
pub use event::*;
pub use function::*;
pub use init::*;
pub use launch::*;
pub use logs::*;
pub use memory::*;
pub use ops::*;
pub use procaddr::*;
pub use stream::*;

macro_rules! export_table {
    ($($f:ident),* $(,)?) => {
        /// Every exported entry point's symbol name.
        pub const EXPORTED: &[&str] = &[$(stringify!($f)),*];

        /// The address of this library's exported function `name` (what
        /// `dlsym(handle, name)` returns), `None` for a name not exported.
        pub fn address_of(name: &str) -> Option<*mut c_void> {
            match name {
                $(stringify!($f) => Some($f as *mut c_void),)*
                _ => None,
            }
        }
    };
}

export_table![
    cuInit,
    cuDriverGetVersion,
    cuDeviceGet,
    cuDeviceGetCount,
    cuDeviceGetName,
    cuDeviceGetAttribute,
    cuDeviceGetPCIBusId,
    cuDeviceTotalMem_v2,
    cuDeviceGetUuid,
    cuDeviceGetUuid_v2,
    cuCtxCreate_v2,
    cuCtxCreate_v3,
    cuCtxCreate_v4,
    cuCtxDestroy,
    cuCtxDestroy_v2,
    cuDevicePrimaryCtxRetain,
    cuDevicePrimaryCtxRelease,
    cuDevicePrimaryCtxRelease_v2,
    cuDevicePrimaryCtxReset,
    cuDevicePrimaryCtxReset_v2,
    cuCtxSetCurrent,
    cuCtxGetCurrent,
    cuCtxGetDevice,
    cuCtxSynchronize,
    cuCtxSynchronize_v2,
    cuMemAlloc_v2,
    cuMemAllocPitch_v2,
    cuMemAllocAsync,
    cuMemAllocAsync_ptsz,
    cuMemFree_v2,
    cuMemGetInfo_v2,
    cuMemHostAlloc,
    cuMemFreeHost,
    cuLaunchKernel,
    cuLaunchKernel_ptsz,
    cuLaunchKernelEx,
    cuLaunchKernelEx_ptsz,
    cuStreamSynchronize,
    cuStreamSynchronize_ptsz,
    cuGetProcAddress,
    cuGetProcAddress_v2,
    cuGetErrorName,
    cuGetErrorString,
    cuLaunchCooperativeKernel,
    cuLaunchCooperativeKernel_ptsz,
    cuFuncGetAttribute,
    cuFuncSetAttribute,
    cuOccupancyMaxActiveBlocksPerMultiprocessor,
    cuStreamCreate,
    cuStreamDestroy_v2,
    cuStreamGetCtx,
    cuMemAllocManaged,
    cuMemFreeAsync,
    cuMemFreeAsync_ptsz,
    cuMemCreate,
    cuMemRelease,
    cuMemGetAllocationGranularity,
    cuPointerGetAttribute,
    cuLogsRegisterCallback,
    cuLogsUnregisterCallback,
    cuStreamCreateWithPriority,
    cuStreamGetFlags,
    cuMemsetD8_v2,
    cuStreamQuery,
    cuStreamQuery_ptsz,
    cuStreamWaitEvent,
    cuStreamWaitEvent_ptsz,
    cuEventCreate,
    cuEventDestroy_v2,
    cuEventRecord,
    cuEventRecord_ptsz,
    cuEventRecordWithFlags,
    cuEventRecordWithFlags_ptsz,
    cuCtxRecordEvent,
    cuCtxWaitEvent,
    fakeEventRecordUnseen,
    cuStreamBeginCapture_v2,
    cuStreamBeginCapture_v2_ptsz,
    cuStreamEndCapture,
    cuStreamEndCapture_ptsz,
    cuStreamWaitValue32_v2,
    cuStreamWaitValue32_v2_ptsz,
    cuStreamWriteValue32_v2,
    cuStreamWriteValue32_v2_ptsz,
    cuMemcpy2DAsync_v2,
    cuMemcpy2DAsync_v2_ptsz,
    cuEventSynchronize,
    cuEventQuery,
    cuMemcpyHtoDAsync_v2,
    cuMemcpyHtoDAsync_v2_ptsz,
    cuMemcpyDtoHAsync_v2,
    cuMemcpyDtoHAsync_v2_ptsz,
    cuMemcpyAsync,
    cuMemcpyAsync_ptsz,
    cuMemcpyHtoD_v2,
    cuMemcpyDtoH_v2,
    cuMemAllocHost_v2,
    cuMemHostRegister_v2,
    cuMemHostUnregister,
    cuCtxPushCurrent_v2,
    cuCtxPopCurrent_v2,
    cuDevicePrimaryCtxGetState,
    cuMemsetD8Async,
    cuMemsetD8Async_ptsz,
    cuMemsetD16Async,
    cuMemsetD16Async_ptsz,
    cuMemsetD32Async,
    cuMemsetD32Async_ptsz,
    cuMemsetD2D8Async,
    cuMemsetD2D8Async_ptsz,
    cuMemsetD2D16Async,
    cuMemsetD2D16Async_ptsz,
    cuMemsetD2D32Async,
    cuMemsetD2D32Async_ptsz,
    cuGraphLaunch,
    cuGraphLaunch_ptsz,
    cuLaunchHostFunc,
    cuLaunchHostFunc_ptsz,
];

/// `Err(CUDA_ERROR_INVALID_VALUE)` when any of the pointers is null.
pub(crate) fn non_null(ptrs: &[*const c_void]) -> Result<(), CUresult> {
    if ptrs.iter().any(|p| p.is_null()) {
        Err(CUresult::CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// Copies `s` into the caller's buffer `dst` of `len` bytes, truncating, always
/// NUL-terminating (as the driver does for names and PCI ids). `INVALID_VALUE` for a null
/// buffer or `len <= 0`.
///
/// # Safety
///
/// `dst` must be null or valid for writes of `len` bytes.
pub(crate) unsafe fn copy_c_string(dst: *mut c_char, len: i32, s: &str) -> Result<(), CUresult> {
    let Ok(len) = usize::try_from(len) else {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    if dst.is_null() || len == 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let n = s.len().min(len - 1);
    // SAFETY: `dst` is non-null and the caller guarantees `len` writable bytes; we write
    // `n + 1 <= len` bytes from a source that does not overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), n);
        dst.add(n).write(0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_table_is_complete() {
        assert_eq!(EXPORTED.len(), 118);
        for name in EXPORTED {
            assert!(address_of(name).is_some_and(|p| !p.is_null()), "{name}");
        }
        assert_eq!(address_of("cuMemAlloc"), None);
        assert_eq!(
            address_of("cuMemAlloc_v2"),
            Some(cuMemAlloc_v2 as *mut c_void)
        );
    }

    #[test]
    fn c_string_copy_truncates() {
        const BAD: Result<(), CUresult> = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        let mut buf = [0x55 as c_char; 8];
        let dst = buf.as_mut_ptr();
        // SAFETY: `buf` has 8 writable bytes.
        let r = unsafe { copy_c_string(dst, 8, "Fake H200 #0") };
        assert_eq!(r, Ok(()));
        assert_eq!(buf.map(|c| c as u8), *b"Fake H2\0");
        let dst = buf.as_mut_ptr();
        // SAFETY: as above; 3 <= 8.
        let r = unsafe { copy_c_string(dst, 3, "ab") };
        assert_eq!(r, Ok(()));
        assert_eq!(
            buf[..3].iter().map(|&c| c as u8).collect::<Vec<_>>(),
            b"ab\0"
        );
        let dst = buf.as_mut_ptr();
        // SAFETY: nothing is written for a zero or negative length.
        let r = unsafe { copy_c_string(dst, 0, "x") };
        assert_eq!(r, BAD);
        // SAFETY: as above.
        let r = unsafe { copy_c_string(dst, -1, "x") };
        assert_eq!(r, BAD);
        // SAFETY: null is checked before writing.
        let r = unsafe { copy_c_string(std::ptr::null_mut(), 4, "x") };
        assert_eq!(r, BAD);
    }
}
