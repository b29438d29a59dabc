//! The driver's error log (`cuLogsRegisterCallback`, CUDA 12.9+): registered callbacks and
//! the messages the fake sends them.
//!
//! An entry point that fails with a message (a refused launch, an allocation that does not
//! fit) leaves it with [`set_pending`] while the driver lock is held; after the lock is
//! released the entry point calls [`deliver_pending`], which calls every registered
//! callback on the calling thread with `CU_LOG_LEVEL_ERROR`, the message as a
//! NUL-terminated string and its length without the NUL. Message text:
//! `[<entry point>] <what failed>`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Mutex;

/// `CUlogsCallback`: `void (*)(void *data, CUlogLevel logLevel, char *message, size_t length)`.
pub type LogsCallback = unsafe extern "C" fn(*mut c_void, c_int, *mut c_char, usize);

/// `CU_LOG_LEVEL_ERROR`.
pub const LOG_LEVEL_ERROR: c_int = 0;
/// First callback handle value (`CUlogsCallbackHandle`, opaque to callers).
pub const HANDLE_BASE: usize = 0x10c5_0000;

struct Registered {
    handle: usize,
    callback: LogsCallback,
    data: usize,
}

static CALLBACKS: Mutex<(usize, Vec<Registered>)> = Mutex::new((0, Vec::new()));

thread_local! {
    static PENDING: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn lock() -> std::sync::MutexGuard<'static, (usize, Vec<Registered>)> {
    CALLBACKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers a callback with its user data; returns its handle.
pub fn register(callback: LogsCallback, data: *mut c_void) -> usize {
    let mut g = lock();
    g.0 += 1;
    let handle = HANDLE_BASE + g.0;
    g.1.push(Registered {
        handle,
        callback,
        data: data as usize,
    });
    handle
}

/// Removes a callback; `false` when the handle is not registered.
pub fn unregister(handle: usize) -> bool {
    let mut g = lock();
    let before = g.1.len();
    g.1.retain(|r| r.handle != handle);
    g.1.len() != before
}

/// Leaves `message` for the calling thread's next [`deliver_pending`].
pub fn set_pending(entry_point: &str, message: &str) {
    let text = format!("[{entry_point}] {message}");
    let _ = PENDING.try_with(|p| *p.borrow_mut() = Some(text));
}

/// Sends the calling thread's pending message, if any, to every registered callback.
/// Call without the driver lock held.
pub fn deliver_pending() {
    let Some(text) = PENDING.try_with(|p| p.borrow_mut().take()).ok().flatten() else {
        return;
    };
    let Ok(c) = CString::new(text) else {
        return;
    };
    let targets: Vec<(LogsCallback, usize)> =
        lock().1.iter().map(|r| (r.callback, r.data)).collect();
    let len = c.as_bytes().len();
    for (callback, data) in targets {
        let mut buf = c.as_bytes_with_nul().to_vec();
        // SAFETY: the callback was registered through cuLogsRegisterCallback with this
        // signature; `buf` is a live NUL-terminated buffer of `len + 1` bytes.
        unsafe {
            callback(
                data as *mut c_void,
                LOG_LEVEL_ERROR,
                buf.as_mut_ptr().cast(),
                len,
            )
        };
    }
}
