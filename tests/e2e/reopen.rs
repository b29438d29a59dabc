//! Programs that lose and find again the driver library (`tests/programs/reopen.c`): a
//! `dlclose` and a `dlopen` of another copy, the same from `dlmopen`, a stub library whose
//! `cuInit` fails followed by the real one by path, and `dlsym(RTLD_DEFAULT or RTLD_NEXT,
//! "cuInit")` with no driver loaded globally. The wrappers must call the library the caller
//! looked the function up in now, and a pseudo-handle look-up must find what it finds
//! without the shim. Every mode gives the native output.

use seedance_e2e::{artifacts, Finished, Run};
use std::path::PathBuf;

/// Two copies of the fake driver in their own directories (`a/`, `b/`).
pub(crate) fn copies() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for d in ["a", "b"] {
        let sub = dir.path().join(d);
        std::fs::create_dir(&sub).unwrap();
        let lib = sub.join("libcuda.so.1");
        std::fs::copy(artifacts().fake_dir.join("libcuda.so.1"), &lib).unwrap();
        paths.push(lib);
    }
    let b = paths.pop().unwrap();
    let a = paths.pop().unwrap();
    (dir, a, b)
}

/// One run of reopen.c with `args` and `env`, without the shim (`mode` None) or with it in
/// `mode`: it must exit 0 and print `want`.
fn one_run(mode: Option<&str>, args: &[&str], env: &[(&str, String)], want: &str) -> Finished {
    let mut r = Run::new("reopen", mode.is_some()).args(args);
    for (k, v) in env {
        r = r.env(k, v);
    }
    if let Some(m) = mode {
        r = r.env("SEEDANCE_MODE", m);
    }
    let f = r.finish();
    assert_eq!(
        f.output.status.code(),
        Some(0),
        "{args:?} {mode:?}: {}",
        f.stderr()
    );
    assert_eq!(f.stdout(), want, "{args:?} {mode:?}: {}", f.stderr());
    f
}

fn in_every_mode(args: &[&str], env: &[(&str, String)], want: &str) -> Vec<Finished> {
    [None, Some("off"), Some("observe"), Some("fix")]
        .into_iter()
        .map(|mode| one_run(mode, args, env, want))
        .collect()
}

fn dir_of(p: &std::path::Path) -> String {
    p.parent().unwrap().display().to_string()
}

/// What `reopen reopen|dlmopen A B` prints with [`two_then_three`]'s copies.
const TWO_THEN_THREE: &str = "first: cuInit -> 0, cuDeviceGetCount -> 0, count 2\n\
                              second: cuInit -> 0, cuDeviceGetCount -> 0, count 3\n";

