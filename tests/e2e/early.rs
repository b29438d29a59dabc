//! Early and re-entrant calls: driver calls made before `main` (a shared
//! library's constructors, of default and high priority; the program's own constructor;
//! its `.preinit_array`, which runs before the C library has initialised itself) are
//! explained, repaired and counted exactly as the same calls made from `main`; so are calls
//! from the constructor of a library loaded with `dlopen`, which runs under the dynamic
//! loader's lock, while another thread calls the driver; and calls from `pthread_once`
//! bodies that 8 threads race into, and from a thread an atexit handler starts. A preloaded
//! allocator that looks up the real `malloc` with `dlsym` works before or after the shim,
//! also when that look-up runs inside the shim's own `dlsym`.
//!
//! Programs: `tests/programs/early_main.c` and `early_dlopen.c`, with `early_ctor.c`
//! (`libearly_ctor.so`); `early_once.c`; `early_alloc_main.c` with `early_alloc.c`
//! (`libearly_alloc.so`). Every run goes through [`finish_within`], so a deadlock fails the
//! test instead of hanging it.

use seedance_e2e::{Finished, Run};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Longest a run may take before the test kills it and fails (each takes well under a
/// second; the margin is for a loaded machine).
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `run` (`what` says which, for the failure message) to completion, killing it and
/// failing the test if it is still running after [`DEADLINE`] (a deadlock in the shim would
/// otherwise hang the test).
fn finish_within(what: &str, run: Run) -> Finished {
    let mut running = run.spawn();
    let started = Instant::now();
    while running
        .child
        .try_wait()
        .expect("wait for test program")
        .is_none()
    {
        if started.elapsed() > DEADLINE {
            let _ = running.child.kill();
            let r = running.finish();
            panic!(
                "{what}: still running after {DEADLINE:?} (deadlock?); killed. stdout: {:?} \
                 stderr: {:?}",
                r.stdout(),
                r.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    running.finish()
}

/// The shim's two lines for `cuDeviceGet(5)` with 2 devices: the explanation and the repair.
const FAULT_2_DEVICES: &str = "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 5 \
    requested, 2 devices visible (ordinal 0 = physical GPU 0, Fake H200 #0, 0000:10:00.0; \
    ordinal 1 = physical GPU 1, Fake H200 #1, 0000:11:00.0); the program expects more GPUs \
    than this host or container exposes; use ordinals 0..1 or run it with fewer ranks per \
    node\nseedance: cuDeviceGet: fix: ordinal 5 -> ordinal 1 (physical GPU 1, Fake H200 #1, \
    0000:11:00.0): ordinal 5 is not visible; set SEEDANCE_FALLBACK=off to keep the error\n";

/// The same with 1 device: ordinal 5 goes to ordinal 0.
const FAULT_1_DEVICE: &str = "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 5 \
    requested, 1 device visible (ordinal 0 = physical GPU 0, Fake H200 #0, 0000:10:00.0); the \
    program expects more GPUs than this host or container exposes; use ordinals 0..0 or run \
    it with fewer ranks per node\nseedance: cuDeviceGet: fix: ordinal 5 -> ordinal 0 \
    (physical GPU 0, Fake H200 #0, 0000:10:00.0): ordinal 5 is not visible; set \
    SEEDANCE_FALLBACK=off to keep the error\n";

/// `early_main STAGE`: the calls of `early_calls()` made at STAGE.
fn early_main(stage: &str, shim: bool) -> Run {
    Run::new("early_main", shim).arg(stage)
}

/// What `early_main` prints when the shim repaired `cuDeviceGet(5)` to `device`.
fn repaired_stdout(stage: &str, device: i32, bus: &str) -> String {
    format!(
        "{stage}: cuInit -> 0, cuDeviceGet(5) -> 0 (device {device}), cuCtxCreate -> 0, \
         context on {bus}\n"
    )
}

/// The trace of a run whose `cuDeviceGet(5)` went to `device`: one fault, one repair, and
/// the exact calls of the program in the exit summary, argv as the program got it.
fn assert_trace(r: &Finished, stage: &str, device: i32, bus: &str, visible: u32) {
    assert_eq!(r.trace_files, 1, "{}", r.stderr());
    let start = r.events("session_start");
    assert_eq!(start.len(), 1);
    let argv = start[0]["argv"].as_array().unwrap();
    assert_eq!(
        argv.len(),
        2,
        "{stage}: argv {argv:?}, session_start {}",
        start[0]
    );
    assert!(argv[0].as_str().unwrap().ends_with("/early_main"));
    assert_eq!(argv[1], stage);
    assert_eq!(start[0]["mode"], "fix");
    assert_eq!(
        start[0]["devices"].as_array().unwrap().len(),
        visible as usize
    );
    let faults = r.events("device_fault");
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0]["function"], "cuDeviceGet");
    assert_eq!(faults[0]["requested_ordinal"], 5);
    assert_eq!(faults[0]["fault"], "invalid_ordinal");
    assert_eq!(faults[0]["visible_devices"], visible);
    let fb = r.events("device_fallback");
    assert_eq!(fb.len(), 1);
    assert_eq!(fb[0]["requested_ordinal"], 5);
    assert_eq!(fb[0]["chosen_ordinal"], device);
    assert_eq!(fb[0]["chosen_pci_bus_id"], bus);
    assert!(r.events("call_failed").is_empty());
    assert_eq!(
        r.summary_calls(),
        [
            ("cuCtxCreate_v2".to_string(), 1),
            ("cuCtxDestroy_v2".to_string(), 1),
            ("cuDeviceGet".to_string(), 1),
            ("cuInit".to_string(), 1),
        ]
    );
    assert_eq!(r.summary_count("cuDeviceGet"), (1, 1));
    let summary = r.events("exit_summary")[0];
    assert_eq!(summary["repairs"], json!({"device_fallback": 1}));
    assert_eq!(summary["fallbacks"], json!({"5": device}));
    assert_eq!(summary["dropped_records"], 0);
}

/// The driver received ordinal 5 once (refused), then the shim's device queries, then the
/// program's context creation on the repaired device.
fn assert_driver_saw(r: &Finished, device: i32) {
    let calls = &r.driver_calls;
    let at = |line: &str| {
        let found: Vec<usize> = (0..calls.len()).filter(|&i| calls[i] == line).collect();
        assert_eq!(found.len(), 1, "{line} in {calls:#?}");
        found[0]
    };
    assert_eq!(at("cuInit flags=0 -> 0"), 0, "{calls:#?}");
    let refused = at("cuDeviceGet ordinal=5 -> 101");
    let created = at(&format!("cuCtxCreate_v2 flags=0 dev={device} -> 0"));
    assert!(refused < created, "{calls:#?}");
    assert_eq!(
        calls[created - 1],
        format!("cuDeviceGet ordinal={device} -> 0"),
        "the repaired call comes right before the context creation: {calls:#?}"
    );
    assert!(
        !calls
            .iter()
            .any(|l| l.starts_with("cuCtxCreate_v2") && !l.ends_with("-> 0")),
        "{calls:#?}"
    );
    // The shim's own device queries (topology, session record) went straight to the driver:
    // more cuDeviceGet calls than the program's one and its repeat, and none counted (the
    // exit summary, checked by assert_trace, has 1). Some of them are made on the session
    // record's thread, at a time of its own, so they are counted over every thread.
    let gets = r
        .all_driver_calls()
        .iter()
        .filter(|l| l.starts_with("cuDeviceGet "))
        .count();
    assert!(gets > 2, "{calls:#?}");
}

/// From `main`, the program's constructor, and a shared library's constructors of default
/// and of high priority (101): the same explanation, the same repair (ordinal 5 -> 1), the
/// same driver calls and the same exact counts, with NVML absent or present. Without the
/// shim the call fails the same way from every stage.
#[test]
fn constructor_calls_are_repaired_as_calls_from_main() {
    for stage in ["main", "exe_ctor", "ctor", "ctor101"] {
        let plain = finish_within(stage, early_main(stage, false));
        assert_eq!(plain.output.status.code(), Some(1), "{stage}");
        assert_eq!(
            plain.stdout(),
            format!(
                "{stage}: cuInit -> 0, cuDeviceGet(5) -> 101 (device -1), cuCtxCreate -> 101, \
                 context on ?\n"
            )
        );
        assert_eq!(plain.stderr(), "");

        for nvml in [false, true] {
            let mut run = early_main(stage, true);
            if nvml {
                run = run.with_nvml();
            }
            let r = finish_within(stage, run);
            assert_eq!(r.output.status.code(), Some(0), "{stage}: {}", r.stderr());
            assert_eq!(r.stdout(), repaired_stdout(stage, 1, "0000:11:00.0"));
            assert_eq!(r.stderr(), FAULT_2_DEVICES, "{stage}");
            assert_trace(&r, stage, 1, "0000:11:00.0", 2);
            assert_driver_saw(&r, 1);
            // NVML, when present, was opened for the topology inside the same early call.
            assert_eq!(
                r.events("session_start")[0]["topology"]["nvml"]["present"],
                nvml,
                "{stage}"
            );
        }
    }
}

/// From the program's `.preinit_array`: before any shared library's constructor and before
/// the C library's own initialiser, so `environ` is still null and `getenv` finds nothing.
/// The shim still reads its `SEEDANCE_*` settings (from the process's initial environment):
/// the trace is written, `SEEDANCE_MODE=off` and `SEEDANCE_QUIET=1` are obeyed. The fake
/// driver, like any driver that reads its settings with `getenv` during `cuInit`, sees no
/// `FAKE_CUDA_*` variable there: its default single device and no call log. So the
/// reference is a run from `main` on 1 device.
#[test]
fn preinit_array_calls_are_repaired_and_the_settings_still_apply() {
    let reference = finish_within(
        "main, 1 device",
        early_main("main", true).env("FAKE_CUDA_DEVICE_COUNT", "1"),
    );
    assert_eq!(
        reference.output.status.code(),
        Some(0),
        "{}",
        reference.stderr()
    );
    assert_eq!(
        reference.stdout(),
        repaired_stdout("main", 0, "0000:10:00.0")
    );
    assert_eq!(reference.stderr(), FAULT_1_DEVICE);
    assert_trace(&reference, "main", 0, "0000:10:00.0", 1);
    assert_driver_saw(&reference, 0);

    let r = finish_within("preinit", early_main("preinit", true).with_nvml());
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), repaired_stdout("preinit", 0, "0000:10:00.0"));
    assert_eq!(r.stderr(), FAULT_1_DEVICE);
    assert_trace(&r, "preinit", 0, "0000:10:00.0", 1);
    // NVML opened inside the preinit call (the fake NVML, like the driver, sees 1 device).
    assert_eq!(
        r.events("session_start")[0]["topology"]["nvml"]["present"],
        true
    );
    assert!(
        r.all_driver_calls().is_empty(),
        "the fake driver read FAKE_CUDA_LOG before libc initialised? {:#?}",
        r.all_driver_calls()
    );

    // Without the shim: the call fails.
    let plain = finish_within("preinit, no shim", early_main("preinit", false));
    assert_eq!(plain.output.status.code(), Some(1));
    let failed = "preinit: cuInit -> 0, cuDeviceGet(5) -> 101 (device -1), cuCtxCreate -> 101, \
                  context on ?\n";
    assert_eq!(plain.stdout(), failed);

    // SEEDANCE_MODE=off, read before libc initialised: forwards only, as without the shim.
    let off = finish_within(
        "preinit, mode off",
        early_main("preinit", true).env("SEEDANCE_MODE", "off"),
    );
    assert_eq!(off.output.status.code(), Some(1));
    assert_eq!(off.stdout(), failed);
    assert_eq!(off.stderr(), "");
    assert_eq!(off.trace_files, 0);

    // SEEDANCE_QUIET=1: repaired, nothing on stderr, the trace as before.
    let quiet = finish_within(
        "preinit, quiet",
        early_main("preinit", true).env("SEEDANCE_QUIET", "1"),
    );
    assert_eq!(quiet.output.status.code(), Some(0));
    assert_eq!(quiet.stdout(), r.stdout());
    assert_eq!(quiet.stderr(), "");
    assert_trace(&quiet, "preinit", 0, "0000:10:00.0", 1);
}

