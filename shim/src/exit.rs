//! The end of the process, and the record of it: the session record the first `cuInit`
//! starts ([`record`]), the exit summary ([`summary`]), the metrics file ([`metrics`]), and
//! shutdown. This is the one module that reads every fault module (for the summary), so it
//! sits above them: nothing below imports it.
//!
//! At normal exit the library's `.fini_array` entry (`shim/src/lib.rs`) calls [`settle`]
//! while the driver and NVML are still initialised, then registers [`shutdown`] to run after
//! every other library's destructor.

pub mod metrics;
pub mod record;
pub mod summary;

use crate::platform;
use crate::rt::{config, output};
use seedance_trace::Event;
use std::panic::AssertUnwindSafe;

/// At the library's `.fini_array` entry, while the driver is still up: waits for the
/// session record ([`record::settle`]), then lets the lifetime tracker confirm pending work
/// and attribute live allocations for the exit report.
///
/// The driver is held for this ([`crate::driver::real::hold_driver`]): a program that closed
/// the copy the shim's queries would call has nothing called in it at exit. An exit made
/// from a signal handler that interrupted the shim's own work on this thread (which may
/// hold the shim's locks, not re-entrant: [`crate::rt::guard::inside`]) does none of it, and
/// neither does one whose session record did not come in time ([`record::settle`]).
pub fn settle() {
    if crate::rt::guard::inside() {
        return;
    }
    record::settle();
    if record::abandoned() {
        return;
    }
    let _driver = crate::driver::real::hold_driver();
    if !config::forked() {
        crate::faults::lifetime::exit::settle();
    }
}

/// Writes the exit summary and flushes the trace. Called once, from the library destructor.
///
/// As [`settle`]: under a hold of the driver, and not at all from a signal handler that
/// interrupted the shim's own work on this thread; nothing at all when the exit gave up
/// waiting for the session record ([`record::abandoned`]).
pub fn shutdown() {
    if config::forked() {
        return;
    }
    if crate::rt::guard::inside() {
        return;
    }
    if record::abandoned() {
        return;
    }
    let _driver = crate::driver::real::hold_driver();
    // Failures still waiting for a retry are given up: their lines come first.
    crate::rt::deferred::give_up_all();
    // The lifetime report (and its one stderr line) comes next: it is printed whether or
    // not a trace is written.
    let _ = crate::faults::lifetime::exit::exit_report();
    let Some(summary) = summary::build(0) else {
        return;
    };
    metrics::write(&summary);
    if output::nothing_to_write() {
        return;
    }
    let Some(w) = output::start_trace(record::session_start) else {
        return;
    };
    output::flush_pending(w);
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| output::write_repeats(w)));
    // A failure while building the summary must not keep what was written from the file.
    let summary = std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("exit_summary");
        let mut s = summary::build(w.dropped()).unwrap_or_default();
        s.cuda_libraries = summary::cuda_libraries();
        s.memory_holders = summary::memory_holders();
        s.records_over_limit = w.over_limit();
        s
    }));
    if let Ok(summary) = summary {
        w.emit(platform::thread_id(), Event::ExitSummary(summary));
    }
    w.close();
}