/// [`copies`] whose second reports 3 devices (the first the harness default, 2): the
/// directory, the two paths, and the variable that says so.
fn two_then_three() -> (tempfile::TempDir, String, String, (&'static str, String)) {
    let (keep, a, b) = copies();
    let env = ("FAKE_CUDA_DEVICE_COUNT_IN", format!("{}=3", dir_of(&b)));
    (keep, a.display().to_string(), b.display().to_string(), env)
}

/// A library that takes the range the first copy leaves (else the second copy can land at
/// the very same address and stale pointers would still work).
fn filler() -> String {
    artifacts()
        .nvml_dir
        .join("libnvidia-ml.so.1")
        .display()
        .to_string()
}

/// How many devices the run's session record lists, and the record.
fn recorded_devices(f: &Finished) -> (usize, String) {
    let start = &f.events("session_start")[0];
    (
        start["devices"].as_array().map_or(0, Vec::len),
        start.to_string(),
    )
}

#[test]
fn a_driver_closed_and_opened_again_from_elsewhere_is_the_one_called() {
    let (_keep, a, b, count) = two_then_three();
    let filler = filler();
    for how in ["reopen", "dlmopen"] {
        let runs = in_every_mode(
            &[how, &a, &b, &filler],
            std::slice::from_ref(&count),
            TWO_THEN_THREE,
        );
        for r in &runs[2..] {
            assert_eq!(r.summary_count("cuInit"), (2, 0), "{how}");
            assert_eq!(r.summary_count("cuDeviceGetCount"), (2, 0), "{how}");
        }
    }
}

#[test]
fn a_driver_closed_before_the_session_record_is_built_is_never_called() {
    // The session record's thread (started by the first cuInit when traces are written)
    // runs while the program has closed the first copy and not yet looked anything up in the
    // second (it pauses 200 ms there), or while it is inside the first copy's
    // cuDeviceGetName (which sleeps 300 ms) when the program closes it. The thread holds its
    // own reference to the copy it queries, taken only while that copy is still the one the
    // program looked cuInit up in: it never calls into an unmapped copy. Before, the
    // program died with SIGSEGV in the thread's first query (6 of 8 runs here).
    let (_keep, a, b, count) = two_then_three();
    let filler = filler();
    let env = [
        count,
        ("FAKE_CUDA_NAME_DELAY_MS", "300".to_string()),
        ("REOPEN_PAUSE_MS", "200".to_string()),
    ];
    for mode in ["observe", "fix"] {
        for round in 0..3 {
            let f = one_run(
                Some(mode),
                &["reopen", &a, &b, &filler],
                &env,
                TWO_THEN_THREE,
            );
            let why = format!("{mode} round {round}: {}", f.stderr());
            assert_eq!(f.summary_count("cuInit"), (2, 0), "{why}");
            // The record lists the devices of the copy it could hold (2 or 3), or none
            // when the first was gone and the second not looked up yet.
            let (n, start) = recorded_devices(&f);
            assert!([0, 2, 3].contains(&n), "{why}: {start}");
        }
    }
}

#[test]
fn a_driver_opened_with_dlmopen_is_never_queried_by_the_shims_own_thread() {
    // The program keeps the first copy open for 300 ms after its first calls, while the
    // session record's thread runs. A copy in the default namespace (dlopen) is described
    // (its 2 devices); one the program opened with dlmopen, in a namespace of its own, is
    // not called from the shim's thread (on the H200 that crashed the program,
    // scripts/gpu/reopen.sh): that record lists no devices, or the second copy's 3 when the
    // thread ran after the program had looked that one up.
    let (_keep, a, b, count) = two_then_three();
    let env = [count, ("REOPEN_HOLD_MS", "300".to_string())];
    for (how, allowed) in [("reopen", [2, 3]), ("dlmopen", [0, 3])] {
        for mode in ["observe", "fix"] {
            let f = one_run(Some(mode), &[how, &a, &b], &env, TWO_THEN_THREE);
            let (n, start) = recorded_devices(&f);
            assert!(
                allowed.contains(&n),
                "{how} {mode}: {}: {start}",
                f.stderr()
            );
        }
    }
}

#[test]
fn a_stub_then_the_real_driver_by_path_gets_the_real_answers() {
    let (_keep, stub, real) = copies();
    let env = [("FAKE_CUDA_STUB_IN", format!("{}=1", dir_of(&stub)))];
    let want = "stub: cuInit -> 34\nreal: cuInit -> 0, cuDeviceGetCount -> 0, count 2\n";
    let runs = in_every_mode(
        &[
            "fallback",
            &stub.display().to_string(),
            &real.display().to_string(),
        ],
        &env,
        want,
    );
    for r in &runs[2..] {
        let s = &r.events("exit_summary")[0]["functions"]["cuInit"];
        assert_eq!(s["calls"], 2);
        assert_eq!(s["errors_by_result"]["CUDA_ERROR_STUB_LIBRARY"], 1);
    }
}

#[test]
fn pseudo_handle_look_ups_find_the_driver_only_where_it_is() {
    let (_keep, a, _) = copies();
    let want = "no driver: RTLD_DEFAULT NULL (dlerror set), RTLD_NEXT NULL (dlerror set)\n\
                RTLD_LOCAL driver: RTLD_DEFAULT NULL (dlerror set), RTLD_NEXT NULL (dlerror set)\n\
                RTLD_GLOBAL driver: RTLD_DEFAULT found (dlerror clear), RTLD_NEXT found (dlerror clear)\n\
                RTLD_GLOBAL driver: cuInit through RTLD_DEFAULT -> 0\n";
    let runs = in_every_mode(&["pseudo", &a.display().to_string()], &[], want);
    // Where the driver is global, observe and fix hand out the wrapper: the call is counted.
    for r in &runs[2..] {
        assert_eq!(r.summary_count("cuInit"), (1, 0));
    }
}
