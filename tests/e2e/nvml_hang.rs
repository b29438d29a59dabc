//! NVML that hangs (fail open): a wedged GPU or a driver in recovery can
//! leave `nvmlInit` or an NVML query blocked for minutes. The fake NVML does that on demand
//! (`FAKE_NVML_INIT_DELAY_MS`, `FAKE_NVML_QUERY_DELAY_MS`: 60 s here, holding the library's
//! lock). The shim waits at most `SEEDANCE_NVML_TIMEOUT` (default 2000 ms) and goes on with
//! the driver's own queries, as with NVML absent: the same output, the same repair, one
//! line on stderr, the trace complete, and the process ends without waiting for NVML.
//! A delay shorter than the timeout changes nothing: NVML is used.

use seedance_e2e::{Finished, Run};
use serde_json::json;
use std::time::{Duration, Instant};

/// A run that takes longer than this is killed and fails the test (a hang would otherwise
/// last the fake's 60 s).
const WATCHDOG: Duration = Duration::from_secs(30);

/// The fake NVML's delay: far longer than any run may take.
const HANG_MS: &str = "60000";

/// Runs to completion and says how long the process took; kills it after [`WATCHDOG`].
fn timed(what: &str, run: Run) -> (Finished, Duration) {
    let started = Instant::now();
    let mut running = run.spawn();
    while running.child.try_wait().expect("wait").is_none() {
        if started.elapsed() > WATCHDOG {
            let _ = running.child.kill();
            let r = running.finish();
            panic!(
                "{what}: still running after {WATCHDOG:?}; killed. stderr: {:?}",
                r.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    eprintln!("nvml_hang: {what}: {took:?}");
    (running.finish(), took)
}

/// The one line the shim prints when NVML does not answer within `ms`.
fn nvml_line(ms: u64) -> String {
    format!(
        "seedance: NVML (libnvidia-ml.so.1) did not answer within {ms} ms; continuing without \
         it: explanations and fallback choices use the driver's own queries, and NVML is not \
         called again in this process (SEEDANCE_NVML_TIMEOUT sets the wait)\n"
    )
}

/// `ordinals 5` on the 2-device host: a device fault that needs the topology, repaired.
fn ordinal_5() -> Run {
    Run::new("ordinals", true).arg("5")
}

fn count(r: &Finished, line: &str) -> usize {
    r.driver_calls.iter().filter(|l| *l == line).count()
}

/// The trace of an `ordinals 5` run: session_start with `nvml`, the fault and the repair to
/// ordinal 1, and the exit summary.
fn assert_repaired_trace(r: &Finished, nvml: serde_json::Value, nvml_indices: [Option<u32>; 2]) {
    assert_eq!(r.trace_files, 1);
    let start = r.events("session_start");
    assert_eq!(start.len(), 1);
    let topo = &start[0]["topology"];
    assert_eq!(topo["nvml"], nvml);
    let devices = topo["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for (d, index) in devices.iter().zip(nvml_indices) {
        assert_eq!(d["nvml_index"], json!(index), "{d}");
    }
    let fault = r.events("device_fault");
    assert_eq!(fault.len(), 1);
    assert_eq!(fault[0]["requested_ordinal"], 5);
    assert_eq!(fault[0]["fault"], "invalid_ordinal");
    assert_eq!(fault[0]["visible_devices"], 2);
    let fb = r.events("device_fallback");
    assert_eq!(fb.len(), 1);
    assert_eq!(fb[0]["chosen_ordinal"], 1);
    assert_eq!(fb[0]["chosen_pci_bus_id"], "0000:11:00.0");
    let summary = r.events("exit_summary");
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0]["repairs"], json!({"device_fallback": 1}));
    assert_eq!(summary[0]["fallbacks"], json!({"5": 1}));
    assert_eq!(summary[0]["dropped_records"], 0);
    assert_eq!(r.summary_count("cuDeviceGet"), (1, 1));
    // The repair came from the driver's own queries: ordinal 5 refused once, then the
    // program's context on device 1.
    assert_eq!(count(r, "cuDeviceGet ordinal=5 -> 101"), 1);
    assert_eq!(count(r, "cuDevicePrimaryCtxRetain dev=1 -> 0"), 1);
}

/// `nvmlInit` hangs (60 s) and the timeout is the default, 2000 ms: the device fault waits
/// 2 s for NVML, then is explained and repaired from the driver's data; the run ends in
/// about 2 s with the output of a run without NVML plus one line.
#[test]
fn a_hanging_nvml_init_costs_one_line_and_at_most_the_timeout() {
    if seedance_e2e::target::skip_under_emulation(
        "it asserts the default 2000 ms wait against NVML's start-up, which alone takes 1 to \
         3 s under qemu",
    ) {
        return;
    }
    let (reference, _) = timed("no NVML", ordinal_5());
    assert_eq!(
        reference.output.status.code(),
        Some(0),
        "{}",
        reference.stderr()
    );
    assert_eq!(reference.stdout(), "ordinal 5 -> 0000:11:00.0\n");
    assert_eq!(
        reference.stderr().lines().count(),
        2,
        "{}",
        reference.stderr()
    );

    let (r, took) = timed(
        "hanging nvmlInit",
        ordinal_5()
            .with_nvml()
            .env("FAKE_NVML_INIT_DELAY_MS", HANG_MS),
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), reference.stdout());
    assert_eq!(r.stderr(), nvml_line(2000) + &reference.stderr());
    assert!(
        took >= Duration::from_millis(2000)
            && took < seedance_e2e::target::wall_time_bound(Duration::from_secs(8)),
        "took {took:?}"
    );
    assert_repaired_trace(
        &r,
        json!({"present": false, "reason": "NVML (libnvidia-ml.so.1) did not answer within 2000 ms"}),
        [None, None],
    );
    // The same fault explanation as without NVML, in the trace too.
    assert_eq!(
        r.events("device_fault")[0]["explanation"],
        reference.events("device_fault")[0]["explanation"]
    );
}

