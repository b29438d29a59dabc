//! Races between asynchronous copies on pinned host memory, on the fake driver, whose copies
//! read and write host memory when their stream runs (at its synchronisation). Each
//! scenario of `tests/programs/hazards.c` queues a copy from a pinned buffer on stream A and
//! touches the same bytes from stream B, then synchronises B before A (as a GPU runs B's
//! copy while A is still busy): without the shim the device gets the later bytes; in `fix`
//! mode the shim orders B after A (its own event, `cuStreamWaitEvent`) and the data equals
//! the synchronised program's; `observe` explains and changes nothing. The healthy
//! scenarios (events, synchronisation, pools, one stream) stay silent in every mode.

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};
use serde_json::Value;

fn run(scenario: &str, shim: bool) -> Run {
    Run::new("hazards", shim).arg(scenario)
}

fn ok(r: Finished) -> Finished {
    r.ok()
}

fn plain(scenario: &str) -> Finished {
    let r = ok(run(scenario, false).finish());
    assert_eq!(r.stderr(), "");
    r
}

fn hazards(r: &Finished) -> Vec<&Value> {
    r.events("host_hazard")
}

/// A racing scenario: corrupted without the shim, explained in `observe` (nothing
/// changed), ordered in `fix` (intact). Returns the fix run.
fn races(scenario: &str, corrupted: &str) -> Finished {
    let before = plain(scenario);
    assert!(before.stdout().contains(corrupted), "{}", before.stdout());

    let o = ok(run(scenario, true).env("SEEDANCE_MODE", "observe").finish());
    assert_eq!(o.stdout(), before.stdout());
    assert_forwarded_unchanged(&before.driver_calls, &o.driver_calls);
    let h = hazards(&o);
    assert_eq!(h.len(), 1, "{}", o.stderr());
    assert_eq!(h[0]["repaired"], false);
    assert!(h[0]["repair"].is_null());
    assert_eq!(o.stderr().lines().count(), 1, "{}", o.stderr());
    assert!(!o.stderr().contains("fix mode:"));

    let f = ok(run(scenario, true).finish());
    assert!(
        f.stdout().ends_with("device copy: intact\n"),
        "{}",
        f.stdout()
    );
    let h = hazards(&f);
    assert_eq!(h.len(), 1, "{}", f.stderr());
    assert_eq!(h[0]["repaired"], true);
    assert_eq!(h[0]["repair"], "event_wait");
    assert_eq!(
        f.events("exit_summary")[0]["repairs"]["order_pinned_copies"],
        1
    );
    assert_eq!(f.stderr().lines().count(), 1, "{}", f.stderr());
    f
}

/// The shim's event is recorded on stream A and stream B waits for it, before the second
/// copy reaches the driver.
fn ordered_before(f: &Finished, second: &str) {
    let calls = &f.driver_calls;
    let rec = calls
        .iter()
        .position(|l| l.starts_with("cuEventRecord event=") && l.contains("stream=0x5eed50000100"))
        .expect("the shim's cuEventRecord on stream A");
    let wait = calls
        .iter()
        .position(|l| l.starts_with("cuStreamWaitEvent stream=0x5eed50000200"))
        .expect("stream B waits");
    let copy = calls
        .iter()
        .position(|l| l.starts_with(second))
        .expect("the second copy");
    assert!(rec < wait && wait < copy, "{calls:#?}");
}

