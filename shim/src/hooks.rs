//! The table of hooks: one line per hooked ABI variant.
//!
//! [`hook_table!`] generates, from each line, the exported wrapper (for programs linked with
//! `-lcuda`), the [`Slot`] holding the real address, a [`HookId`], and an entry of [`TABLE`]
//! that both override paths (`dlsym` and `cuGetProcAddress`) consult. A wrapper only
//! forwards, counts, and on failure hands plain values to the session.

use crate::driver::real::Slot;
use crate::rt::args::ArgVal;
use crate::rt::{config, output};
use crate::{faults::alloc, faults::hazard, faults::launch, faults::lifetime};
use libc::{c_int, c_uchar, c_uint, c_ushort, c_void};
use seedance_cuda::*;
use std::ffi::CStr;

/// One entry of the hook table.
pub struct Hook {
    /// Base name the driver's `cuGetProcAddress` is asked for (`cuMemAlloc`).
    pub base: &'static str,
    /// Address of our wrapper for this exact ABI variant.
    pub wrapper: fn() -> *mut c_void,
    /// Where the real address lives.
    pub slot: &'static Slot,
}

macro_rules! cstr {
    ($s:expr) => {
        match CStr::from_bytes_with_nul(concat!($s, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("symbol names contain no NUL"),
        }
    };
}

/// For wrappers of calls that take a device (`device ARG: Ordinal|Handle` in the table):
/// hands a failure to [`crate::faults::devices::on_failure`] with a closure that repeats the call
/// with another device. For the others: `None`, the generic failure report.
macro_rules! device_fault {
    ($id:expr, $r:expr, (), $call:expr) => {
        None
    };
    ($id:expr, $r:expr, ($dev:ident $kind:ident), $call:expr) => {
        crate::faults::devices::on_failure(
            $id,
            $r,
            crate::faults::devices::Target::$kind($dev),
            &mut |target: crate::faults::devices::Target| {
                let $dev = target.value();
                $call
            },
        )
    };
}

/// For wrappers with a `pre(..)` clause (launch and allocation checks, issue 4): with
/// `SEEDANCE_VALIDATE=pre`, a call the check refuses returns the driver's code without
/// reaching the driver. Without the clause: nothing.
macro_rules! pre_check {
    ($id:expr, (), $args:tt) => {};
    ($id:expr, ($pre:path), ($($arg:ident),*)) => {
        // SAFETY: the program's own arguments, under the driver function's contract. The
        // check itself returns at once (one relaxed load) unless the mode is on and
        // SEEDANCE_VALIDATE=pre.
        if let Some(code) = unsafe { $pre($id, $($arg),*) } {
            output::count($id, code);
            return code;
        }
    };
}

/// For wrappers with a `fault(..)` clause: a failure the check explains is reported by it
/// (a `launch_fault` or `alloc_fault` event); otherwise `$otherwise` (the plain report).
macro_rules! fault_check {
    ($id:expr, $r:expr, (), $args:tt, $otherwise:block) => {
        $otherwise
    };
    ($id:expr, $r:expr, ($fault:path), ($($arg:ident),*), $otherwise:block) => {
        // SAFETY: the program's own arguments, under the driver function's contract.
        if !unsafe { $fault($id, $r, $($arg),*) } $otherwise
    };
}

/// For wrappers with an `ok(..)` clause: called after a success (allocation and lifetime
/// tracking).
macro_rules! ok_note {
    ($id:expr, $r:expr, (), $args:tt) => {};
    ($id:expr, $r:expr, ($ok:path), ($($arg:ident),*)) => {
        if $r.0 == 0 {
            // SAFETY: the program's own arguments, which the driver just filled in.
            unsafe { $ok($id, $($arg),*) }
        }
    };
}

/// How a wrapper counts its call: with a `count(..)` clause, that function counts it (with
/// the arguments, so that it can record more in the same thread-local access: launches);
/// without, [`output::count`].
/// `stream_op(hStream)`: the call queues one operation on `hStream` that is neither a kernel
/// launch nor a copy (a memset, a graph launch, a host function). A failure is explained
/// when that stream's context has ended; a success counts one pending operation there.
macro_rules! stream_fault {
    ($id:expr, $r:expr, ()) => {
        false
    };
    ($id:expr, $r:expr, ($st:ident)) => {
        lifetime::fault_on_stream($id, $r, $st)
    };
}

macro_rules! count_call {
    ($id:expr, $r:expr, (), $args:tt) => {
        output::count($id, $r)
    };
    ($id:expr, $r:expr, ($count:path), ($($arg:ident),*)) => {
        // SAFETY: the program's own arguments, under the driver function's contract.
        unsafe { $count($id, $r, $($arg),*) }
    };
}

macro_rules! hook_table {
    (
        wrapped { $( $sym:ident / $base:literal ( $($arg:ident : $ty:ty),* ) $(device $dev:ident : $kind:ident)? $(pre($pre:path))? $(fault($fault:path))? $(ok($ok:path))? $(count($count:path))? $(stream_op($st:ident))? $(after $after:path)? ; )* }
        custom { $( $csym:ident / $cbase:literal ; )* }
        unlisted { $( $usym:ident ; )* }
    ) => {
        /// Identifies a hooked function; the value indexes the call counters.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(usize)]
        pub enum HookId { $($sym,)* $($csym,)* $($usym,)* }

        impl HookId {
            /// Every id, in counter order.
            pub const ALL: &'static [HookId] = &[$(HookId::$sym,)* $(HookId::$csym,)* $(HookId::$usym,)*];

            /// The exported symbol name (`cuMemAlloc_v2`).
            pub fn name(self) -> &'static str {
                match self {
                    $(HookId::$sym => stringify!($sym),)*
                    $(HookId::$csym => stringify!($csym),)*
                    $(HookId::$usym => stringify!($usym),)*
                }
            }
        }

        /// Real-function slots, one per hooked driver symbol.
        #[allow(non_upper_case_globals)]
        pub mod slots {
            use super::*;
            $( pub static $sym: Slot = Slot::new(cstr!(stringify!($sym))); )*
            $( pub static $csym: Slot = Slot::new(cstr!(stringify!($csym))); )*
        }

        $(
            #[doc = concat!("Wrapper exported as `", stringify!($sym), "`: forwards to the real driver and counts the call.")]
            ///
            /// # Safety
            /// Same contract as the driver function of that name.
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $sym($($arg: $ty),*) -> CUresult {
                type Real = unsafe extern "C" fn($($ty),*) -> CUresult;
                let real = slots::$sym.get();
                if real.is_null() {
                    return crate::driver::missing::missing(HookId::$sym, |_r| { $( $after(_r); )? });
                }
                // SAFETY: the slot holds the real driver function for exactly this ABI
                // variant (resolved by this symbol's name, or matched by address).
                let f: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
                pre_check!(HookId::$sym, ($($pre)?), ($($arg),*));
                // SAFETY: arguments are passed through unchanged under the same contract.
                let mut r = unsafe { f($($arg),*) };
                if config::active() {
                    count_call!(HookId::$sym, r, ($($count)?), ($($arg),*));
                    if r.0 != 0 {
                        if r == CUresult::CUDA_ERROR_DEINITIALIZED {
                            lifetime::after_deinit(HookId::$sym);
                        }
                        let repaired: Option<CUresult> = device_fault!(
                            HookId::$sym, r, ($($dev $kind)?),
                            // SAFETY: same arguments, the device argument replaced by another
                            // valid ordinal or handle of the same driver.
                            unsafe { f($($arg),*) }
                        );
                        match repaired {
                            Some(r2) => r = r2,
                            None => fault_check!(HookId::$sym, r, ($($fault)?), ($($arg),*), {
                                if !stream_fault!(HookId::$sym, r, ($($st)?)) {
                                    output::failed(HookId::$sym, r, &[$((stringify!($arg), ArgVal::from($arg))),*])
                                }
                            }),
                        }
                    }
                    ok_note!(HookId::$sym, r, ($($ok)?), ($($arg),*));
                    $( if r.0 == 0 { lifetime::note_stream_op(HookId::$sym, $st); } )?
                    $( $after(r); )?
                }
                r
            }
        )*

        /// Every hook that `dlsym` and `cuGetProcAddress` can hand out.
        pub static TABLE: &[Hook] = &[
            $( Hook { base: $base, wrapper: || $sym as *mut c_void, slot: &slots::$sym }, )*
            $( Hook { base: $cbase, wrapper: || crate::interpose::procaddr::$csym as *mut c_void, slot: &slots::$csym }, )*
        ];
    };
}

