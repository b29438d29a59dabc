//! The host-write guard (`SEEDANCE_HOST_GUARD=on`) on the fake driver, whose asynchronous
//! copies read their source when their stream runs (at its synchronisation), so a host
//! write made while a copy is pending reaches the device without the shim. Each scenario of
//! `tests/programs/host_guard.c` writes into a pending copy's source in a way the former
//! page-protection guard broke (several threads, `read(2)`, `SIG_DFL`, blocked signals, a
//! free, a synchronous copy into it) or is a correct ring it reported falsely: the program
//! runs as without the shim (same stdout and exit status in `observe`), the write is
//! reported once, and in `fix` mode the device gets the bytes from the copy's submission.
//! Every run is bounded by the harness's deadline (a deadlock fails the test).

use seedance_e2e::{Finished, Run};
use serde_json::Value;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);

/// Why the guard's tests do not run under qemu-user: it answers `process_vm_readv` with
/// `ENOSYS`, so the guard turns itself off there with one line (fail open); on aarch64
/// hardware the call exists.
pub(crate) const QEMU_LACKS_PROCESS_VM_READV: &str =
    "qemu-user does not implement process_vm_readv (ENOSYS), which the host-write guard reads \
     through; the guard turns itself off there with one line";

fn run(scenario: &str, shim: bool) -> Run {
    Run::new("host_guard", shim).arg(scenario)
}

fn ok(r: Finished) -> Finished {
    r.ok()
}

fn plain(scenario: &str) -> Finished {
    let r = ok(run(scenario, false).finish_within(DEADLINE));
    assert_eq!(r.stderr(), "");
    r
}

fn guarded(scenario: &str, mode: &str) -> Finished {
    ok(run(scenario, true)
        .env("SEEDANCE_MODE", mode)
        .env("SEEDANCE_HOST_GUARD", "on")
        .finish_within(DEADLINE))
}

fn writes(r: &Finished) -> Vec<&Value> {
    r.events("host_hazard")
        .into_iter()
        .filter(|h| h["kind"] == "host_write_race")
        .collect()
}

/// One report of a write into bytes `offset..offset + 4096` of the 64 KiB buffer during
/// the copy, repaired (sent from the snapshot) in `fix` mode.
fn reported_by(r: &Finished, mode: &str, offset: u64, function: &str) {
    let h = writes(r);
    assert_eq!(h.len(), 1, "{mode}: {}", r.stderr());
    let h = h[0];
    let fix = mode == "fix";
    assert_eq!(h["function"], "host write");
    assert_eq!(h["repaired"], fix, "{mode}");
    assert_eq!(
        h["repair"],
        if fix { "snapshot".into() } else { Value::Null }
    );
    assert_eq!(h["made_by"], "cuMemHostAlloc");
    assert_eq!(h["range"]["bytes"], 65536);
    assert_eq!(h["first"]["function"], function);
    assert_eq!(h["first"]["access"], "read");
    assert_eq!(h["first"]["offset"], 0);
    assert_eq!(h["first"]["bytes"], 65536);
    assert!(h["first"]["stream"].as_str().unwrap().starts_with("0x"));
    assert_eq!(h["second"]["access"], "write");
    assert_eq!(h["second"]["offset"], offset, "{mode}");
    assert_eq!(h["second"]["bytes"], 4096);
    assert!(h.get("backtrace").is_none());
    let err = r.stderr();
    assert_eq!(err.lines().count(), 1, "{mode}: {err}");
    assert!(
        err.starts_with(&format!(
            "seedance: {function}: host write into pinned memory during a copy: \
             bytes {offset}..{} of pinned range 0x",
            offset + 4096
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "(64.0 KiB, made by cuMemHostAlloc) changed while {function} on stream 0x"
        )),
        "{err}"
    );
    assert!(err.contains("was pending with bytes 0..65536 of that range as its source"));
    assert_eq!(
        err.contains("fix mode: the copy was sent from the shim's snapshot"),
        fix
    );
    let repairs = &r.events("exit_summary")[0]["repairs"];
    assert_eq!(
        repairs["snapshot_before_copy"],
        if fix { 1.into() } else { Value::Null },
        "{mode}: {repairs}"
    );
}

