//! The read-mostly words the hooks' fast paths read ([`Hot`]), together on cache lines of
//! their own.
//!
//! Every hooked call reads some of them: the configuration word, the pinned ranges'
//! bounding box, the count of open stream captures, the count of handles that died with
//! their context. They are written rarely: when the configuration is read, when a pinned
//! range is made or the last one freed, when a capture begins or ends, when a context ends
//! with handles.
//!
//! Kept together, a call that reads several of them finds them in one line pair: between
//! two calls of a thread the driver's own work evicts the shim's lines, so each line a call
//! reads can be a cache miss (docs/performance.md, "Cold caches"). Kept apart from
//! everything written often, no other thread's writes invalidate them.

use seedance_core::line::Line;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// The words (see the module documentation); each is documented where it is used.
pub struct Hot {
    /// The configuration word (`crate::rt::config`).
    pub word: AtomicU32,
    /// Streams and events whose context ended (`crate::faults::lifetime`).
    pub dead_handles: AtomicUsize,
    /// Open stream captures (`crate::faults::capture`).
    pub captures_open: AtomicUsize,
    /// Lowest first byte of the pinned ranges (`crate::faults::hazard`).
    pub box_lo: AtomicU64,
    /// Highest end of the pinned ranges (`crate::faults::hazard`).
    pub box_hi: AtomicU64,
}

/// The process's hot words.
pub static HOT: Line<Hot> = Line::new(Hot {
    word: AtomicU32::new(0),
    dead_handles: AtomicUsize::new(0),
    captures_open: AtomicUsize::new(0),
    box_lo: AtomicU64::new(u64::MAX),
    box_hi: AtomicU64::new(0),
});
