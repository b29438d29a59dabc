//! Direct calls to the real driver made by the shim itself (never through our wrappers, so
//! they are not counted): the device list for the session record, the topology and the
//! device-fault explanations; the launch and allocation explanations; the lifetime checks
//! and repairs. Used on the failure path, before a call only with `SEEDANCE_VALIDATE=pre`,
//! once at initialisation (session record, `cuLogsRegisterCallback`), and by
//! [`crate::faults::lifetime`] at a context destroy or reset, a free of pinned or stream-ordered
//! memory, and exit.
//!
//! Each entry point is looked up once, by name, in the library that holds the real
//! `cuInit`, and remembered; an entry point the driver lacks
//! (an older driver) makes its query return `None`, so the explanation leaves that fact out.

use crate::hooks::slots;
use libc::{c_int, c_void};
use seedance_cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmemAllocationProp, CUresult, CUstream,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A real driver entry point, looked up on first use: 0 = not yet, 1 = missing.
struct RealFn {
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

    fn get(&self) -> Option<*mut c_void> {
        let generation = crate::driver::real::generation() + 1;
        if self.found_in.load(Ordering::Acquire) != generation {
            // A slot moved to another library since: look this one up there again.
            self.addr.store(0, Ordering::Release);
            self.found_in.store(generation, Ordering::Release);
        }
        match self.addr.load(Ordering::Acquire) {
            0 => {
                let anchor = slots::cuInit.get();
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
    ($($id:ident = $name:literal;)*) => {
        $( static $id: RealFn = RealFn::new($name); )*
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
}

/// Reinterprets a looked-up address as the function type `F`.
///
/// # Safety
/// `p` must be the driver function whose C signature `F` spells.
unsafe fn typed<F: Copy>(p: *mut c_void) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: F is a function-pointer type of pointer size, per the caller's contract.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn result(r: CUresult) -> Result<(), CUresult> {
    if r.is_success() {
        Ok(())
    } else {
        Err(r)
    }
}

/// `cuCtxGetDevice`: the current context's device; the driver's code when there is no
/// usable current context (201 none, 709 destroyed), `CUDA_ERROR_NOT_FOUND` without the
/// entry point.
pub fn ctx_get_device() -> Result<CUdevice, CUresult> {
    type F = unsafe extern "C" fn(*mut CUdevice) -> CUresult;
    let p = CTX_GET_DEVICE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxGetDevice.
    let f: F = unsafe { typed(p) };
    let mut d: CUdevice = -1;
    // SAFETY: d is a valid out-pointer.
    result(unsafe { f(&mut d) }).map(|()| d)
}

/// `cuCtxGetCurrent`: the calling thread's current context handle, 0 for none.
pub fn ctx_get_current() -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
    let p = CTX_GET_CURRENT
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxGetCurrent.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a valid out-pointer.
    result(unsafe { f(&mut c) }).map(|()| c as usize)
}

/// `cuStreamGetCtx`: the context a stream belongs to.
pub fn stream_get_ctx(stream: CUstream) -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult;
    let p = STREAM_GET_CTX.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamGetCtx.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a valid out-pointer; the stream handle is only passed on.
    result(unsafe { f(stream, &mut c) }).map(|()| c as usize)
}

/// `cuDeviceGetAttribute(attrib, dev)`, `None` if it fails.
pub fn device_attribute(attrib: i32, dev: CUdevice) -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    let p = DEVICE_GET_ATTRIBUTE.get()?;
    // SAFETY: p is cuDeviceGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, attrib, dev) }.is_success().then_some(v)
}

/// `cuDeviceTotalMem_v2(dev)`, bytes.
pub fn device_total_mem(dev: CUdevice) -> Option<u64> {
    type F = unsafe extern "C" fn(*mut usize, CUdevice) -> CUresult;
    let p = DEVICE_TOTAL_MEM.get()?;
    // SAFETY: p is cuDeviceTotalMem_v2.
    let f: F = unsafe { typed(p) };
    let mut v: usize = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, dev) }.is_success().then_some(v as u64)
}

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

