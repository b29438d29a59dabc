//! The host-write guard's staging memory for snapshots (`fix` mode): pinned buffers the
//! shim allocates itself (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_PORTABLE`, through
//! `crate::driver::query`, so never counted or tracked as the program's), at most
//! `SEEDANCE_HOST_GUARD_POOL` bytes in all, made on demand and reused.
//!
//! A buffer is lent to one copy from submission until the shim knows the copy completed
//! ([`give`]); one whose copy's completion cannot be learnt is never lent again ([`lose`]).
//! No buffer is ever freed: a free could come while a copy still reads it, and at exit the
//! driver's own teardown releases them. A buffer belongs to the context current when it
//! was made (the driver releases it with that context: [`context_ended`] forgets them).
//! When no buffer fits and the pool has no room for a new one, the copy is sent from the
//! program's buffer, after one line.

use crate::rt::{config, stderr};
use parking_lot::Mutex;

/// `CU_MEMHOSTALLOC_PORTABLE` (cuda.h).
const PORTABLE: u32 = 1;
/// Buffers are made in multiples of this many bytes (fewer, reusable sizes).
const GRAIN: usize = 64 << 10;

struct Buf {
    ctx: usize,
    ptr: usize,
    cap: usize,
    lent: bool,
    lost: bool,
}

struct Pool {
    bufs: Vec<Buf>,
    /// Bytes of live buffers.
    total: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    bufs: Vec::new(),
    total: 0,
});

/// A staging buffer of at least `bytes` bytes in context `ctx` (the calling thread's
/// current one), lent until [`give`]; `None` when the pool has no room (one line).
pub(super) fn take(ctx: usize, bytes: u64) -> Option<usize> {
    let bytes = usize::try_from(bytes).ok()?;
    let limit = usize::try_from(config::get().host_guard_pool).unwrap_or(usize::MAX);
    if limit == 0 {
        return None;
    }
    let mut p = POOL.lock();
    let best = p
        .bufs
        .iter_mut()
        .filter(|b| b.ctx == ctx && !b.lent && !b.lost && b.cap >= bytes)
        .min_by_key(|b| b.cap);
    if let Some(b) = best {
        b.lent = true;
        return Some(b.ptr);
    }
    let cap = bytes.div_ceil(GRAIN).max(1) * GRAIN;
    if p.total.saturating_add(cap) > limit {
        drop(p);
        stderr::say_once(
            "host_guard_pool",
            &format!(
                "SEEDANCE_HOST_GUARD: no room in the snapshot pool (SEEDANCE_HOST_GUARD_POOL={limit} \
                 bytes) for a copy of {bytes} bytes: such copies are sent from the program's \
                 buffer, without a snapshot, until room is free (host writes into them are \
                 still reported)"
            ),
        );
        return None;
    }
    match crate::driver::query::mem_host_alloc(cap, PORTABLE) {
        Ok(ptr) if !ptr.is_null() => {
            p.total += cap;
            p.bufs.push(Buf {
                ctx,
                ptr: ptr as usize,
                cap,
                lent: true,
                lost: false,
            });
            Some(ptr as usize)
        }
        r => {
            drop(p);
            stderr::say_once(
                "host_guard_alloc",
                &format!(
                    "SEEDANCE_HOST_GUARD: cuMemHostAlloc of {cap} bytes for a snapshot failed \
                     ({r:?}): the copy is sent from the program's buffer, without a snapshot"
                ),
            );
            None
        }
    }
}

/// The copy that read `ptr` completed: the buffer may be lent again.
pub(super) fn give(ptr: usize) {
    if let Some(b) = POOL.lock().bufs.iter_mut().find(|b| b.ptr == ptr) {
        b.lent = false;
    }
}

/// The copy that read `ptr` may still read it: never lend it again.
pub(super) fn lose(ptr: usize) {
    if let Some(b) = POOL.lock().bufs.iter_mut().find(|b| b.ptr == ptr) {
        b.lost = true;
    }
}

/// Context `ctx` ended, and its buffers with it.
pub(super) fn context_ended(ctx: usize) {
    let mut p = POOL.lock();
    let gone: usize = p.bufs.iter().filter(|b| b.ctx == ctx).map(|b| b.cap).sum();
    p.bufs.retain(|b| b.ctx != ctx);
    p.total -= gone;
}
