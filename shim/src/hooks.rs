//! The table of hooks: one line per hooked ABI variant, and the answers the `dlsym` and
//! `cuGetProcAddress` overrides give from it.
//!
//! The table is written once, as [`hook_table!`], and expanded per use: [`ids`] (the bottom
//! layer every other module may use) makes from it the [`ids::HookId`]s, the real-function
//! slots and [`ids::TABLE`]; `wrappers` (the top layer) makes the exported wrapper of each
//! line, for programs linked with `-lcuda`. A wrapper only forwards, counts, and on failure
//! hands plain values to the session.
//!
//! A line reads `symbol (C arguments) clauses;`: `symbol` is a variant of the driver-ABI
//! table (`crates/seedance-cuda/src/abi/table.rs`, marked `both` or `hooked` there), which
//! gives its base name (what `cuGetProcAddress` is asked for) and its per-thread form; the C
//! arguments are the table's (a test checks names and sizes). Each clause names the
//! function it calls and the arguments it passes: a C argument by name, `[a, b, c]` (three
//! C arguments as one array), `id` (the line's [`ids::HookId`]) or `r` (the driver's
//! result; not in `pre`). The clauses, in this order:
//!
//! * `device(arg: Ordinal|Handle)`: the call takes a device; a failure goes to
//!   [`crate::faults::devices::on_failure`], which may repeat the call with another device;
//! * `pre(f(..))`: before the call; `Some(code)` returns `code` without calling the driver;
//! * `source(arg = f(..))`: the driver is given `f`'s answer for `arg` (the host-write
//!   guard's snapshot, [`crate::faults::hostguard::source`]), and
//!   [`crate::faults::hostguard::submitted`] gets the result; the other clauses see the
//!   program's own `arg`;
//! * `fault(f(..))`: after a failure; `true` when it explained it (else the plain report);
//! * `ok(f(..))`: after a success;
//! * `count(f(..))`: counts the call instead of `output::count` (launches: one
//!   thread-local access for the count and the pending-work record);
//! * `stream_op(hStream)`: the call queues one operation on `hStream` that is neither a
//!   kernel launch nor a copy (a memset, a graph launch, a host function): a failure is
//!   explained when that stream's context has ended, a success counts one pending
//!   operation there;
//! * `after(f(r))`: after every call, with its result.
//!
//! Stream work the model only counts (`stream_op` alone: 2D, 3D, peer and batch copies,
//! graph uploads) orders and completes as any work on its stream; stream work whose effect
//! on other streams it does not follow also has `ok(hazard::forget_after(..))` (unknown
//! means forget: docs/reliability.md); the capture lines keep `crate::faults::capture`.
//!
//! The functions are named by their module path under `crate::faults` (or `driverlog::`, or
//! `record::`: `crate::exit::record`, which cuInit's line starts), where each one's policy
//! lives.

use crate::hooks::ids::{Hook, HookId};
use crate::rt::{config, output};
use libc::c_void;
use std::ffi::CStr;