/// Per-device queries hang instead (`nvmlInit` answers at once): the same, with a 300 ms
/// timeout (`SEEDANCE_NVML_TIMEOUT`).
#[test]
fn hanging_nvml_queries_are_bounded_too() {
    let (reference, _) = timed("no NVML", ordinal_5());
    let (r, took) = timed(
        "hanging queries",
        ordinal_5()
            .with_nvml()
            .env("FAKE_NVML_QUERY_DELAY_MS", HANG_MS)
            .env("SEEDANCE_NVML_TIMEOUT", "300"),
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), reference.stdout());
    assert_eq!(r.stderr(), nvml_line(300) + &reference.stderr());
    assert!(
        took >= Duration::from_millis(300)
            && took < seedance_e2e::target::wall_time_bound(Duration::from_secs(5)),
        "took {took:?}"
    );
    assert_repaired_trace(
        &r,
        json!({"present": false, "reason": "NVML (libnvidia-ml.so.1) did not answer within 300 ms"}),
        [None, None],
    );
}

/// `nvmlInit` takes 100 ms, well within the default 2000 ms: NVML is used as usual (present
/// in the trace, nvidia-smi indices known), no line about it. A bad `SEEDANCE_NVML_TIMEOUT`
/// gives one warning and the default.
#[test]
fn a_slow_nvml_within_the_timeout_is_used() {
    if seedance_e2e::target::skip_under_emulation(
        "it asserts the default 2000 ms wait against NVML's start-up, which alone takes 1 to \
         3 s under qemu",
    ) {
        return;
    }
    let (reference, _) = timed("NVML", ordinal_5().with_nvml());
    assert_eq!(
        reference.output.status.code(),
        Some(0),
        "{}",
        reference.stderr()
    );
    let (r, took) = timed(
        "NVML 100 ms",
        ordinal_5()
            .with_nvml()
            .env("FAKE_NVML_INIT_DELAY_MS", "100"),
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "ordinal 5 -> 0000:11:00.0\n");
    assert_eq!(r.stderr(), reference.stderr());
    assert!(!r.stderr().contains("NVML"), "{}", r.stderr());
    assert!(took >= Duration::from_millis(100), "took {took:?}");
    let present = json!({"present": true, "reason": null});
    assert_repaired_trace(&r, present.clone(), [Some(0), Some(1)]);

    let (bad, _) = timed(
        "NVML 100 ms, bad timeout",
        ordinal_5()
            .with_nvml()
            .env("FAKE_NVML_INIT_DELAY_MS", "100")
            .env("SEEDANCE_NVML_TIMEOUT", "2s"),
    );
    assert_eq!(bad.output.status.code(), Some(0), "{}", bad.stderr());
    assert_eq!(bad.stdout(), r.stdout());
    assert_eq!(
        bad.stderr(),
        "seedance: SEEDANCE_NVML_TIMEOUT=\"2s\" is not a number of milliseconds from 1 to \
         600000; using 2000\n"
            .to_string()
            + &reference.stderr()
    );
    assert_repaired_trace(&bad, present, [Some(0), Some(1)]);
}

