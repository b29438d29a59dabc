//! The shim's lines on the program's stderr: [`say`], and [`say_once`], the one
//! deduplication of repeated messages (by key, once per process). Below everything that
//! reports (the driver's loading included), so it imports only the configuration, the guard
//! and the platform.
//!
//! Descriptor 2 is the program's. A line is written to it only while it is still the file
//! it was when the shim first looked (the configuration's reading, on the first driver
//! look-up or call; or the first line, if that comes first): the same device and inode
//! (`fstat`). A program that closed it and opened something else there (a daemon's data
//! file gets descriptor 2 when 0 to 2 were closed) hears nothing more from the shim; one
//! that pointed it at a log file (`dup2`) before its first CUDA call gets the lines there;
//! one that changes it later loses them. Where descriptor 2 was closed when the shim first
//! looked, no line is ever written. Every line is one line: control characters in it are
//! escaped (`seedance_core::text::escape_controls`).
//!
//! It also keeps the session's clock ([`began`]): the moment the shim first reported
//! anything (a line said once, a failure, an event, the first `cuInit`), from which the exit
//! summary's duration and the trace file's name count.

use crate::platform::{self, FdIdentity};
use crate::rt::config::{self, sw};
use once_cell::sync::OnceCell;
use seedance_core::once::ExplainOnce;

/// When the session began (trace clock, ns), set by the first report of any kind.
static BEGAN: OnceCell<u64> = OnceCell::new();

/// Keys of the messages said once.
static SAID: ExplainOnce<String> = ExplainOnce::unbounded();

/// What descriptor 2 was when the shim first looked (`None`: it was closed).
static STDERR: OnceCell<Option<FdIdentity>> = OnceCell::new();

/// When the session began, trace clock in ns (now, if this is its first report).
pub fn began() -> u64 {
    *BEGAN.get_or_init(seedance_trace::writer::now_ns)
}

/// Whether the session has begun (something was reported): before that, exit writes
/// nothing.
pub fn has_begun() -> bool {
    BEGAN.get().is_some()
}

/// Notes what descriptor 2 is now, the first time only (the configuration's reading).
pub fn remember_stderr() {
    STDERR.get_or_init(|| platform::fd_identity(2));
}

/// Whether descriptor 2 is still the file the shim first saw there.
fn stderr_is_ours() -> bool {
    let first = *STDERR.get_or_init(|| platform::fd_identity(2));
    first.is_some() && platform::fd_identity(2) == first
}

/// Writes `seedance: <msg>` and a newline to descriptor 2, whatever the quiet switch, if it
/// is still the program's stderr of the start ([module documentation](self)); control
/// characters of `msg` escaped. For the configuration's own warnings and the panic hook.
pub fn write_line(msg: &str) {
    if !stderr_is_ours() {
        return;
    }
    // `write` is a cancellation point: a thread with a pending cancel must not be unwound
    // from inside the shim (`guard::NoCancel`).
    let _cancel = crate::rt::guard::NoCancel::new();
    let line = format!("seedance: {}\n", seedance_core::text::escape_controls(msg));
    platform::write_fd(2, line.as_bytes());
}

/// One line on stderr, `seedance: ...`, unless `SEEDANCE_QUIET` is set.
pub fn say(msg: &str) {
    if config::switches() & sw::QUIET == 0 {
        write_line(msg);
    }
}

/// Like [`say`], but only the first time `key` is seen in this process.
pub fn say_once(key: &str, msg: &str) {
    began();
    if SAID.first(key.to_string()) {
        say(msg);
    }
}
