//! The driver-ABI table: every driver entry point the shim hooks or the fake driver exports,
//! with its ABI variants. It is written once, as [`driver_abi!`](crate::driver_abi), and
//! expanded by its users: [`crate::abi::ENTRIES`] here, the fake driver's export list
//! (`crates/fake-cuda/src/exports/mod.rs`); the shim's hook table (`shim/src/hooks.rs`) takes
//! each line's base name and per-thread form from [`crate::abi::ENTRIES`] at compile time and a
//! test checks its argument lists against this one.
//!
//! A row reads `base (arguments) { variants }`: `base` is the name `cuGetProcAddress` is asked
//! for, `arguments` the C arguments as `cuda.h` (CUDA 13.0) names them, with Rust types of the
//! same size and passing class. Each variant reads
//! `symbol since form sides [(arguments)];`:
//!
//! * `symbol`: the exported name of this ABI (`cuMemAlloc_v2`);
//! * `since`: the lowest `cudaVersion` for which `cuGetProcAddress` hands this variant out;
//!   the newest variant a version allows wins ([`crate::abi::select`]). `0`: no minimum is
//!   modelled (the first ABI of an entry point older than the versions the table tells apart);
//! * `form`: `legacy`, `ptsz` (the per-thread default stream form of a call that takes a
//!   stream: stream 0 is the calling thread's per-thread stream) or `ptds` (the per-thread form
//!   of a call that runs on the default stream without taking one), handed out for
//!   `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`; a per-thread form has the `since` of its
//!   legacy form;
//! * `sides`: `both` (the shim hooks it and the fake driver exports it), `hooked` (the shim
//!   only) or `faked` (the fake driver only);
//! * `(arguments)`: only where this variant's differ from the row's.
//!
//! Variants neither side implements are not listed (the 32-bit `cuMemAlloc` of CUDA before
//! 3.2, `cuCtxGetDevice_v2`). Sources of the versions: the fake driver's selection rules as
//! measured against driver 580 (docs/design.md, facts 2 and 11), the requests of the CUDA 13
//! runtime (docs/cudart13-procaddress-requests.txt, checked by a test in `crate::abi`) and
//! `cudaTypedefs.h` (`PFN_cuStreamWaitValue32_v11070`: the stream memory operations' `_v2`).

