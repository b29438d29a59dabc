//! What a wrapper does when the real function cannot be found.

use crate::driver::real;
use crate::hooks::HookId;
use crate::rt::{config, output, stderr};
use seedance_cuda::CUresult;

/// A wrapper was called but the real function cannot be found (no libcuda, or a driver
/// without this entry point). Returns `CUDA_ERROR_NOT_FOUND` (500); one stderr line per
/// function when a driver is loaded but lacks it, none when no driver could be loaded (that
/// was said once already). With no driver at all, `no_driver` runs (under the guard) with
/// the code: the wrapper's `after` hook, which for `cuInit` starts the session record.
#[cold]
pub fn missing(id: HookId, no_driver: impl FnOnce(CUresult)) -> CUresult {
    let r = CUresult::CUDA_ERROR_NOT_FOUND;
    if config::active() {
        output::count(id, r);
        let Some(_inside) = crate::rt::guard::enter() else {
            return r;
        };
        if real::libcuda().is_null() {
            // No driver at all: `real::libcuda` said so once; a line per function would
            // blame a driver that is not there. A `cuInit` still starts the trace, so the
            // process's record shows the failed calls (session_start without a driver).
            no_driver(r);
            return r;
        }
        stderr::say_once(
            &format!("missing:{}", id.name()),
            &format!(
                "{} is not provided by the loaded CUDA driver; returning CUDA_ERROR_NOT_FOUND",
                id.name()
            ),
        );
    }
    r
}
