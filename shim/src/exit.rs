//! The end of the process, and the record of it: the session record the first `cuInit`
//! starts ([`record`]), the exit summary ([`summary`]), the metrics file ([`metrics`]), and
//! shutdown. This is the one module that reads every fault module (for the summary), so it
//! sits above them: nothing below imports it.
//!
//! At normal exit the library's `.fini_array` entry (`shim/src/lib.rs`) calls [`settle`]
//! while the driver and NVML are still initialised, then registers [`shutdown`] to run after
//! every other library's destructor. Both hand their work to the exit's own thread
//! ([`worker`]) and wait for it only while it makes progress.

pub mod metrics;
pub mod record;
pub mod summary;
mod worker;

use crate::rt::{config, output};
use seedance_trace::Event;
use std::panic::AssertUnwindSafe;

/// At the library's `.fini_array` entry, while the driver is still up: waits for the
/// session record ([`record::settle`]), then lets the lifetime tracker confirm pending work
/// and attribute live allocations for the exit report.
///
/// The work runs on the exit's own thread ([`worker`]), which the exiting thread waits for
/// while it makes progress: an `exit` made from a signal handler that interrupted the
/// program inside `malloc`, a lock of the shim's or the driver gives the work up rather
/// than wait for ever ([`worker::run`]). An exit from a handler that interrupted the shim's
/// own work on this thread (which may hold the shim's locks, not re-entrant:
/// [`crate::rt::guard::inside`]) does none of it, and neither does a forked child.
pub fn settle() {
    if config::forked() || crate::rt::guard::inside() {
        return;
    }
    worker::run(worker::Job::Settle, settle_here);
}

/// [`settle`]'s work, on the exit's thread (or the exiting thread when there is none).
///
/// The driver is held for it ([`crate::driver::real::hold_driver`]): a program that closed
/// the copy the shim's queries would call has nothing called in it at exit. Nothing is
/// done when the session record did not come in time ([`record::settle`]).
pub(super) fn settle_here() {
    record::settle();
    worker::step();
    if record::abandoned() {
        return;
    }
    let _driver = crate::driver::real::hold_driver();
    worker::step();
    crate::faults::lifetime::exit::settle();
    worker::step();
}

/// Writes the exit summary and flushes the trace. Called once, from the library destructor.
///
/// As [`settle`]: on the exit's thread, waited for while it makes progress, and not at all
/// from a signal handler that interrupted the shim's own work on this thread, in a forked
/// child, or when the exit gave its work up ([`worker::gave_up`]).
pub fn shutdown() {
    if config::forked() || crate::rt::guard::inside() {
        return;
    }
    worker::run(worker::Job::Shutdown, shutdown_here);
}

/// [`shutdown`]'s work: under a hold of the driver; nothing at all when the exit gave up
/// waiting for the session record ([`record::abandoned`]). Each step done is progress for
/// the exiting thread's wait ([`worker::step`]); so is each line the trace's writer writes.
pub(super) fn shutdown_here() {
    if record::abandoned() {
        return;
    }
    let _driver = crate::driver::real::hold_driver();
    // Failures still waiting for a retry are given up: their lines come first.
    crate::rt::deferred::give_up_all();
    worker::step();
    // The lifetime report (and its one stderr line) comes next: it is printed whether or
    // not a trace is written.
    let _ = crate::faults::lifetime::exit::exit_report();
    worker::step();
    let Some(summary) = summary::build(0) else {
        return;
    };
    metrics::write(&summary);
    worker::step();
    if output::nothing_to_write() {
        return;
    }
    let Some(w) = output::start_trace(record::session_start) else {
        return;
    };
    output::flush_pending(w);
    worker::step();
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| output::write_repeats(w)));
    worker::step();
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
        w.emit(worker::exit_tid(), Event::ExitSummary(summary));
    }
    worker::step();
    w.close();
}