/// Device 0 has 1 GiB free of 80 GiB; device 1 is empty (as in `e2e::alloc`).
fn oom() -> Run {
    Run::new("alloc_faults", true)
        .env("FAKE_CUDA_FREE_MEM", "1073741824,")
        .arg("oom")
}

/// An out-of-memory explanation asks NVML which other device has room. With `nvmlInit` or
/// the queries hanging and a 300 ms timeout, it says that is unknown, as without NVML, and
/// the run ends promptly.
#[test]
fn an_out_of_memory_explanation_under_a_hanging_nvml_finishes_promptly() {
    let (reference, _) = timed("no NVML", oom());
    assert_eq!(
        reference.output.status.code(),
        Some(0),
        "{}",
        reference.stdout()
    );
    assert_eq!(
        reference.stderr().lines().count(),
        1,
        "{}",
        reference.stderr()
    );
    for knob in ["FAKE_NVML_INIT_DELAY_MS", "FAKE_NVML_QUERY_DELAY_MS"] {
        let (r, took) = timed(
            knob,
            oom()
                .with_nvml()
                .env(knob, HANG_MS)
                .env("SEEDANCE_NVML_TIMEOUT", "300"),
        );
        assert_eq!(r.output.status.code(), Some(0), "{knob}: {}", r.stderr());
        assert_eq!(r.stdout(), reference.stdout(), "{knob}");
        assert_eq!(
            r.stdout(),
            "cuMemAlloc 256 MiB -> 0\ncuMemAlloc 256 MiB -> 0\ncuMemFree -> 0\n\
             cuMemAlloc 2 GiB -> 2\ncuMemAlloc 512 MiB -> 0\n"
        );
        assert_eq!(r.stderr(), nvml_line(300) + &reference.stderr(), "{knob}");
        assert!(
            took >= Duration::from_millis(300)
                && took < seedance_e2e::target::wall_time_bound(Duration::from_secs(5)),
            "{knob}: took {took:?}"
        );
        let f = r.events("alloc_fault");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0]["check"], "out_of_memory");
        assert_eq!(f[0]["free_bytes"].as_u64(), Some(768 << 20));
        assert!(
            f[0]["other_devices_with_room"].is_null(),
            "{knob}: {}",
            f[0]
        );
        assert_eq!(
            f[0]["explanation"],
            reference.events("alloc_fault")[0]["explanation"],
            "{knob}"
        );
        assert_eq!(
            r.events("session_start")[0]["topology"]["nvml"],
            json!({"present": false, "reason": "NVML (libnvidia-ml.so.1) did not answer within 300 ms"}),
            "{knob}"
        );
        let summary = r.events("exit_summary");
        assert_eq!(summary.len(), 1);
        assert_eq!(r.summary_count("cuMemAlloc_v2"), (4, 1));
    }
}

/// A device fault in the constructor of a library being `dlopen`ed, whose thread holds the
/// dynamic loader's lock, with NVML present (`tests/programs/early_dlopen.c`, fault mode:
/// another thread's device fault races the constructor's). A helper thread cannot load
/// NVML until the constructor returns; the shim notices within 250 ms and takes NVML's
/// part on the calling thread, as before: no NVML line, no timeout, NVML in the trace.
#[test]
fn a_device_fault_under_the_loaders_lock_still_uses_nvml() {
    let (r, took) = timed(
        "dlopen constructor fault, NVML",
        Run::new("early_dlopen", true)
            .args(&["ctor", "fault"])
            .with_nvml(),
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "dlopen ctor: cuInit -> 0, cuDeviceGet(5) -> 0 (device 1), cuCtxCreate -> 0, context \
         on 0000:11:00.0\nthread: cuDeviceGet(0) -> 0, cuDeviceGet(5) -> 0 (device 1)\n"
    );
    let (reference, _) = timed("no NVML", ordinal_5());
    assert_eq!(r.stderr(), reference.stderr());
    assert!(
        took < seedance_e2e::target::wall_time_bound(Duration::from_secs(5)),
        "took {took:?}"
    );
    assert_eq!(
        r.events("session_start")[0]["topology"]["nvml"],
        json!({"present": true, "reason": null})
    );
    assert_eq!(r.events("device_fallback").len(), 1);
    assert_eq!(r.events("exit_summary").len(), 1);
}
