//! Process lifecycle under the shim: fork, and exit paths.

use seedance_e2e::{Finished, Run};
use serde_json::Value;
use std::time::Duration;

/// The line a child forked after its parent's `cuInit` prints for its first failing call
/// `function` (`crates/seedance-core/src/fork.rs`).
fn fork_line(function: &str, child: u64, parent: u64) -> String {
    format!(
        "seedance: {function}: CUDA_ERROR_NOT_INITIALIZED (3): this process (pid {child}) was \
         forked from pid {parent} after pid {parent} initialised CUDA; the driver cannot be \
         used in a child forked after initialisation (every call returns this error, cuInit \
         included): start worker processes with the spawn or forkserver method \
         (multiprocessing.set_start_method(\"spawn\"), torch.multiprocessing, \
         DataLoader(multiprocessing_context=\"spawn\")), or initialise CUDA only in the \
         children, after the fork\n"
    )
}

/// The parent's pid (the one with an exit summary) and the forked child's (the one with
/// the `forked_after_init` record), from the trace.
fn parent_and_child(r: &Finished) -> (u64, u64) {
    let parent = r.events("exit_summary")[0]["pid"].as_u64().unwrap();
    let faults = r.events("lifetime_fault");
    assert_eq!(faults.len(), 1, "{:#?}", r.records);
    (parent, faults[0]["pid"].as_u64().unwrap())
}

/// A child forked after the parent's `cuInit` gets `CUDA_ERROR_NOT_INITIALIZED` from its
/// call, as on driver 580 (docs/design.md, fact 15); in observe and fix the shim explains it
/// once on stderr (the call, the pids, the cause, the fix) and writes the child a trace of
/// its own (`session_start`, then a `lifetime_fault` of kind `forked_after_init`), written
/// at once by the child (no writer thread there). Everything else is as without the shim:
/// stdout and exit codes; no wait on the parent's writer thread; the parent's trace counts
/// only the parent's calls. Before, the child heard nothing and had no trace.
#[test]
fn a_child_forked_after_init_hears_why_its_calls_fail() {
    let expected = "child cuDeviceGet(9) -> 3\nparent cuDeviceGet(0) -> 0, child exit 0\n";
    let plain = Run::new("fork_child", false).finish();
    assert_eq!(plain.output.status.code(), Some(0));
    assert_eq!(plain.stdout(), expected);
    for mode in ["observe", "fix"] {
        let started = std::time::Instant::now();
        let r = Run::new("fork_child", true)
            .env("SEEDANCE_MODE", mode)
            .finish();
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        assert_eq!(r.trace_files, 2, "{mode}");
        let (parent, child) = parent_and_child(&r);
        assert_ne!(parent, child);
        assert_eq!(
            r.stderr(),
            fork_line("cuDeviceGet", child, parent),
            "{mode}"
        );
        // The child's trace: its session start (no driver, no devices), then the fault.
        let child_records: Vec<&Value> = r.records.iter().filter(|e| e["pid"] == child).collect();
        let kinds: Vec<&str> = child_records
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["session_start", "lifetime_fault"], "{mode}");
        assert_eq!(child_records[0]["mode"], mode);
        assert_eq!(child_records[0]["devices"], serde_json::json!([]));
        let f = child_records[1];
        assert_eq!(f["seq"], 1);
        assert_eq!(f["kind"], "forked_after_init");
        assert_eq!(f["function"], "cuDeviceGet");
        assert_eq!(f["result"], 3);
        assert_eq!(f["result_name"], "CUDA_ERROR_NOT_INITIALIZED");
        assert_eq!(f["repaired"], false);
        assert_eq!(
            format!(
                "seedance: cuDeviceGet: CUDA_ERROR_NOT_INITIALIZED (3): {}\n",
                f["explanation"].as_str().unwrap()
            ),
            r.stderr()
        );
        // The parent's trace: only the parent's calls.
        assert_eq!(r.summary_count("cuDeviceGet"), (1, 0), "{mode}");
        let bound = seedance_e2e::target::wall_time_bound(Duration::from_millis(900));
        assert!(started.elapsed() < bound, "took {:?}", started.elapsed());
    }
}

/// `SEEDANCE_MODE=off` forwards only: the child's failure is not explained, no trace.
#[test]
fn mode_off_says_nothing_in_a_forked_child() {
    let r = Run::new("fork_child", true)
        .env("SEEDANCE_MODE", "off")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "child cuDeviceGet(9) -> 3\nparent cuDeviceGet(0) -> 0, child exit 0\n"
    );
    assert_eq!(r.stderr(), "");
    assert_eq!(r.trace_files, 0);
}

/// The child's five failing calls (two `cuDeviceGet`, `cuInit`, `cuMemAlloc_v2`,
/// `cuCtxSynchronize`, all 3) are explained once, at the first; the parent's context and
/// allocation are untouched.
#[test]
fn a_forked_child_hears_the_explanation_once() {
    let expected = "parent alloc -> 0\nchild get=3 get=3 init=3 alloc=3 sync=3\n\
                    parent cuDeviceGet(0) -> 0, child exit 0\n";
    let plain = Run::new("fork_child", false).arg("many").finish();
    assert_eq!(plain.stdout(), expected);
    for mode in ["observe", "fix"] {
        let r = Run::new("fork_child", true)
            .env("SEEDANCE_MODE", mode)
            .arg("many")
            .finish();
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        let (parent, child) = parent_and_child(&r);
        assert_eq!(
            r.stderr(),
            fork_line("cuDeviceGet", child, parent),
            "{mode}"
        );
        assert_eq!(r.trace_files, 2, "{mode}");
    }
    // SEEDANCE_QUIET silences the line; the child's trace is still written.
    let r = Run::new("fork_child", true)
        .env("SEEDANCE_QUIET", "1")
        .arg("many")
        .finish();
    assert_eq!(r.stdout(), expected);
    assert_eq!(r.stderr(), "");
    assert_eq!(r.trace_files, 2);
    assert_eq!(r.events("lifetime_fault").len(), 1);
}

