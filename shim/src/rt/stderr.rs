//! The shim's lines on the program's stderr: [`say`], and [`say_once`], the one
//! deduplication of repeated messages (by key, once per process). Below everything that
//! reports (the driver's loading included), so it imports only the configuration, the guard
//! and [`crate::rt::fd2`], which decides whether descriptor 2 may be written at all.
//!
//! It also keeps the session's clock ([`began`]): the moment the shim first reported
//! anything (a line said once, a failure, an event, the first `cuInit`), from which the exit
//! summary's duration and the trace file's name count.

use crate::rt::config::{self, sw};
use once_cell::sync::OnceCell;
use seedance_core::once::ExplainOnce;

/// When the session began (trace clock, ns), set by the first report of any kind.
static BEGAN: OnceCell<u64> = OnceCell::new();

/// Keys of the messages said once.
static SAID: ExplainOnce<String> = ExplainOnce::unbounded();

/// When the session began, trace clock in ns (now, if this is its first report).
pub fn began() -> u64 {
    *BEGAN.get_or_init(seedance_trace::writer::now_ns)
}

/// Whether the session has begun (something was reported): before that, exit writes
/// nothing.
pub fn has_begun() -> bool {
    BEGAN.get().is_some()
}

/// One line on stderr, `seedance: ...`, unless `SEEDANCE_QUIET` is set.
pub fn say(msg: &str) {
    if config::switches() & sw::QUIET == 0 {
        // `write` is a cancellation point: a thread with a pending cancel must not be
        // unwound from inside the shim (`guard::NoCancel`).
        let _cancel = crate::rt::guard::NoCancel::new();
        crate::rt::fd2::write_line(msg);
    }
}

/// Like [`say`], but only the first time `key` is seen in this process.
pub fn say_once(key: &str, msg: &str) {
    began();
    if SAID.first(key.to_string()) {
        say(msg);
    }
}