/// The one hook table. `hook_table!(m)` expands to `m! { wrapped {..} custom {..}
/// unlisted {..} }`: `wrapped` lines get a generated wrapper, `custom` ones a hand-written
/// one (in [`crate::interpose::procaddr`]), `unlisted` ones only an id (counted, never
/// handed out by `dlsym` or `cuGetProcAddress`).
macro_rules! hook_table {
    ($expand:ident) => {
        $expand! {
            wrapped {
                // First: their slots share the hot words' line (`crate::rt::hot`).
                cuMemAlloc_v2 (dptr: *mut CUdeviceptr, bytesize: usize) pre(alloc::pre_mem_alloc(id, bytesize)) fault(alloc::fault_mem_alloc(id, r, bytesize)) ok(alloc::ok_mem_alloc_counted(dptr, bytesize)) count(alloc::count_failure(id, r));
                cuMemFree_v2 (dptr: CUdeviceptr) pre(lifetime::memory::pre_mem_free(id, dptr)) fault(lifetime::memory::fault_mem_free(id, r, dptr)) ok(alloc::ok_mem_free_counted(dptr)) count(alloc::count_failure(id, r));
                cuInit (flags: c_uint) after(record::after_init(r));
                cuDriverGetVersion (driverVersion: *mut c_int);
                cuDeviceGet (device: *mut CUdevice, ordinal: c_int) device(ordinal: Ordinal) count(devices::count_device_get(id, r, ordinal));
                cuDeviceGetCount (count: *mut c_int) count(devices::count_device_count(id, r, count));
                cuCtxCreate_v2 (pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) device(dev: Handle) ok(lifetime::contexts::ok_ctx_create(id, pctx));
                cuCtxCreate_v3 (pctx: *mut CUcontext, paramsArray: *mut CUexecAffinityParam, numParams: c_int, flags: c_uint, dev: CUdevice) device(dev: Handle) ok(lifetime::contexts::ok_ctx_create(id, pctx));
                cuCtxCreate_v4 (pctx: *mut CUcontext, ctxCreateParams: *mut CUctxCreateParams, flags: c_uint, dev: CUdevice) device(dev: Handle) ok(lifetime::contexts::ok_ctx_create(id, pctx));
                cuCtxDestroy (ctx: CUcontext) pre(lifetime::contexts::pre_ctx_destroy(id, ctx)) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_destroy(id, ctx));
                cuCtxDestroy_v2 (ctx: CUcontext) pre(lifetime::contexts::pre_ctx_destroy(id, ctx)) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_destroy(id, ctx));
                cuDevicePrimaryCtxRetain (pctx: *mut CUcontext, dev: CUdevice) device(dev: Handle) pre(lifetime::stray::pre_primary_retain(id, pctx, dev)) ok(lifetime::contexts::ok_primary_retain(id, pctx, dev));
                cuDevicePrimaryCtxRelease (dev: CUdevice) pre(lifetime::contexts::pre_primary_release(id, dev)) ok(lifetime::contexts::ok_primary_release(id, dev));
                cuDevicePrimaryCtxRelease_v2 (dev: CUdevice) pre(lifetime::contexts::pre_primary_release(id, dev)) ok(lifetime::contexts::ok_primary_release(id, dev));
                cuDevicePrimaryCtxReset (dev: CUdevice) pre(lifetime::contexts::pre_primary_reset(id, dev)) ok(lifetime::contexts::ok_primary_reset(id, dev));
                cuDevicePrimaryCtxReset_v2 (dev: CUdevice) pre(lifetime::contexts::pre_primary_reset(id, dev)) ok(lifetime::contexts::ok_primary_reset(id, dev));
                cuCtxSetCurrent (ctx: CUcontext) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_current(ctx));
                cuCtxPushCurrent (ctx: CUcontext) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_current(ctx));
                cuCtxPushCurrent_v2 (ctx: CUcontext) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_current(ctx));
                cuCtxPopCurrent (pctx: *mut CUcontext) ok(lifetime::contexts::ok_ctx_pop());
                cuCtxPopCurrent_v2 (pctx: *mut CUcontext) ok(lifetime::contexts::ok_ctx_pop());
                cuCtxSynchronize () fault(lifetime::contexts::fault_ctx_synchronize(id, r)) ok(lifetime::contexts::ok_ctx_synchronize());
                cuCtxSynchronize_v2 (ctx: CUcontext) fault(lifetime::contexts::fault_ctx(id, r, ctx)) ok(lifetime::contexts::ok_ctx_synchronize_v2(ctx));
                cuMemAllocPitch_v2 (dptr: *mut CUdeviceptr, pPitch: *mut usize, WidthInBytes: usize, Height: usize, ElementSizeBytes: c_uint) pre(alloc::pre_mem_alloc_pitch(id, WidthInBytes, Height)) fault(alloc::fault_mem_alloc_pitch(id, r, WidthInBytes, Height)) ok(alloc::ok_mem_alloc_pitch(dptr, pPitch, Height));
                cuMemAllocAsync (dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) fault(alloc::fault_mem_alloc_async(id, r, bytesize)) ok(alloc::ok_mem_alloc(dptr, bytesize));
                cuMemAllocAsync_ptsz (dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) fault(alloc::fault_mem_alloc_async(id, r, bytesize)) ok(alloc::ok_mem_alloc(dptr, bytesize));
                cuMemHostAlloc (pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) fault(alloc::fault_mem_host_alloc(id, r, bytesize)) ok(lifetime::memory::ok_mem_host_alloc(id, pp, bytesize));
                cuMemAllocHost_v2 (pp: *mut *mut c_void, bytesize: usize) ok(lifetime::memory::ok_mem_host_alloc(id, pp, bytesize));
                cuMemFreeHost (p: HostPtr) pre(lifetime::memory::pre_mem_free_host(id, p)) fault(lifetime::memory::fault_mem_free_host(id, r, p)) ok(lifetime::memory::ok_mem_free_host(p));
                cuMemHostRegister (p: HostPtr, bytesize: usize, Flags: c_uint) ok(lifetime::memory::ok_host_register(id, p, bytesize));
                cuMemHostRegister_v2 (p: HostPtr, bytesize: usize, Flags: c_uint) ok(lifetime::memory::ok_host_register(id, p, bytesize));
                cuMemHostUnregister (p: HostPtr) pre(lifetime::memory::pre_host_unregister(id, p)) fault(lifetime::memory::fault_host_unregister(id, r, p)) ok(lifetime::memory::ok_host_unregister(p));
                cuLaunchKernel (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel(id, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) fault(launch::fault_kernel(id, r, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) count(lifetime::launches::count_launch(id, r, hStream));
                cuLaunchKernel_ptsz (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel(id, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) fault(launch::fault_kernel(id, r, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) count(lifetime::launches::count_launch(id, r, hStream));
                cuLaunchKernelEx (config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel_ex(id, config, f)) fault(launch::fault_kernel_ex(id, r, config, f)) count(lifetime::launches::count_launch_kernel_ex(id, r, config));
                cuLaunchKernelEx_ptsz (config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) pre(launch::pre_kernel_ex(id, config, f)) fault(launch::fault_kernel_ex(id, r, config, f)) count(lifetime::launches::count_launch_kernel_ex(id, r, config));
                cuLaunchCooperativeKernel (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void) pre(launch::pre_cooperative(id, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) fault(launch::fault_cooperative(id, r, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) count(lifetime::launches::count_launch(id, r, hStream));
                cuLaunchCooperativeKernel_ptsz (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void) pre(launch::pre_cooperative(id, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) fault(launch::fault_cooperative(id, r, f, [gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ], sharedMemBytes, hStream)) count(lifetime::launches::count_launch(id, r, hStream));
                cuMemAllocManaged (dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) fault(alloc::fault_mem_alloc_managed(id, r, bytesize)) ok(alloc::ok_mem_alloc(dptr, bytesize));
                cuMemCreate (handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: u64) pre(alloc::pre_mem_create(id, size, prop)) fault(alloc::fault_mem_create(id, r, size, prop)) ok(alloc::ok_mem_create(handle, size, prop));
                cuMemRelease (handle: CUmemGenericAllocationHandle) ok(alloc::ok_mem_release(handle));
                cuMemFreeAsync (dptr: CUdeviceptr, hStream: CUstream) pre(lifetime::memory::pre_mem_free_async(id, dptr, hStream)) ok(alloc::ok_mem_free(dptr));
                cuMemFreeAsync_ptsz (dptr: CUdeviceptr, hStream: CUstream) pre(lifetime::memory::pre_mem_free_async(id, dptr, hStream)) ok(alloc::ok_mem_free(dptr));
                cuStreamSynchronize (hStream: CUstream) pre(lifetime::streams::pre_stream_sync(id, hStream)) fault(lifetime::streams::fault_stream(id, r, hStream)) ok(lifetime::streams::ok_stream_sync(id, hStream));
                cuStreamSynchronize_ptsz (hStream: CUstream) pre(lifetime::streams::pre_stream_sync(id, hStream)) fault(lifetime::streams::fault_stream(id, r, hStream)) ok(lifetime::streams::ok_stream_sync(id, hStream));
                cuStreamCreate (phStream: *mut CUstream, Flags: c_uint) ok(lifetime::streams::ok_stream_create(id, phStream, Flags));
                cuStreamCreateWithPriority (phStream: *mut CUstream, flags: c_uint, priority: c_int) ok(lifetime::streams::ok_stream_create(id, phStream, flags));
                cuStreamDestroy (hStream: CUstream) pre(lifetime::streams::pre_stream_destroy(id, hStream)) fault(lifetime::streams::fault_stream(id, r, hStream)) ok(lifetime::streams::ok_stream_destroy(hStream));
                cuStreamDestroy_v2 (hStream: CUstream) pre(lifetime::streams::pre_stream_destroy(id, hStream)) fault(lifetime::streams::fault_stream(id, r, hStream)) ok(lifetime::streams::ok_stream_destroy(hStream));
                cuStreamWaitEvent (hStream: CUstream, hEvent: CUevent, Flags: c_uint) fault(lifetime::streams::fault_stream_wait_event(id, r, hStream, hEvent)) ok(lifetime::streams::ok_stream_wait_event(id, hStream, hEvent));
                cuStreamWaitEvent_ptsz (hStream: CUstream, hEvent: CUevent, Flags: c_uint) fault(lifetime::streams::fault_stream_wait_event(id, r, hStream, hEvent)) ok(lifetime::streams::ok_stream_wait_event(id, hStream, hEvent));
                cuStreamQuery (hStream: CUstream) fault(lifetime::streams::fault_stream_query(id, r, hStream)) ok(lifetime::streams::ok_stream_query(id, hStream));
                cuStreamQuery_ptsz (hStream: CUstream) fault(lifetime::streams::fault_stream_query(id, r, hStream)) ok(lifetime::streams::ok_stream_query(id, hStream));
                cuEventQuery (hEvent: CUevent) fault(lifetime::streams::fault_event_query(id, r, hEvent)) ok(lifetime::streams::ok_event_query(hEvent));
                cuEventCreate (phEvent: *mut CUevent, Flags: c_uint) ok(lifetime::streams::ok_event_create(id, phEvent));
                cuEventDestroy (hEvent: CUevent) pre(lifetime::streams::pre_event_destroy(id, hEvent)) fault(lifetime::streams::fault_event(id, r, hEvent)) ok(lifetime::streams::ok_event_destroy(hEvent));
                cuEventDestroy_v2 (hEvent: CUevent) pre(lifetime::streams::pre_event_destroy(id, hEvent)) fault(lifetime::streams::fault_event(id, r, hEvent)) ok(lifetime::streams::ok_event_destroy(hEvent));
                cuEventRecord (hEvent: CUevent, hStream: CUstream) fault(lifetime::streams::fault_event_record(id, r, hEvent, hStream)) ok(lifetime::streams::ok_event_record(id, hEvent, hStream));
                cuEventRecord_ptsz (hEvent: CUevent, hStream: CUstream) fault(lifetime::streams::fault_event_record(id, r, hEvent, hStream)) ok(lifetime::streams::ok_event_record(id, hEvent, hStream));
                cuEventRecordWithFlags (hEvent: CUevent, hStream: CUstream, flags: c_uint) fault(lifetime::streams::fault_event_record(id, r, hEvent, hStream)) ok(lifetime::streams::ok_event_record(id, hEvent, hStream));
                cuEventRecordWithFlags_ptsz (hEvent: CUevent, hStream: CUstream, flags: c_uint) fault(lifetime::streams::fault_event_record(id, r, hEvent, hStream)) ok(lifetime::streams::ok_event_record(id, hEvent, hStream));
                cuEventSynchronize (hEvent: CUevent) pre(lifetime::streams::pre_event_sync(id, hEvent)) fault(lifetime::streams::fault_event(id, r, hEvent)) ok(lifetime::streams::ok_event_sync(hEvent));
                cuMemcpyHtoDAsync_v2 (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_htod(id, srcHost, ByteCount, hStream)) source(srcHost = hostguard::source(id, srcHost, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy_htod(id, dstDevice, srcHost, ByteCount, hStream));
                cuMemcpyHtoDAsync_v2_ptsz (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_htod(id, srcHost, ByteCount, hStream)) source(srcHost = hostguard::source(id, srcHost, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy_htod(id, dstDevice, srcHost, ByteCount, hStream));
                cuMemcpyDtoHAsync_v2 (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_dtoh(id, dstHost, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy_dtoh(id, dstHost, srcDevice, ByteCount, hStream));
                cuMemcpyDtoHAsync_v2_ptsz (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy_dtoh(id, dstHost, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy_dtoh(id, dstHost, srcDevice, ByteCount, hStream));
                cuMemcpyAsync (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy(id, dst, src, ByteCount, hStream)) source(src = hostguard::source_unified(id, src, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy(id, dst, src, ByteCount, hStream));
                cuMemcpyAsync_ptsz (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) pre(hazard::pre_copy(id, dst, src, ByteCount, hStream)) source(src = hostguard::source_unified(id, src, ByteCount, hStream)) fault(lifetime::launches::fault_copy(id, r, hStream)) ok(lifetime::launches::ok_copy(id, dst, src, ByteCount, hStream));
                // Synchronous copies and memsets: work on the legacy default stream (the
                // per-thread one in `_ptds` form) that orders or completes other streams'
                // pending pinned copies (faults/hazard/legacy.rs).
                cuMemcpyHtoD_v2 (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyHtoD_v2_ptds (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyDtoH_v2 (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyDtoH_v2_ptds (dstHost: HostPtr, srcDevice: CUdeviceptr, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyDtoD_v2 (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) ok(hazard::sync_device(id));
                cuMemcpyDtoD_v2_ptds (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) ok(hazard::sync_device(id));
                cuMemcpy (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpy_ptds (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyPeer (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpyPeer_ptds (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize) ok(hazard::sync_host(id));
                cuMemcpy2D_v2 (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy2D_v2_ptds (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy2DUnaligned_v2 (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy2DUnaligned_v2_ptds (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy3D_v2 (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy3D_v2_ptds (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy3DPeer (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemcpy3DPeer_ptds (pCopy: *const c_void) ok(hazard::sync_host(id));
                cuMemsetD8_v2 (dstDevice: CUdeviceptr, value: c_uchar, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD8_v2_ptds (dstDevice: CUdeviceptr, value: c_uchar, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD16_v2 (dstDevice: CUdeviceptr, value: c_ushort, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD16_v2_ptds (dstDevice: CUdeviceptr, value: c_ushort, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD32_v2 (dstDevice: CUdeviceptr, value: c_uint, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD32_v2_ptds (dstDevice: CUdeviceptr, value: c_uint, N: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D8_v2 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D8_v2_ptds (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D16_v2 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D16_v2_ptds (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D32_v2 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD2D32_v2_ptds (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize) ok(hazard::sync_memset(id, dstDevice));
                cuMemsetD8Async (dstDevice: CUdeviceptr, value: c_uchar, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD8Async_ptsz (dstDevice: CUdeviceptr, value: c_uchar, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD16Async (dstDevice: CUdeviceptr, value: c_ushort, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD16Async_ptsz (dstDevice: CUdeviceptr, value: c_ushort, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD32Async (dstDevice: CUdeviceptr, value: c_uint, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD32Async_ptsz (dstDevice: CUdeviceptr, value: c_uint, N: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D8Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D8Async_ptsz (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D16Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D16Async_ptsz (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D32Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuMemsetD2D32Async_ptsz (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize, hStream: CUstream) stream_op(hStream);
                cuGraphLaunch (hGraphExec: GraphExec, hStream: CUstream) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuGraphLaunch_ptsz (hGraphExec: GraphExec, hStream: CUstream) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuLaunchHostFunc (hStream: CUstream, fn_: HostFn, userData: HostPtr) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuLaunchHostFunc_ptsz (hStream: CUstream, fn_: HostFn, userData: HostPtr) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuMemcpyDtoDAsync_v2 (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyDtoDAsync_v2_ptsz (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyPeerAsync (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyPeerAsync_ptsz (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpy2DAsync_v2 (pCopy: *const c_void, hStream: CUstream) pre(hazard::pre_copy_2d(id, pCopy, hStream)) ok(hazard::ok_copy_2d(id, pCopy)) stream_op(hStream);
                cuMemcpy2DAsync_v2_ptsz (pCopy: *const c_void, hStream: CUstream) pre(hazard::pre_copy_2d(id, pCopy, hStream)) ok(hazard::ok_copy_2d(id, pCopy)) stream_op(hStream);
                cuMemcpy3DAsync_v2 (pCopy: *const c_void, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DAsync_v2_ptsz (pCopy: *const c_void, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DPeerAsync (pCopy: *const c_void, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DPeerAsync_ptsz (pCopy: *const c_void, hStream: CUstream) stream_op(hStream);
                cuMemcpyBatchAsync (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, failIdx: *mut usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyBatchAsync_ptsz (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, failIdx: *mut usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyBatchAsync_v2 (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpyBatchAsync_v2_ptsz (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DBatchAsync (numOps: usize, opList: *mut c_void, failIdx: *mut usize, flags: u64, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DBatchAsync_ptsz (numOps: usize, opList: *mut c_void, failIdx: *mut usize, flags: u64, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DBatchAsync_v2 (numOps: usize, opList: *mut c_void, flags: u64, hStream: CUstream) stream_op(hStream);
                cuMemcpy3DBatchAsync_v2_ptsz (numOps: usize, opList: *mut c_void, flags: u64, hStream: CUstream) stream_op(hStream);
                cuGraphUpload (hGraphExec: GraphExec, hStream: CUstream) stream_op(hStream);
                cuGraphUpload_ptsz (hGraphExec: GraphExec, hStream: CUstream) stream_op(hStream);
                cuStreamAddCallback (hStream: CUstream, callback: HostFn, userData: HostPtr, flags: c_uint) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuStreamAddCallback_ptsz (hStream: CUstream, callback: HostFn, userData: HostPtr, flags: c_uint) ok(hazard::forget_after(id, hStream)) stream_op(hStream);
                cuStreamWaitValue32 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue32_ptsz (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue32_v2 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue32_v2_ptsz (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue64 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue64_ptsz (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue64_v2 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWaitValue64_v2_ptsz (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue32 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue32_ptsz (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue32_v2 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue32_v2_ptsz (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue64 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue64_ptsz (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue64_v2 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamWriteValue64_v2_ptsz (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamBatchMemOp (stream: CUstream, count: c_uint, paramArray: *mut c_void, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamBatchMemOp_ptsz (stream: CUstream, count: c_uint, paramArray: *mut c_void, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamBatchMemOp_v2 (stream: CUstream, count: c_uint, paramArray: *mut c_void, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuStreamBatchMemOp_v2_ptsz (stream: CUstream, count: c_uint, paramArray: *mut c_void, flags: c_uint) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuSignalExternalSemaphoresAsync (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuSignalExternalSemaphoresAsync_ptsz (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuWaitExternalSemaphoresAsync (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuWaitExternalSemaphoresAsync_ptsz (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) ok(hazard::forget_after(id, stream)) stream_op(stream);
                cuCtxRecordEvent (hCtx: CUcontext, hEvent: CUevent) ok(hazard::forget_after_context(id, hCtx));
                cuCtxWaitEvent (hCtx: CUcontext, hEvent: CUevent) ok(hazard::forget_after_context(id, hCtx));
                cuGreenCtxRecordEvent (hCtx: *mut c_void, hEvent: CUevent) ok(hazard::forget_after_context(id, hCtx));
                cuGreenCtxWaitEvent (hCtx: *mut c_void, hEvent: CUevent) ok(hazard::forget_after_context(id, hCtx));
                cuStreamBeginCapture (hStream: CUstream) ok(capture::ok_begin(id, hStream));
                cuStreamBeginCapture_ptsz (hStream: CUstream) ok(capture::ok_begin(id, hStream));
                cuStreamBeginCapture_v2 (hStream: CUstream, mode: c_uint) ok(capture::ok_begin(id, hStream));
                cuStreamBeginCapture_v2_ptsz (hStream: CUstream, mode: c_uint) ok(capture::ok_begin(id, hStream));
                cuStreamBeginCaptureToGraph (hStream: CUstream, hGraph: *mut c_void, dependencies: *const c_void, dependencyData: *const c_void, numDependencies: usize, mode: c_uint) ok(capture::ok_begin(id, hStream));
                cuStreamBeginCaptureToGraph_ptsz (hStream: CUstream, hGraph: *mut c_void, dependencies: *const c_void, dependencyData: *const c_void, numDependencies: usize, mode: c_uint) ok(capture::ok_begin(id, hStream));
                cuStreamEndCapture (hStream: CUstream, phGraph: *mut *mut c_void) after(capture::after_end(id, r, hStream));
                cuStreamEndCapture_ptsz (hStream: CUstream, phGraph: *mut *mut c_void) after(capture::after_end(id, r, hStream));
            }
            custom {
                cuGetProcAddress;
                cuGetProcAddress_v2;
            }
            unlisted {
                cudaSetDevice;
            }
        }
    };
}

#[cfg(test)]
mod coverage;
pub mod ids;
mod wrappers;

/// Expands the table into [`wrapper`]: the address handed out for each id.
macro_rules! wrapper_addresses {
    (
        wrapped { $( $sym:ident $args:tt $( $clause:ident $body:tt )* ; )* }
        custom { $( $csym:ident ; )* }
        unlisted { $( $usym:ident ; )* }
    ) => {
        /// Address of our wrapper for `id`'s exact ABI variant (null for an unlisted id,
        /// which is never handed out).
        fn wrapper(id: HookId) -> *mut c_void {
            match id {
                $( HookId::$sym => wrappers::$sym as *mut c_void, )*
                $( HookId::$csym => crate::interpose::procaddr::$csym as *mut c_void, )*
                $( HookId::$usym => std::ptr::null_mut(), )*
            }
        }
    };
}

hook_table!(wrapper_addresses);

/// The hook for exported symbol `name`, if we have one.
pub fn by_symbol(name: &[u8]) -> Option<&'static Hook> {
    ids::TABLE.iter().find(|h| h.slot.name().to_bytes() == name)
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
    Some(wrapper(hook.id))
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
    wrapper(hook.id)
}

/// Replaces `real` (what the driver's `cuGetProcAddress` returned for base name `base`) with
/// our wrapper for the same ABI variant. The variant is found by address: the real pointer
/// must equal the address of one hooked variant's symbol in the same library. Anything else
/// is returned unchanged (and noted, for the exit summary).
pub fn swap_proc_address(base: &CStr, real: *mut c_void) -> *mut c_void {
    let base_s = base.to_bytes();
    let mut any = false;
    for hook in ids::TABLE.iter().filter(|h| h.base.as_bytes() == base_s) {
        any = true;
        let candidate = crate::driver::real::sibling(real, hook.slot.name());
        if candidate == real {
            hook.slot.set(real);
            return wrapper(hook.id);
        }
    }
    if any && !crate::platform::is_ours(real) {
        output::note_unmatched(base);
    }
    if !any {
        crate::rt::probes::untouched(base);
    }
    real
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::ids::TABLE;

    #[test]
    fn table_is_consistent() {
        assert!(HookId::ALL.len() <= seedance_hotpath::counters::MAX_FUNCTIONS);
        for (i, id) in HookId::ALL.iter().enumerate() {
            assert_eq!(*id as usize, i);
        }
        for h in TABLE {
            let name = h.slot.name().to_str().unwrap();
            assert!(HookId::ALL.iter().any(|id| id.name() == name), "{name}");
            assert_eq!(h.id.name(), name);
            assert!(!wrapper(h.id).is_null(), "{name}");
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
            "cuEventRecordWithFlags",
            "cuEventRecordWithFlags_ptsz",
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