/// `early_dlopen ctor MODE`: `libearly_ctor.so` loaded with `dlopen`, its constructor's calls
/// racing another thread's (see `tests/programs/early_dlopen.c`).
fn early_dlopen(mode: &str, shim: bool) -> Run {
    Run::new("early_dlopen", shim).args(&["ctor", mode])
}

/// The constructor's line of `early_dlopen` when its `cuDeviceGet(5)` was repaired.
const DLOPEN_CTOR_REPAIRED: &str = "dlopen ctor: cuInit -> 0, cuDeviceGet(5) -> 0 (device 1), \
    cuCtxCreate -> 0, context on 0000:11:00.0\n";

/// A library loaded with `dlopen` runs its constructor while its thread holds the dynamic
/// loader's lock, and the shim's first steps (opening libcuda, looking up entry points,
/// taking the topology, opening NVML) wait for that lock. Here another thread makes its first
/// driver calls (`first`) or a device fault (`fault`) just before the constructor makes its
/// own, and gets inside the shim first. Before the fix that thread held the shim's
/// once-only cell (the libcuda handle, the topology) while it waited for the loader, and the
/// constructor's call waited for the cell: deadlock, both modes, every run. Now each finishes:
/// both threads' calls answered, the constructor's `cuDeviceGet(5)` repaired, exact counts.
#[test]
fn dlopen_constructor_calls_racing_another_thread_do_not_deadlock() {
    let plain = finish_within("first, no shim", early_dlopen("first", false));
    assert_eq!(plain.output.status.code(), Some(1));
    assert_eq!(
        plain.stdout(),
        "dlopen ctor: cuInit -> 0, cuDeviceGet(5) -> 101 (device -1), cuCtxCreate -> 101, \
         context on ?\nthread: cuInit -> 0, cuDeviceGet(0) -> 0 (device 0)\n"
    );

    let r = finish_within("first", early_dlopen("first", true));
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        format!("{DLOPEN_CTOR_REPAIRED}thread: cuInit -> 0, cuDeviceGet(0) -> 0 (device 0)\n")
    );
    assert_eq!(r.stderr(), FAULT_2_DEVICES);
    assert_eq!(
        r.summary_calls(),
        [
            ("cuCtxCreate_v2".to_string(), 1),
            ("cuCtxDestroy_v2".to_string(), 1),
            ("cuDeviceGet".to_string(), 2),
            ("cuInit".to_string(), 2),
        ]
    );
    assert_eq!(r.summary_count("cuDeviceGet"), (2, 1));
    assert_eq!(r.events("device_fallback").len(), 1);
    let count = |r: &Finished, line: &str| r.driver_calls.iter().filter(|l| *l == line).count();
    assert_eq!(count(&r, "cuDeviceGet ordinal=5 -> 101"), 1);
    assert_eq!(count(&r, "cuCtxCreate_v2 flags=0 dev=1 -> 0"), 1);

    // The device fault race: without a trace directory, so that the topology is not taken
    // at cuInit by the session record but by the first fault, which is the race.
    let r = finish_within(
        "fault",
        early_dlopen("fault", true).env_remove("SEEDANCE_TRACE_DIR"),
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        format!(
            "{DLOPEN_CTOR_REPAIRED}thread: cuDeviceGet(0) -> 0, cuDeviceGet(5) -> 0 (device 1)\n"
        )
    );
    // One explanation and one announcement for the two faults on ordinal 5.
    assert_eq!(r.stderr(), FAULT_2_DEVICES);
    assert_eq!(r.trace_files, 0);
    assert_eq!(count(&r, "cuDeviceGet ordinal=5 -> 101"), 2);
    assert_eq!(count(&r, "cuCtxCreate_v2 flags=0 dev=1 -> 0"), 1);
}

