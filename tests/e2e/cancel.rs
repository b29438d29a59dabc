//! Threads cancelled with `pthread_cancel` while they make driver calls
//! (`tests/programs/cancel_calls.c`). A cancel pending on a thread acts at its next
//! cancellation point; the shim's own work (its stderr lines, its waits for the driver) must
//! not be one, or glibc's forced unwind starts inside the shim's `catch_unwind`, which
//! swallows it and the process aborts ("FATAL: exception not rethrown"). The program's own
//! driver call stays a cancellation point if the driver's is one. The fake driver's
//! `cuCtxSynchronize` and `cuStreamSynchronize` are cancellation points here
//! (`FAKE_CUDA_CANCEL_POINTS`).

use seedance_e2e::{Finished, Run};
use std::time::Duration;

fn run(scenario: &str, mode: Option<&str>) -> Finished {
    let mut r = Run::new("cancel_calls", mode.is_some()).arg(scenario).env(
        "FAKE_CUDA_CANCEL_POINTS",
        "cuCtxSynchronize,cuStreamSynchronize",
    );
    if let Some(m) = mode {
        r = r.env("SEEDANCE_MODE", m);
    }
    r.finish_within(Duration::from_secs(30))
}

fn same_as_native(scenario: &str, want: &str) -> Vec<Finished> {
    let native = run(scenario, None);
    assert_eq!(native.output.status.code(), Some(0), "{}", native.stderr());
    assert_eq!(native.stdout(), want);
    ["observe", "fix"]
        .into_iter()
        .map(|mode| {
            let r = run(scenario, Some(mode));
            assert_eq!(
                r.output.status.code(),
                Some(0),
                "{scenario} {mode}: {}",
                r.stderr()
            );
            assert_eq!(r.stdout(), want, "{scenario} {mode}");
            assert!(!r.stderr().contains("FATAL"), "{}", r.stderr());
            r
        })
        .collect()
}

/// A failing call the shim explains on stderr: the thread still ends at its own
/// `pthread_testcancel`, after both calls, with its cleanup handler run.
#[test]
fn a_cancelled_thread_whose_call_is_explained_ends_where_it_would_natively() {
    let runs = same_as_native(
        "failing",
        "failing: codes 201 201, past the calls: yes, ended: canceled, cleanup ran: yes\n",
    );
    for r in &runs {
        assert!(
            r.stderr().contains("seedance: cuMemAlloc_v2(dptr="),
            "{}",
            r.stderr()
        );
        assert_eq!(r.summary_count("cuMemAlloc_v2"), (2, 2));
    }
}

/// A destroy with work pending: fix mode synchronises the context first with
/// `cuCtxSynchronize`, a cancellation point of the driver, on the cancelled thread.
#[test]
fn a_cancelled_thread_in_the_repair_before_a_destroy_ends_where_it_would_natively() {
    let runs = same_as_native(
        "destroy",
        "destroy: codes 0 0, past the calls: yes, ended: canceled, cleanup ran: yes\n",
    );
    let fix = &runs[1];
    assert!(fix
        .stderr()
        .contains("fix: the shim synchronised the context first (cuCtxSynchronize)"));
    let order: Vec<&String> = fix
        .driver_calls
        .iter()
        .filter(|l| l.starts_with("cuCtxSynchronize") || l.starts_with("cuCtxDestroy"))
        .collect();
    assert_eq!(
        order,
        [
            "cuCtxSynchronize -> 0",
            "cuCtxDestroy_v2 ctx=0x5eedc0000100 -> 0"
        ]
    );
}

/// The program's own call is a cancellation point of the driver: the thread ends inside
/// it, natively and under the shim (the forced unwind passes through the wrapper).
#[test]
fn a_forwarded_call_that_is_a_cancellation_point_stays_one() {
    same_as_native(
        "forwarded",
        "forwarded: codes -1 -1, past the calls: no, ended: canceled, cleanup ran: yes\n",
    );
}