#[test]
fn a_copy_back_into_a_pinned_block_on_another_stream_is_ordered_after_the_first() {
    let f = races(
        "recycle",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x22)",
    );
    ordered_before(&f, "cuMemcpyDtoHAsync_v2");
    let h = &hazards(&f)[0];
    assert_eq!(h["function"], "cuMemcpyDtoHAsync_v2");
    assert_eq!(h["kind"], "pinned_copy_race");
    assert_eq!(h["range"]["bytes"], 65536);
    assert_eq!(h["made_by"], "cuMemHostAlloc");
    assert_eq!(h["first"]["function"], "cuMemcpyHtoDAsync_v2");
    assert_eq!(h["first"]["stream"], "0x5eed50000100");
    assert_eq!(h["first"]["access"], "read");
    assert_eq!(h["first"]["offset"], 0);
    assert_eq!(h["first"]["bytes"], 65536);
    assert_eq!(h["second"]["stream"], "0x5eed50000200");
    assert_eq!(h["second"]["access"], "write");
    assert_eq!(h["first"]["tid"], h["second"]["tid"]);
    let err = f.stderr();
    assert!(
        err.starts_with(
            "seedance: cuMemcpyDtoHAsync_v2: cuMemcpyDtoHAsync_v2 on stream 0x5eed50000200 \
             (thread "
        ),
        "{err}"
    );
    assert!(err.contains("writes host bytes 0..65536 (64.0 KiB) of pinned range 0x"));
    assert!(err.contains("(64.0 KiB, made by cuMemHostAlloc) that cuMemcpyHtoDAsync_v2 on stream 0x5eed50000100 (thread "));
    assert!(err.contains("still reads (bytes 0..65536, 64.0 KiB)"));
    assert!(err.contains("so the second copy may run before the first one reads: the device would receive the bytes the second copy wrote"));
    assert!(err.contains("fix: record an event after the first copy (cuEventRecord(event, 0x5eed50000100)) and make the second stream wait for it (cuStreamWaitEvent(0x5eed50000200, event, 0)) before the second copy, or keep the buffer until the first copy completes"));
    assert!(err.trim_end().ends_with(
        "fix mode: the shim recorded its own event on stream 0x5eed50000100 and made stream \
         0x5eed50000200 wait for it before the second copy"
    ));
}

/// A contiguous 2D copy (`cuMemcpy2DAsync_v2`, as `cudaMemcpy2DAsync` of a packed buffer)
/// is a pinned access like a 1D one: the race is caught and ordered.
#[test]
fn a_contiguous_2d_copy_is_checked_as_a_pinned_access() {
    let f = races(
        "recycle_2d",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x22)",
    );
    ordered_before(&f, "cuMemcpyDtoHAsync_v2");
    let h = &hazards(&f)[0];
    assert_eq!(h["first"]["function"], "cuMemcpy2DAsync_v2");
    assert_eq!(h["first"]["access"], "read");
    assert_eq!(h["first"]["bytes"], 65536);
}

#[test]
fn the_same_copy_from_a_second_thread_is_ordered_too() {
    let f = races(
        "recycle_thread",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x22)",
    );
    ordered_before(&f, "cuMemcpyDtoHAsync_v2");
    let h = &hazards(&f)[0];
    assert_ne!(h["first"]["tid"], h["second"]["tid"]);
}

#[test]
fn interior_pointers_of_a_registered_block_overlapping_by_a_page() {
    let f = races(
        "interior",
        "device copy: corrupted (4096 of 8192 bytes wrong, first 0x11)",
    );
    let h = &hazards(&f)[0];
    assert_eq!(h["made_by"], "cuMemHostRegister_v2");
    assert_eq!(h["first"]["offset"], 4096);
    assert_eq!(h["first"]["bytes"], 8192);
    assert_eq!(h["second"]["offset"], 8192);
    assert_eq!(h["second"]["bytes"], 8192);
    assert!(f
        .stderr()
        .contains("writes host bytes 8192..16384 (8.0 KiB)"));
    assert!(f
        .stderr()
        .contains("still reads (bytes 4096..12288, 8.0 KiB)"));
}

#[test]
fn bytes_registered_after_copies_from_them_are_checked_as_pinned() {
    // The thread's cached answer for those bytes ("no pinned range") is dropped when the
    // ranges change.
    let f = races(
        "registered_later",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x22)",
    );
    let h = &hazards(&f)[0];
    assert_eq!(h["made_by"], "cuMemHostRegister_v2");
    assert_eq!(h["first"]["offset"], 0);
    assert_eq!(h["second"]["bytes"], 65536);
}

