//! Launch and copy hooks: the per-thread pending-work counts (the hot path).

use super::dead::explain_stream;
use super::*;

/// Counts a `cuLaunchKernel(_ptsz)` or `cuLaunchCooperativeKernel(_ptsz)` call and, when it
/// succeeded, one launch on its stream, in one thread-local access.
///
/// # Safety
/// None: the stream is only a key.
#[inline(always)]
pub unsafe fn count_launch(id: HookId, r: CUresult, stream: CUstream) {
    work::count_launch(
        id as usize,
        r.0 != 0,
        stream as usize,
        id.per_thread(),
        on(),
    );
}

/// Counts a `cuLaunchKernelEx(_ptsz)` call (and the launch).
///
/// # Safety
/// `config` is null or valid when the launch succeeded (the driver accepted it).
#[inline(always)]
pub unsafe fn count_launch_kernel_ex(id: HookId, r: CUresult, config: *const CUlaunchConfig) {
    let stream = if r.0 == 0 {
        // SAFETY: the driver accepted the config, so it is null or valid.
        unsafe { config.as_ref() }.map_or(0, |c| c.h_stream as usize)
    } else {
        0
    };
    work::count_launch(id as usize, r.0 != 0, stream, id.per_thread(), on());
}

/// After a successful `cuMemcpyHtoDAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are only recorded.
#[inline(always)]
pub unsafe fn ok_copy_htod(
    id: HookId,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) {
    crate::faults::hazard::ok_copy(src as u64, src as u64);
    if on() {
        let k = CopyKind::HostToDevice;
        work::note_copy(
            stream as usize,
            id.per_thread(),
            dst,
            src as u64,
            bytes as u64,
            k,
        );
    }
}

/// After a successful `cuMemcpyDtoHAsync_v2(_ptsz)`.
///
/// # Safety
/// None: the addresses are only recorded.
#[inline(always)]
pub unsafe fn ok_copy_dtoh(
    id: HookId,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) {
    crate::faults::hazard::ok_copy(dst as u64, dst as u64);
    if on() {
        let k = CopyKind::DeviceToHost;
        work::note_copy(
            stream as usize,
            id.per_thread(),
            dst as u64,
            src,
            bytes as u64,
            k,
        );
    }
}

/// After a successful `cuMemcpyAsync(_ptsz)` (unified addresses: either side may be host
/// memory).
///
/// # Safety
/// None: the addresses are only recorded.
#[inline(always)]
pub unsafe fn ok_copy(
    id: HookId,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) {
    crate::faults::hazard::ok_copy(src, dst);
    if on() {
        let k = CopyKind::Unified;
        work::note_copy(stream as usize, id.per_thread(), dst, src, bytes as u64, k);
    }
}

/// After a failed asynchronous copy (`cuMemcpyHtoDAsync_v2`, `cuMemcpyDtoHAsync_v2`,
/// `cuMemcpyAsync`, `_ptsz` too): explained when its stream or context is dead.
///
/// # Safety
/// None: the stream is only a key.
pub unsafe fn fault_copy(id: HookId, r: CUresult, stream: CUstream) -> bool {
    fault_on_stream(id, r, stream)
}

/// After a successful call with the hook table's `stream_op` clause (the asynchronous
/// memsets, `cuGraphLaunch`, `cuLaunchHostFunc`, `_ptsz` too): one other operation on its
/// stream, counted as a launch is (the calling thread's shard; no lock, no allocation once
/// the thread has its shard). A whole graph counts as one.
#[inline]
pub fn note_stream_op(id: HookId, stream: CUstream) {
    if on() {
        work::note_op(stream as usize, id.per_thread());
    }
}

/// After a failed call with the `stream_op` clause: explained when its stream or context is
/// dead (`true`: a lifetime fault replaces the plain `call_failed`).
pub fn fault_on_stream(id: HookId, r: CUresult, stream: CUstream) -> bool {
    on() && cold(|| explain_stream(id, r, stream))
}

// ---------------------------------------------------------------------------------------
// Memory.
