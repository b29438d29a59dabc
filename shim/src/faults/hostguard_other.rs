//! `SEEDANCE_HOST_GUARD` on platforms other than Linux: not available (the guard relies on
//! Linux's `siginfo_t` fault address, `gettid` and signal-stack behaviour, and has only been
//! written and tested there). Asking for it gives one line at start-up
//! (`shim/src/rt/config.rs`); everything else is a no-op.

/// Never on.
#[inline(always)]
pub fn on() -> bool {
    false
}

/// Nothing to guard.
pub fn arm(_function: usize, _src: u64, _bytes: u64, _stream: usize, _ctx: usize, _key: u64) {}

/// Nothing guarded.
pub fn key_completed(_key: u64) {}

/// Nothing guarded.
pub fn context_completed(_ctx: usize) {}

/// Nothing guarded.
pub fn release_range(_lo: u64, _hi: u64) {}

pub use crate::faults::guarded_write::Write;

/// No write is ever recorded.
pub fn take() -> Option<Write> {
    None
}

/// Never.
#[inline(always)]
pub fn pending_report() -> bool {
    false
}