/// Expands `$callback! { rows }` with the table's rows (syntax: the module documentation of
/// `seedance_cuda::abi`). The argument types name `seedance_cuda` items; a callback outside
/// this crate should match them as `tt` and not emit them.
#[macro_export]
macro_rules! driver_abi {
    ($callback:ident) => {
        $callback! {
        cuMemAlloc (dptr: *mut CUdeviceptr, bytesize: usize) {
            cuMemAlloc_v2 3020 legacy both;
        }
        cuMemFree (dptr: CUdeviceptr) {
            cuMemFree_v2 3020 legacy both;
        }
        cuInit (flags: c_uint) {
            cuInit 0 legacy both;
        }
        cuDriverGetVersion (driverVersion: *mut c_int) {
            cuDriverGetVersion 0 legacy both;
        }
        cuDeviceGet (device: *mut CUdevice, ordinal: c_int) {
            cuDeviceGet 0 legacy both;
        }
        cuDeviceGetCount (count: *mut c_int) {
            cuDeviceGetCount 0 legacy both;
        }
        cuCtxCreate (pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
            cuCtxCreate_v2 3020 legacy both;
            cuCtxCreate_v3 11040 legacy both (pctx: *mut CUcontext, paramsArray: *mut CUexecAffinityParam, numParams: c_int, flags: c_uint, dev: CUdevice);
            cuCtxCreate_v4 12050 legacy both (pctx: *mut CUcontext, ctxCreateParams: *mut CUctxCreateParams, flags: c_uint, dev: CUdevice);
        }
        cuCtxDestroy (ctx: CUcontext) {
            cuCtxDestroy 0 legacy both;
            cuCtxDestroy_v2 4000 legacy both;
        }
        cuDevicePrimaryCtxRetain (pctx: *mut CUcontext, dev: CUdevice) {
            cuDevicePrimaryCtxRetain 0 legacy both;
        }
        cuDevicePrimaryCtxRelease (dev: CUdevice) {
            cuDevicePrimaryCtxRelease 0 legacy both;
            cuDevicePrimaryCtxRelease_v2 11000 legacy both;
        }
        cuDevicePrimaryCtxReset (dev: CUdevice) {
            cuDevicePrimaryCtxReset 0 legacy both;
            cuDevicePrimaryCtxReset_v2 11000 legacy both;
        }
        cuCtxSetCurrent (ctx: CUcontext) {
            cuCtxSetCurrent 0 legacy both;
        }
        cuCtxPushCurrent (ctx: CUcontext) {
            cuCtxPushCurrent 0 legacy hooked;
            cuCtxPushCurrent_v2 4000 legacy both;
        }
        cuCtxPopCurrent (pctx: *mut CUcontext) {
            cuCtxPopCurrent 0 legacy hooked;
            cuCtxPopCurrent_v2 4000 legacy both;
        }
        cuCtxSynchronize () {
            cuCtxSynchronize 0 legacy both;
            cuCtxSynchronize_v2 13000 legacy both (ctx: CUcontext);
        }
        cuMemAllocPitch (dptr: *mut CUdeviceptr, pPitch: *mut usize, WidthInBytes: usize, Height: usize, ElementSizeBytes: c_uint) {
            cuMemAllocPitch_v2 3020 legacy both;
        }
        cuMemAllocAsync (dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) {
            cuMemAllocAsync 0 legacy both;
            cuMemAllocAsync_ptsz 0 ptsz both;
        }
        cuMemHostAlloc (pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) {
            cuMemHostAlloc 0 legacy both;
        }
        cuMemAllocHost (pp: *mut *mut c_void, bytesize: usize) {
            cuMemAllocHost_v2 3020 legacy both;
        }
        cuMemFreeHost (p: *mut c_void) {
            cuMemFreeHost 0 legacy both;
        }
        cuMemHostRegister (p: *mut c_void, bytesize: usize, Flags: c_uint) {
            cuMemHostRegister 0 legacy hooked;
            cuMemHostRegister_v2 6050 legacy both;
        }
        cuMemHostUnregister (p: *mut c_void) {
            cuMemHostUnregister 0 legacy both;
        }
        cuLaunchKernel (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) {
            cuLaunchKernel 0 legacy both;
            cuLaunchKernel_ptsz 0 ptsz both;
        }
        cuLaunchKernelEx (config: *const CUlaunchConfig, f: CUfunction, kernelParams: *mut *mut c_void, extra: *mut *mut c_void) {
            cuLaunchKernelEx 11060 legacy both;
            cuLaunchKernelEx_ptsz 11060 ptsz both;
        }
        cuLaunchCooperativeKernel (f: CUfunction, gridDimX: c_uint, gridDimY: c_uint, gridDimZ: c_uint, blockDimX: c_uint, blockDimY: c_uint, blockDimZ: c_uint, sharedMemBytes: c_uint, hStream: CUstream, kernelParams: *mut *mut c_void) {
            cuLaunchCooperativeKernel 0 legacy both;
            cuLaunchCooperativeKernel_ptsz 0 ptsz both;
        }
        cuMemAllocManaged (dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) {
            cuMemAllocManaged 0 legacy both;
        }
        cuMemCreate (handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: u64) {
            cuMemCreate 0 legacy both;
        }
        cuMemRelease (handle: CUmemGenericAllocationHandle) {
            cuMemRelease 0 legacy both;
        }
        cuMemFreeAsync (dptr: CUdeviceptr, hStream: CUstream) {
            cuMemFreeAsync 0 legacy both;
            cuMemFreeAsync_ptsz 0 ptsz both;
        }
        cuStreamSynchronize (hStream: CUstream) {
            cuStreamSynchronize 0 legacy both;
            cuStreamSynchronize_ptsz 0 ptsz both;
        }
        cuStreamCreate (phStream: *mut CUstream, Flags: c_uint) {
            cuStreamCreate 0 legacy both;
        }
        cuStreamCreateWithPriority (phStream: *mut CUstream, flags: c_uint, priority: c_int) {
            cuStreamCreateWithPriority 0 legacy both;
        }
        cuStreamDestroy (hStream: CUstream) {
            cuStreamDestroy 0 legacy hooked;
            cuStreamDestroy_v2 4000 legacy both;
        }
        cuStreamWaitEvent (hStream: CUstream, hEvent: CUevent, Flags: c_uint) {
            cuStreamWaitEvent 0 legacy both;
            cuStreamWaitEvent_ptsz 0 ptsz both;
        }
        cuStreamQuery (hStream: CUstream) {
            cuStreamQuery 0 legacy both;
            cuStreamQuery_ptsz 0 ptsz both;
        }
        cuEventQuery (hEvent: CUevent) {
            cuEventQuery 0 legacy both;
        }
        cuEventCreate (phEvent: *mut CUevent, Flags: c_uint) {
            cuEventCreate 0 legacy both;
        }
        cuEventDestroy (hEvent: CUevent) {
            cuEventDestroy 0 legacy hooked;
            cuEventDestroy_v2 4000 legacy both;
        }
        cuEventRecord (hEvent: CUevent, hStream: CUstream) {
            cuEventRecord 0 legacy both;
            cuEventRecord_ptsz 0 ptsz both;
        }
        cuEventRecordWithFlags (hEvent: CUevent, hStream: CUstream, flags: c_uint) {
            cuEventRecordWithFlags 0 legacy both;
            cuEventRecordWithFlags_ptsz 0 ptsz both;
        }
        cuEventSynchronize (hEvent: CUevent) {
            cuEventSynchronize 0 legacy both;
        }
        cuMemcpyHtoDAsync (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) {
            cuMemcpyHtoDAsync_v2 3020 legacy both;
            cuMemcpyHtoDAsync_v2_ptsz 3020 ptsz both;
        }
        cuMemcpyDtoHAsync (dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
            cuMemcpyDtoHAsync_v2 3020 legacy both;
            cuMemcpyDtoHAsync_v2_ptsz 3020 ptsz both;
        }
        cuMemcpyAsync (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
            cuMemcpyAsync 0 legacy both;
            cuMemcpyAsync_ptsz 0 ptsz both;
        }
        cuMemcpyHtoD (dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) {
            cuMemcpyHtoD_v2 3020 legacy both;
            cuMemcpyHtoD_v2_ptds 3020 ptds hooked;
        }
        cuMemcpyDtoH (dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) {
            cuMemcpyDtoH_v2 3020 legacy both;
            cuMemcpyDtoH_v2_ptds 3020 ptds hooked;
        }
        cuMemcpyDtoD (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) {
            cuMemcpyDtoD_v2 3020 legacy hooked;
            cuMemcpyDtoD_v2_ptds 3020 ptds hooked;
        }
        cuMemcpy (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize) {
            cuMemcpy 0 legacy hooked;
            cuMemcpy_ptds 0 ptds hooked;
        }
        cuMemcpyPeer (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize) {
            cuMemcpyPeer 0 legacy hooked;
            cuMemcpyPeer_ptds 0 ptds hooked;
        }
        cuMemcpy2D (pCopy: *const CUDA_MEMCPY2D) {
            cuMemcpy2D_v2 3020 legacy hooked;
            cuMemcpy2D_v2_ptds 3020 ptds hooked;
        }
        cuMemcpy2DUnaligned (pCopy: *const CUDA_MEMCPY2D) {
            cuMemcpy2DUnaligned_v2 3020 legacy hooked;
            cuMemcpy2DUnaligned_v2_ptds 3020 ptds hooked;
        }
        cuMemcpy3D (pCopy: *const CUDA_MEMCPY3D) {
            cuMemcpy3D_v2 3020 legacy hooked;
            cuMemcpy3D_v2_ptds 3020 ptds hooked;
        }
        cuMemcpy3DPeer (pCopy: *const CUDA_MEMCPY3D) {
            cuMemcpy3DPeer 0 legacy hooked;
            cuMemcpy3DPeer_ptds 0 ptds hooked;
        }
        cuMemsetD8 (dstDevice: CUdeviceptr, value: c_uchar, N: usize) {
            cuMemsetD8_v2 3020 legacy both;
            cuMemsetD8_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD16 (dstDevice: CUdeviceptr, value: c_ushort, N: usize) {
            cuMemsetD16_v2 3020 legacy hooked;
            cuMemsetD16_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD32 (dstDevice: CUdeviceptr, value: c_uint, N: usize) {
            cuMemsetD32_v2 3020 legacy hooked;
            cuMemsetD32_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD2D8 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize) {
            cuMemsetD2D8_v2 3020 legacy hooked;
            cuMemsetD2D8_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD2D16 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize) {
            cuMemsetD2D16_v2 3020 legacy hooked;
            cuMemsetD2D16_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD2D32 (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize) {
            cuMemsetD2D32_v2 3020 legacy hooked;
            cuMemsetD2D32_v2_ptds 3020 ptds hooked;
        }
        cuMemsetD8Async (dstDevice: CUdeviceptr, value: c_uchar, N: usize, hStream: CUstream) {
            cuMemsetD8Async 0 legacy both;
            cuMemsetD8Async_ptsz 0 ptsz both;
        }
        cuMemsetD16Async (dstDevice: CUdeviceptr, value: c_ushort, N: usize, hStream: CUstream) {
            cuMemsetD16Async 0 legacy both;
            cuMemsetD16Async_ptsz 0 ptsz both;
        }
        cuMemsetD32Async (dstDevice: CUdeviceptr, value: c_uint, N: usize, hStream: CUstream) {
            cuMemsetD32Async 0 legacy both;
            cuMemsetD32Async_ptsz 0 ptsz both;
        }
        cuMemsetD2D8Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uchar, Width: usize, Height: usize, hStream: CUstream) {
            cuMemsetD2D8Async 0 legacy both;
            cuMemsetD2D8Async_ptsz 0 ptsz both;
        }
        cuMemsetD2D16Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_ushort, Width: usize, Height: usize, hStream: CUstream) {
            cuMemsetD2D16Async 0 legacy both;
            cuMemsetD2D16Async_ptsz 0 ptsz both;
        }
        cuMemsetD2D32Async (dstDevice: CUdeviceptr, dstPitch: usize, value: c_uint, Width: usize, Height: usize, hStream: CUstream) {
            cuMemsetD2D32Async 0 legacy both;
            cuMemsetD2D32Async_ptsz 0 ptsz both;
        }
        cuGraphLaunch (hGraphExec: CUgraphExec, hStream: CUstream) {
            cuGraphLaunch 0 legacy both;
            cuGraphLaunch_ptsz 0 ptsz both;
        }
        cuLaunchHostFunc (hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) {
            cuLaunchHostFunc 0 legacy both;
            cuLaunchHostFunc_ptsz 0 ptsz both;
        }
        cuMemcpyDtoDAsync (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
            cuMemcpyDtoDAsync_v2 3020 legacy hooked;
            cuMemcpyDtoDAsync_v2_ptsz 3020 ptsz hooked;
        }
        cuMemcpyPeerAsync (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize, hStream: CUstream) {
            cuMemcpyPeerAsync 0 legacy hooked;
            cuMemcpyPeerAsync_ptsz 0 ptsz hooked;
        }
        cuMemcpy2DAsync (pCopy: *const CUDA_MEMCPY2D, hStream: CUstream) {
            cuMemcpy2DAsync_v2 3020 legacy both;
            cuMemcpy2DAsync_v2_ptsz 3020 ptsz both;
        }
        cuMemcpy3DAsync (pCopy: *const CUDA_MEMCPY3D, hStream: CUstream) {
            cuMemcpy3DAsync_v2 3020 legacy hooked;
            cuMemcpy3DAsync_v2_ptsz 3020 ptsz hooked;
        }
        cuMemcpy3DPeerAsync (pCopy: *const CUDA_MEMCPY3D, hStream: CUstream) {
            cuMemcpy3DPeerAsync 0 legacy hooked;
            cuMemcpy3DPeerAsync_ptsz 0 ptsz hooked;
        }
        cuMemcpyBatchAsync (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, failIdx: *mut usize, hStream: CUstream) {
            cuMemcpyBatchAsync 12080 legacy hooked;
            cuMemcpyBatchAsync_ptsz 12080 ptsz hooked;
            cuMemcpyBatchAsync_v2 13000 legacy hooked (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, hStream: CUstream);
            cuMemcpyBatchAsync_v2_ptsz 13000 ptsz hooked (dsts: *mut CUdeviceptr, srcs: *mut CUdeviceptr, sizes: *mut usize, count: usize, attrs: *mut c_void, attrsIdxs: *mut usize, numAttrs: usize, hStream: CUstream);
        }
        cuMemcpy3DBatchAsync (numOps: usize, opList: *mut c_void, failIdx: *mut usize, flags: u64, hStream: CUstream) {
            cuMemcpy3DBatchAsync 12080 legacy hooked;
            cuMemcpy3DBatchAsync_ptsz 12080 ptsz hooked;
            cuMemcpy3DBatchAsync_v2 13000 legacy hooked (numOps: usize, opList: *mut c_void, flags: u64, hStream: CUstream);
            cuMemcpy3DBatchAsync_v2_ptsz 13000 ptsz hooked (numOps: usize, opList: *mut c_void, flags: u64, hStream: CUstream);
        }
        cuGraphUpload (hGraphExec: CUgraphExec, hStream: CUstream) {
            cuGraphUpload 0 legacy hooked;
            cuGraphUpload_ptsz 0 ptsz hooked;
        }
        cuStreamAddCallback (hStream: CUstream, callback: CUhostFn, userData: *mut c_void, flags: c_uint) {
            cuStreamAddCallback 0 legacy hooked;
            cuStreamAddCallback_ptsz 0 ptsz hooked;
        }
        cuStreamWaitValue32 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) {
            cuStreamWaitValue32 8000 legacy both;
            cuStreamWaitValue32_ptsz 8000 ptsz both;
            cuStreamWaitValue32_v2 11070 legacy both;
            cuStreamWaitValue32_v2_ptsz 11070 ptsz both;
        }
        cuStreamWaitValue64 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) {
            cuStreamWaitValue64 9000 legacy hooked;
            cuStreamWaitValue64_ptsz 9000 ptsz hooked;
            cuStreamWaitValue64_v2 11070 legacy hooked;
            cuStreamWaitValue64_v2_ptsz 11070 ptsz hooked;
        }
        cuStreamWriteValue32 (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) {
            cuStreamWriteValue32 8000 legacy both;
            cuStreamWriteValue32_ptsz 8000 ptsz both;
            cuStreamWriteValue32_v2 11070 legacy both;
            cuStreamWriteValue32_v2_ptsz 11070 ptsz both;
        }
        cuStreamWriteValue64 (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) {
            cuStreamWriteValue64 9000 legacy hooked;
            cuStreamWriteValue64_ptsz 9000 ptsz hooked;
            cuStreamWriteValue64_v2 11070 legacy hooked;
            cuStreamWriteValue64_v2_ptsz 11070 ptsz hooked;
        }
        cuStreamBatchMemOp (stream: CUstream, count: c_uint, paramArray: *mut c_void, flags: c_uint) {
            cuStreamBatchMemOp 8000 legacy hooked;
            cuStreamBatchMemOp_ptsz 8000 ptsz hooked;
            cuStreamBatchMemOp_v2 11070 legacy hooked;
            cuStreamBatchMemOp_v2_ptsz 11070 ptsz hooked;
        }
        cuSignalExternalSemaphoresAsync (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) {
            cuSignalExternalSemaphoresAsync 0 legacy hooked;
            cuSignalExternalSemaphoresAsync_ptsz 0 ptsz hooked;
        }
        cuWaitExternalSemaphoresAsync (extSemArray: *const c_void, paramsArray: *const c_void, numExtSems: c_uint, stream: CUstream) {
            cuWaitExternalSemaphoresAsync 0 legacy hooked;
            cuWaitExternalSemaphoresAsync_ptsz 0 ptsz hooked;
        }
        cuCtxRecordEvent (hCtx: CUcontext, hEvent: CUevent) {
            cuCtxRecordEvent 12050 legacy both;
        }
        cuCtxWaitEvent (hCtx: CUcontext, hEvent: CUevent) {
            cuCtxWaitEvent 12050 legacy both;
        }
        cuGreenCtxRecordEvent (hCtx: CUgreenCtx, hEvent: CUevent) {
            cuGreenCtxRecordEvent 0 legacy hooked;
        }
        cuGreenCtxWaitEvent (hCtx: CUgreenCtx, hEvent: CUevent) {
            cuGreenCtxWaitEvent 0 legacy hooked;
        }
        cuStreamBeginCapture (hStream: CUstream) {
            cuStreamBeginCapture 10000 legacy hooked;
            cuStreamBeginCapture_ptsz 10000 ptsz hooked;
            cuStreamBeginCapture_v2 10010 legacy both (hStream: CUstream, mode: c_uint);
            cuStreamBeginCapture_v2_ptsz 10010 ptsz both (hStream: CUstream, mode: c_uint);
        }
        cuStreamBeginCaptureToGraph (hStream: CUstream, hGraph: CUgraph, dependencies: *const c_void, dependencyData: *const c_void, numDependencies: usize, mode: c_uint) {
            cuStreamBeginCaptureToGraph 12030 legacy hooked;
            cuStreamBeginCaptureToGraph_ptsz 12030 ptsz hooked;
        }
        cuStreamEndCapture (hStream: CUstream, phGraph: *mut CUgraph) {
            cuStreamEndCapture 0 legacy both;
            cuStreamEndCapture_ptsz 0 ptsz both;
        }
        cuDeviceGetName (name: *mut c_char, len: c_int, dev: CUdevice) {
            cuDeviceGetName 0 legacy faked;
        }
        cuDeviceGetAttribute (pi: *mut c_int, attrib: c_int, dev: CUdevice) {
            cuDeviceGetAttribute 0 legacy faked;
        }
        cuDeviceGetPCIBusId (pciBusId: *mut c_char, len: c_int, dev: CUdevice) {
            cuDeviceGetPCIBusId 0 legacy faked;
        }
        cuDeviceTotalMem (bytes: *mut usize, dev: CUdevice) {
            cuDeviceTotalMem_v2 3020 legacy faked;
        }
        cuDeviceGetUuid (uuid: *mut CUuuid, dev: CUdevice) {
            cuDeviceGetUuid 0 legacy faked;
            cuDeviceGetUuid_v2 11040 legacy faked;
        }
        cuCtxGetCurrent (pctx: *mut CUcontext) {
            cuCtxGetCurrent 0 legacy faked;
        }
        cuCtxGetDevice (device: *mut CUdevice) {
            cuCtxGetDevice 0 legacy faked;
        }
        cuMemGetInfo (free: *mut usize, total: *mut usize) {
            cuMemGetInfo_v2 3020 legacy faked;
        }
        cuGetProcAddress (symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64) {
            cuGetProcAddress 0 legacy both;
            cuGetProcAddress_v2 12000 legacy both (symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64, symbolStatus: *mut CUdriverProcAddressQueryResult);
        }
        cuGetErrorName (error: CUresult, pStr: *mut *const c_char) {
            cuGetErrorName 0 legacy faked;
        }
        cuGetErrorString (error: CUresult, pStr: *mut *const c_char) {
            cuGetErrorString 0 legacy faked;
        }
        cuFuncGetAttribute (pi: *mut c_int, attrib: c_int, hfunc: CUfunction) {
            cuFuncGetAttribute 0 legacy faked;
        }
        cuFuncSetAttribute (hfunc: CUfunction, attrib: c_int, value: c_int) {
            cuFuncSetAttribute 0 legacy faked;
        }
        cuOccupancyMaxActiveBlocksPerMultiprocessor (numBlocks: *mut c_int, func: CUfunction, blockSize: c_int, dynamicSMemSize: usize) {
            cuOccupancyMaxActiveBlocksPerMultiprocessor 0 legacy faked;
        }
        cuStreamGetCtx (hStream: CUstream, pctx: *mut CUcontext) {
            cuStreamGetCtx 0 legacy faked;
        }
        cuMemGetAllocationGranularity (granularity: *mut usize, prop: *const CUmemAllocationProp, option: c_int) {
            cuMemGetAllocationGranularity 0 legacy faked;
        }
        cuPointerGetAttribute (data: *mut c_void, attribute: c_int, ptr: CUdeviceptr) {
            cuPointerGetAttribute 0 legacy faked;
        }
        cuLogsRegisterCallback (callbackFunc: CUlogsCallback, userData: *mut c_void, callback_out: *mut CUlogsCallbackHandle) {
            cuLogsRegisterCallback 12090 legacy faked;
        }
        cuLogsUnregisterCallback (callback: CUlogsCallbackHandle) {
            cuLogsUnregisterCallback 12090 legacy faked;
        }
        cuStreamGetFlags (hStream: CUstream, flags: *mut c_uint) {
            cuStreamGetFlags 0 legacy faked;
        }
        cuDevicePrimaryCtxGetState (dev: CUdevice, flags: *mut c_uint, active: *mut c_int) {
            cuDevicePrimaryCtxGetState 0 legacy faked;
        }
        }
    };
}