/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)`: the device of a live
/// allocation; the driver's code for an address that is not (or no longer) allocated.
pub fn pointer_device(ptr: CUdeviceptr) -> Result<i32, CUresult> {
    type F = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
    let p = POINTER_GET_ATTRIBUTE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuPointerGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut d: c_int = -1;
    // SAFETY: d is an int, the type of this attribute.
    let r = unsafe {
        f(
            (&mut d as *mut c_int).cast(),
            seedance_cuda::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    result(r).map(|()| d)
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

/// `CUlogsCallback`: `void (*)(void *data, CUlogLevel logLevel, char *message, size_t length)`.
pub type LogsCallback = unsafe extern "C" fn(*mut c_void, c_int, *mut libc::c_char, usize);

/// `cuLogsRegisterCallback(callback, NULL, &handle)` (CUDA 12.9+); `None` when the driver
/// lacks it, else what it returned.
pub fn logs_register(callback: LogsCallback) -> Option<CUresult> {
    type F = unsafe extern "C" fn(LogsCallback, *mut c_void, *mut *mut c_void) -> CUresult;
    let p = LOGS_REGISTER.get()?;
    // SAFETY: p is cuLogsRegisterCallback.
    let f: F = unsafe { typed(p) };
    let mut handle: *mut c_void = std::ptr::null_mut();
    // SAFETY: callback is a valid function for the life of the process; handle is a valid
    // out-pointer.
    Some(unsafe { f(callback, std::ptr::null_mut(), &mut handle) })
}

/// `cuStreamQuery(stream)`: `Ok(true)` while work is pending (`CUDA_ERROR_NOT_READY`),
/// `Ok(false)` when idle, the driver's code otherwise.
pub fn stream_busy(stream: CUstream) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUstream) -> CUresult;
    let p = STREAM_QUERY.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamQuery.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    match unsafe { f(stream) } {
        CUresult::CUDA_SUCCESS => Ok(false),
        CUresult::CUDA_ERROR_NOT_READY => Ok(true),
        r => Err(r),
    }
}

/// `cuEventCreate(&e, flags)` in the calling thread's current context: the shim's own
/// event for ordering two streams ([`crate::faults::hazard`]).
pub fn event_create(flags: u32) -> Result<CUevent, CUresult> {
    type F = unsafe extern "C" fn(*mut CUevent, u32) -> CUresult;
    let p = EVENT_CREATE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventCreate.
    let f: F = unsafe { typed(p) };
    let mut e: CUevent = std::ptr::null_mut();
    // SAFETY: e is a valid out-pointer.
    result(unsafe { f(&mut e, flags) }).map(|()| e)
}

/// `cuEventRecord(event, stream)` (the legacy-default-stream variant).
pub fn event_record(event: CUevent, stream: CUstream) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUevent, CUstream) -> CUresult;
    let p = EVENT_RECORD.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuEventRecord.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handles are only passed on.
    result(unsafe { f(event, stream) })
}

/// `cuStreamWaitEvent(stream, event, 0)` (the legacy-default-stream variant).
pub fn stream_wait_event(stream: CUstream, event: CUevent) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUstream, CUevent, u32) -> CUresult;
    let p = STREAM_WAIT_EVENT
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamWaitEvent.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handles are only passed on.
    result(unsafe { f(stream, event, 0) })
}

/// Looks up, now, the entry points the host-write guard's signal handler calls
/// (`cuStreamQuery`, `cuStreamSynchronize`, `cuCtxGetCurrent`, `cuCtxPushCurrent_v2`,
/// `cuCtxPopCurrent_v2`), so that the handler never runs the look-up (`dlsym`) itself.
/// Linux only, as the guard is (`shim/src/faults/hostguard.rs`).
#[cfg(target_os = "linux")]
pub fn resolve_for_signal_handler() {
    for f in [
        &STREAM_QUERY,
        &STREAM_SYNCHRONIZE,
        &CTX_GET_CURRENT,
        &CTX_PUSH,
        &CTX_POP,
    ] {
        let _ = f.get();
    }
}

/// `cuStreamSynchronize(stream)` (the legacy-default-stream variant).
pub fn stream_synchronize(stream: CUstream) -> Result<(), CUresult> {
    type F = unsafe extern "C" fn(CUstream) -> CUresult;
    let p = STREAM_SYNCHRONIZE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuStreamSynchronize.
    let f: F = unsafe { typed(p) };
    // SAFETY: the handle is only passed on.
    result(unsafe { f(stream) })
}

/// `cuCtxSynchronize()`: waits for the calling thread's current context.
pub fn ctx_synchronize() -> Result<(), CUresult> {
    type F = unsafe extern "C" fn() -> CUresult;
    let p = CTX_SYNCHRONIZE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuCtxSynchronize, which takes no arguments.
    let f: F = unsafe { typed(p) };
    // SAFETY: no arguments.
    result(unsafe { f() })
}

/// Runs `f` with `ctx` current on the calling thread (`cuCtxPushCurrent_v2` and
/// `cuCtxPopCurrent_v2` around it unless it is current already); the push's code if it
/// fails.
pub fn with_context<T>(ctx: usize, f: impl FnOnce() -> T) -> Result<T, CUresult> {
    if ctx_get_current() == Ok(ctx) {
        return Ok(f());
    }
    type Push = unsafe extern "C" fn(CUcontext) -> CUresult;
    type Pop = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
    let push = CTX_PUSH.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    let pop = CTX_POP.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: push and pop are cuCtxPushCurrent_v2 and cuCtxPopCurrent_v2.
    let (push, pop): (Push, Pop) = unsafe { (typed(push), typed(pop)) };
    // SAFETY: the handle is only passed on.
    result(unsafe { push(ctx as CUcontext) })?;
    let out = f();
    let mut popped: CUcontext = std::ptr::null_mut();
    // SAFETY: popped is a valid out-pointer.
    let _ = unsafe { pop(&mut popped) };
    Ok(out)
}

/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_CONTEXT, ptr)`: the context of a live
/// allocation; the driver's code for an address it no longer knows.
pub fn pointer_context(ptr: CUdeviceptr) -> Result<usize, CUresult> {
    type F = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
    let p = POINTER_GET_ATTRIBUTE
        .get()
        .ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuPointerGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: c is a CUcontext, the type of this attribute.
    let r = unsafe {
        f(
            (&mut c as *mut CUcontext).cast(),
            seedance_cuda::CU_POINTER_ATTRIBUTE_CONTEXT,
            ptr,
        )
    };
    result(r).map(|()| c as usize)
}