/// A racing scenario: `corrupted` without the shim and in `observe` (same stdout), intact
/// in `fix`; reported at `offset` in both.
fn races(scenario: &str, corrupted: &str, offset: u64) {
    races_by(scenario, corrupted, offset, "cuMemcpyHtoDAsync_v2");
}

fn races_by(scenario: &str, corrupted: &str, offset: u64, function: &str) {
    let before = plain(scenario);
    assert!(before.stdout().ends_with(corrupted), "{}", before.stdout());
    let off = ok(run(scenario, true).finish_within(DEADLINE));
    assert_eq!(off.stdout(), before.stdout());
    assert_eq!(off.stderr(), "");
    let o = guarded(scenario, "observe");
    assert_eq!(o.stdout(), before.stdout());
    reported_by(&o, "observe", offset, function);
    let f = guarded(scenario, "fix");
    assert_eq!(
        f.stdout(),
        before.stdout().replace(corrupted, "device copy: intact\n")
    );
    reported_by(&f, "fix", offset, function);
}

#[test]
fn eight_threads_writing_a_pending_copys_source_are_reported_and_kept_from_the_device() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    races(
        "threads",
        "device copy: corrupted (65536 of 65536 bytes wrong, first 0x33)\n",
        0,
    );
}

#[test]
fn a_unified_copy_from_pinned_memory_is_guarded_too() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    races_by(
        "unified",
        "device copy: corrupted (4096 of 65536 bytes wrong, first 0x11)\n",
        4096,
        "cuMemcpyAsync",
    );
}

#[test]
fn read_from_a_pipe_into_a_guarded_buffer_never_fails() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    races(
        "pipe_read",
        "device copy: corrupted (4096 of 65536 bytes wrong, first 0x44)\n",
        0,
    );
    let f = guarded("pipe_read", "fix");
    assert!(f
        .stdout()
        .starts_with("read during the copy: 4096\nread after the copy: 4096\n"));
}

#[test]
fn sig_dfl_set_by_the_program_then_a_write_does_not_crash() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    races(
        "sig_dfl",
        "device copy: corrupted (4096 of 65536 bytes wrong, first 0x11)\n",
        65536 - 4096,
    );
}

#[test]
fn a_thread_with_every_signal_blocked_writes_without_being_killed() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    races(
        "blocked",
        "device copy: corrupted (4096 of 65536 bytes wrong, first 0x33)\n",
        0,
    );
}

#[test]
fn freeing_a_buffer_with_a_guarded_copy_pending_does_not_deadlock() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    // The free waits for the copy (driver 580, as the fake plays it): intact in every run.
    let before = plain("free_pending");
    assert_eq!(before.stdout(), "freed\ndevice copy: intact\n");
    let o = guarded("free_pending", "observe");
    assert_eq!(o.stdout(), before.stdout());
    let f = guarded("free_pending", "fix");
    assert_eq!(f.stdout(), before.stdout());
    for r in [&o, &f] {
        assert!(writes(r).is_empty(), "{}", r.stderr());
        assert!(!r.stderr().contains("host write"), "{}", r.stderr());
        assert!(
            r.stderr().contains("cuMemFreeHost waited "),
            "{}",
            r.stderr()
        );
    }
}

/// On a real driver a synchronous copy does not wait for a non-blocking stream, so its
/// write into the source of a copy pending there is a write during that copy: the fake
/// runs only the legacy stream and the blocking streams first, as the driver does, so the
/// device gets the bytes the synchronous copy wrote (in fix mode, the guard's snapshot: the
/// bytes from before); the write is reported.
#[test]
fn a_synchronous_copy_into_a_guarded_buffer_does_not_deadlock() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let before = plain("sync_dtoh");
    assert_eq!(
        before.stdout(),
        "buffer after the synchronous copy: 0x22\ndevice copy: corrupted (65536 of 65536 \
         bytes wrong, first 0x22)\n"
    );
    for mode in ["observe", "fix"] {
        let r = guarded("sync_dtoh", mode);
        // Fix mode gives the driver the guard's snapshot of the source: the device gets
        // the bytes from before the write.
        let want = match mode {
            "fix" => "buffer after the synchronous copy: 0x22\ndevice copy: intact\n".to_string(),
            _ => before.stdout(),
        };
        assert_eq!(r.stdout(), want, "{mode}");
        let h = writes(&r);
        assert_eq!(h.len(), 1, "{mode}: {}", r.stderr());
        assert_eq!(h[0]["second"]["offset"], 0);
    }
}