#[test]
fn a_failed_copy_leaves_nothing_pending_for_the_next_copy_to_commit() {
    // The failed copy's accesses, kept by its `pre` hook, are never committed by the
    // `ok` hook of the pageable copy after it.
    silent_but_failures("failed_then_pageable", 1);
}

/// A panic inside a copy's race check (debug builds: `SEEDANCE_TEST_PANIC=hazard_copy`,
/// raised in the check itself) is caught on every copy path: the program sees what it sees
/// without the shim, the driver gets the same calls, and stderr has the one internal-error
/// line.
#[test]
fn a_panic_in_the_race_checks_of_a_copy_never_reaches_the_program() {
    if seedance_e2e::artifacts()
        .shim
        .components()
        .any(|c| c.as_os_str() == "release")
    {
        seedance_e2e::say_skipped(
            "hazards::a_panic_in_the_race_checks_of_a_copy_never_reaches_the_program",
            "SEEDANCE_TEST_PANIC exists in debug builds only",
        );
        return;
    }
    // recycle: cuMemcpyHtoDAsync_v2, then cuMemcpyDtoHAsync_v2; unified: cuMemcpyAsync both
    // ways; recycle_2d: cuMemcpy2DAsync_v2.
    for scenario in ["recycle", "unified", "recycle_2d"] {
        let before = plain(scenario);
        let r = run(scenario, true)
            .env("SEEDANCE_TEST_PANIC", "hazard_copy")
            .finish();
        assert_eq!(
            r.output.status.code(),
            Some(0),
            "{scenario}: {}",
            r.stderr()
        );
        assert_eq!(r.stdout(), before.stdout(), "{scenario}");
        assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
        assert!(hazards(&r).is_empty(), "{scenario}");
        let stderr = r.stderr();
        assert_eq!(stderr.lines().count(), 1, "{scenario}: {stderr}");
        assert!(
            stderr.starts_with("seedance: internal error (SEEDANCE_TEST_PANIC=hazard_copy at "),
            "{scenario}: {stderr}"
        );
    }
}

#[test]
fn unified_copies_are_classified_by_the_pinned_range_table() {
    let f = races(
        "unified",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x22)",
    );
    ordered_before(&f, "cuMemcpyAsync dst=<host>");
    let h = &hazards(&f)[0];
    assert_eq!(h["first"]["function"], "cuMemcpyAsync");
    assert_eq!(h["first"]["access"], "read");
    assert_eq!(h["second"]["access"], "write");
}

#[test]
fn a_read_before_a_pending_write_lands_is_ordered() {
    let f = races(
        "write_then_read",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x11)",
    );
    ordered_before(&f, "cuMemcpyHtoDAsync_v2");
    let h = &hazards(&f)[0];
    assert_eq!(h["first"]["access"], "write");
    assert_eq!(h["second"]["access"], "read");
    assert!(f
        .stderr()
        .contains("so the second copy may run before the first one writes"));
}

