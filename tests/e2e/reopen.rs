//! Programs that lose and find again the driver library (`tests/programs/reopen.c`): a
//! `dlclose` and a `dlopen` of another copy, the same from `dlmopen`, a stub library whose
//! `cuInit` fails followed by the real one by path, and `dlsym(RTLD_DEFAULT or RTLD_NEXT,
//! "cuInit")` with no driver loaded globally. The wrappers must call the library the caller
//! looked the function up in now, and a pseudo-handle look-up must find what it finds
//! without the shim. Every mode gives the native output.

use seedance_e2e::{artifacts, Finished, Run};
use std::path::PathBuf;

/// Two copies of the fake driver in their own directories (`a/`, `b/`).
fn copies() -> (tempfile::TempDir, PathBuf, PathBuf) {
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

fn in_every_mode(args: &[&str], env: &[(&str, String)], want: &str) -> Vec<Finished> {
    let mut runs = Vec::new();
    for mode in [None, Some("off"), Some("observe"), Some("fix")] {
        let mut r = Run::new("reopen", mode.is_some()).args(args);
        for (k, v) in env {
            r = r.env(k, v);
        }
        if let Some(m) = mode {
            r = r.env("SEEDANCE_MODE", m);
        }
        let f = r.finish();
        assert_eq!(f.output.status.code(), Some(0), "{mode:?}: {}", f.stderr());
        assert_eq!(f.stdout(), want, "{mode:?}: {}", f.stderr());
        runs.push(f);
    }
    runs
}

fn dir_of(p: &std::path::Path) -> String {
    p.parent().unwrap().display().to_string()
}

#[test]
fn a_driver_closed_and_opened_again_from_elsewhere_is_the_one_called() {
    let (_keep, a, b) = copies();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    // A library that takes the range the first copy leaves (else the second copy can land
    // at the very same address and stale pointers would still work).
    let filler = artifacts().nvml_dir.join("libnvidia-ml.so.1");
    let filler = filler.display().to_string();
    // The second copy reports 3 devices, the first 2 (the harness default).
    let env = [(
        "FAKE_CUDA_DEVICE_COUNT_IN",
        format!("{}=3", dir_of(std::path::Path::new(&b))),
    )];
    let want = "first: cuInit -> 0, cuDeviceGetCount -> 0, count 2\n\
                second: cuInit -> 0, cuDeviceGetCount -> 0, count 3\n";
    for how in ["reopen", "dlmopen"] {
        let runs = in_every_mode(&[how, &a, &b, &filler], &env, want);
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
    let (_keep, a, b) = copies();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let filler = artifacts().nvml_dir.join("libnvidia-ml.so.1");
    let filler = filler.display().to_string();
    let want = "first: cuInit -> 0, cuDeviceGetCount -> 0, count 2\n\
                second: cuInit -> 0, cuDeviceGetCount -> 0, count 3\n";
    for mode in ["observe", "fix"] {
        for round in 0..3 {
            let f = Run::new("reopen", true)
                .args(&["reopen", &a, &b, &filler])
                .env("SEEDANCE_MODE", mode)
                .env(
                    "FAKE_CUDA_DEVICE_COUNT_IN",
                    format!("{}=3", dir_of(std::path::Path::new(&b))),
                )
                .env("FAKE_CUDA_NAME_DELAY_MS", "300")
                .env("REOPEN_PAUSE_MS", "200")
                .finish();
            let why = format!("{mode} round {round}: {}", f.stderr());
            assert_eq!(f.output.status.code(), Some(0), "{why}");
            assert_eq!(f.stdout(), want, "{why}");
            assert_eq!(f.summary_count("cuInit"), (2, 0), "{why}");
            // The record lists the devices of the copy it could hold (2 or 3), or none
            // when the first was gone and the second not looked up yet.
            let start = &f.events("session_start")[0];
            let n = start["devices"].as_array().map_or(0, Vec::len);
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
    // scripts/gpu-reopen.sh): that record lists no devices, or the second copy's 3 when the
    // thread ran after the program had looked that one up.
    let (_keep, a, b) = copies();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let want = "first: cuInit -> 0, cuDeviceGetCount -> 0, count 2\n\
                second: cuInit -> 0, cuDeviceGetCount -> 0, count 3\n";
    for (how, allowed) in [("reopen", [2, 3]), ("dlmopen", [0, 3])] {
        for mode in ["observe", "fix"] {
            let f = Run::new("reopen", true)
                .args(&[how, &a, &b])
                .env("SEEDANCE_MODE", mode)
                .env(
                    "FAKE_CUDA_DEVICE_COUNT_IN",
                    format!("{}=3", dir_of(std::path::Path::new(&b))),
                )
                .env("REOPEN_HOLD_MS", "300")
                .finish();
            let why = format!("{how} {mode}: {}", f.stderr());
            assert_eq!(f.output.status.code(), Some(0), "{why}");
            assert_eq!(f.stdout(), want, "{why}");
            let start = &f.events("session_start")[0];
            let n = start["devices"].as_array().map_or(0, Vec::len);
            assert!(allowed.contains(&n), "{why}: {start}");
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
