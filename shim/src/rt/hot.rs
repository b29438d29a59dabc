//! The read-mostly words the hooks' fast paths read ([`Hot`]), on one cache line with the
//! real-function slots of `cuMemAlloc_v2` and `cuMemFree_v2`.
//!
//! Every hooked call reads some of them: the configuration word, the pinned ranges'
//! bounding box, the count of open stream captures, the count of handles that died with
//! their context. They are written rarely: when the configuration is read, when a pinned
//! range is made or the last one freed, when a capture begins or ends, when a context ends
//! with handles.
//!
//! Kept together, a call that reads several of them finds them in one line: between two
//! calls of a thread the driver's own work evicts the shim's lines, so each line a call
//! reads can be a cache miss (docs/performance.md, "Cold caches"). They are 32 bytes, the
//! first half of the block of real-function slots (`crate::hooks::ids::slots::All`, aligned
//! to a line pair), whose first two slots, `cuMemAlloc_v2`'s and `cuMemFree_v2`'s, fill the
//! other half: an allocation and its free read one line for the switches and the driver's
//! function instead of two (`scripts/bench/lines-touched.sh`). The slots are written only when a
//! look-up hands out a real address, so no other thread's writes invalidate the line
//! during a program's work.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// The words (see the module documentation); each is documented where it is used. 32 bytes
/// (a test in `crate::hooks::ids` checks the line it shares).
#[repr(C)]
pub struct Hot {
    /// The configuration word (`crate::rt::config`).
    pub word: AtomicU32,
    /// Open stream captures (`crate::faults::capture`; at most 256 are tracked).
    pub captures_open: AtomicU32,
    /// Streams and events whose context ended (`crate::faults::lifetime`).
    pub dead_handles: AtomicUsize,
    /// Lowest first byte of the pinned ranges (`crate::faults::hazard`).
    pub box_lo: AtomicU64,
    /// Highest end of the pinned ranges (`crate::faults::hazard`).
    pub box_hi: AtomicU64,
}

impl Hot {
    /// The words at start-up: no switch read, nothing dead or captured, an empty box.
    pub const fn new() -> Hot {
        Hot {
            word: AtomicU32::new(0),
            captures_open: AtomicU32::new(0),
            dead_handles: AtomicUsize::new(0),
            box_lo: AtomicU64::new(u64::MAX),
            box_hi: AtomicU64::new(0),
        }
    }
}

/// The process's hot words (at the start of the slots' block).
#[inline(always)]
pub fn hot() -> &'static Hot {
    &crate::hooks::ids::slots::ALL.hot
}