/// The first copy's stream was destroyed before the second copy (the driver finishes its
/// work; cuStreamDestroy does not wait): still a race, explained without telling the user
/// to record on the destroyed stream, and in fix mode repaired without touching it (the
/// shim synchronises the first copy's context instead of recording an event there).
#[test]
fn a_race_with_a_copy_on_a_destroyed_stream_never_uses_the_destroyed_handle() {
    let before = plain("destroyed_first");
    for mode in ["observe", "fix"] {
        let r = ok(run("destroyed_first", true)
            .env("SEEDANCE_MODE", mode)
            .finish());
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        let h = hazards(&r);
        assert_eq!(h.len(), 1, "{mode}: {}", r.stderr());
        let e = h[0]["explanation"].as_str().unwrap();
        assert!(
            e.contains("stream 0x5eed50000100 was destroyed after the first copy"),
            "{mode}: {e}"
        );
        assert!(
            !e.contains("cuEventRecord(event, 0x5eed50000100)"),
            "{mode}: {e}"
        );
        let destroy = r
            .driver_calls
            .iter()
            .position(|l| l.starts_with("cuStreamDestroy_v2 stream=0x5eed50000100"))
            .expect("the program's destroy of stream A");
        assert!(
            !r.driver_calls[destroy + 1..]
                .iter()
                .any(|l| l.contains("stream=0x5eed50000100")),
            "{mode}: the destroyed stream was used: {:?}",
            &r.driver_calls[destroy..]
        );
        if mode == "fix" {
            assert_eq!(h[0]["repaired"], true);
            assert_eq!(h[0]["repair"], "context_synchronize");
            let second = r
                .driver_calls
                .iter()
                .position(|l| l.starts_with("cuMemcpyDtoHAsync_v2"))
                .unwrap();
            assert!(
                r.driver_calls[destroy..second]
                    .iter()
                    .any(|l| l.starts_with("cuCtxSynchronize")),
                "{:?}",
                &r.driver_calls[destroy..second]
            );
            assert!(
                e.contains("fix mode: stream 0x5eed50000100 was destroyed"),
                "{e}"
            );
        } else {
            assert_eq!(h[0]["repaired"], false);
            assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
        }
    }
}

/// A healthy scenario: intact without the shim, and in both modes the same output, the
/// same driver calls, no stderr, no hazard.
fn silent(scenario: &str) {
    silent_but_failures(scenario, 0);
}

/// [`silent`] for a scenario that makes `failed` calls the driver refuses: each one
/// explained (a `call_failed` record and its line on stderr), nothing else said.
fn silent_but_failures(scenario: &str, failed: usize) {
    let before = plain(scenario);
    assert!(
        before.stdout().ends_with("device copy: intact\n"),
        "{}",
        before.stdout()
    );
    for mode in ["observe", "fix"] {
        let r = ok(run(scenario, true).env("SEEDANCE_MODE", mode).finish());
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        if failed == 0 {
            assert_eq!(r.stderr(), "", "{mode}");
        }
        assert_eq!(r.stderr().lines().count(), failed, "{mode}: {}", r.stderr());
        assert_eq!(
            r.events("call_failed").len(),
            failed,
            "{mode}: {}",
            r.stderr()
        );
        assert!(hazards(&r).is_empty(), "{mode}: {}", r.stderr());
        assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
    }
}

#[test]
fn an_event_waited_for_by_the_second_stream_is_silent() {
    silent("event_ordered");
}

/// A healthy scenario run with a second argument (how the program reaches the call, or
/// what it does): [`silent`]'s checks; returns the observe and fix runs.
fn silent_via(scenario: &str, path: &str) -> Vec<Finished> {
    let mut runs = Vec::new();
    let before = ok(run(scenario, false).arg(path).finish());
    assert_eq!(before.stderr(), "");
    assert!(
        before.stdout().ends_with("device copy: intact\n"),
        "{path}: {}",
        before.stdout()
    );
    for mode in ["observe", "fix"] {
        let r = ok(run(scenario, true)
            .arg(path)
            .env("SEEDANCE_MODE", mode)
            .finish());
        assert_eq!(r.stdout(), before.stdout(), "{path} {mode}");
        assert_eq!(r.stderr(), "", "{path} {mode}");
        assert!(hazards(&r).is_empty(), "{path} {mode}");
        assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
        runs.push(r);
    }
    runs
}

/// [`silent_via`], and the shim counted the record through the variant `path` reaches.
fn silent_recorded_with_flags(scenario: &str, path: &str) {
    let record = if path == "procaddr_ptsz" {
        "cuEventRecordWithFlags_ptsz"
    } else {
        "cuEventRecordWithFlags"
    };
    for r in silent_via(scenario, path) {
        let summary = &r.events("exit_summary")[0];
        assert_eq!(
            summary["functions"][record]["calls"], 1,
            "{path}: {summary}"
        );
    }
}

