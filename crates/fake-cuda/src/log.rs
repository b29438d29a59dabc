//! The call recorder: with `FAKE_CUDA_LOG=<path>`, one line per entry-point call received.
//!
//! The file is opened once (at the first call) with `O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC`,
//! mode 0644, and each line is written with a single `write(2)`, so lines from several
//! threads and processes sharing the file never interleave. Calls are recorded whatever
//! they return, including before `cuInit` and in stub mode.
//!
//! # Line format (tests in other crates parse this)
//!
//! ```text
//! <exported symbol name>[ key=value]... -> <code>
//! ```
//!
//! `<code>` is the decimal `CUresult` returned. Numbers are decimal; handles, pointers and
//! addresses are lowercase hex as Rust's `{:#x}` writes them (`0x0` for null). Symbol names
//! in `cuGetProcAddress` lines have blanks and control characters replaced by `?`, and a
//! null name is written `(null)`. The keys per entry point, exactly:
//!
//! ```text
//! cuInit flags=F
//! cuDriverGetVersion
//! cuDeviceGet ordinal=N
//! cuDeviceGetCount
//! cuDeviceGetName len=N dev=D
//! cuDeviceGetAttribute attrib=A dev=D
//! cuDeviceGetPCIBusId len=N dev=D
//! cuDeviceTotalMem_v2 dev=D
//! cuDeviceGetUuid dev=D                       (and cuDeviceGetUuid_v2)
//! cuCtxCreate_v2 flags=F dev=D
//! cuCtxCreate_v3 nparams=N flags=F dev=D
//! cuCtxCreate_v4 params=0xHEX flags=F dev=D
//! cuCtxDestroy ctx=0xHEX                      (and cuCtxDestroy_v2)
//! cuDevicePrimaryCtxRetain dev=D
//! cuDevicePrimaryCtxRelease dev=D             (and cuDevicePrimaryCtxRelease_v2)
//! cuDevicePrimaryCtxReset dev=D               (and cuDevicePrimaryCtxReset_v2)
//! cuCtxSetCurrent ctx=0xHEX
//! cuCtxGetCurrent
//! cuCtxGetDevice
//! cuCtxSynchronize
//! cuCtxSynchronize_v2 ctx=0xHEX
//! cuMemAlloc_v2 bytes=N
//! cuMemAllocPitch_v2 width=N height=N elem=N
//! cuMemAllocAsync bytes=N stream=0xHEX        (and cuMemAllocAsync_ptsz)
//! cuMemFree_v2 ptr=0xHEX
//! cuMemGetInfo_v2
//! cuMemHostAlloc bytes=N flags=F
//! cuMemFreeHost ptr=0xHEX
//! cuLaunchKernel f=0xHEX grid=X,Y,Z block=X,Y,Z shmem=N stream=0xHEX    (and _ptsz)
//! cuLaunchKernelEx f=0xHEX grid=X,Y,Z block=X,Y,Z shmem=N stream=0xHEX attrs=N  (and _ptsz)
//! cuLaunchKernelEx f=0xHEX config=0x0         (null config; and _ptsz)
//! cuStreamSynchronize stream=0xHEX            (and cuStreamSynchronize_ptsz)
//! cuGetProcAddress symbol=NAME version=V flags=F   (and cuGetProcAddress_v2)
//! cuGetErrorName error=N
//! cuGetErrorString error=N
//! cuLaunchCooperativeKernel f=0xHEX grid=X,Y,Z block=X,Y,Z shmem=N stream=0xHEX  (and _ptsz)
//! cuFuncGetAttribute attrib=A f=0xHEX
//! cuFuncSetAttribute f=0xHEX attrib=A value=V
//! cuOccupancyMaxActiveBlocksPerMultiprocessor f=0xHEX block=N shmem=N
//! cuStreamCreate flags=F
//! cuStreamDestroy_v2 stream=0xHEX
//! cuStreamGetCtx stream=0xHEX
//! cuMemAllocManaged bytes=N flags=F
//! cuMemFreeAsync ptr=0xHEX stream=0xHEX        (and cuMemFreeAsync_ptsz)
//! cuMemCreate bytes=N dev=D flags=F            (dev=? when the properties are not a device)
//! cuMemRelease handle=0xHEX
//! cuMemGetAllocationGranularity option=N dev=D
//! cuPointerGetAttribute attrib=A ptr=0xHEX
//! cuLogsRegisterCallback
//! cuLogsUnregisterCallback handle=0xHEX
//! cuStreamCreateWithPriority flags=F priority=P
//! cuStreamQuery stream=0xHEX                  (and cuStreamQuery_ptsz)
//! cuStreamWaitEvent stream=0xHEX event=0xHEX flags=F   (and _ptsz)
//! cuEventCreate flags=F
//! cuEventDestroy_v2 event=0xHEX
//! cuEventRecord event=0xHEX stream=0xHEX      (and cuEventRecord_ptsz)
//! cuEventRecordWithFlags event=0xHEX stream=0xHEX flags=F   (and _ptsz)
//! cuEventSynchronize event=0xHEX
//! cuEventQuery event=0xHEX
//! cuCtxRecordEvent ctx=0xHEX event=0xHEX      (and cuCtxWaitEvent)
//! cuMemcpyHtoDAsync_v2 dst=0xHEX src=0xHEX bytes=N stream=0xHEX   (and _v2_ptsz, the
//!     cuMemcpyDtoHAsync_v2 pair and cuMemcpyAsync(_ptsz); host addresses vary by run)
//! cuMemcpyHtoD_v2 bytes=N                      (and cuMemcpyDtoH_v2)
//! cuMemAllocHost_v2 bytes=N
//! cuMemHostRegister_v2 ptr=0xHEX bytes=N flags=F
//! cuMemHostUnregister ptr=0xHEX
//! cuCtxPushCurrent_v2 ctx=0xHEX
//! cuCtxPopCurrent_v2
//! cuDevicePrimaryCtxGetState dev=D
//! ```
//!
//! For example `cuMemAlloc_v2 bytes=1048576 -> 0` and
//! `cuLaunchKernel f=0x1234 grid=1,1,1 block=1025,1,1 shmem=0 stream=0x0 -> 1`.

