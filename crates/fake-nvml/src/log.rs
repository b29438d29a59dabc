//! The call recorder: with `FAKE_NVML_LOG=<path>`, one line per entry-point call received,
//! in the style of `fake-cuda`'s `FAKE_CUDA_LOG`.
//!
//! The file is opened once (at the first call) with `O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC`,
//! mode 0644, and each line is written with a single `write(2)`, so lines from several
//! threads and processes never interleave. Calls are recorded whatever they return,
//! including before `nvmlInit`. `nvmlErrorString` (which returns a string, not a status) is
//! not recorded.
//!
//! # Line format
//!
//! ```text
//! <exported symbol name>[ key=value]... -> <code>
//! ```
//!
//! `<code>` is the decimal `nvmlReturn_t`. A device handle is written `dev=<index>` when it
//! is one of this library's handles and `dev=0xHEX` otherwise; strings passed in are
//! written with blanks and control characters replaced by `?` (`(null)` for null). Keys:
//!
//! ```text
//! nvmlInit_v2
//! nvmlInitWithFlags flags=F
//! nvmlShutdown
//! nvmlSystemGetDriverVersion len=N
//! nvmlSystemGetCudaDriverVersion             (and nvmlSystemGetCudaDriverVersion_v2)
//! nvmlDeviceGetCount_v2
//! nvmlDeviceGetHandleByIndex_v2 index=N
//! nvmlDeviceGetHandleByUUID uuid=TEXT
//! nvmlDeviceGetHandleByPciBusId_v2 busid=TEXT
//! nvmlDeviceGetIndex dev=D
//! nvmlDeviceGetName dev=D len=N                (and nvmlDeviceGetUUID)
//! nvmlDeviceGetPciInfo_v3 dev=D
//! nvmlDeviceGetMemoryInfo dev=D                (and nvmlDeviceGetMemoryInfo_v2)
//! nvmlDeviceGetComputeMode dev=D
//! nvmlDeviceGetComputeRunningProcesses_v3 dev=D count=N   (and _v2; N is *infoCount on entry)
//! nvmlDeviceGetCudaComputeCapability dev=D
//! ```
//!
//! For example `nvmlDeviceGetName dev=1 len=96 -> 0`.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::sync::OnceLock;

/// Environment variable naming the log file.
pub const LOG_ENV: &str = "FAKE_NVML_LOG";

static FD: OnceLock<libc::c_int> = OnceLock::new();

fn fd() -> libc::c_int {
    *FD.get_or_init(open_from_env)
}

fn open_from_env() -> libc::c_int {
    let Some(path) = std::env::var_os(LOG_ENV).filter(|p| !p.is_empty()) else {
        return -1;
    };
    let shown = path.to_string_lossy().into_owned();
    let Ok(cpath) = CString::new(path.into_vec()) else {
        let _ = writeln!(
            std::io::stderr(),
            "fake-nvml: ignoring bad {LOG_ENV}={shown:?}"
        );
        return -1;
    };
    // SAFETY: `cpath` is a valid NUL-terminated string that outlives the call; the mode
    // argument is passed as the variadic `mode_t` open(2) expects with O_CREAT.
    let fd = unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        let _ = writeln!(
            std::io::stderr(),
            "fake-nvml: cannot open {LOG_ENV}={shown:?}: {err}"
        );
    }
    fd
}

/// One log line, newline included.
pub fn format_line(name: &str, args: &str, result: u32) -> String {
    if args.is_empty() {
        format!("{name} -> {result}\n")
    } else {
        format!("{name} {args} -> {result}\n")
    }
}

/// Makes free text safe to embed as one `key=value` token.
pub fn token(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// Records one call when logging is on; `args` is only evaluated then.
pub fn record(name: &str, args: impl FnOnce() -> String, result: u32) {
    let fd = fd();
    if fd < 0 {
        return;
    }
    let line = format_line(name, &args(), result);
    loop {
        // SAFETY: `line` is a live buffer of `line.len()` bytes; `fd` is the descriptor this
        // module opened and never closes.
        let n = unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        assert_eq!(format_line("nvmlInit_v2", "", 0), "nvmlInit_v2 -> 0\n");
        assert_eq!(
            format_line("nvmlDeviceGetName", "dev=1 len=96", 7),
            "nvmlDeviceGetName dev=1 len=96 -> 7\n"
        );
        assert_eq!(token("GPU-x y\n\u{e9}"), "GPU-x?y??");
    }
}
