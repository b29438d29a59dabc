//! `SEEDANCE_MODE`, bad configuration values, `SEEDANCE_LIBCUDA`, and the stub library.

use seedance_e2e::{artifacts, Run};

#[test]
fn mode_off_forwards_only() {
    let plain = Run::new("cudart_style", false).finish();
    let off = Run::new("cudart_style", true)
        .env("SEEDANCE_MODE", "off")
        .finish();
    assert_eq!(off.output.status.code(), Some(0));
    assert_eq!(off.stdout(), plain.stdout());
    assert_eq!(off.stderr(), "");
    assert_eq!(off.trace_files, 0);
    assert_eq!(off.driver_calls, plain.driver_calls);
}

#[test]
fn observe_counts_like_fix() {
    let r = Run::new("dlsym_style", true)
        .env("SEEDANCE_MODE", "observe")
        .finish();
    assert_eq!(r.output.status.code(), Some(0));
    assert_eq!(r.events("session_start")[0]["mode"], "observe");
    assert_eq!(r.summary_count("cuMemAlloc_v2"), (2, 1));
}

#[test]
fn bad_values_warn_once_and_use_defaults() {
    let r = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .env("SEEDANCE_MODE", "turbo")
        .env("SEEDANCE_QUIET", "perhaps")
        .finish();
    assert_eq!(r.output.status.code(), Some(0));
    let err = r.stderr();
    assert_eq!(
        err.matches(
            "seedance: SEEDANCE_MODE=\"turbo\" is not one of off, observe, fix; using observe"
        )
        .count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("SEEDANCE_QUIET=\"perhaps\" is not a boolean"),
        "{err}"
    );
    assert_eq!(r.events("session_start")[0]["mode"], "observe");
    assert_eq!(r.summary_count("cuInit"), (1, 0));
}

/// A mode the shim cannot read (misspelt, or not UTF-8) means observe: the warning, the
/// explanation, and the driver's error kept; it used to mean fix, which repaired the fault.
#[test]
fn an_unreadable_mode_means_observe() {
    use std::os::unix::ffi::OsStrExt;
    let plain = Run::new("ordinals", false)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .arg("1")
        .finish();
    assert_eq!(plain.stdout(), "ordinal 1: cuDeviceGet -> 101\n");
    let cases: [(&std::ffi::OsStr, &str); 3] = [
        // `0` is none of the three documented values (before, it turned the shim off
        // without a word).
        (
            std::ffi::OsStr::new("0"),
            "seedance: SEEDANCE_MODE=\"0\" is not one of off, observe, fix; using observe\n",
        ),
        (
            std::ffi::OsStr::new("obsrve"),
            "seedance: SEEDANCE_MODE=\"obsrve\" is not one of off, observe, fix; using observe\n",
        ),
        (
            std::ffi::OsStr::from_bytes(b"fi\xffx"),
            "seedance: SEEDANCE_MODE=\"fi\\xffx\" is not valid UTF-8; using observe\n",
        ),
    ];
    for (value, warning) in cases {
        let r = Run::new("ordinals", true)
            .env("CUDA_VISIBLE_DEVICES", "1")
            .env("SEEDANCE_MODE", value)
            .arg("1")
            .finish();
        assert_eq!(r.output.status.code(), Some(1), "{}", r.stderr());
        assert_eq!(r.stdout(), plain.stdout());
        let err = r.stderr();
        assert!(err.starts_with(warning), "{err}");
        assert_eq!(err.lines().count(), 2, "{err}");
        assert!(err.contains("CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0"));
        assert!(!err.contains("fix:"), "{err}");
        assert!(r.events("device_fallback").is_empty());
        assert_eq!(r.events("session_start")[0]["mode"], "observe");
    }
}

/// A `SEEDANCE_*` name that is no setting gets one warning naming the closest setting (and
/// does nothing); a setting whose value is not UTF-8 is warned about and replaced by its
/// default, never dropped silently.
#[test]
fn unknown_names_and_values_that_are_not_utf8_are_warned() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let r = Run::new("linked", true)
        .env("SEEDANCE_MODE", "observe")
        .env("SEEDANCE_TRACEDIR", dir.path())
        .env("SEEDANCE_QUIT", "1")
        .env("SEEDANCE_VALIDATE", std::ffi::OsStr::from_bytes(b"pr\xe9"))
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let plain = Run::new("linked", false).finish();
    assert_eq!(r.stdout(), plain.stdout());
    let err = r.stderr();
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("seedance: SEEDANCE_"))
        .collect();
    assert_eq!(
        warnings,
        [
            "seedance: SEEDANCE_VALIDATE=\"pr\\xe9\" is not valid UTF-8; using post",
            "seedance: SEEDANCE_QUIT is not a seedance setting; did you mean SEEDANCE_QUIET?",
            "seedance: SEEDANCE_TRACEDIR is not a seedance setting; did you mean SEEDANCE_TRACE_DIR?",
        ],
        "{err}"
    );
    // The misspelt names changed nothing: no trace in that directory, stderr not quiet.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(err.lines().count() > warnings.len(), "{err}");
}

#[test]
fn libcuda_override_is_used() {
    let a = artifacts();
    let other = tempfile::tempdir().unwrap();
    let path = other.path().join("libcuda.so.1");
    std::fs::copy(a.fake_dir.join("libcuda.so.1"), &path).unwrap();
    let r = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .env("SEEDANCE_LIBCUDA", &path)
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stdout());
    assert_eq!(
        r.events("session_start")[0]["libcuda_path"],
        path.display().to_string()
    );
}

#[test]
fn stub_library_is_named() {
    let plain = Run::new("dlsym_style", false)
        .env("FAKE_CUDA_STUB", "1")
        .finish();
    let r = Run::new("dlsym_style", true)
        .env("FAKE_CUDA_STUB", "1")
        .finish();
    assert_eq!(r.output.status.code(), plain.output.status.code());
    assert_eq!(r.stdout(), plain.stdout());
    let err = r.stderr();
    assert!(
        err.contains("cuInit(flags=0) returned CUDA_ERROR_STUB_LIBRARY (34)"),
        "{err}"
    );
    assert_eq!(
        err.matches("is the CUDA toolkit's stub library").count(),
        1,
        "{err}"
    );
}

/// No driver installed: the shim's wrappers (found through the global scope) return
/// CUDA_ERROR_NOT_FOUND, and eight threads racing to load the driver print one line, once.
#[test]
fn missing_driver_fails_open_with_one_line() {
    let cache = std::process::Command::new("/sbin/ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if cache.contains("libcuda.so.1 ") {
        seedance_e2e::say_skipped(
            "modes::missing_driver_fails_open_with_one_line",
            "this machine has a libcuda.so.1 installed",
        );
        return;
    }
    let plain = Run::new("missing_driver", false)
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .finish();
    assert_eq!(plain.stdout(), "no cuInit in the process\n");
    let r = Run::new("missing_driver", true)
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "cuInit x8 -> 500 (all threads)\n");
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr());
    assert!(
        lines[0].starts_with("seedance: cannot load the CUDA driver libcuda.so.1 ("),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(
        "); driver calls will fail with CUDA_ERROR_NOT_FOUND. Set SEEDANCE_LIBCUDA to its path \
         if it is installed elsewhere"
    ));
    assert_eq!(r.summary_count("cuInit"), (8, 8));
    let start = &r.events("session_start")[0];
    assert!(start["libcuda_path"].is_null(), "{start}");
    assert_eq!(start["devices"], serde_json::json!([]));
}