type CUexecAffinityParam = c_void;
type CUctxCreateParams = c_void;
type HostPtr = *mut c_void;
/// `CUgraphExec`: an opaque handle, only passed on.
type GraphExec = *mut c_void;
/// `CUhostFn` (`void (*)(void *)`): only passed on, never called by the shim.
type HostFn = *mut c_void;

hook_table! {
    wrapped {
        cuInit / "cuInit" (flags: c_uint) after crate::exit::record::after_init;
        cuDriverGetVersion / "cuDriverGetVersion" (driverVersion: *mut c_int);
        cuDeviceGet / "cuDeviceGet" (device: *mut CUdevice, ordinal: c_int) device ordinal: Ordinal count(crate::faults::devices::count_device_get);
        cuDeviceGetCount / "cuDeviceGetCount" (count: *mut c_int) count(crate::faults::devices::count_device_count);
        cuCtxCreate_v2 / "cuCtxCreate" (pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) device dev: Handle ok(lifetime::ok_ctx_create_v2);
        cuCtxCreate_v3 / "cuCtxCreate" (pctx: *mut CUcontext, paramsArray: *mut CUexecAffinityParam, numParams: c_int, flags: c_uint, dev: CUdevice) device dev: Handle ok(lifetime::ok_ctx_create_v3);
        cuCtxCreate_v4 / "cuCtxCreate" (pctx: *mut CUcontext, ctxCreateParams: *mut CUctxCreateParams, flags: c_uint, dev: CUdevice) device dev: Handle ok(lifetime::ok_ctx_create_v4);
        cuCtxDestroy / "cuCtxDestroy" (ctx: CUcontext) pre(lifetime::pre_ctx_destroy) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_destroy);
        cuCtxDestroy_v2 / "cuCtxDestroy" (ctx: CUcontext) pre(lifetime::pre_ctx_destroy) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_destroy);
        cuDevicePrimaryCtxRetain / "cuDevicePrimaryCtxRetain" (pctx: *mut CUcontext, dev: CUdevice) device dev: Handle pre(lifetime::pre_primary_retain) ok(lifetime::ok_primary_retain);
        cuDevicePrimaryCtxRelease / "cuDevicePrimaryCtxRelease" (dev: CUdevice) pre(lifetime::pre_primary_release) ok(lifetime::ok_primary_release);
        cuDevicePrimaryCtxRelease_v2 / "cuDevicePrimaryCtxRelease" (dev: CUdevice) pre(lifetime::pre_primary_release) ok(lifetime::ok_primary_release);
        cuDevicePrimaryCtxReset / "cuDevicePrimaryCtxReset" (dev: CUdevice) pre(lifetime::pre_primary_reset) ok(lifetime::ok_primary_reset);
        cuDevicePrimaryCtxReset_v2 / "cuDevicePrimaryCtxReset" (dev: CUdevice) pre(lifetime::pre_primary_reset) ok(lifetime::ok_primary_reset);
        cuCtxSetCurrent / "cuCtxSetCurrent" (ctx: CUcontext) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_current);
        cuCtxPushCurrent / "cuCtxPushCurrent" (ctx: CUcontext) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_current);
        cuCtxPushCurrent_v2 / "cuCtxPushCurrent" (ctx: CUcontext) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_current);
        cuCtxPopCurrent / "cuCtxPopCurrent" (pctx: *mut CUcontext) ok(lifetime::ok_ctx_pop);
        cuCtxPopCurrent_v2 / "cuCtxPopCurrent" (pctx: *mut CUcontext) ok(lifetime::ok_ctx_pop);
        cuCtxSynchronize / "cuCtxSynchronize" () fault(lifetime::fault_ctx_synchronize) ok(lifetime::ok_ctx_synchronize);
        cuCtxSynchronize_v2 / "cuCtxSynchronize" (ctx: CUcontext) fault(lifetime::fault_ctx) ok(lifetime::ok_ctx_synchronize_v2);
        cuMemAlloc_v2 / "cuMemAlloc" (dptr: *mut CUdeviceptr, bytesize: usize) pre(alloc::pre_mem_alloc) fault(alloc::fault_mem_alloc) ok(alloc::ok_mem_alloc);
        cuMemAllocPitch_v2 / "cuMemAllocPitch" (dptr: *mut CUdeviceptr, pPitch: *mut usize, WidthInBytes: usize, Height: usize, ElementSizeBytes: c_uint) pre(alloc::pre_mem_alloc_pitch) fault(alloc::fault_mem_alloc_pitch) ok(alloc::ok_mem_alloc_pitch);
        cuMemAllocAsync / "cuMemAllocAsync" (dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) fault(alloc::fault_mem_alloc_async) ok(alloc::ok_mem_alloc_async);
        cuMemAllocAsync_ptsz / "cuMemAllocAsync" (dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) fault(alloc::fault_mem_alloc_async) ok(alloc::ok_mem_alloc_async);
        cuMemFree_v2 / "cuMemFree" (dptr: CUdeviceptr) pre(lifetime::pre_mem_free) fault(lifetime::fault_mem_free) ok(alloc::ok_mem_free);
        cuMemHostAlloc / "cuMemHostAlloc" (pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) fault(alloc::fault_mem_host_alloc) ok(lifetime::ok_mem_host_alloc);
        cuMemAllocHost_v2 / "cuMemAllocHost" (pp: *mut *mut c_void, bytesize: usize) ok(lifetime::ok_mem_alloc_host);
        cuMemFreeHost / "cuMemFreeHost" (p: HostPtr) pre(lifetime::pre_mem_free_host) fault(lifetime::fault_mem_free_host) ok(lifetime::ok_mem_free_host);
        cuMemHostRegister / "cuMemHostRegister" (p: HostPtr, bytesize: usize, Flags: c_uint) ok(lifetime::ok_host_register);
        cuMemHostRegister_v2 / "cuMemHostRegister" (p: HostPtr, bytesize: usize, Flags: c_uint) ok(lifetime::ok_host_register);
        cuMemHostUnregister / "cuMemHostUnregister" (p: HostPtr) pre(lifetime::pre_host_unregister) fault(lifetime::fault_host_unregister) ok(lifetime::ok_host_unregister);
        cuLaunchKernel / "cuLaunchKernel" (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel) fault(launch::fault_kernel) count(lifetime::count_launch_kernel);
        cuLaunchKernel_ptsz / "cuLaunchKernel" (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel) fault(launch::fault_kernel) count(lifetime::count_launch_kernel);
        cuLaunchKernelEx / "cuLaunchKernelEx" (config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel_ex) fault(launch::fault_kernel_ex) count(lifetime::count_launch_kernel_ex);
        cuLaunchKernelEx_ptsz / "cuLaunchKernelEx" (config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel_ex) fault(launch::fault_kernel_ex) count(lifetime::count_launch_kernel_ex);
        cuLaunchCooperativeKernel / "cuLaunchCooperativeKernel" (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void) pre(launch::pre_cooperative) fault(launch::fault_cooperative) count(lifetime::count_launch_cooperative);
        cuLaunchCooperativeKernel_ptsz / "cuLaunchCooperativeKernel" (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void) pre(launch::pre_cooperative) fault(launch::fault_cooperative) count(lifetime::count_launch_cooperative);
        cuMemAllocManaged / "cuMemAllocManaged" (dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) fault(alloc::fault_mem_alloc_managed) ok(alloc::ok_mem_alloc_managed);
        cuMemCreate / "cuMemCreate" (handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: u64) pre(alloc::pre_mem_create) fault(alloc::fault_mem_create) ok(alloc::ok_mem_create);
        cuMemRelease / "cuMemRelease" (handle: CUmemGenericAllocationHandle) ok(alloc::ok_mem_release);
        cuMemFreeAsync / "cuMemFreeAsync" (dptr: CUdeviceptr, hStream: CUstream) pre(lifetime::pre_mem_free_async) ok(alloc::ok_mem_free_async);
        cuMemFreeAsync_ptsz / "cuMemFreeAsync" (dptr: CUdeviceptr, hStream: CUstream) pre(lifetime::pre_mem_free_async) ok(alloc::ok_mem_free_async);
        cuStreamSynchronize / "cuStreamSynchronize" (hStream: CUstream) pre(lifetime::pre_stream_sync) fault(lifetime::fault_stream) ok(lifetime::ok_stream_sync);
        cuStreamSynchronize_ptsz / "cuStreamSynchronize" (hStream: CUstream) pre(lifetime::pre_stream_sync) fault(lifetime::fault_stream) ok(lifetime::ok_stream_sync);
        cuStreamCreate / "cuStreamCreate" (phStream: *mut CUstream, Flags: c_uint) ok(lifetime::ok_stream_create);
        cuStreamCreateWithPriority / "cuStreamCreateWithPriority" (phStream: *mut CUstream, flags: c_uint, priority: c_int) ok(lifetime::ok_stream_create_priority);
        cuStreamDestroy / "cuStreamDestroy" (hStream: CUstream) pre(lifetime::pre_stream_destroy) fault(lifetime::fault_stream) ok(lifetime::ok_stream_destroy);
        cuStreamDestroy_v2 / "cuStreamDestroy" (hStream: CUstream) pre(lifetime::pre_stream_destroy) fault(lifetime::fault_stream) ok(lifetime::ok_stream_destroy);
        cuStreamWaitEvent / "cuStreamWaitEvent" (hStream: CUstream, hEvent: CUevent, Flags: c_uint) fault(lifetime::fault_stream_wait_event) ok(lifetime::ok_stream_wait_event);
        cuStreamWaitEvent_ptsz / "cuStreamWaitEvent" (hStream: CUstream, hEvent: CUevent, Flags: c_uint) fault(lifetime::fault_stream_wait_event) ok(lifetime::ok_stream_wait_event);
        cuStreamQuery / "cuStreamQuery" (hStream: CUstream) fault(lifetime::fault_stream_query) ok(lifetime::ok_stream_query);
        cuStreamQuery_ptsz / "cuStreamQuery" (hStream: CUstream) fault(lifetime::fault_stream_query) ok(lifetime::ok_stream_query);
        cuEventQuery / "cuEventQuery" (hEvent: CUevent) fault(lifetime::fault_event_query) ok(lifetime::ok_event_query);
        cuEventCreate / "cuEventCreate" (phEvent: *mut CUevent, Flags: c_uint) ok(lifetime::ok_event_create);
        cuEventDestroy / "cuEventDestroy" (hEvent: CUevent) pre(lifetime::pre_event_destroy) fault(lifetime::fault_event) ok(lifetime::ok_event_destroy);
        cuEventDestroy_v2 / "cuEventDestroy" (hEvent: CUevent) pre(lifetime::pre_event_destroy) fault(lifetime::fault_event) ok(lifetime::ok_event_destroy);
        cuEventRecord / "cuEventRecord" (hEvent: CUevent, hStream: CUstream) fault(lifetime::fault_event_record) ok(lifetime::ok_event_record);
        cuEventRecord_ptsz / "cuEventRecord" (hEvent: CUevent, hStream: CUstream) fault(lifetime::fault_event_record) ok(lifetime::ok_event_record);
        cuEventSynchronize / "cuEventSynchronize" (hEvent: CUevent) pre(lifetime::pre_event_sync) fault(lifetime::fault_event) ok(lifetime::ok_event_sync);
        cuMemcpyHtoDAsync_v2 / "cuMemcpyHtoDAsync" (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_htod) fault(lifetime::fault_copy_htod) ok(lifetime::ok_copy_htod);
        cuMemcpyHtoDAsync_v2_ptsz / "cuMemcpyHtoDAsync" (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_htod) fault(lifetime::fault_copy_htod) ok(lifetime::ok_copy_htod);
        cuMemcpyDtoHAsync_v2 / "cuMemcpyDtoHAsync" (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_dtoh) fault(lifetime::fault_copy_dtoh) ok(lifetime::ok_copy_dtoh);
        cuMemcpyDtoHAsync_v2_ptsz / "cuMemcpyDtoHAsync" (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_dtoh) fault(lifetime::fault_copy_dtoh) ok(lifetime::ok_copy_dtoh);
        cuMemcpyAsync / "cuMemcpyAsync" (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy) fault(lifetime::fault_copy) ok(lifetime::ok_copy);
        cuMemcpyAsync_ptsz / "cuMemcpyAsync" (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy) fault(lifetime::fault_copy) ok(lifetime::ok_copy);
        cuMemsetD8Async / "cuMemsetD8Async" (dstDevice: CUdeviceptr, value: c_uchar, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD8Async_ptsz / "cuMemsetD8Async" (dstDevice: CUdeviceptr, value: c_uchar, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD16Async / "cuMemsetD16Async" (dstDevice: CUdeviceptr, value: c_ushort, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD16Async_ptsz / "cuMemsetD16Async" (dstDevice: CUdeviceptr, value: c_ushort, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD32Async / "cuMemsetD32Async" (dstDevice: CUdeviceptr, value: c_uint, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD32Async_ptsz / "cuMemsetD32Async" (dstDevice: CUdeviceptr, value: c_uint, N: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D8Async / "cuMemsetD2D8Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D8Async_ptsz / "cuMemsetD2D8Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D16Async / "cuMemsetD2D16Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D16Async_ptsz / "cuMemsetD2D16Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D32Async / "cuMemsetD2D32Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuMemsetD2D32Async_ptsz / "cuMemsetD2D32Async" (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
        cuGraphLaunch / "cuGraphLaunch" (hGraphExec: GraphExec, hStream: CUstream) stream_op(hStream);
        cuGraphLaunch_ptsz / "cuGraphLaunch" (hGraphExec: GraphExec, hStream: CUstream) stream_op(hStream);
        cuLaunchHostFunc / "cuLaunchHostFunc" (hStream: CUstream, fn_: HostFn, userData: HostPtr) stream_op(hStream);
        cuLaunchHostFunc_ptsz / "cuLaunchHostFunc" (hStream: CUstream, fn_: HostFn, userData: HostPtr) stream_op(hStream);
    }
    custom {
        cuGetProcAddress / "cuGetProcAddress";
        cuGetProcAddress_v2 / "cuGetProcAddress";
    }
    unlisted {
        cudaSetDevice;
    }
}

/// The hook for exported symbol `name`, if we have one.
pub fn by_symbol(name: &[u8]) -> Option<&'static Hook> {
    TABLE.iter().find(|h| h.slot.name().to_bytes() == name)
}

/// Answers `dlsym(handle, name)` for a driver name: our wrapper if we hook that exact
/// symbol and the library behind `handle` has it, with the real address recorded in the
/// slot; `None` to let the real `dlsym` answer.
pub fn answer_dlsym(handle: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    if !config::interposing() {
        return None;
    }
    let hook = by_symbol(name.to_bytes())?;
    let real = crate::platform::lookup(handle, name);
    if real.is_null() {
        return None;
    }
    hook.slot.set(real);
    Some((hook.wrapper)())
}

/// Answers `dlsym(RTLD_DEFAULT or RTLD_NEXT, name)` for a driver name we export, given
/// `native`: what the look-up finds without the shim (null when no driver is loaded where
/// the caller can see it). When interposing and the driver has it: our wrapper, with the
/// slot set; in `off` mode: `native` itself; never our own export when the driver is not
/// there. (Linux only: the macOS layer has no pseudo-handle answers.)
#[cfg(target_os = "linux")]
pub fn answer_pseudo(hook: &'static Hook, native: *mut c_void) -> *mut c_void {
    if native.is_null() || !config::interposing() {
        return native;
    }
    hook.slot.set(native);
    (hook.wrapper)()
}

/// Replaces `real` (what the driver's `cuGetProcAddress` returned for base name `base`) with
/// our wrapper for the same ABI variant. The variant is found by address: the real pointer
/// must equal the address of one hooked variant's symbol in the same library. Anything else
/// is returned unchanged (and noted, for the exit summary).
pub fn swap_proc_address(base: &CStr, real: *mut c_void) -> *mut c_void {
    let base_s = base.to_bytes();
    let mut any = false;
    for hook in TABLE.iter().filter(|h| h.base.as_bytes() == base_s) {
        any = true;
        let candidate = crate::driver::real::sibling(real, hook.slot.name());
        if candidate == real {
            hook.slot.set(real);
            return (hook.wrapper)();
        }
    }
    if any && !crate::platform::is_ours(real) {
        output::note_unmatched(base);
    }
    real
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        assert!(HookId::ALL.len() <= seedance_core::counters::MAX_FUNCTIONS);
        for (i, id) in HookId::ALL.iter().enumerate() {
            assert_eq!(*id as usize, i);
        }
        for h in TABLE {
            let name = h.slot.name().to_str().unwrap();
            assert!(HookId::ALL.iter().any(|id| id.name() == name), "{name}");
            assert!(name.starts_with(h.base), "{name} / {}", h.base);
            assert!(crate::rt::names::is_driver_name(name.as_bytes()));
        }
        assert!(by_symbol(b"cuLaunchKernel_ptsz").is_some());
        assert!(by_symbol(b"cuLaunchKernelEx").is_some());
        for name in [
            "cuLaunchCooperativeKernel",
            "cuLaunchCooperativeKernel_ptsz",
            "cuMemAllocManaged",
            "cuMemCreate",
            "cuMemRelease",
            "cuMemFreeAsync",
            "cuMemFreeAsync_ptsz",
            "cuMemsetD8Async",
            "cuMemsetD16Async_ptsz",
            "cuMemsetD2D32Async",
            "cuMemsetD2D8Async_ptsz",
            "cuGraphLaunch",
            "cuGraphLaunch_ptsz",
            "cuLaunchHostFunc",
            "cuLaunchHostFunc_ptsz",
        ] {
            assert!(by_symbol(name.as_bytes()).is_some(), "{name}");
        }
        assert!(by_symbol(b"cudaSetDevice").is_none());
        assert!(
            by_symbol(b"cuMemAlloc").is_none(),
            "the 32-bit v1 ABI is not hooked"
        );
    }
}
