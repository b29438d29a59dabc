//! How the shim finds the driver entry points it calls itself: each is looked up once, by
//! name, in the library that holds the real `cuInit`, and found again when a slot moves to
//! another library (`crate::driver::real::generation`).

use crate::driver::real::Here;
use libc::c_void;
use seedance_cuda::CUresult;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A real driver entry point, looked up on first use: 0 = not yet, 1 = missing.
pub(super) struct RealFn {
    name: &'static CStr,
    addr: AtomicUsize,
    /// `real::generation()` when `addr` was found (plus one; 0 = never).
    found_in: AtomicUsize,
}

impl RealFn {
    const fn new(name: &'static CStr) -> RealFn {
        RealFn {
            name,
            addr: AtomicUsize::new(0),
            found_in: AtomicUsize::new(0),
        }
    }

    /// The entry point, `None` when the driver lacks it (or no driver is loaded). Under a
    /// [`crate::driver::real::hold_driver`] on this thread, the entry point of the held
    /// library, looked up in it now (never the shared cache, which may point into another
    /// copy), or `None` when the hold found no driver.
    pub(super) fn get(&self) -> Option<*mut c_void> {
        match crate::driver::real::held_here() {
            Here::Anywhere => self.cached(),
            Here::Nowhere => None,
            Here::In(h) => {
                let p = crate::platform::lookup(h, self.name);
                (!p.is_null()).then_some(p)
            }
        }
    }

    /// The entry point from the shared cache, looked up again when a slot moved.
    fn cached(&self) -> Option<*mut c_void> {
        let generation = crate::driver::real::generation() + 1;
        if self.found_in.load(Ordering::Acquire) != generation {
            // A slot moved to another library since: look this one up there again.
            self.addr.store(0, Ordering::Release);
            self.found_in.store(generation, Ordering::Release);
        }
        match self.addr.load(Ordering::Acquire) {
            0 => {
                let anchor = crate::driver::real::anchor();
                if anchor.is_null() {
                    return None;
                }
                let p = crate::driver::real::sibling(anchor, self.name);
                let v = if p.is_null() { 1 } else { p as usize };
                self.addr.store(v, Ordering::Release);
                (v > 1).then_some(p)
            }
            1 => None,
            p => Some(p as *mut c_void),
        }
    }
}

macro_rules! real_fns {
    ($($(#[$m:meta])* $id:ident = $name:literal;)*) => {
        $( $(#[$m])* pub(super) static $id: RealFn = RealFn::new($name); )*
    };
}

real_fns! {
    CTX_GET_DEVICE = c"cuCtxGetDevice";
    CTX_GET_CURRENT = c"cuCtxGetCurrent";
    STREAM_GET_CTX = c"cuStreamGetCtx";
    DEVICE_GET_ATTRIBUTE = c"cuDeviceGetAttribute";
    DEVICE_GET_NAME = c"cuDeviceGetName";
    DEVICE_GET_PCI_BUS_ID = c"cuDeviceGetPCIBusId";
    DEVICE_GET_UUID = c"cuDeviceGetUuid_v2";
    DEVICE_TOTAL_MEM = c"cuDeviceTotalMem_v2";
    FUNC_GET_ATTRIBUTE = c"cuFuncGetAttribute";
    OCCUPANCY = c"cuOccupancyMaxActiveBlocksPerMultiprocessor";
    MEM_GET_INFO = c"cuMemGetInfo_v2";
    DEVICE_GET_COUNT = c"cuDeviceGetCount";
    DEVICE_GET = c"cuDeviceGet";
    DRIVER_GET_VERSION = c"cuDriverGetVersion";
    PRIMARY_RETAIN = c"cuDevicePrimaryCtxRetain";
    PRIMARY_RELEASE = c"cuDevicePrimaryCtxRelease_v2";
    POINTER_GET_ATTRIBUTE = c"cuPointerGetAttribute";
    GRANULARITY = c"cuMemGetAllocationGranularity";
    LOGS_REGISTER = c"cuLogsRegisterCallback";
    STREAM_QUERY = c"cuStreamQuery";
    STREAM_SYNCHRONIZE = c"cuStreamSynchronize";
    CTX_SYNCHRONIZE = c"cuCtxSynchronize";
    CTX_PUSH = c"cuCtxPushCurrent_v2";
    CTX_POP = c"cuCtxPopCurrent_v2";
    PRIMARY_STATE = c"cuDevicePrimaryCtxGetState";
    EVENT_CREATE = c"cuEventCreate";
    EVENT_RECORD = c"cuEventRecord";
    STREAM_WAIT_EVENT = c"cuStreamWaitEvent";
    STREAM_GET_FLAGS = c"cuStreamGetFlags";
    // The host-write guard is Linux-only (it reads through process_vm_readv).
    #[cfg(target_os = "linux")]
    EVENT_QUERY = c"cuEventQuery";
    // The host-write guard is Linux-only (it reads through process_vm_readv).
    #[cfg(target_os = "linux")]
    EVENT_DESTROY = c"cuEventDestroy_v2";
    // The host-write guard is Linux-only (it reads through process_vm_readv).
    #[cfg(target_os = "linux")]
    STREAM_IS_CAPTURING = c"cuStreamIsCapturing";
    // The host-write guard is Linux-only (it reads through process_vm_readv).
    #[cfg(target_os = "linux")]
    MEM_HOST_ALLOC = c"cuMemHostAlloc";
}

/// Reinterprets a looked-up address as the function type `F`.
///
/// # Safety
/// `p` must be the driver function whose C signature `F` spells.
pub(super) unsafe fn typed<F: Copy>(p: *mut c_void) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: F is a function-pointer type of pointer size, per the caller's contract.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

/// `Ok` for `CUDA_SUCCESS`, else the code.
pub(super) fn result(r: CUresult) -> Result<(), CUresult> {
    if r.is_success() {
        Ok(())
    } else {
        Err(r)
    }
}
