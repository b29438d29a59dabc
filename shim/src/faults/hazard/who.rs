//! What the race checks need of a hook's identity: the calling thread's key for a stream
//! ([`caller`]) and a copy's name and form ([`Who`]), taken where the hook's id is a
//! constant.

use crate::hooks::ids::HookId;
use crate::platform;
use seedance_cuda::CUstream;
use seedance_hotpath::work;

/// The calling thread's key for `stream` (stream 0 read as the per-thread default stream
/// when `per_thread`, a `_ptsz` form), its context and its id, in one thread-local access.
#[inline(always)]
pub(super) fn caller(per_thread: bool, stream: CUstream) -> work::Caller {
    work::caller(stream as usize, per_thread, platform::thread_id)
}

/// What a copy's checks need of its hook, taken where the id is a constant (the wrapper,
/// into which the `pre` and `ok` clauses are inlined), so that the name and the form are
/// constants too and the out-of-line work reads no table for them.
#[derive(Clone, Copy)]
pub(super) struct Who {
    /// The exported symbol name (`cuMemcpyHtoDAsync_v2`).
    pub(super) name: &'static str,
    /// Whether it is a `_ptsz` form ([`HookId::per_thread`]).
    pub(super) per_thread: bool,
}

impl Who {
    /// `id`'s name and form (constants where `id` is).
    #[inline(always)]
    pub(super) fn of(id: HookId) -> Who {
        Who {
            name: id.name(),
            per_thread: id.per_thread(),
        }
    }
}
