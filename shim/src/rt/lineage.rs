//! Where a forked child comes from: which process initialised CUDA before the fork, and
//! which process forked. In a child forked after a `cuInit` the shim saw succeed, every
//! driver call returns `CUDA_ERROR_NOT_INITIALIZED` (docs/design.md, fact 15); the first one
//! that does is explained once ([`take`], `crate::faults::forked`).
//!
//! Plain atomics only: the `pthread_atfork` handlers ([`crate::rt::config`]) write them, and
//! a child reads them with no other thread alive and no lock taken.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The pid of the process whose `cuInit` the shim saw succeed (0: none). Inherited by
/// children, which never set it themselves (a forked child only forwards).
static INITIALISED_BY: AtomicU32 = AtomicU32::new(0);

/// The pid of the process that forks, set by the prepare handler.
static FORKING: AtomicU32 = AtomicU32::new(0);

/// In a child forked after initialisation, until its failure is explained: the parent's pid
/// (high half) and [`INITIALISED_BY`] (low half); 0 otherwise.
static UNEXPLAINED: AtomicU64 = AtomicU64::new(0);

/// A `cuInit` succeeded in this process (the first one is kept).
pub fn note_initialised() {
    let _ = INITIALISED_BY.compare_exchange(
        0,
        std::process::id(),
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
}

/// From the fork's prepare handler: this process is about to fork.
pub fn before_fork() {
    FORKING.store(std::process::id(), Ordering::Relaxed);
}

/// From the fork's child handler: a child of an initialised process has a failure to
/// explain (its first `CUDA_ERROR_NOT_INITIALIZED`); any other child has none.
pub fn in_child() {
    let init = INITIALISED_BY.load(Ordering::Relaxed);
    let parent = FORKING.load(Ordering::Relaxed);
    let v = if init != 0 && parent != 0 {
        (u64::from(parent) << 32) | u64::from(init)
    } else {
        0
    };
    UNEXPLAINED.store(v, Ordering::Relaxed);
}

/// The lineage of this child, the first time it is asked after the fork (`None` after
/// that, and in a process not forked after initialisation).
pub fn take() -> Option<seedance_core::fork::Lineage> {
    let v = UNEXPLAINED.swap(0, Ordering::Relaxed);
    (v != 0).then(|| seedance_core::fork::Lineage {
        child: std::process::id(),
        parent: (v >> 32) as u32,
        initialised_by: v as u32,
    })
}
