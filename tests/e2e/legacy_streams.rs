//! The legacy default stream's implicit synchronisation (CUDA programming guide, "Default
//! Stream" and "Implicit Synchronization"; measured on driver 580.159, H100, 2026-12-06: an
//! event recorded on stream 0 completed 1.012 s after a blocking stream's copy queued behind
//! a 1 s kernel), on `tests/programs/legacy_streams.c`: simpleStreams' pattern (a copy into
//! a pinned buffer on stream A, an event recorded on stream 0 and synchronised, a copy into
//! part of the buffer on stream B) and its variants with another legacy-stream call between
//! the copies. Blocking streams: correct, silent in every mode, no repair. Non-blocking
//! streams: a real race, reported in `observe` and repaired in `fix`. Two threads'
//! per-thread default streams: a real race, reported.

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};
use serde_json::Value;

const ORDERED: &str = "host buffer: as ordered\n";

fn run(args: &[&str], shim: bool) -> Run {
    Run::new("legacy_streams", shim).args(args)
}

fn hazards(r: &Finished) -> Vec<&Value> {
    r.events("host_hazard")
}

fn repairs(r: &Finished) -> Value {
    r.events("exit_summary")[0]["repairs"]["order_pinned_copies"].clone()
}

/// Correct code: ordered without the shim, and in `observe` and `fix` the same output, the
/// same driver calls, nothing on stderr, no hazard, no repair.
fn silent(kind: &str, step: &str) {
    let before = run(&[kind, step], false).finish().ok();
    assert_eq!(before.stdout(), ORDERED, "{kind} {step}");
    assert_eq!(before.stderr(), "");
    for mode in ["observe", "fix"] {
        let r = run(&[kind, step], true)
            .env("SEEDANCE_MODE", mode)
            .finish()
            .ok();
        assert_eq!(r.stdout(), ORDERED, "{kind} {step} {mode}");
        assert_eq!(r.stderr(), "", "{kind} {step} {mode}");
        assert!(hazards(&r).is_empty(), "{kind} {step} {mode}");
        assert!(repairs(&r).is_null(), "{kind} {step} {mode}");
        assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
    }
}

/// A real race: out of order without the shim, reported and unchanged in `observe`,
/// reported and ordered in `fix` (one repair in the exit summary).
fn races(kind: &str, step: &str) {
    let before = run(&[kind, step], false).finish().ok();
    assert!(
        before.stdout().starts_with("host buffer: out of order"),
        "{kind} {step}: {}",
        before.stdout()
    );
    let o = run(&[kind, step], true)
        .env("SEEDANCE_MODE", "observe")
        .finish()
        .ok();
    assert_eq!(o.stdout(), before.stdout());
    assert_forwarded_unchanged(&before.driver_calls, &o.driver_calls);
    let h = hazards(&o);
    assert_eq!(h.len(), 1, "{}", o.stderr());
    assert_eq!(h[0]["kind"], "pinned_copy_race");
    assert_eq!(h[0]["repaired"], false);
    assert_eq!(h[0]["first"]["stream"], "0x5eed50000100");
    assert_eq!(h[0]["second"]["stream"], "0x5eed50000200");
    assert_eq!(h[0]["second"]["bytes"], 16384);

    let f = run(&[kind, step], true).finish().ok();
    assert_eq!(f.stdout(), ORDERED, "{kind} {step}: {}", f.stderr());
    let h = hazards(&f);
    assert_eq!(h.len(), 1, "{}", f.stderr());
    assert_eq!(h[0]["kind"], "pinned_copy_race");
    assert_eq!(h[0]["repaired"], true);
    assert_eq!(repairs(&f), 1);
}

/// simpleStreams (cuda-samples, Samples/0_Introduction/simpleStreams): blocking streams,
/// an event recorded on stream 0 and synchronised between the copies.
#[test]
fn simple_streams_event_on_stream_0_with_blocking_streams_is_silent() {
    silent("blocking", "event");
}

#[test]
fn an_event_on_stream_0_found_complete_by_cu_event_query_is_silent() {
    silent("blocking", "event_query");
}

/// A synchronous copy (host-blocking) and a synchronous memset of device memory (not
/// host-blocking, but legacy-stream work: a barrier between blocking streams).
#[test]
fn a_synchronous_copy_or_memset_between_is_silent() {
    silent("blocking", "memcpy");
    silent("blocking", "memset");
}

#[test]
fn stream_0_legacy_or_context_synchronisation_between_is_silent() {
    silent("blocking", "sync0");
    silent("blocking", "sync_legacy");
    silent("blocking", "ctx_sync");
}

/// `cuStreamCreateWithPriority`: the flags decide, not the priority.
#[test]
fn streams_made_with_a_priority_follow_their_flags() {
    silent("priority", "event");
    races("priority_non_blocking", "event");
}

/// The same pattern on `CU_STREAM_NON_BLOCKING` streams: the legacy stream orders
/// neither, the race is real.
#[test]
fn simple_streams_pattern_on_non_blocking_streams_is_reported_and_repaired() {
    races("non_blocking", "event");
    races("non_blocking", "memset");
    races("non_blocking", "memcpy");
}

/// Two threads' per-thread default streams synchronise with the legacy stream, not with
/// each other: an event on the second thread's orders nothing of the first's.
#[test]
fn per_thread_default_streams_of_two_threads_still_race() {
    for mode in ["observe", "fix"] {
        let r = run(&["per_thread"], true)
            .env("SEEDANCE_MODE", mode)
            .finish()
            .ok();
        assert_eq!(r.stdout(), "per-thread copies: done\n");
        let h = hazards(&r);
        assert_eq!(h.len(), 1, "{mode}: {}", r.stderr());
        assert_eq!(h[0]["kind"], "pinned_copy_race");
        assert_eq!(h[0]["first"]["function"], "cuMemcpyDtoHAsync_v2_ptsz");
        assert_ne!(h[0]["first"]["tid"], h[0]["second"]["tid"]);
    }
}
