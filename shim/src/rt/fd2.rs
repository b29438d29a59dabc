//! Descriptor 2 is the program's. A line is written to it only while it is still the file
//! it was when the shim first looked (the configuration's reading, on the first driver
//! look-up or call; or the first line, if that comes first): the same device and inode
//! (`fstat`). A program that closed it and opened something else there (a daemon's data
//! file gets descriptor 2 when 0 to 2 were closed) hears nothing more from the shim; one
//! that pointed it at a log file (`dup2`) before its first CUDA call gets the lines there;
//! one that changes it later loses them. Where descriptor 2 was closed when the shim first
//! looked, no line is ever written. Every line is one line: its control characters are
//! escaped (`seedance_core::text::escape_controls`). A descriptor 2 whose reader went away
//! (a pipe to `head`) loses the line; the program gets no SIGPIPE from the shim.
//!
//! Below the configuration, the guard and [`crate::rt::stderr`] (all three write through
//! it); callers keep cancellation off around it (`write` is a cancellation point).

use crate::platform::{self, FdIdentity};
use once_cell::sync::OnceCell;

/// What descriptor 2 was when the shim first looked (`None`: it was closed).
static FIRST: OnceCell<Option<FdIdentity>> = OnceCell::new();

/// Notes what descriptor 2 is now, the first time only (the configuration's reading).
pub fn remember() {
    FIRST.get_or_init(|| platform::fd_identity(2));
}

/// Whether descriptor 2 is still the file the shim first saw there.
fn still_first() -> bool {
    let first = *FIRST.get_or_init(|| platform::fd_identity(2));
    first.is_some() && platform::fd_identity(2) == first
}

/// Writes `seedance: <msg>` and a newline to descriptor 2 if it is still the program's
/// stderr of the start, control characters of `msg` escaped.
pub fn write_line(msg: &str) {
    if !still_first() {
        return;
    }
    let line = format!("seedance: {}\n", seedance_core::text::escape_controls(msg));
    platform::write_fd_no_sigpipe(2, line.as_bytes());
}