/// `pthread_once` bodies making driver calls (`tests/programs/early_once.c`): 8 threads race
/// into each of 4 once-controls; the body (the first one makes the process's first driver
/// call, so the shim starts up inside it while 7 threads wait in `pthread_once`) calls
/// `cuInit`, `cuDeviceGet(5)` (repaired to 1 every round, explained once) and
/// `cuCtxCreate_v2`; then every thread uses the round's context. An atexit handler destroys
/// the contexts from a thread it starts. No deadlock, exact counts, three runs.
#[test]
fn pthread_once_bodies_racing_eight_threads_are_repaired_and_counted() {
    for _ in 0..3 {
        let r = finish_within("early_once 5", Run::new("early_once", true).arg("5"));
        assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
        assert_eq!(
            r.stdout(),
            "once bodies: 1 1 1 1; devices: 1 1 1 1; threads' calls ok: 32 of 32\n\
             atexit thread: 4 contexts destroyed\n"
        );
        assert_eq!(r.stderr(), FAULT_2_DEVICES);
        assert_eq!(
            r.summary_calls(),
            [
                ("cuCtxCreate_v2".to_string(), 4),
                ("cuCtxDestroy_v2".to_string(), 4),
                ("cuCtxSetCurrent".to_string(), 32),
                ("cuCtxSynchronize".to_string(), 32),
                ("cuDeviceGet".to_string(), 4),
                ("cuInit".to_string(), 4),
            ]
        );
        assert_eq!(r.summary_count("cuDeviceGet"), (4, 4));
        let summary = r.events("exit_summary")[0];
        assert_eq!(summary["repairs"], json!({"device_fallback": 4}));
        assert_eq!(summary["fallbacks"], json!({"5": 1}));
        assert_eq!(summary["live_contexts"], json!([]));
        assert_eq!(summary["dropped_records"], 0);
        assert_eq!(r.events("device_fault").len(), 1);
        assert_eq!(r.events("device_fallback").len(), 1);
        assert!(r.events("call_failed").is_empty());
        let count = |prefix: &str| {
            r.driver_calls
                .iter()
                .filter(|l| l.starts_with(prefix))
                .count()
        };
        assert_eq!(count("cuDeviceGet ordinal=5 -> 101"), 4);
        assert_eq!(count("cuCtxCreate_v2 flags=0 dev=1 -> 0"), 4);
        assert_eq!(count("cuCtxCreate_v2"), 4);
        assert_eq!(count("cuCtxSetCurrent"), 32);
        assert_eq!(count("cuCtxDestroy_v2"), 4);
    }
    // A healthy run (ordinal 0): as without the shim, and silent.
    let plain = finish_within(
        "early_once 0, no shim",
        Run::new("early_once", false).arg("0"),
    );
    let r = finish_within("early_once 0", Run::new("early_once", true).arg("0"));
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "once bodies: 1 1 1 1; devices: 0 0 0 0; threads' calls ok: 32 of 32\n\
         atexit thread: 4 contexts destroyed\n"
    );
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.stderr(), "");
    assert_eq!(r.summary_count("cuCtxSynchronize"), (32, 0));
    assert_eq!(r.summary_count("cuDeviceGet"), (4, 0));
}

