//! Process lifecycle under the shim: fork, and exit paths.

use seedance_e2e::Run;
use std::time::Duration;

/// After fork the child only forwards: no stderr line, no trace of its own, no wait on the
/// parent's writer thread; the parent's trace counts only the parent's calls.
#[test]
fn forked_child_forwards_only() {
    let run = Run::new("fork_child", true);
    let started = std::time::Instant::now();
    let r = run.finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "child cuDeviceGet(9) -> 101\nparent cuDeviceGet(0) -> 0, child exit 0\n"
    );
    assert_eq!(r.stderr(), "");
    assert_eq!(r.trace_files, 1);
    assert_eq!(r.summary_count("cuDeviceGet"), (1, 0));
    assert!(r.events("device_fault").is_empty());
    let bound = seedance_e2e::target::wall_time_bound(std::time::Duration::from_millis(900));
    assert!(started.elapsed() < bound, "took {:?}", started.elapsed());
}

/// A child forked after the parent read `SEEDANCE_VALIDATE=pre` (it launched once) only
/// forwards: its invalid launch reaches the driver and gets the driver's code, as natively,
/// with no pre-check line. The fork handler clears every switch of the configuration word;
/// it used to leave the pre-check on, so the shim answered the child's launch itself.
#[test]
fn forked_child_makes_no_pre_checks() {
    let plain = Run::new("fork_child", false).arg("launch").finish();
    let expected = "parent launch -> 0\nchild launch 32x33x1 -> 1\n\
                    parent cuDeviceGet(0) -> 0, child exit 0\n";
    assert_eq!(plain.stdout(), expected);
    let child_launch = "cuLaunchKernel f=0x1000 grid=1,1,1 block=32,33,1 shmem=0 stream=0x0 -> 1";
    assert!(plain.driver_calls.iter().any(|l| l == child_launch));
    for mode in ["observe", "fix"] {
        let r = Run::new("fork_child", true)
            .env("SEEDANCE_VALIDATE", "pre")
            .env("SEEDANCE_MODE", mode)
            .arg("launch")
            .finish_within(seedance_e2e::target::wall_time_bound(Duration::from_secs(
                30,
            )));
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        assert!(
            r.driver_calls.iter().any(|l| l == child_launch),
            "{mode}: {:?}",
            r.driver_calls
        );
        assert!(r.events("launch_fault").is_empty(), "{mode}");
        // The parent's own launch was counted; the child's was not.
        assert_eq!(r.summary_count("cuLaunchKernel"), (1, 0), "{mode}");
    }
}

/// A fork while the session record's thread is inside the driver (the fake's
/// `cuDeviceGetName` holds the driver's lock for 300 ms, the program forks 200 ms after
/// `cuInit`): the fork waits for the shim's queries, so the child's own driver call gets
/// the driver's answer, as without the shim. Before, the child inherited the driver's lock
/// held by a thread it does not have and waited forever (killed by the watchdog).
#[test]
fn fork_during_the_session_records_queries_leaves_the_child_a_usable_driver() {
    let expected = "child cuDeviceGet(9) -> 101\nparent cuDeviceGet(0) -> 0, child exit 0\n";
    let plain = Run::new("fork_child", false)
        .env("FAKE_CUDA_NAME_DELAY_MS", "300")
        .arg("pause")
        .finish_within(seedance_e2e::target::wall_time_bound(Duration::from_secs(
            30,
        )));
    assert_eq!(plain.stdout(), expected);
    for mode in ["observe", "fix"] {
        let r = Run::new("fork_child", true)
            .env("SEEDANCE_MODE", mode)
            .env("FAKE_CUDA_NAME_DELAY_MS", "300")
            .arg("pause")
            .finish_within(seedance_e2e::target::wall_time_bound(Duration::from_secs(
                30,
            )));
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        // The session record was still taken, by the shim's own thread.
        assert!(
            r.shim_thread_calls
                .iter()
                .any(|l| l.starts_with("[seedance-init] cuDeviceGetName")),
            "{mode}: {:?}",
            r.shim_thread_calls
        );
    }
}

/// 32 threads x 100k launches plus context create/destroy: no deadlock, exact counts in the
/// exit summary, nothing dropped. Under qemu (tests/harness/target.rs), where a call costs
/// some 50 times more, each thread makes 10k launches: the same 32 threads race on the same
/// counters.
#[test]
fn thirty_two_threads_exact_counts() {
    let n: u64 = if seedance_e2e::target::cross().is_some() {
        10_000
    } else {
        100_000
    };
    let r = Run::new("stress", true)
        .env("SEEDANCE_QUIET", "1")
        .args(&["32", &n.to_string()])
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    // Per thread: cuDeviceGet + cuCtxCreate_v2, n launches, n/1000 x (create, destroy,
    // set current).
    let rounds = n / 1000;
    assert_eq!(
        r.stdout(),
        format!("ok_calls={}\n", 32 * (2 + n + 3 * rounds))
    );
    assert_eq!(r.summary_count("cuLaunchKernel"), (32 * n, 0));
    assert_eq!(r.summary_count("cuCtxCreate_v2"), (32 * (1 + rounds), 0));
    assert_eq!(r.summary_count("cuCtxDestroy_v2"), (32 * rounds, 0));
    assert_eq!(r.summary_count("cuCtxSetCurrent"), (32 * rounds, 0));
    assert_eq!(r.events("exit_summary")[0]["dropped_records"], 0);
}

/// exec'd children follow their environment: with it kept they run under the shim with a
/// trace of their own (the fault repaired), without LD_PRELOAD or with SEEDANCE_MODE=off
/// they see the driver unchanged and write nothing.
#[test]
fn execd_children_follow_their_environment() {
    let parent = "parent: cuDeviceGet(0) -> 0\n";
    let r = Run::new("exec_child", true).arg("inherit").finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        format!("{parent}child: cuDeviceGet(7) -> 0\nparent: child exit 0\n")
    );
    assert_eq!(r.trace_files, 2);
    let starts = r.events("session_start");
    let pids: std::collections::BTreeSet<u64> =
        starts.iter().map(|s| s["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(r.events("device_fallback").len(), 1);
    assert_eq!(r.events("exit_summary").len(), 2);
    for how in ["unset", "off"] {
        let r = Run::new("exec_child", true).arg(how).finish();
        assert_eq!(r.output.status.code(), Some(0), "{how}: {}", r.stderr());
        assert_eq!(
            r.stdout(),
            format!("{parent}child: cuDeviceGet(7) -> 101\nparent: child exit 0\n"),
            "{how}"
        );
        assert_eq!(r.stderr(), "", "{how}");
        assert_eq!(r.trace_files, 1, "{how}");
        assert_eq!(r.events("exit_summary").len(), 1, "{how}");
        assert_eq!(r.summary_count("cuDeviceGet"), (1, 0), "{how}");
    }
}
