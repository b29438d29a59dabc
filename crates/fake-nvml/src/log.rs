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

use fake_support::log::CallLog;

pub use fake_support::log::token;

/// Environment variable naming the log file.
pub const LOG_ENV: &str = "FAKE_NVML_LOG";

/// The log file, opened at the first call (see [`fake_support::log::CallLog`]).
static LOG: CallLog = CallLog::new("fake-nvml", LOG_ENV);

/// One log line, newline included.
pub fn format_line(name: &str, args: &str, result: u32) -> String {
    fake_support::log::format_line(name, args, result)
}

/// Records one call when logging is on; `args` is only evaluated then.
pub fn record(name: &str, args: impl FnOnce() -> String, result: u32) {
    LOG.record(name, args, result);
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
