//! The driver's own words: on drivers of CUDA 12.9 and later, `cuLogsRegisterCallback`
//! delivers a plain-English message for many failed calls (docs/design.md, fact 10). The shim
//! registers one callback after the first successful `cuInit` (bound optionally: older
//! drivers lack the symbol, and then nothing changes) and keeps the last message per
//! thread; a launch or allocation fault takes it ([`take_recent`]) and attaches it to its
//! event and stderr line.
//!
//! The callback runs only when the driver logs something, which is on failures: it copies
//! the message into a thread-local slot. Nothing happens on the success path.

use crate::driver::query;
use crate::rt::config;
use libc::{c_char, c_int, c_void};
use seedance_core::Validate;
use seedance_cuda::CUresult;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A message older than this is not attached to a failure (it belongs to an earlier call).
/// The message is taken right after the failing call returns, on the same thread; the
/// window only guards against a message an earlier, successful call logged. 2 s, not less:
/// under valgrind on a loaded 2-core machine the first failure's path took over 250 ms
/// between the driver's callback and the look-up, and the explanation lost the message
/// (`e2e::memcheck`).
pub const RECENT: Duration = Duration::from_millis(2000);

/// Longest message kept, bytes.
const MAX_MESSAGE: usize = 2048;

static REGISTERED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static LAST: RefCell<Option<(Instant, String)>> = const { RefCell::new(None) };
}

/// Registers the callback after the first successful `cuInit` (`r` is what it returned;
/// called from the session record's `after_init`, `shim/src/exit/record.rs`).
pub fn register(r: CUresult) {
    if !r.is_success() || config::get().validate == Validate::Off {
        return;
    }
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    let _ = std::panic::catch_unwind(|| query::logs_register(on_driver_log));
}

/// `CUlogsCallback`: keeps the message as the calling thread's last one.
unsafe extern "C" fn on_driver_log(
    _data: *mut c_void,
    _level: c_int,
    message: *mut c_char,
    length: usize,
) {
    if message.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        let len = length.min(MAX_MESSAGE);
        // SAFETY: the driver passes `length` readable bytes at `message`.
        let bytes = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), len) };
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let text = String::from_utf8_lossy(&bytes[..end]).trim().to_string();
        if text.is_empty() {
            return;
        }
        let _ = LAST.try_with(|l| *l.borrow_mut() = Some((Instant::now(), text)));
    });
}

/// Takes the calling thread's last driver message if it was logged within [`RECENT`].
pub fn take_recent() -> Option<String> {
    let (at, text) = LAST.try_with(|l| l.borrow_mut().take()).ok().flatten()?;
    (at.elapsed() <= RECENT).then_some(text)
}

/// Forgets whatever the driver logged on this thread (the shim's own queries may make it
/// log).
pub fn discard() {
    let _ = LAST.try_with(|l| l.borrow_mut().take());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_recent_message() {
        assert_eq!(take_recent(), None);
        let mut first = *b"first\0";
        let mut second = *b"[cuLaunchKernel] too many threads\n\0junk";
        // SAFETY: both buffers are live for the lengths given.
        unsafe {
            on_driver_log(std::ptr::null_mut(), 0, first.as_mut_ptr().cast(), 5);
            on_driver_log(
                std::ptr::null_mut(),
                0,
                second.as_mut_ptr().cast(),
                second.len(),
            );
            on_driver_log(std::ptr::null_mut(), 0, std::ptr::null_mut(), 3);
        }
        assert_eq!(
            take_recent().as_deref(),
            Some("[cuLaunchKernel] too many threads")
        );
        assert_eq!(take_recent(), None);
        if let Some(old) = Instant::now().checked_sub(RECENT * 2) {
            LAST.with(|l| *l.borrow_mut() = Some((old, "old".into())));
            assert_eq!(take_recent(), None);
        }
    }
}