/// The CUDA 13 runtime records events with `cuEventRecordWithFlags` (docs/design.md, fact
/// 11): an event so recorded orders the second stream, by every path to the driver.
#[test]
fn an_event_recorded_with_flags_and_waited_for_is_silent_on_every_path() {
    for path in ["exported", "dlsym", "procaddr", "procaddr_ptsz"] {
        silent_recorded_with_flags("event_ordered_with_flags", path);
    }
}

/// The same record, then `cuEventSynchronize`: the first copy is complete.
#[test]
fn an_event_recorded_with_flags_and_synchronised_is_silent() {
    for path in ["exported", "procaddr_ptsz"] {
        silent_recorded_with_flags("event_synchronized_with_flags", path);
    }
}

/// Completion follows waits: stream B waited for the first copy's event, then B was
/// synchronised (or an event recorded on B after the wait completed); a copy back into the
/// buffer on a third stream is not a race, in observe or fix.
#[test]
fn a_copy_complete_through_a_waiting_stream_is_silent() {
    for how in ["stream", "event"] {
        silent_via("wait_then_complete", how);
    }
}

/// Unknown means forget, never alarm: a wait on an event the shim never saw recorded drops
/// the pending accesses from the checks, counted in the exit summary.
#[test]
fn a_wait_on_an_event_recorded_unseen_forgets_instead_of_alarming() {
    for r in silent_via("unseen_record", "-") {
        assert_eq!(r.events("exit_summary")[0]["unknown_orderings"], 1);
    }
    // A healthy program that the model follows forgets nothing.
    for r in silent_via("event_ordered_with_flags", "exported") {
        assert_eq!(r.events("exit_summary")[0]["unknown_orderings"], 0);
    }
}

/// Copies captured into a CUDA graph do not run: a copy back into the buffer on another
/// stream while the capture is open is no race, and the shim makes no call of its own
/// (no event record or wait, no query or synchronisation) while the capture is open.
#[test]
fn copies_captured_into_a_graph_are_not_running_and_the_capture_is_left_alone() {
    let before = plain("captured");
    assert_eq!(before.stdout(), "graph made\nhost copy: intact\n");
    for mode in ["observe", "fix"] {
        let r = ok(run("captured", true).env("SEEDANCE_MODE", mode).finish());
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        assert!(hazards(&r).is_empty(), "{mode}");
        assert_forwarded_unchanged(&before.driver_calls, &r.driver_calls);
        let ordering = |calls: &[String]| -> Vec<String> {
            let names = [
                "cuEventCreate",
                "cuEventRecord",
                "cuStreamWaitEvent",
                "cuStreamQuery",
                "cuStreamSynchronize",
                "cuCtxSynchronize",
                "cuEventSynchronize",
                "cuEventQuery",
            ];
            calls
                .iter()
                .filter(|l| names.iter().any(|n| l.starts_with(&format!("{n} "))))
                .cloned()
                .collect()
        };
        assert_eq!(
            ordering(&r.driver_calls),
            ordering(&before.driver_calls),
            "{mode}"
        );
    }
}

/// Streams ordered through memory values (cuStreamWriteValue32 / cuStreamWaitValue32) are
/// beyond the model: the pending accesses are forgotten, counted, never reported.
#[test]
fn streams_ordered_through_a_memory_value_are_forgotten_not_reported() {
    for r in silent_via("value_ordered", "-") {
        assert_eq!(r.events("exit_summary")[0]["unknown_orderings"], 1);
        assert_eq!(r.summary_count("cuStreamWriteValue32_v2"), (1, 0));
    }
}