/// `cuDevicePrimaryCtxGetState(dev)`: whether the device's primary context is active.
pub fn primary_active(dev: CUdevice) -> Result<bool, CUresult> {
    type F = unsafe extern "C" fn(CUdevice, *mut libc::c_uint, *mut c_int) -> CUresult;
    let p = PRIMARY_STATE.get().ok_or(CUresult::CUDA_ERROR_NOT_FOUND)?;
    // SAFETY: p is cuDevicePrimaryCtxGetState.
    let f: F = unsafe { typed(p) };
    let (mut flags, mut active): (libc::c_uint, c_int) = (0, 0);
    // SAFETY: both are valid out-pointers.
    result(unsafe { f(dev, &mut flags, &mut active) }).map(|()| active != 0)
}

/// What the driver says about one visible device.
#[derive(Debug, Clone, Default)]
pub struct DeviceFacts {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: Option<String>,
    /// `cuDeviceGetPCIBusId`, lower-cased (`0000:1a:00.0`).
    pub pci_bus_id: Option<String>,
    /// `cuDeviceGetUuid_v2`, as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: Option<String>,
    /// `cuDeviceTotalMem_v2`, bytes.
    pub total_mem_bytes: Option<u64>,
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`: 0 default, 2 prohibited, 3 exclusive process.
    pub compute_mode: Option<i32>,
}

/// `cuDeviceGetCount` through the real driver; `None` if it fails (e.g. before `cuInit`).
pub fn device_count() -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = slots::cuDeviceGetCount.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDeviceGetCount.
    let f: F = unsafe { typed(p) };
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-pointer.
    unsafe { f(&mut n) }.is_success().then_some(n)
}

/// `cuDeviceGet` through the real driver.
pub fn device_handle(ordinal: i32) -> Option<CUdevice> {
    type F = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
    let p = slots::cuDeviceGet.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDeviceGet.
    let f: F = unsafe { typed(p) };
    let mut d: CUdevice = 0;
    // SAFETY: d is a valid out-pointer.
    unsafe { f(&mut d, ordinal) }.is_success().then_some(d)
}

/// `cuDevicePrimaryCtxRetain(pctx, dev)` on the real driver, uncounted; `None` when the
/// driver lacks it.
pub fn primary_retain(pctx: *mut seedance_cuda::CUcontext, dev: CUdevice) -> Option<CUresult> {
    type F = unsafe extern "C" fn(*mut seedance_cuda::CUcontext, CUdevice) -> CUresult;
    let p = slots::cuDevicePrimaryCtxRetain.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDevicePrimaryCtxRetain.
    let f: F = unsafe { typed(p) };
    // SAFETY: pctx is the program's own out-pointer, under the same contract.
    Some(unsafe { f(pctx, dev) })
}

/// `cuDevicePrimaryCtxRelease_v2(dev)` on the real driver, uncounted; `None` when the
/// driver lacks it.
pub fn primary_release(dev: CUdevice) -> Option<CUresult> {
    type F = unsafe extern "C" fn(CUdevice) -> CUresult;
    let p = slots::cuDevicePrimaryCtxRelease_v2.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDevicePrimaryCtxRelease_v2.
    let f: F = unsafe { typed(p) };
    // SAFETY: no pointer argument.
    Some(unsafe { f(dev) })
}

/// The ordinal of a `CUdevice` handle: the ordinal whose `cuDeviceGet` returns it. On every
/// driver we know the handle equals the ordinal; this does not rely on it.
pub fn ordinal_of(handle: CUdevice) -> Option<i32> {
    let n = device_count()?;
    (0..n).find(|&o| device_handle(o) == Some(handle))
}

/// `cuDriverGetVersion` through the real driver. A fork waits for it to end
/// ([`crate::rt::session::hold_fork`]).
pub fn driver_version() -> Option<i32> {
    let _hold = crate::rt::session::hold_fork();
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = slots::cuDriverGetVersion.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDriverGetVersion.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v) }.is_success().then_some(v)
}

/// A `(char *buf, int len, CUdevice)` text query (`cuDeviceGetName`, `cuDeviceGetPCIBusId`).
fn device_text(f: &RealFn, dev: CUdevice) -> Option<String> {
    type F = unsafe extern "C" fn(*mut libc::c_char, c_int, CUdevice) -> CUresult;
    let p = f.get()?;
    // SAFETY: p is one of the two text queries, whose signature F spells.
    let f: F = unsafe { typed(p) };
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: buf is writable for 256 bytes and we pass that length.
    if !unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) }.is_success() {
        return None;
    }
    buf[255] = 0;
    // SAFETY: buf is NUL-terminated (forced above).
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `cuDeviceGetUuid_v2(dev)` in the `GPU-...` form nvidia-smi and `CUDA_VISIBLE_DEVICES` use.
fn device_uuid(dev: CUdevice) -> Option<String> {
    type F = unsafe extern "C" fn(*mut [u8; 16], CUdevice) -> CUresult;
    let p = DEVICE_GET_UUID.get()?;
    // SAFETY: p is cuDeviceGetUuid_v2 (CUuuid is 16 bytes).
    let f: F = unsafe { typed(p) };
    let mut u = [0u8; 16];
    // SAFETY: u is 16 writable bytes.
    unsafe { f(&mut u, dev) }
        .is_success()
        .then(|| seedance_topology::model::format_uuid(&u))
}

/// Facts about every visible device; empty if the driver is not initialised. A fork waits
/// for the whole burst of queries to end ([`crate::rt::session::hold_fork`]).
pub fn devices() -> Vec<DeviceFacts> {
    // The session record's thread runs this while the program may fork.
    let _hold = crate::rt::session::hold_fork();
    let Some(n) = device_count() else {
        return Vec::new();
    };
    (0..n)
        .filter_map(|ordinal| {
            let dev = device_handle(ordinal)?;
            Some(DeviceFacts {
                ordinal,
                name: device_text(&DEVICE_GET_NAME, dev),
                pci_bus_id: device_text(&DEVICE_GET_PCI_BUS_ID, dev)
                    .map(|s| s.to_ascii_lowercase()),
                uuid: device_uuid(dev),
                total_mem_bytes: device_total_mem(dev),
                compute_mode: device_attribute(seedance_cuda::attr::COMPUTE_MODE, dev),
            })
        })
        .collect()
}
