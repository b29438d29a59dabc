//! Context lifetime and asynchronous safety, on the fake driver, whose launches
//! and copies wait in their stream until something synchronises it and whose context
//! destroy loses queued work. Each scenario of `tests/programs/lifetime.c` runs without the
//! shim (the damage: an error code, corrupted data), in `fix` mode (explained and repaired:
//! data intact, no error) and in `observe` mode (explained, nothing changed).

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};
use serde_json::Value;

fn run(scenario: &str, shim: bool) -> Run {
    Run::new("lifetime", shim).arg(scenario)
}

fn plain(scenario: &str) -> Finished {
    let r = run(scenario, false).finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stdout());
    assert_eq!(r.stderr(), "");
    r
}

fn fixed(scenario: &str) -> Finished {
    let r = run(scenario, true).finish();
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "{}\n{}",
        r.stdout(),
        r.stderr()
    );
    r
}

/// A synchronize or destroy of a stream or event whose context is gone: the calls observe
/// mode does not make (the driver dereferences the handle and may crash), answering
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED` itself.
fn is_dead_handle_call(line: &str) -> bool {
    [
        "cuStreamSynchronize ",
        "cuStreamDestroy_v2 ",
        "cuEventSynchronize ",
        "cuEventDestroy_v2 ",
    ]
    .iter()
    .any(|p| line.starts_with(p))
        && line.ends_with("-> 709")
}

/// Observe mode: the program sees exactly what it sees without the shim, every call reaches
/// the driver unchanged except those on handles known dead (answered with the driver's own
/// code, never forwarded), and the hazard is explained.
fn observed(scenario: &str) -> Finished {
    let base = plain(scenario);
    let r = run(scenario, true).env("SEEDANCE_MODE", "observe").finish();
    assert_eq!(r.stdout(), base.stdout());
    let forwarded: Vec<String> = base
        .driver_calls
        .iter()
        .filter(|l| !is_dead_handle_call(l))
        .cloned()
        .collect();
    assert_forwarded_unchanged(&forwarded, &r.driver_calls);
    assert!(
        !r.driver_calls.iter().any(|l| is_dead_handle_call(l)),
        "{:#?}",
        r.driver_calls
    );
    assert!(r.events("lifetime_repair").is_empty());
    assert!(r
        .events("lifetime_fault")
        .iter()
        .all(|f| f["repaired"] == false));
    r
}

fn faults<'a>(r: &'a Finished, kind: &str) -> Vec<&'a Value> {
    r.events("lifetime_fault")
        .into_iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

fn calls(r: &Finished, prefix: &str) -> Vec<String> {
    r.driver_calls
        .iter()
        .filter(|l| l.starts_with(prefix))
        .cloned()
        .collect()
}

/// The driver's context calls in order, without the shim's own `cuCtxGet*` queries.
fn context_calls(r: &Finished) -> Vec<String> {
    calls(r, "cuCtx")
        .into_iter()
        .filter(|l| !l.starts_with("cuCtxGet"))
        .collect()
}

fn repairs(r: &Finished) -> Value {
    r.events("exit_summary")[0]["repairs"].clone()
}

#[test]
fn destroy_before_sync_is_synchronised_first() {
    let before = plain("destroy_before_sync");
    assert!(before
        .stdout()
        .contains("cuStreamSynchronize after the destroy -> 709\n"));
    assert!(before.stdout().contains("results: corrupted"));

    let r = fixed("destroy_before_sync");
    assert_eq!(
        r.stdout(),
        "cuLaunchKernel on the stream -> 0\ncuMemcpyHtoDAsync -> 0\ncuMemcpyDtoHAsync -> 0\n\
         cuCtxDestroy before synchronising -> 0\ncuStreamSynchronize after the destroy -> 0\n\
         results: intact\n"
    );
    let err = r.stderr();
    assert!(err.starts_with("seedance: cuCtxDestroy_v2: destroying context 0x5eedc0000100 (device 0, generation 1, made by cuCtxCreate_v2 on thread "), "{err}");
    assert!(err.contains(
        "while its streams still have unfinished work (1 launch and 2 copies submitted since \
         they were last synchronised: stream 0x5eed50000100 (made by cuStreamCreate on thread"
    ));
    assert!(err.contains("fix: the shim synchronised the context first (cuCtxSynchronize)"));
    // The later synchronize of the dead stream: its work had completed, so it is done.
    assert!(err.contains("seedance: cuStreamSynchronize: stream 0x5eed50000100"));
    assert!(err.contains("fix: all its work completed before the context ended; returned CUDA_SUCCESS without calling the driver"));
    // The driver saw the repair before the destroy, and never saw the dead synchronize.
    let order = context_calls(&r);
    assert_eq!(
        order,
        [
            "cuCtxCreate_v2 flags=0 dev=0 -> 0",
            "cuCtxSynchronize -> 0",
            "cuCtxDestroy_v2 ctx=0x5eedc0000100 -> 0"
        ]
    );
    assert!(calls(&r, "cuStreamSynchronize").is_empty());

    let f = &faults(&r, "pending_work_at_destroy")[0];
    assert_eq!(f["function"], "cuCtxDestroy_v2");
    assert_eq!(f["result"], Value::Null);
    assert_eq!(f["context"], "0x5eedc0000100");
    assert_eq!(f["device"], 0);
    assert_eq!(f["generation"], 1);
    assert_eq!(f["repaired"], true);
    assert_eq!(f["streams"][0]["stream"], "0x5eed50000100");
    assert_eq!(f["streams"][0]["launches"], 1);
    assert_eq!(f["streams"][0]["copies"], 2);
    assert_eq!(f["streams"][0]["created"]["function"], "cuStreamCreate");
    assert!(f["streams"][0]["created"]["seq"].as_u64().unwrap() > 0);
    let u = &faults(&r, "use_after_destroy")[0];
    assert_eq!(u["function"], "cuStreamSynchronize");
    assert_eq!(u["handle_kind"], "stream");
    assert_eq!(u["ended"]["how"], "destroyed");
    assert_eq!(u["ended"]["site"]["function"], "cuCtxDestroy_v2");
    assert_eq!(u["ended"]["lost_launches"], 0);
    let kinds: Vec<&Value> = r
        .events("lifetime_repair")
        .iter()
        .map(|e| &e["kind"])
        .collect();
    assert_eq!(kinds, ["synchronize_before_destroy", "already_complete"]);
    assert_eq!(
        repairs(&r),
        serde_json::json!({"already_complete": 1, "synchronize_before_destroy": 1})
    );
}

#[test]
fn destroy_before_sync_observed() {
    let r = observed("destroy_before_sync");
    assert!(r.stdout().contains("results: corrupted"));
    let err = r.stderr();
    assert!(err.contains("the work is abandoned: its results are lost"));
    assert!(err.contains(
        "seedance: cuStreamSynchronize: CUDA_ERROR_CONTEXT_IS_DESTROYED (709): stream \
         0x5eed50000100"
    ));
    assert!(err.contains("with 1 launch and 2 copies still unfinished (lost)"));
    let u = &faults(&r, "use_after_destroy")[0];
    assert_eq!(u["result"], 709);
    assert_eq!(u["ended"]["lost_copies"], 2);
    assert!(r.events("call_failed").is_empty());
    assert_eq!(r.summary_count("cuStreamSynchronize"), (1, 1));
}

#[test]
fn event_and_stream_destroyed_after_a_reset_are_already_released() {
    let before = plain("event_after_reset");
    assert_eq!(
        before.stdout(),
        "cuDevicePrimaryCtxReset -> 0\ncuEventDestroy after the reset -> 709\n\
         cuStreamDestroy after the reset -> 709\n"
    );
    let r = fixed("event_after_reset");
    assert_eq!(
        r.stdout(),
        "cuDevicePrimaryCtxReset -> 0\ncuEventDestroy after the reset -> 0\n\
         cuStreamDestroy after the reset -> 0\n"
    );
    assert!(calls(&r, "cuEventDestroy").is_empty());
    assert!(calls(&r, "cuStreamDestroy").is_empty());
    let f = &faults(&r, "use_after_destroy");
    assert_eq!(f.len(), 2);
    assert_eq!(f[0]["function"], "cuEventDestroy_v2");
    assert_eq!(f[0]["handle_kind"], "event");
    assert_eq!(f[0]["result"], 0);
    assert_eq!(f[0]["created"]["function"], "cuEventCreate");
    assert_eq!(f[0]["ended"]["how"], "reset");
    assert_eq!(
        f[0]["ended"]["site"]["function"],
        "cuDevicePrimaryCtxReset_v2"
    );
    assert!(r
        .stderr()
        .contains("belonged to context 0x5eedc0000100 (device 0, primary, generation 1"));
    assert_eq!(repairs(&r), serde_json::json!({"already_released": 2}));
    // In the exit summary: nothing left alive (the primary context was reset).
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["live_contexts"], serde_json::json!([]));

    let o = observed("event_after_reset");
    assert!(o.stderr().contains(
        "seedance: cuEventDestroy_v2: CUDA_ERROR_CONTEXT_IS_DESTROYED (709): event 0x5eede0000100"
    ));
}

#[test]
fn atexit_frees_after_the_context_is_gone() {
    let before = plain("atexit_free");
    assert_eq!(
        before.stdout(),
        "cuCtxDestroy -> 0\natexit cuMemFree -> 201\natexit cuStreamDestroy -> 709\n\
         atexit cuEventDestroy -> 709\n"
    );
    let r = fixed("atexit_free");
    assert_eq!(
        r.stdout(),
        "cuCtxDestroy -> 0\natexit cuMemFree -> 0\natexit cuStreamDestroy -> 0\n\
         atexit cuEventDestroy -> 0\n"
    );
    assert!(calls(&r, "cuMemFree_v2").is_empty());
    let kinds: Vec<&Value> = faults(&r, "use_after_destroy")
        .iter()
        .map(|f| &f["handle_kind"])
        .collect();
    assert_eq!(kinds, ["device_memory", "stream", "event"]);
    assert!(r.stderr().contains(
        "seedance: cuMemFree_v2: device memory 0x700000000000 belonged to context \
         0x5eedc0000100"
    ));
    assert!(r
        .stderr()
        .contains("which was destroyed by cuCtxDestroy_v2 on thread"));
    // Nothing at exit: the memory, stream and event died with their context.
    assert!(!r.stderr().contains("at exit:"), "{}", r.stderr());

    let o = observed("atexit_free");
    assert!(o.stderr().contains(
        "seedance: cuMemFree_v2: CUDA_ERROR_INVALID_CONTEXT (201): device memory \
         0x700000000000 belonged to context"
    ));
    assert_eq!(faults(&o, "use_after_destroy").len(), 3);
}

/// A pinned free with a copy pending, on a driver that waits for the copy before it
/// releases the memory (driver 580, as the fake plays it): the data is intact with and
/// without the shim, and the shim says what the driver did (a hidden synchronisation, a
/// warning-level finding), in both modes alike, without a word of corruption and without
/// a repair.
fn pinned(scenario: &str) {
    let before = plain(scenario);
    assert!(
        before.stdout().ends_with("device copy: intact\n"),
        "{}",
        before.stdout()
    );
    for r in [fixed(scenario), observed(scenario)] {
        assert_eq!(r.stdout(), before.stdout());
        let f = &faults(&r, "pinned_release_waited")[0];
        assert_eq!(f["function"], "cuMemFreeHost");
        assert_eq!(f["range"]["bytes"], 4096);
        assert_eq!(f["streams"][0]["copies"], 1);
        assert_eq!(f["repaired"], false);
        assert!(faults(&r, "pinned_memory_in_use").is_empty());
        assert!(r.events("lifetime_repair").is_empty());
        // No synchronisation of the shim's own: the free reached the driver as the program
        // made it, and the driver's own wait completed the copy.
        let free = r
            .driver_calls
            .iter()
            .position(|l| l.starts_with("cuMemFreeHost"))
            .expect("freed");
        let first_sync = r
            .driver_calls
            .iter()
            .position(|l| l.starts_with("cuStreamSynchronize"))
            .expect("the program synchronises");
        assert!(free < first_sync, "{:?}", r.driver_calls);
        let err = r.stderr();
        assert!(
            err.starts_with("seedance: cuMemFreeHost: freeing pinned host memory 0x"),
            "{err}"
        );
        assert!(err.contains("(4.0 KiB (4096 bytes), made by cuMemHostAlloc on thread"));
        assert!(err.contains("1 copy): cuMemFreeHost waited "), "{err}");
        assert!(err.contains(
            "for them before releasing the memory (the streams were idle when it returned), \
             so the copies completed with the data intact"
        ));
        assert!(!err.contains("corrupt"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        // In the report: a warning the driver handled, never "not repaired" or an error.
        let (_, report) = crate::recovered::gate(&r);
        let p = problem(&report, "lifetime_fault/pinned_release_waited");
        assert_eq!(p["severity"], "warning");
        assert!(
            p["title"]
                .as_str()
                .unwrap()
                .ends_with("handled by the driver (no repair needed)"),
            "{p}"
        );
        assert!(report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["severity"] != "error"));
    }
}

/// The analyzer's problem with key `key`.
fn problem<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {report}"))
}

/// The same on a driver that released the memory with the copy still queued
/// (`FAKE_CUDA_RELEASE_NO_WAIT=1`, not seen on a real driver): the stream is still busy
/// after the call, so the shim reports the real fault, an error, in both modes.
fn pinned_released_under_the_copy(scenario: &str) {
    let before = run(scenario, false)
        .env("FAKE_CUDA_RELEASE_NO_WAIT", "1")
        .finish();
    assert!(before.stdout().contains("device copy: corrupted ("));
    for mode in ["fix", "observe"] {
        let r = run(scenario, true)
            .env("FAKE_CUDA_RELEASE_NO_WAIT", "1")
            .env("SEEDANCE_MODE", mode)
            .finish();
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        let f = &faults(&r, "pinned_memory_in_use")[0];
        assert_eq!(f["function"], "cuMemFreeHost");
        assert_eq!(f["repaired"], false);
        assert!(faults(&r, "pinned_release_waited").is_empty());
        let err = r.stderr();
        assert!(err.contains(
            "returned while asynchronous copies that read or write it were still running"
        ));
        assert!(err.contains("the copies may read freed or reused memory (corrupted data)"));
        let (code, report) = crate::recovered::gate(&r);
        assert_eq!(code, Some(4));
        assert_eq!(
            problem(&report, "lifetime_fault/pinned_memory_in_use")["severity"],
            "error"
        );
    }
}

#[test]
fn pinned_memory_freed_while_a_copy_reads_it() {
    pinned("pinned_free");
}

#[test]
fn pinned_memory_freed_while_a_copy_reads_inside_it() {
    pinned("pinned_free_interior");
}

#[test]
fn pinned_memory_released_under_a_running_copy_is_the_error() {
    pinned_released_under_the_copy("pinned_free");
}

#[test]
fn registered_memory_unregistered_and_reused_while_a_copy_reads_it() {
    let before = plain("unregister_reuse");
    assert!(before.stdout().ends_with("device copy: intact\n"));
    for r in [fixed("unregister_reuse"), observed("unregister_reuse")] {
        assert_eq!(r.stdout(), before.stdout());
        let f = &faults(&r, "pinned_release_waited")[0];
        assert_eq!(f["function"], "cuMemHostUnregister");
        assert!(r
            .stderr()
            .contains("seedance: cuMemHostUnregister: unregistering pinned host memory 0x"));
        assert!(r
            .stderr()
            .contains("made by cuMemHostRegister_v2 on thread"));
        assert!(r.stderr().contains("cuMemHostUnregister waited "));
    }
    let torn = run("unregister_reuse", false)
        .env("FAKE_CUDA_RELEASE_NO_WAIT", "1")
        .finish();
    assert!(torn
        .stdout()
        .contains("device copy: corrupted (256 of 256 bytes wrong, first 0x55)"));
}

#[test]
fn allocation_from_before_a_reset_is_already_released_and_the_new_context_works() {
    let before = plain("alloc_reset_alloc");
    assert!(before
        .stdout()
        .ends_with("cuMemFree of the allocation from before the reset -> 1\n"));
    let r = fixed("alloc_reset_alloc");
    assert_eq!(
        r.stdout(),
        "cuMemAlloc -> 0\ncuDevicePrimaryCtxReset -> 0\nnew primary context: new handle\n\
         cuMemAlloc in the new context -> 0\ncuLaunchKernel in the new context -> 0\n\
         cuCtxSynchronize -> 0\ncuMemFree of the new allocation -> 0\n\
         cuMemFree of the allocation from before the reset -> 0\n"
    );
    assert_eq!(
        calls(&r, "cuMemFree_v2"),
        ["cuMemFree_v2 ptr=0x700000001000 -> 0"]
    );
    let f = &faults(&r, "use_after_destroy")[0];
    assert_eq!(f["handle_kind"], "device_memory");
    assert_eq!(f["handle"], "0x700000000000");
    assert_eq!(f["ended"]["how"], "reset");
    // The new primary context is a new incarnation; nothing from the old one lingers.
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["live_contexts"].as_array().unwrap().len(), 1);
    assert_eq!(s["live_contexts"][0]["context"], "0x5eedc0000200");
    assert_eq!(s["live_contexts"][0]["primary"], true);
    // A runtime-owned primary context at exit is not worth a paragraph.
    assert!(!r.stderr().contains("at exit:"), "{}", r.stderr());
    let o = observed("alloc_reset_alloc");
    assert!(o.stderr().contains(
        "seedance: cuMemFree_v2: CUDA_ERROR_INVALID_VALUE (1): device memory 0x700000000000"
    ));
}

#[test]
fn stream_ordered_free_waits_for_copies_on_other_streams() {
    let r = fixed("free_async");
    let f = &faults(&r, "device_memory_in_use")[0];
    assert_eq!(f["function"], "cuMemFreeAsync");
    assert_eq!(f["range"]["address"], "0x700000000000");
    assert_eq!(f["streams"][0]["stream"], "0x5eed50000100");
    let i = r
        .driver_calls
        .iter()
        .position(|l| l == "cuStreamSynchronize stream=0x5eed50000100 -> 0")
        .expect("stream a synchronised");
    let j = r
        .driver_calls
        .iter()
        .position(|l| l.starts_with("cuMemFreeAsync"))
        .unwrap();
    assert!(i < j);
    let o = observed("free_async");
    assert!(o
        .stderr()
        .contains("seedance: cuMemFreeAsync: freeing device memory 0x700000000000 (4.0 KiB"));
}

#[test]
fn a_clean_program_sees_nothing() {
    let base = plain("clean");
    let r = fixed("clean");
    assert_eq!(r.stdout(), base.stdout());
    assert_eq!(r.stderr(), "");
    assert_forwarded_unchanged(&base.driver_calls, &r.driver_calls);
    assert!(r.events("lifetime_fault").is_empty());
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["live_contexts"], serde_json::json!([]));
    assert_eq!(s["leaked_allocations"], serde_json::json!([]));
    assert_eq!(s["unsynchronized_streams"], serde_json::json!([]));
    assert_eq!(s["calls_after_deinit"], serde_json::json!({}));
    assert_eq!(s["repairs"], serde_json::json!({}));
}

/// What the process leaves to the driver at exit is in the exit summary; stderr gets one line,
/// for the work still queued on a stream (its results nothing waited for).
#[test]
fn exit_report_names_what_was_left_behind() {
    let r = fixed("leave");
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "seedance: at exit: work never synchronised (stream 0x5eed50000100 (made by \
             cuStreamCreate on thread"
        ),
        "{err}"
    );
    assert!(
        err.ends_with(
            "): 1 launch): it was still queued on the device when the process exited, and \
             nothing waited for its results. Synchronise the stream (cuStreamSynchronize or \
             cudaStreamSynchronize) before exit\n"
        ),
        "{err}"
    );
    assert!(
        !err.contains("context still alive") && !err.contains("never freed"),
        "{err}"
    );
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["live_contexts"][0]["context"], "0x5eedc0000100");
    assert_eq!(s["live_contexts"][0]["primary"], false);
    let leaks = s["leaked_allocations"].as_array().unwrap();
    assert_eq!(leaks.len(), 2);
    assert_eq!(leaks[0]["device"], 0);
    assert_eq!(leaks[0]["context"], "0x5eedc0000100");
    assert_eq!(leaks[0]["bytes"], 4096);
    assert_eq!(leaks[1]["host"], true);
    assert_eq!(leaks[1]["bytes"], 512);
    let u = &s["unsynchronized_streams"][0];
    assert_eq!(u["stream"], "0x5eed50000100");
    assert_eq!(u["launches"], 1);
    assert_eq!(u["context"], "0x5eedc0000100");
    assert_eq!(u["primary_retained"], false);
}

#[test]
fn calls_after_deinitialisation_are_counted_but_not_the_runtime_teardown() {
    let r = run("after_deinit", true)
        .env("FAKE_CUDA_DEINIT_AT_EXIT", "1")
        .finish();
    assert_eq!(
        r.stdout(),
        "exiting\natexit cuMemFree after deinit -> 4\n\
         atexit cuDevicePrimaryCtxRelease after deinit -> 4\n"
    );
    let s = &r.events("exit_summary")[0];
    assert_eq!(
        s["calls_after_deinit"],
        serde_json::json!({"cuMemFree_v2": 1})
    );
    // Calls after the driver shut down did nothing and cost the program nothing: in the
    // trace and the report, not on stderr.
    assert_eq!(r.stderr(), "");
    assert_eq!(s["live_contexts"][0]["primary"], true);
}

/// A context and its memory never released: the driver reclaims them when the process ends,
/// so stderr says nothing; the exit summary lists them and the analyzer's report has them in
/// its process-health table, not among its problems.
#[test]
fn a_context_left_at_exit_is_silent_and_in_the_report() {
    let base = plain("leave_context");
    for mode in ["observe", "fix"] {
        let r = run("leave_context", true)
            .env("SEEDANCE_MODE", mode)
            .finish();
        assert_eq!(r.output.status.code(), Some(0), "{mode}");
        assert_eq!(r.stdout(), base.stdout(), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        let s = &r.events("exit_summary")[0];
        assert_eq!(s["live_contexts"][0]["context"], "0x5eedc0000100", "{mode}");
        assert_eq!(s["live_contexts"][0]["primary"], false, "{mode}");
        assert_eq!(s["leaked_allocations"][0]["bytes"], 4096, "{mode}");
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<String> = r.records.iter().map(|v| v.to_string()).collect();
        std::fs::write(dir.path().join("leave.jsonl"), lines.join("\n") + "\n").unwrap();
        let report = crate::signals::analyze(dir.path());
        assert_eq!(report["problems"], serde_json::json!([]), "{report}");
        let h = &report["process_health"][0];
        assert_eq!(h["live_contexts"], 1, "{report}");
        assert_eq!(h["leaked_allocations"], 1, "{report}");
        assert_eq!(h["leaked_bytes"], 4096, "{report}");
    }
}

#[test]
fn lifetime_tracking_off_changes_nothing() {
    let base = plain("destroy_before_sync");
    let r = run("destroy_before_sync", true)
        .env("SEEDANCE_LIFETIME", "off")
        .finish();
    assert_eq!(r.stdout(), base.stdout());
    assert!(r.events("lifetime_fault").is_empty());
    assert!(!r.stderr().contains("destroying context"));
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["live_contexts"], serde_json::json!([]));
}

// ---------------------------------------------------------------------------------------
// Stream operations other than launches and copies: asynchronous memsets, graph launches
// and host functions count as pending work on their stream.

const OP: &str = "1 stream operation (a memset, graph launch or host function)";

/// `scenario` queues one operation (`call`) on a created stream, then destroys the context
/// before synchronising: without the shim the later synchronize gets 709; in `fix` mode the
/// context is synchronised first and the explanation counts the operation; in `observe`
/// mode it is explained and lost.
fn op_then_destroy(scenario: &str, call: &str) {
    let before = plain(scenario);
    assert!(
        before
            .stdout()
            .contains("cuStreamSynchronize after the destroy -> 709\n"),
        "{}",
        before.stdout()
    );

    let r = fixed(scenario);
    assert_eq!(
        r.stdout(),
        format!(
            "{call} on the stream -> 0\ncuCtxDestroy before synchronising -> 0\n\
             cuStreamSynchronize after the destroy -> 0\n"
        )
    );
    let err = r.stderr();
    assert!(
        err.starts_with("seedance: cuCtxDestroy_v2: destroying context 0x5eedc0000100"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "while its streams still have unfinished work ({OP} submitted since they were \
             last synchronised: stream 0x5eed50000100 (made by cuStreamCreate on thread"
        )),
        "{err}"
    );
    assert!(err.contains(&format!(
        "): {OP}); fix: the shim synchronised the context first"
    )));
    assert!(
        !err.contains("launch and") && !err.contains("1 launch;"),
        "{err}"
    );
    let order = context_calls(&r);
    assert_eq!(
        order,
        [
            "cuCtxCreate_v2 flags=0 dev=0 -> 0",
            "cuCtxSynchronize -> 0",
            "cuCtxDestroy_v2 ctx=0x5eedc0000100 -> 0"
        ]
    );
    let f = &faults(&r, "pending_work_at_destroy")[0];
    assert_eq!(f["repaired"], true);
    assert_eq!(f["streams"][0]["stream"], "0x5eed50000100");
    assert_eq!(f["streams"][0]["launches"], 0);
    assert_eq!(f["streams"][0]["copies"], 0);
    assert_eq!(f["streams"][0]["ops"], 1);
    let kinds: Vec<&Value> = r
        .events("lifetime_repair")
        .iter()
        .map(|e| &e["kind"])
        .collect();
    assert_eq!(kinds, ["synchronize_before_destroy", "already_complete"]);

    let o = observed(scenario);
    let err = o.stderr();
    assert!(
        err.contains("the work is abandoned: its results are lost"),
        "{err}"
    );
    assert!(
        err.contains(&format!("with {OP} still unfinished (lost)")),
        "{err}"
    );
    let u = &faults(&o, "use_after_destroy")[0];
    assert_eq!(u["result"], 709);
    assert_eq!(u["ended"]["lost_launches"], 0);
    assert_eq!(u["ended"]["lost_copies"], 0);
    assert_eq!(u["ended"]["lost_ops"], 1);
}

#[test]
fn memset_then_destroy_is_synchronised_first() {
    op_then_destroy("memset_destroy", "cuMemsetD32Async");
}

#[test]
fn graph_launch_then_destroy_is_synchronised_first() {
    op_then_destroy("graph_destroy", "cuGraphLaunch");
}

#[test]
fn host_function_then_destroy_is_synchronised_first() {
    op_then_destroy("host_func_destroy", "cuLaunchHostFunc");
}

#[test]
fn every_memset_variant_counts_on_its_stream() {
    let r = fixed("memset_variants");
    let err = r.stderr();
    let many = "6 stream operations (memsets, graph launches or host functions)";
    assert!(
        err.contains(
            "(12 stream operations (memsets, graph launches or host functions) submitted \
             since they were last synchronised: stream 0x5eed50000100"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!("the per-thread default stream: {many}")),
        "{err}"
    );
    let f = &faults(&r, "pending_work_at_destroy")[0];
    let streams = f["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{f}");
    let created = streams.iter().find(|s| s["stream"] == "0x5eed50000100");
    assert_eq!(created.unwrap()["ops"], 6);
    let ptds = streams.iter().find(|s| s["default_stream"] == "per_thread");
    assert_eq!(ptds.unwrap()["ops"], 6);
    assert_eq!(repairs(&r)["synchronize_before_destroy"], 1);
    for name in ["cuMemsetD2D16Async", "cuMemsetD8Async_ptsz"] {
        assert_eq!(r.summary_count(name), (1, 0), "{name}");
    }
}

#[test]
fn synchronised_memsets_graphs_and_host_functions_see_nothing() {
    let base = plain("ops_clean");
    let r = fixed("ops_clean");
    assert_eq!(r.stdout(), base.stdout());
    assert!(!r.stdout().contains("-> 7"), "{}", r.stdout());
    assert_eq!(r.stderr(), "");
    assert_forwarded_unchanged(&base.driver_calls, &r.driver_calls);
    assert!(r.events("lifetime_fault").is_empty());
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["unsynchronized_streams"], serde_json::json!([]));
    assert_eq!(s["repairs"], serde_json::json!({}));
    assert_eq!(r.summary_count("cuGraphLaunch"), (1, 0));
    assert_eq!(r.summary_count("cuLaunchHostFunc"), (1, 0));
}

#[test]
fn exit_report_counts_an_unsynchronised_memset() {
    let r = fixed("leave_memset");
    let err = r.stderr();
    assert!(
        err.contains(&format!("): {OP}): it was still queued on the device")),
        "{err}"
    );
    let u = &r.events("exit_summary")[0]["unsynchronized_streams"][0];
    assert_eq!(u["stream"], "0x5eed50000100");
    assert_eq!(u["launches"], 0);
    assert_eq!(u["ops"], 1);
}

#[test]
fn operations_looked_up_through_get_proc_address_are_counted() {
    let r = fixed("ops_procaddr");
    let err = r.stderr();
    assert!(
        err.contains(
            "(3 stream operations (memsets, graph launches or host functions) submitted since \
             they were last synchronised"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "the per-thread default stream: 2 stream operations (memsets, graph launches or \
             host functions)"
        ),
        "{err}"
    );
    assert!(err.contains(&format!("): {OP}")), "{err}");
    // The driver handed out the `_ptsz` variants, and the shim wrapped those.
    for (name, calls) in [
        ("cuMemsetD8Async_ptsz", (1, 0)),
        ("cuGraphLaunch_ptsz", (1, 0)),
        ("cuLaunchHostFunc", (1, 0)),
        ("cuMemsetD8Async", (0, 0)),
    ] {
        assert_eq!(r.summary_count(name), calls, "{name}");
    }
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["procaddr_unmatched"], serde_json::json!([]));
    assert_eq!(repairs(&r)["synchronize_before_destroy"], 1);
}

/// A synchronize or destroy of a stream or event whose context was destroyed is undefined:
/// on an H200 (driver 580.159) `cuStreamSynchronize` and `cuStreamDestroy` of such a stream
/// crashed inside the driver. The fake does the same with `FAKE_CUDA_DEAD_HANDLE_CRASH=1`.
/// Observe mode never makes that call: it returns `CUDA_ERROR_CONTEXT_IS_DESTROYED` (what
/// the same driver returned when it did not crash), explained once; fix mode answers as
/// before (success for a handle whose work completed or that the driver released).
#[test]
fn calls_on_dead_streams_and_events_never_reach_the_driver() {
    for (scenario, dead_calls) in [
        ("destroy_before_sync", 1),
        ("event_after_reset", 2),
        ("atexit_free", 2),
    ] {
        let want = plain(scenario);
        let crash = |shim: bool, mode: &str| {
            let mut r = run(scenario, shim).env("FAKE_CUDA_DEAD_HANDLE_CRASH", "1");
            if shim {
                r = r.env("SEEDANCE_MODE", mode);
            }
            r.finish()
        };
        use std::os::unix::process::ExitStatusExt;
        let native = crash(false, "");
        assert_eq!(
            native.output.status.signal(),
            Some(11),
            "{scenario}: {}",
            native.stdout()
        );

        let o = crash(true, "observe");
        assert_eq!(
            o.output.status.code(),
            Some(0),
            "{scenario}: {}",
            o.stderr()
        );
        assert_eq!(o.stdout(), want.stdout(), "{scenario}");
        let refused: Vec<&Value> = faults(&o, "use_after_destroy")
            .into_iter()
            .filter(|f| {
                f["explanation"]
                    .as_str()
                    .unwrap()
                    .contains("returned CUDA_ERROR_CONTEXT_IS_DESTROYED without calling the driver")
            })
            .collect();
        assert_eq!(refused.len(), dead_calls, "{scenario}: {}", o.stderr());
        assert!(refused
            .iter()
            .all(|f| f["result"] == 709 && f["repaired"] == false));
        assert!(o.events("lifetime_repair").is_empty());
        assert!(
            o.stderr().contains(
                "with its context, and a call with it is undefined (the driver may crash): \
                 returned CUDA_ERROR_CONTEXT_IS_DESTROYED without calling the driver; release \
                 handles before their context"
            ),
            "{scenario}: {}",
            o.stderr()
        );

        let f = crash(true, "fix");
        assert_eq!(
            f.output.status.code(),
            Some(0),
            "{scenario}: {}",
            f.stderr()
        );
        assert_eq!(f.stdout(), fixed(scenario).stdout(), "{scenario}");
    }
}

/// A context's end releases exactly the allocations made in it, found through the index of
/// allocations by context (shim/src/faults/lifetime.rs, `owned_allocations_that_died`): those made
/// on another thread, more than one thread's ring holds, included; the other context's
/// allocation stays live and its free reaches the driver.
#[test]
fn destroying_one_context_releases_exactly_its_own_allocations() {
    let before = plain("two_contexts");
    assert_eq!(
        before.stdout(),
        "cuCtxDestroy of a -> 0\ncuMemFree of a's allocation -> 1\n\
         cuMemFree of the worker's first allocation in a -> 1\n\
         cuMemFree of the worker's last allocation in a -> 1\n\
         cuMemFree of b's allocation -> 0\ncuCtxDestroy of b -> 0\n"
    );
    let r = fixed("two_contexts");
    assert_eq!(
        r.stdout(),
        "cuCtxDestroy of a -> 0\ncuMemFree of a's allocation -> 0\n\
         cuMemFree of the worker's first allocation in a -> 0\n\
         cuMemFree of the worker's last allocation in a -> 0\n\
         cuMemFree of b's allocation -> 0\ncuCtxDestroy of b -> 0\n"
    );
    // Only b's free reaches the driver.
    let frees = calls(&r, "cuMemFree_v2");
    let b_free = calls(&before, "cuMemFree_v2").pop().unwrap();
    assert_eq!(frees, [b_free]);
    assert_eq!(repairs(&r), serde_json::json!({"already_released": 3}));
    let dead: Vec<&str> = faults(&r, "use_after_destroy")
        .iter()
        .map(|f| f["handle_kind"].as_str().unwrap())
        .collect();
    // Explained once (per function, kind and context), repaired each time.
    assert_eq!(dead, ["device_memory"]);
    // Nothing is left behind: a's allocations died with it, b's was freed.
    let s = &r.events("exit_summary")[0];
    assert_eq!(s["leaked_allocations"], serde_json::json!([]), "{s}");
    observed("two_contexts");
}

/// Threads on their own streams and events in one context, synchronising them (no lock
/// another such thread takes: the baselines live in each thread's shard), then leaving
/// thread i with i + 1 copies unfinished when the main thread destroys the context
/// (tests/programs/sync_threads.c): exact call counts, and exactly those copies reported,
/// stream by stream.
#[test]
fn threads_synchronising_their_own_streams_leave_exact_pending_counts() {
    let (t, n) = (8u64, 4000u64);
    let args = [t.to_string(), n.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let per_thread = |i: u64| n + n / 4 + 2 * (n / 4) + i + 1;
    let calls = format!("ok_calls={}\n", (0..t).map(per_thread).sum::<u64>());
    let plain = Run::new("sync_threads", false).args(&args).finish();
    assert_eq!(plain.stdout(), calls, "{}", plain.stderr());
    for mode in ["observe", "fix"] {
        let r = Run::new("sync_threads", true)
            .env("SEEDANCE_MODE", mode)
            .args(&args)
            .finish();
        assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
        assert_eq!(r.stdout(), calls, "{mode}: {}", r.stderr());
        assert_eq!(r.summary_count("cuStreamSynchronize"), (t * n / 4, 0));
        assert_eq!(r.summary_count("cuEventSynchronize"), (t * n / 4, 0));
        assert_eq!(
            r.summary_count("cuMemcpyHtoDAsync_v2"),
            (t * n + t * (t + 1) / 2, 0)
        );
        let f = faults(&r, "pending_work_at_destroy");
        assert_eq!(f.len(), 1, "{mode}: {}", r.stderr());
        let mut copies: Vec<u64> = f[0]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(s["launches"], 0);
                s["copies"].as_u64().unwrap()
            })
            .collect();
        copies.sort_unstable();
        assert_eq!(
            copies,
            (1..=t).collect::<Vec<_>>(),
            "{mode}: {}",
            r.stderr()
        );
        assert_eq!(f[0]["repaired"], mode == "fix");
    }
}

/// The exit summary lists exactly one leaked allocation, of `bytes`.
fn assert_one_leak(r: &Finished, bytes: u64) {
    let s = &r.events("exit_summary")[0];
    let leaks = s["leaked_allocations"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert_eq!(leaks[0]["allocations"], 1);
    assert_eq!(leaks[0]["bytes"], bytes);
}

/// Allocations whose threads exited before another thread freed them (32 threads, 24 of
/// them one after another, so that later ones get earlier ones' thread pointers and the
/// shim's lines found by them, `seedance_hotpath::held_lines`), then 8 more threads that
/// allocate and free their own: each free finds its allocation wherever the exited thread
/// left it (the one never freed stays on the line of the last thread), so exactly the one
/// never freed is reported, none of the freed ones is published again by a later thread, and
/// the exit summary counts every allocation and free.
#[test]
fn memory_freed_after_its_thread_exited_is_not_left_live() {
    let base = plain("freed_after_their_threads_exit");
    assert_eq!(base.stdout(), "frees failed: 0\n");
    for r in [
        fixed("freed_after_their_threads_exit"),
        observed("freed_after_their_threads_exit"),
    ] {
        assert_eq!(r.stdout(), base.stdout());
        assert!(r.events("lifetime_fault").is_empty());
        assert_one_leak(&r, 4096);
        assert_eq!(r.summary_count("cuMemAlloc_v2"), (40, 0));
        assert_eq!(r.summary_count("cuMemFree_v2"), (39, 0));
    }
}

/// An allocation freed on another thread while its own thread has made no allocation since
/// (the shim holds a thread's latest allocation in that thread's record,
/// `seedance_hotpath::held`): the free reaches the record, so the exit report names only the
/// allocation that was never freed, and the allocation freed right after it was made on
/// its own thread is never reported.
#[test]
fn memory_freed_on_another_thread_is_not_left_live() {
    let base = plain("free_on_another_thread");
    for r in [
        fixed("free_on_another_thread"),
        observed("free_on_another_thread"),
    ] {
        assert_eq!(r.stdout(), base.stdout());
        assert_forwarded_unchanged(&base.driver_calls, &r.driver_calls);
        assert!(r.events("lifetime_fault").is_empty());
        assert_one_leak(&r, 8192);
        // The leak is the exit summary's; the driver reclaims it, so stderr is silent.
        assert_eq!(r.stderr(), "");
    }
}

/// 2,000 context create/destroy pairs alternating two devices: the tracker remembers the
/// last `KEEP_ENDED` (1024) ended contexts, not every one (each context end walked every
/// context ever seen, and kept about 110 bytes of each for good: 8,000 pairs took 0.68 s,
/// 64,000 took 16.7 s), and the exit summary still counts every context per device.
/// Debug builds tell the tracker's size (`SEEDANCE_TEST_TRACKER_SIZE`).
#[test]
fn context_churn_on_two_devices_keeps_the_trackers_size() {
    if seedance_e2e::artifacts()
        .shim
        .components()
        .any(|c| c.as_os_str() == "release")
    {
        seedance_e2e::say_skipped(
            "lifetime::context_churn_on_two_devices_keeps_the_trackers_size",
            "the tracker's size is told by debug builds only",
        );
        return;
    }
    let r = Run::new("ctx_churn", true)
        .env_remove("FAKE_CUDA_LOG")
        .env("SEEDANCE_TEST_TRACKER_SIZE", "1")
        .arg("2000")
        .finish_within(seedance_e2e::target::wall_time_bound(
            std::time::Duration::from_secs(120),
        ))
        .ok();
    assert_eq!(r.stdout(), "pairs 2000\n");
    assert_eq!(
        r.stderr(),
        "seedance: test: the tracker remembers 1024 contexts\n"
    );
    let uses = &r.events("exit_summary")[0]["device_use"];
    let contexts: Vec<(i64, i64)> = uses
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["device"].as_i64().unwrap(),
                u["contexts"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(contexts, [(0, 1000), (1, 1000)]);
}
