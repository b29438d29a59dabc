//! Driver calls made from a signal handler that interrupts the shim's own work.
//!
//! `tests/programs/signal_calls.c` makes failing driver calls from its SIGUSR1 handler
//! while its main thread loops over the same failing calls. The fake driver raises the
//! signal inside `cuCtxGetCurrent` (`FAKE_CUDA_RAISE`), which the program calls itself and
//! the shim calls as its own query while it holds the lifetime tracker's lock (recording a
//! new stream): the handler then runs inside the shim's locked section, deterministically.
//! A nested call that waited for that lock would wait forever. Every run is under a 30 s
//! watchdog.

use seedance_e2e::{Finished, Run};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);
const ITERATIONS: u64 = 50;

fn run(shim: bool, mode: &str) -> Finished {
    let mut r = Run::new("signal_calls", shim)
        .arg(&ITERATIONS.to_string())
        .env("FAKE_CUDA_RAISE", "10:cuCtxGetCurrent:1000");
    if shim {
        r = r.env("SEEDANCE_MODE", mode);
    }
    r.finish_within(DEADLINE)
}

/// How often the handler ran, from the program's second line.
fn handler_runs(r: &Finished) -> u64 {
    let out = r.stdout();
    let line = out.lines().nth(1).unwrap_or_default().to_string();
    line.strip_prefix("handler: ran ")
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no handler line in {out:?}"))
}

#[test]
fn failing_calls_from_a_signal_handler_inside_the_shim_do_not_deadlock() {
    let native = run(false, "");
    assert_eq!(native.output.status.code(), Some(0));
    assert_eq!(
        native.stdout(),
        "main: 50 iterations, cuMemAlloc(0) -> 1, cuStreamSynchronize(dead) -> 709\n\
         handler: ran 50 times, cuMemAlloc(0) -> 1, cuStreamSynchronize(dead) -> 709\n"
    );
    for mode in ["observe", "fix"] {
        let r = run(true, mode);
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        let main = r.stdout().lines().next().unwrap_or_default().to_string();
        // In fix mode the synchronize of a stream whose work all completed before its
        // context ended is answered with success (announced); the rest is the native run.
        let want_main = if mode == "fix" {
            "main: 50 iterations, cuMemAlloc(0) -> 1, cuStreamSynchronize(dead) -> 0"
        } else {
            "main: 50 iterations, cuMemAlloc(0) -> 1, cuStreamSynchronize(dead) -> 709"
        };
        assert_eq!(main, want_main, "{mode}");
        // The handler ran for each of the program's own cuCtxGetCurrent calls and for each
        // of the shim's (one per stream created), each time making both calls.
        let runs = handler_runs(&r);
        assert!(runs >= 2 * ITERATIONS, "{mode}: {}", r.stdout());
        assert!(r.stdout().contains("cuMemAlloc(0) -> 1"), "{mode}");
        // Exact counts: every call the program made, the nested ones included.
        assert_eq!(
            r.summary_count("cuMemAlloc_v2"),
            (ITERATIONS + runs, ITERATIONS + runs),
            "{mode}"
        );
        let (sync_calls, _) = r.summary_count("cuStreamSynchronize");
        assert_eq!(sync_calls, ITERATIONS + runs, "{mode}");
        // The driver got every allocation the program asked for, nested or not.
        let allocs = r
            .driver_calls
            .iter()
            .filter(|l| l.starts_with("cuMemAlloc_v2 bytes=0"))
            .count() as u64;
        assert_eq!(allocs, ITERATIONS + runs, "{mode}");
    }
}