#[test]
fn a_correct_event_ordered_ring_is_silent() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let before = plain("ring");
    assert_eq!(
        before.stdout(),
        "slot 0: intact\nslot 1: intact\nslot 2: intact\n"
    );
    for mode in ["off", "observe", "fix"] {
        let r = ok(run("ring", true)
            .env("SEEDANCE_MODE", mode)
            .env("SEEDANCE_HOST_GUARD", "on")
            .finish_within(DEADLINE));
        assert_eq!(r.stdout(), before.stdout(), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        assert!(r.events("host_hazard").is_empty(), "{mode}");
    }
}

/// `fix` mode's staging buffers go back to the pool when their copy is known complete:
/// the ring's nine copies, at most three pending at a time, are sent from at most three
/// buffers the shim made (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_PORTABLE`, flags 1).
#[test]
fn snapshots_reuse_the_staging_buffers_of_completed_copies() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let staging = |r: &Finished| {
        r.driver_calls
            .iter()
            .filter(|l| l.starts_with("cuMemHostAlloc ") && l.contains("flags=1"))
            .count()
    };
    let r = guarded("ring", "fix");
    assert!((1..=3).contains(&staging(&r)), "{:#?}", r.driver_calls);
    assert_eq!(staging(&guarded("ring", "observe")), 0);
}

/// A copy that finds no room in `SEEDANCE_HOST_GUARD_POOL` is sent from the program's
/// buffer (the write reaches the device, as without the shim) after one line, and is still
/// reported; a pool of 0 turns the snapshot off without a line.
#[test]
fn a_copy_without_room_in_the_pool_goes_without_a_snapshot_after_one_line() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    let before = plain("threads");
    for (pool, lines) in [("4KiB", 2), ("0", 1)] {
        let r = ok(run("threads", true)
            .env("SEEDANCE_HOST_GUARD", "on")
            .env("SEEDANCE_HOST_GUARD_POOL", pool)
            .finish_within(DEADLINE));
        assert_eq!(r.stdout(), before.stdout(), "{pool}");
        let err = r.stderr();
        assert_eq!(err.lines().count(), lines, "{pool}: {err}");
        assert_eq!(
            err.starts_with(
                "seedance: SEEDANCE_HOST_GUARD: no room in the snapshot pool \
                 (SEEDANCE_HOST_GUARD_POOL=4096 bytes) for a copy of 65536 bytes: such copies \
                 are sent from the program's buffer, without a snapshot"
            ),
            pool == "4KiB",
            "{err}"
        );
        let h = writes(&r);
        assert_eq!(h.len(), 1, "{pool}: {err}");
        assert_eq!(h[0]["repaired"], false);
        assert!(!err.contains("fix mode: the copy was sent from the shim's snapshot"));
    }
}

/// Eight threads, each refilling its own pinned buffer 300 times, only after synchronising
/// its own stream: no write is ever made during a copy, so nothing is reported and no
/// snapshot repair is counted, in observe and fix, three runs each. Before, another
/// thread's synchronisation took a copy whose own thread had just seen it complete and
/// compared it after that thread refilled the buffer: 1 to 5 false `host_write_race`
/// reports per run (three runs of 8 x 300: 5, 1, 4).
#[test]
fn threads_refilling_their_own_buffers_after_their_own_sync_are_silent() {
    if seedance_e2e::target::skip_under_emulation(QEMU_LACKS_PROCESS_VM_READV) {
        return;
    }
    for mode in ["observe", "fix"] {
        for round in 0..3 {
            let r = ok(Run::new("guard_threads", true)
                .args(&["8", "300"])
                .env("SEEDANCE_MODE", mode)
                .env("SEEDANCE_HOST_GUARD", "on")
                .finish_within(DEADLINE));
            assert_eq!(r.stdout(), "ok\n", "{mode} run {round}");
            assert_eq!(r.stderr(), "", "{mode} run {round}");
            assert!(
                writes(&r).is_empty(),
                "{mode} run {round}: {:?}",
                writes(&r)
            );
            let repairs = &r.events("exit_summary")[0]["repairs"];
            assert!(
                repairs.get("snapshot_before_copy").is_none(),
                "{mode} run {round}: {repairs}"
            );
        }
    }
}