use fake_support::log::CallLog;
use seedance_cuda::CUresult;

pub use fake_support::log::token;

/// Environment variable naming the log file.
pub const LOG_ENV: &str = "FAKE_CUDA_LOG";

/// The log file, opened at the first call (see [`fake_support::log::CallLog`]).
static LOG: CallLog = CallLog::new("fake-cuda", LOG_ENV);

/// Whether calls are being recorded.
pub fn enabled() -> bool {
    LOG.enabled()
}

/// One log line, newline included: `name args -> code` (no blank before the arrow's
/// left-hand side when `args` is empty).
pub fn format_line(name: &str, args: &str, result: CUresult) -> String {
    fake_support::log::format_line(name, args, result.0)
}

/// Records one call when logging is on; `args` is only evaluated then. Cancellation of
/// the thread is disabled during the write: `write` is a cancellation point, and recording
/// a call must not make one of an entry point (a real driver keeps no such log).
pub fn record(name: &str, args: impl FnOnce() -> String, result: CUresult) {
    if !LOG.enabled() {
        return;
    }
    extern "C" {
        fn pthread_setcancelstate(
            state: std::ffi::c_int,
            old: *mut std::ffi::c_int,
        ) -> std::ffi::c_int;
    }
    /// glibc's `PTHREAD_CANCEL_DISABLE` (`<pthread.h>`).
    const DISABLE: std::ffi::c_int = 1;
    let mut old: std::ffi::c_int = DISABLE;
    // SAFETY: a valid state and out-pointer (pthread_setcancelstate(3)).
    unsafe { pthread_setcancelstate(DISABLE, &mut old) };
    LOG.record(name, args, result.0);
    let mut ignored: std::ffi::c_int = 0;
    // SAFETY: as above, putting back the state it returned.
    unsafe { pthread_setcancelstate(old, &mut ignored) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        assert_eq!(
            format_line("cuDeviceGetCount", "", CUresult(0)),
            "cuDeviceGetCount -> 0\n"
        );
        assert_eq!(
            format_line(
                "cuMemAlloc_v2",
                "bytes=1048576",
                CUresult::CUDA_ERROR_OUT_OF_MEMORY
            ),
            "cuMemAlloc_v2 bytes=1048576 -> 2\n"
        );
        assert_eq!(format!("ctx={:#x}", 0usize), "ctx=0x0");
        assert_eq!(format!("ctx={:#x}", 0xABCusize), "ctx=0xabc");
    }

    #[test]
    fn tokens() {
        assert_eq!(token("cuMemAlloc"), "cuMemAlloc");
        assert_eq!(token("a b\nc\u{e9}"), "a?b?c?");
    }
}