/// Context-wide events (`cuCtxRecordEvent`, `cuCtxWaitEvent`, CUDA 12.5+) order or complete
/// the work of every stream of a context: beyond the model, so the pending accesses are
/// forgotten, counted, never reported.
#[test]
fn context_wide_event_records_and_waits_are_forgotten_not_reported() {
    for (scenario, call) in [
        ("ctx_event_synchronized", "cuCtxRecordEvent"),
        ("ctx_waited", "cuCtxWaitEvent"),
    ] {
        for r in silent_via(scenario, "-") {
            assert_eq!(
                r.events("exit_summary")[0]["unknown_orderings"],
                1,
                "{scenario}"
            );
            assert_eq!(r.summary_count(call), (1, 0), "{scenario}");
        }
    }
}

#[test]
fn a_staging_buffer_reused_after_its_event_completed_is_silent() {
    silent("event_synchronized");
}

#[test]
fn a_pool_block_reused_after_cu_event_query_is_silent() {
    silent("pool_query");
}

#[test]
fn a_stream_polled_until_idle_is_silent() {
    silent("stream_polled");
}

#[test]
fn a_synchronised_stream_is_silent() {
    silent("synchronized");
}

#[test]
fn a_dataloader_style_pinned_loop_is_silent() {
    silent("dataloader");
}

#[test]
fn copies_on_one_stream_or_disjoint_bytes_are_silent() {
    silent("same_stream");
    silent("disjoint");
}

fn guarded(scenario: &str, mode: &str) -> Finished {
    ok(run(scenario, true)
        .env("SEEDANCE_MODE", mode)
        .env("SEEDANCE_HOST_GUARD", "on")
        .finish())
}

