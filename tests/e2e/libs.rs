//! The program's libraries and signals are its own (`tests/programs/libs.c`,
//! `tests/programs/timer_signals.c`): a driver copy the program closed unloads as without
//! the shim and is never called again, at exit or from the shim's own thread; the program's
//! signal handlers run on its own threads only; a handler that calls `exit()` ends the
//! process. Every mode gives the native output.

use seedance_e2e::{artifacts, Finished, Run};
use std::time::Duration;

/// Two copies of the fake driver in their own directories ([`crate::reopen::copies`]), as
/// path strings.
fn copies() -> (tempfile::TempDir, String, String) {
    let (dir, a, b) = crate::reopen::copies();
    (dir, a.display().to_string(), b.display().to_string())
}

/// A library that takes the address range a closed copy leaves, so that a call into the
/// closed copy faults instead of finding the same code again.
fn filler() -> String {
    artifacts()
        .nvml_dir
        .join("libnvidia-ml.so.1")
        .display()
        .to_string()
}

/// One run of `program args` natively (`mode` None) or with the shim in `mode`, killed and
/// failed after 20 s.
fn run(program: &str, mode: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Finished {
    let mut r = Run::new(program, mode.is_some()).args(args);
    for (k, v) in env {
        r = r.env(k, v);
    }
    if let Some(m) = mode {
        r = r.env("SEEDANCE_MODE", m);
    }
    r.finish_within(Duration::from_secs(20))
}

/// One run of `timer_signals <how> <nth>` natively (`mode` None) or with the shim in `mode`:
/// killed and failed after 20 s, with every thread's stack (gdb, where installed) and the
/// case in the message.
fn exit_run(how: &str, mode: Option<&str>, nth: u32, env: &[(&str, &str)]) -> Finished {
    let mut r = Run::new("timer_signals", mode.is_some()).args(&[how, &nth.to_string()]);
    if let Some(m) = mode {
        r = r.env("SEEDANCE_MODE", m);
    }
    for (k, v) in env {
        r = r.env(k, v);
    }
    let mut running = r.spawn();
    let started = std::time::Instant::now();
    while running.child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let stacks = std::process::Command::new("gdb")
                .args(["-q", "-batch", "-p", &running.child.id().to_string()])
                .args(["-ex", "thread apply all bt 30"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let _ = running.child.kill();
            let f = running.finish();
            panic!(
                "{how} {mode:?} exit at run {nth}: still running after 20 s; killed. stderr: {}\n{stacks}",
                f.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    running.finish()
}

/// Asserts exit status 0 and `want` on stdout.
fn clean(f: &Finished, want: &str, why: &str) {
    assert_eq!(
        f.output.status.code(),
        Some(0),
        "{why}: {:?} {}",
        f.output.status,
        f.stderr()
    );
    assert_eq!(f.stdout(), want, "{why}: {}", f.stderr());
}

#[test]
fn a_driver_closed_before_exit_is_not_called_at_exit() {
    // A thread that then ends makes a context and an allocation, and a second context that
    // it destroys (whose end is judged with the allocation alive: the shim looks the
    // allocation's device up, cuPointerGetAttribute, and remembers that entry point). The
    // program closes the driver and exits. Before, the exit report called the remembered
    // cuPointerGetAttribute inside the unmapped copy: SIGSEGV (exit 139, the buffered line
    // lost) in 6 of 6 runs. The exit now holds the driver it queries, and finds it gone.
    let (_keep, a, _) = copies();
    let filler = filler();
    let want = "thread: 0 0 0 0 0 0\nclosed; exit 0\n";
    clean(
        &run("libs", None, &["close-at-exit", &a, &filler], &[]),
        want,
        "native",
    );
    for mode in ["observe", "fix"] {
        for round in 0..3 {
            let f = run("libs", Some(mode), &["close-at-exit", &a, &filler], &[]);
            clean(&f, want, &format!("{mode} round {round}"));
        }
    }
}

#[test]
fn a_driver_the_program_closes_is_unloaded() {
    // With a trace directory the session record's thread queries the driver; once it is
    // done, the program's dlclose must unload the copy as natively: opened again, it is a
    // fresh, uninitialised instance (cuDeviceGetCount without cuInit: 3,
    // CUDA_ERROR_NOT_INITIALIZED). Before, the shim's device queries resolved through
    // `dlopen("libcuda.so.1", RTLD_NOLOAD)` and kept that reference for good: "still
    // loaded" and 0 in every run in observe and fix.
    let (_keep, a, _) = copies();
    let want = "first: cuInit -> 0, cuDeviceGetCount -> 0, count 2, cuDeviceGet(0) -> 0\n\
                after dlclose: unloaded\n\
                opened again: cuDeviceGetCount without cuInit -> 3\n";
    for mode in [None, Some("off"), Some("observe"), Some("fix")] {
        let f = run("libs", mode, &["reload", &a], &[]);
        clean(&f, want, &format!("{mode:?}"));
    }
}

#[test]
fn the_shims_thread_calls_only_the_copy_it_holds() {
    // The program opens copy A, initialises it and, while the session record's thread is
    // inside A's cuDeviceGetName (the fake sleeps 300 ms there), closes A, opens copy B,
    // uses it (cuInit, cuDeviceGetCount, cuDeviceGet) and closes it too, then waits. The
    // thread holds A; before, its next queries went through the program's latest look-ups
    // (B's cuDeviceGet), into the unmapped B: SIGSEGV in every run (4 of 4). It now looks
    // every entry point up in the copy it holds.
    let (_keep, a, b) = copies();
    let filler = filler();
    let want = "A: cuInit -> 0, cuDeviceGetCount -> 0, count 2, cuDeviceGet(0) -> 0\n\
                B: cuInit -> 0, cuDeviceGetCount -> 0, count 2, cuDeviceGet(0) -> 0\n\
                done\n";
    let env = [("FAKE_CUDA_NAME_DELAY_MS", "300")];
    clean(
        &run("libs", None, &["two-copies", &a, &b, &filler], &env),
        want,
        "native",
    );
    for mode in ["observe", "fix"] {
        for round in 0..2 {
            let f = run("libs", Some(mode), &["two-copies", &a, &b, &filler], &env);
            clean(&f, want, &format!("{mode} round {round}"));
            let start = &f.events("session_start")[0];
            // The record describes the copy the thread held: A's two devices.
            assert_eq!(
                start["devices"].as_array().map_or(0, Vec::len),
                2,
                "{mode} round {round}: {start}"
            );
        }
    }
}

#[test]
fn the_programs_signal_handlers_run_on_its_own_threads() {
    // A 1 kHz SIGALRM whose handler is slow every fourth run: the next tick comes while
    // SIGALRM is blocked on the main thread, and the kernel gives it to any thread that
    // does not block it. Natively there is none; before, the shim's trace writer took
    // 40-44 of them in every run. Every thread the shim starts now blocks every signal.
    let want = "started\nhandler ran yes, 0 times on another thread\n";
    for mode in [None, Some("off"), Some("observe"), Some("fix")] {
        let f = run("timer_signals", mode, &["threads"], &[]);
        clean(&f, want, &format!("{mode:?}"));
    }
}

#[test]
fn a_signal_handler_that_calls_exit_ends_the_process() {
    if seedance_e2e::target::skip_under_emulation(
        "qemu-user itself dies with SIGSEGV when a handler of a 1 kHz timer calls exit(), \
         without the shim too",
    ) {
        return;
    }
    // The handler's Nth run calls exit(7), wherever it interrupted the program (its driver
    // calls, the shim's work around them, malloc) or, before, on a thread of the shim's.
    // Natively exit status 7 and the buffered line written. Before, 11 of 20 runs here
    // ended with status 0 instead (the exit on the shim's thread waited while the program
    // finished) or hung.
    for mode in [None, Some("observe"), Some("fix")] {
        for n in 6..16 {
            let f = exit_run("exit", mode, n, &[]);
            assert_eq!(
                f.output.status.code(),
                Some(7),
                "{mode:?} exit at run {n}: {:?} {}",
                f.output.status,
                f.stderr()
            );
            assert_eq!(f.stdout(), "started\n", "{mode:?} exit at run {n}");
        }
    }
}

#[test]
fn an_exit_from_a_handler_inside_the_driver_does_not_wait_for_the_record() {
    // The handler calls exit(7) while the program is inside the driver (cuDeviceGetName,
    // which holds the fake's lock for 1 s), right after cuInit started the session record,
    // whose thread waits for that lock: it can never finish. Natively exit 7 at once.
    // Before, the exit waited for the record for ever (3 of 3 runs killed at 10 s, 2 of 2
    // here at 20 s). Now it waits at most SEEDANCE_NVML_TIMEOUT + 1 s (300 ms here), then
    // exits without the record, the report or the summary (and calls no driver).
    let env = [
        ("FAKE_CUDA_NAME_DELAY_MS", "1000"),
        ("SEEDANCE_NVML_TIMEOUT", "300"),
    ];
    for mode in [None, Some("observe"), Some("fix")] {
        let started = std::time::Instant::now();
        let f = run("timer_signals", mode, &["inside"], &env);
        assert_eq!(
            f.output.status.code(),
            Some(7),
            "{mode:?}: {:?} {}",
            f.output.status,
            f.stderr()
        );
        assert_eq!(f.stdout(), "started\n", "{mode:?}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{mode:?}: {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn an_exit_from_a_handler_that_interrupted_the_allocator_or_the_driver_ends_the_process() {
    if seedance_e2e::target::skip_under_emulation(
        "qemu-user itself dies with SIGSEGV when a handler of a 1 kHz timer calls exit(), \
         without the shim too",
    ) {
        return;
    }
    // A context with a live allocation (the exit has a lifetime report to make), 200 ms of
    // quiet (the session record is written), then a 1 kHz SIGALRM whose Nth run calls
    // exit(7) while the program loops over malloc and free only (`malloc`: the exit nearly
    // always interrupts the C library's allocator, holding its arena's lock) or over driver
    // calls only (`calls`: cuDeviceGetName holds the fake driver's lock for 5 ms, so the exit
    // mostly interrupts the driver). Natively exit status 7 with the buffered line. Before,
    // the exit's work ran on the exiting thread and waited for those locks for ever: killed
    // at 15 s in 7 of 10 `malloc` runs (main_arena's lock, the live-allocation list's
    // growth) and 11 of 12 `calls` runs (the fake driver's lock, the stray-context check's
    // cuPointerGetAttribute), observe and fix. Now it runs on the shim's exit thread, which
    // the exiting thread waits for only while it makes progress, at most
    // SEEDANCE_NVML_TIMEOUT + 1 s (1.3 s here) without any: 0 of 60 `malloc` and 0 of 12
    // `calls` runs hung.
    for (how, env) in [
        (
            "malloc",
            [
                ("SEEDANCE_NVML_TIMEOUT", "300"),
                ("FAKE_CUDA_NAME_DELAY_MS", "0"),
            ],
        ),
        (
            "calls",
            [
                ("SEEDANCE_NVML_TIMEOUT", "300"),
                ("FAKE_CUDA_NAME_DELAY_MS", "5"),
            ],
        ),
    ] {
        for mode in [None, Some("observe"), Some("fix")] {
            for n in 6..12 {
                let started = std::time::Instant::now();
                let f = exit_run(how, mode, n, &env);
                assert_eq!(
                    f.output.status.code(),
                    Some(7),
                    "{how} {mode:?} exit at run {n}: {:?} {}",
                    f.output.status,
                    f.stderr()
                );
                assert_eq!(f.stdout(), "started\n", "{how} {mode:?} exit at run {n}");
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "{how} {mode:?} exit at run {n}: {:?}",
                    started.elapsed()
                );
            }
        }
    }
}
