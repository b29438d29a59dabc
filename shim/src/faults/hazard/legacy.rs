//! Synchronous copies and memsets: work on the legacy default stream (on the calling
//! thread's per-thread default stream in their `_ptds` form), which orders or completes
//! the pending accesses of other streams.
//!
//! Sources (CUDA programming guide, "Default Stream" and "Implicit Synchronization"; CUDA
//! driver API, "API synchronization behavior"):
//!
//! * work on the legacy default stream runs after all earlier work of its context's
//!   blocking streams (made without `CU_STREAM_NON_BLOCKING`, and the per-thread default
//!   streams), and their later work runs after it; non-blocking streams are not ordered
//!   by it. Measured on driver 580.159, H100, 2026-12-06: an event recorded on stream 0
//!   completed 1.012 s after a copy queued on a blocking stream behind a 1 s kernel;
//! * a synchronous copy to or from host memory returns once it completed (from pageable
//!   memory to the device, once the source was staged, after a synchronisation of the
//!   stream it runs on): its return completes everything its stream waited for. A
//!   device-to-device copy does not block the host, nor does a synchronous memset of
//!   device memory (one of pinned host memory does);
//! * the per-thread default stream is a blocking stream of its own per thread: its work
//!   waits for the legacy default stream's earlier work, and orders no other stream.
//!
//! A copy whose sides the hook does not classify (`cuMemcpy`, `cuMemcpyPeer`, the 2D and
//! 3D forms) counts as blocking the host: that completes more, which can only hide a race
//! (unknown means silent).

use super::{caller, maybe_pinned, on, while_pending, TABLE};
use crate::hooks::ids::HookId;
use seedance_cuda::CUdeviceptr;

/// Whether `id` is a `_ptds` form (the calling thread's per-thread default stream).
#[inline(always)]
fn ptds(id: HookId) -> bool {
    id.name().ends_with("_ptds")
}

/// A synchronous copy that blocks the host returned: for the legacy default stream, its
/// context's blocking streams' work queued before it is complete, as a
/// `cuStreamSynchronize(0)`; for the per-thread default stream, that stream's work, the
/// legacy stream's, and what a legacy barrier before it covered.
///
/// # Safety
/// None: no pointer is dereferenced (an unsafe fn as every hook clause).
pub unsafe fn sync_host(id: HookId) {
    let per_thread = ptds(id);
    while_pending(|t| {
        let c = caller(false, std::ptr::null_mut());
        if per_thread {
            t.per_thread_synced(c.ctx as u64, c.tid);
        } else {
            t.stream_completed(c.key, c.tid, c.ctx as u64);
        }
    });
}

/// Synchronous work on the legacy default stream that does not block the host (a
/// device-to-device copy, a memset of device memory) was queued: a barrier between its
/// context's blocking streams. Its `_ptds` form orders no other stream.
///
/// # Safety
/// None: no pointer is dereferenced (an unsafe fn as every hook clause).
pub unsafe fn sync_device(id: HookId) {
    if ptds(id) {
        return;
    }
    while_pending(|t| {
        let c = caller(false, std::ptr::null_mut());
        t.legacy_barrier(c.ctx as u64);
    });
}

/// A synchronous memset of `dst` returned: it blocked the host when `dst` is pinned host
/// memory the shim saw made ([`sync_host`]), else it is [`sync_device`].
///
/// # Safety
/// None: no pointer is dereferenced (an unsafe fn as every hook clause).
pub unsafe fn sync_memset(id: HookId, dst: CUdeviceptr) {
    if maybe_pinned(dst) && on() && TABLE.pinned_at(dst).is_some() {
        // SAFETY: nothing is dereferenced.
        unsafe { sync_host(id) };
    } else {
        // SAFETY: nothing is dereferenced.
        unsafe { sync_device(id) };
    }
}
