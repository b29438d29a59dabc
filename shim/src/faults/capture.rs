//! Stream capture (`cuStreamBeginCapture(_v2)`, `cuStreamBeginCaptureToGraph`,
//! `cuStreamEndCapture`, each with `_ptsz`): work queued on a capturing stream goes into a
//! graph and does not run, and a synchronisation, query or event operation the shim made on
//! its own while a capture is open could invalidate it (in the global capture mode, any
//! thread's). So, while any capture is open:
//!
//! * the pinned-copy race checks ignore copies on a capturing stream (they run when the
//!   graph is launched, which the checks take as unknown work: `crate::faults::hazard`);
//! * no fix-mode repair is made ([`open`] gates `fix()` in `hazard` and `lifetime`), and the
//!   lifetime checks do not ask the driver whether a stream is busy.
//!
//! Cost: a begin or end takes one lock; everything else reads one relaxed atomic
//! ([`open`]) and, only when a capture is open and a pinned copy is checked, the lock.

use crate::hooks::ids::HookId;
use parking_lot::Mutex;
use seedance_cuda::{CUresult, CUstream};
use seedance_hotpath::work;
use std::sync::atomic::{AtomicU32, Ordering};

/// Stream keys being captured now ([`work::key_for`]), with the thread that began each.
static CAPTURING: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
/// How many captures are open (one relaxed load for [`open`]).
/// With the other hot words ([`crate::rt::hot`]): every copy from pinned memory reads it.
#[inline(always)]
pub(crate) fn captures_open() -> &'static AtomicU32 {
    &crate::rt::hot::hot().captures_open
}
/// Most captures tracked at once; a begin beyond is not tracked (its copies are checked as
/// running work, its end changes nothing).
const MAX_CAPTURES: usize = 256;

/// The same stream: equal keys, and for the per-thread default stream the same thread.
fn same(k: u64, t: u64, key: u64, tid: u64) -> bool {
    k == key && (!matches!(work::key_kind(k), work::KeyKind::PerThread(_)) || t == tid)
}

#[inline]
fn key(id: HookId, stream: CUstream) -> u64 {
    work::key_for(stream as usize, id.per_thread())
}

/// Whether any stream capture is open in the process: one relaxed load.
#[inline(always)]
pub fn open() -> bool {
    captures_open().load(Ordering::Relaxed) != 0
}

/// Whether the stream with key `key` (thread `tid` for a per-thread default stream) is
/// being captured.
pub fn capturing(key: u64, tid: u64) -> bool {
    open() && CAPTURING.lock().iter().any(|&(k, t)| same(k, t, key, tid))
}

/// After a successful `cuStreamBeginCapture(_v2)(_ptsz)` or `cuStreamBeginCaptureToGraph`.
///
/// # Safety
/// None: the handle is only a key.
pub unsafe fn ok_begin(id: HookId, stream: CUstream) {
    let k = key(id, stream);
    let mut c = CAPTURING.lock();
    if c.len() < MAX_CAPTURES {
        c.push((k, crate::platform::thread_id()));
        captures_open().fetch_add(1, Ordering::Relaxed);
    }
}

/// After `cuStreamEndCapture(_ptsz)`, whatever its result: a capture the driver
/// invalidated ends too (`CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`); a call that is no end of
/// a capture the shim saw begin changes nothing.
pub fn after_end(id: HookId, r: CUresult, stream: CUstream) {
    if r == CUresult::CUDA_ERROR_INVALID_HANDLE || r == CUresult::CUDA_ERROR_INVALID_VALUE {
        return;
    }
    let k = key(id, stream);
    let tid = crate::platform::thread_id();
    let mut c = CAPTURING.lock();
    let at = c.iter().position(|&(ck, t)| same(ck, t, k, tid));
    if let Some(i) = at {
        c.swap_remove(i);
        let _ = captures_open()
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}