/// What `early_alloc_main` prints, but its last line, with or without the shim.
const ALLOC_MAIN_CALLS: &str = "cuInit -> 0\ncuDeviceGet(1) -> 0\ncuCtxCreate -> 0\n\
    cuMemAlloc 0 bytes -> 1\nblock 32x33x1 -> 1\ncuMemAlloc 1 MiB -> 0\nblock 32x32x1 -> 0\n\
    cuCtxSynchronize -> 0\ncuMemFree -> 0\ncuCtxDestroy -> 0\n";

/// `early_alloc_main` with `LD_PRELOAD` set to `preload` (paths joined with `:`).
fn under_allocator(preload: &[&PathBuf]) -> Run {
    let list: Vec<String> = preload.iter().map(|p| p.display().to_string()).collect();
    Run::new("early_alloc_main", false).env("LD_PRELOAD", list.join(":"))
}

/// A preloaded allocator interposer (`tests/programs/early_alloc.c`: malloc, free, calloc
/// and realloc found with `dlsym(RTLD_NEXT, ..)` on first use, a static buffer meanwhile),
/// before and after the shim in `LD_PRELOAD`. The program's first contact with the driver is
/// `dlsym(libcuda, "cuInit")` with the allocator made to look its functions up again: under
/// the shim its `dlsym(RTLD_NEXT, "malloc")` runs inside the shim's `dlsym` (the shim's
/// first-use set-up allocates there), once; without the shim nothing allocates there. Then a
/// zero-size allocation and an over-limit launch, each explained (the shim allocates inside
/// the failing call), and healthy calls. Same results as under the allocator alone, the two
/// explanations, exact counts, no deadlock or crash.
#[test]
fn preloaded_allocator_before_or_after_the_shim() {
    let a = seedance_e2e::artifacts();
    let alloc = a.bin_dir.join("libearly_alloc.so");
    let plain = finish_within("allocator alone", under_allocator(&[&alloc]));
    assert_eq!(plain.output.status.code(), Some(0), "{}", plain.stdout());
    assert_eq!(
        plain.stdout(),
        format!("{ALLOC_MAIN_CALLS}allocator in use; look-ups inside dlsym(cuInit): 0\n")
    );
    assert_eq!(plain.stderr(), "");
    for (what, order) in [
        ("allocator, shim", [&alloc, &a.shim]),
        ("shim, allocator", [&a.shim, &alloc]),
    ] {
        let r = finish_within(what, under_allocator(&order));
        assert_eq!(r.output.status.code(), Some(0), "{what}: {}", r.stderr());
        assert_eq!(
            r.stdout(),
            format!("{ALLOC_MAIN_CALLS}allocator in use; look-ups inside dlsym(cuInit): 1\n"),
            "{what}"
        );
        let err = r.stderr();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{what}: {err}");
        assert!(
            lines[0].starts_with(
                "seedance: cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE (1): the program asked for \
                 0 bytes"
            ),
            "{what}: {err}"
        );
        assert!(
            lines[1].starts_with(
                "seedance: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): block (32,33,1) = 1056 \
                 threads, over device 1's limit of 1024 threads per block"
            ),
            "{what}: {err}"
        );
        assert_eq!(r.events("alloc_fault").len(), 1, "{what}");
        assert_eq!(r.events("launch_fault").len(), 1, "{what}");
        assert!(r.events("call_failed").is_empty(), "{what}");
        assert_eq!(
            r.summary_calls(),
            [
                ("cuCtxCreate_v2".to_string(), 1),
                ("cuCtxDestroy_v2".to_string(), 1),
                ("cuCtxSynchronize".to_string(), 1),
                ("cuDeviceGet".to_string(), 1),
                ("cuInit".to_string(), 1),
                ("cuLaunchKernel".to_string(), 2),
                ("cuMemAlloc_v2".to_string(), 2),
                ("cuMemFree_v2".to_string(), 1),
            ],
            "{what}"
        );
        assert_eq!(r.summary_count("cuLaunchKernel"), (2, 1), "{what}");
        assert_eq!(r.summary_count("cuMemAlloc_v2"), (2, 1), "{what}");
        assert_eq!(r.events("exit_summary")[0]["dropped_records"], 0);
        seedance_e2e::assert_forwarded_unchanged(&plain.driver_calls, &r.driver_calls);
    }
}