#[test]
fn a_host_write_into_a_pending_copys_source_is_caught_by_the_guard() {
    if seedance_e2e::target::skip_under_emulation(crate::host_guard::QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let before = plain("host_write");
    assert!(
        before
            .stdout()
            .contains("device copy: corrupted (4096 of 65536 bytes wrong, first 0x11)"),
        "{}",
        before.stdout()
    );
    // Off by default: host writes are not watched.
    let off = ok(run("host_write", true).finish());
    assert_eq!(off.stdout(), before.stdout());
    assert_eq!(off.stderr(), "");

    let o = guarded("host_write", "observe");
    assert_eq!(o.stdout(), before.stdout());
    let f = guarded("host_write", "fix");
    assert!(
        f.stdout().ends_with("device copy: intact\n"),
        "{}",
        f.stdout()
    );
    for (r, repaired) in [(&o, false), (&f, true)] {
        let h = hazards(r);
        assert_eq!(h.len(), 1, "{}", r.stderr());
        let h = h[0];
        assert_eq!(h["kind"], "host_write_race");
        assert_eq!(h["repaired"], repaired);
        assert_eq!(h["first"]["function"], "cuMemcpyHtoDAsync_v2");
        assert_eq!(h["first"]["stream"], "0x5eed50000100");
        assert_eq!(h["second"]["access"], "write");
        assert_eq!(h["second"]["offset"], 65536 - 4096);
        assert_eq!(h["second"]["bytes"], 4096);
        let err = r.stderr();
        assert!(
            err.starts_with(
                "seedance: cuMemcpyHtoDAsync_v2: host write into pinned memory during a copy: \
                 bytes 61440..65536 of pinned range 0x"
            ),
            "{err}"
        );
        assert!(
            err.contains("changed while cuMemcpyHtoDAsync_v2 on stream 0x5eed50000100 (thread ")
        );
        assert!(err.contains("was pending with bytes 0..65536 of that range as its source"));
        assert_eq!(
            err.contains("fix mode: the copy was sent from the shim's snapshot"),
            repaired
        );
    }
    assert_eq!(
        f.events("exit_summary")[0]["repairs"]["snapshot_before_copy"],
        1
    );
}

/// A child forked while a guarded copy is pending, writing into the copy's source: the
/// child only forwards (the fork handler clears the whole configuration word, the guard's
/// bits included), so its inherited guard makes no repair there: no `cuStreamSynchronize`
/// the program did not make. Before, the guard's `fix` switch outlived the fork and the
/// child's write waited for the stream.
#[test]
fn a_forked_child_writing_into_a_guarded_source_only_forwards() {
    if seedance_e2e::target::skip_under_emulation(crate::host_guard::QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let before = plain("fork_write");
    assert_eq!(
        before.stdout(),
        "child wrote\nchild exit 0\ndevice copy: intact\n"
    );
    let syncs = |r: &Finished| {
        r.driver_calls
            .iter()
            .filter(|l| l.starts_with("cuStreamSynchronize "))
            .count()
    };
    for mode in ["observe", "fix"] {
        let r = guarded("fork_write", mode);
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        assert_eq!(syncs(&r), syncs(&before), "{mode}: {:#?}", r.driver_calls);
        assert!(hazards(&r).is_empty(), "{mode}");
    }
}

#[test]
fn the_guard_is_silent_for_a_write_after_the_copy_and_leaves_the_programs_faults_alone() {
    if seedance_e2e::target::skip_under_emulation(crate::host_guard::QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    for mode in ["observe", "fix"] {
        let r = guarded("write_after_sync", mode);
        assert!(
            r.stdout().ends_with("device copy: intact\n"),
            "{}",
            r.stdout()
        );
        assert_eq!(r.stderr(), "", "{mode}");
        assert!(hazards(&r).is_empty());

        let r = guarded("foreign_fault", mode);
        assert!(
            r.stdout().contains("the program's handler ran\n"),
            "{}",
            r.stdout()
        );
        assert!(r.stdout().ends_with("device copy: intact\n"));
        assert_eq!(r.stderr(), "", "{mode}");
    }
}

/// 12 threads, each in its own context on its own streams and its own pinned buffer (the
/// shim keeps an event of its own in at most 16 contexts), 2,000 copies, event
/// records and waits each, with synchronisations and queries, and every 500 rounds a race
/// of its own (tests/programs/pinned_threads.c): exact counts, and every race caught and
/// ordered in fix mode (the device got the bytes of before the race), explained in observe
/// with nothing changed. No timing: the same under any CPU load.
#[test]
fn threads_on_their_own_streams_exact_counts_and_every_race_caught() {
    let (t, n, race) = (12u64, 2000u64, 500u64);
    let args = [t.to_string(), n.to_string(), race.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let per_thread = 3 * n
        + (0..n)
            .map(|i| match (i % 128 == 127, i % 64 == 63) {
                (true, _) => 2,
                (false, true) => 1,
                _ => 0,
            })
            .sum::<u64>()
        + n / race;
    let races = t * (n / race);
    let calls = format!("ok_calls={}", t * per_thread);

    let before = ok(Run::new("pinned_threads", false).args(&args).finish());
    assert_eq!(before.stdout(), format!("{calls} intact=0\n"));

    let o = ok(Run::new("pinned_threads", true)
        .env("SEEDANCE_MODE", "observe")
        .args(&args)
        .finish());
    assert_eq!(o.stdout(), before.stdout());
    let h = hazards(&o);
    assert_eq!(
        h.len(),
        1,
        "explained once per pair of call sites: {}",
        o.stderr()
    );
    assert_eq!(h[0]["kind"], "pinned_copy_race");

    let f = ok(Run::new("pinned_threads", true).args(&args).finish());
    assert_eq!(
        f.stdout(),
        format!("{calls} intact={races}\n"),
        "{}",
        f.stderr()
    );
    assert_eq!(hazards(&f).len(), 1, "{}", f.stderr());
    let s = &f.events("exit_summary")[0];
    assert_eq!(s["repairs"]["order_pinned_copies"], races);
    assert_eq!(s["unknown_orderings"], 0);
    assert_eq!(f.summary_count("cuMemcpyHtoDAsync_v2"), (t * n, 0));
    assert_eq!(f.summary_count("cuEventRecord"), (t * n, 0));
    assert_eq!(f.summary_count("cuStreamWaitEvent"), (t * n, 0));
    assert_eq!(f.summary_count("cuMemcpyDtoHAsync_v2"), (races, 0));
}