/// A child forked before the parent's `cuInit` (after the shim read its configuration: the
/// program asked the driver's version first) initialises the driver itself and works: a
/// context, an allocation and a free, each 0, and hears nothing.
#[test]
fn a_child_forked_before_init_works_and_hears_nothing() {
    let expected = "child init=0 get=0 ctx=0 alloc=0 free=0\n\
                    parent init=0 get=0 ctx=0 alloc=0 free=0\nchild exit 0\n";
    let plain = Run::new("fork_child", false).arg("before").finish();
    assert_eq!(plain.stdout(), expected);
    for mode in ["observe", "fix"] {
        let r = Run::new("fork_child", true)
            .env("SEEDANCE_MODE", mode)
            .arg("before")
            .finish();
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        assert!(r.events("lifetime_fault").is_empty(), "{mode}");
        // The parent's trace only: the child only forwards.
        assert_eq!(r.trace_files, 1, "{mode}");
        assert_eq!(r.summary_count("cuMemAlloc_v2"), (1, 0), "{mode}");
    }
}

/// A child forked after the parent read `SEEDANCE_VALIDATE=pre` (it launched once) only
/// forwards: its invalid launch reaches the driver and gets the driver's code (3: the fork
/// came after `cuInit`), as natively, with no pre-check line; only the fork is explained.
/// The fork handler clears every switch of the configuration word; it used to leave the
/// pre-check on, so the shim answered the child's launch itself.
#[test]
fn forked_child_makes_no_pre_checks() {
    let plain = Run::new("fork_child", false).arg("launch").finish();
    let expected = "parent launch -> 0\nchild launch 32x33x1 -> 3\n\
                    parent cuDeviceGet(0) -> 0, child exit 0\n";
    assert_eq!(plain.stdout(), expected);
    let child_launch = "cuLaunchKernel f=0x1000 grid=1,1,1 block=32,33,1 shmem=0 stream=0x0 -> 3";
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
        let (parent, child) = parent_and_child(&r);
        assert_eq!(
            r.stderr(),
            fork_line("cuLaunchKernel", child, parent),
            "{mode}"
        );
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
/// `cuInit`): the fork waits for the shim's queries, so the child's own driver call returns
/// the driver's answer (3: the fork came after `cuInit`), as without the shim. Before, the
/// child inherited the driver's lock held by a thread it does not have and waited forever
/// (killed by the watchdog).
#[test]
fn fork_during_the_session_records_queries_leaves_the_child_a_usable_driver() {
    let expected = "child cuDeviceGet(9) -> 3\nparent cuDeviceGet(0) -> 0, child exit 0\n";
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
        let (parent, child) = parent_and_child(&r);
        assert_eq!(
            r.stderr(),
            fork_line("cuDeviceGet", child, parent),
            "{mode}"
        );
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

/// The analyzer reads the forked child's trace beside the parent's: one error problem,
/// `lifetime_fault/forked_after_init`, with the shim's explanation (the pids, the cause, the
/// fix); the child, whose trace never has an exit summary, is not reported as killed (its
/// status is `forked_child`).
#[test]
fn the_analyzer_shows_the_forked_childs_failure() {
    let mut running = Run::new("fork_child", true)
        .env("SEEDANCE_MODE", "observe")
        .spawn();
    let r = running.finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let (parent, child) = parent_and_child(&r);
    let report = crate::signals::analyze(&running.traces());
    assert_eq!(report["input"]["files_read"], 2);
    assert_eq!(report["input"]["malformed_lines"], 0);
    assert_eq!(report["input"]["records_by_kind"]["lifetime_fault"], 1);
    assert_eq!(report["overview"]["processes"], 2);
    // The child's trace never has an exit summary; it is not reported as killed.
    assert_eq!(report["overview"]["processes_without_exit_summary"], 0);
    let status = |pid: u64| {
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status(parent), "exited");
    assert_eq!(status(child), "forked_child");
    let problems = report["problems"].as_array().unwrap();
    let keys: Vec<&str> = problems
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["lifetime_fault/forked_after_init"], "{problems:#?}");
    let p = &problems[0];
    assert_eq!(p["severity"], "error");
    assert_eq!(
        p["title"],
        "lifetime fault: CUDA used in a child forked after the parent initialised it \
         (forked_after_init) in 1 process on 1 host; no mode can repair it"
    );
    let explanation = p["explanations"][0].as_str().unwrap();
    assert!(
        explanation.starts_with(&format!(
            "this process (pid {child}) was forked from pid {parent} after pid {parent} \
             initialised CUDA; "
        )),
        "{explanation}"
    );
    assert!(p["remediation"][0]
        .as_str()
        .unwrap()
        .contains("spawn or forkserver"));
}
