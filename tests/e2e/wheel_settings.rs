//! The wheel's build backend (packaging/seedance_build.py) reads SEEDANCE_WHEEL_LINK and
//! SEEDANCE_WHEEL_TARGET: a bad value gives one warning line and the default, as unset
//! (docs/configuration.md, "Packaging"). Run through the module's own entry point, which
//! prints the settings it would build with.

use seedance_e2e::optional_tool;
use std::path::Path;
use std::process::Command;

/// `(stdout, stderr)` of `python3 packaging/seedance_build.py` with `env` set.
fn settings(py: &Path, env: &[(&str, &str)]) -> (String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut c = Command::new(py);
    c.arg(root.join("packaging/seedance_build.py"))
        .env_remove("SEEDANCE_WHEEL_LINK")
        .env_remove("SEEDANCE_WHEEL_TARGET");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_wheel_settings_warn_once_and_build_as_unset() {
    let Some(py) = optional_tool("wheel_settings", &["python3"], "SEEDANCE_REQUIRE_PYTHON") else {
        return;
    };
    let (unset, quiet) = settings(&py, &[]);
    assert!(unset.starts_with("link=native target="), "{unset}");
    assert_eq!(quiet, "");
    let (out, err) = settings(&py, &[("SEEDANCE_WHEEL_LINK", "zgi")]);
    assert_eq!(out, unset);
    assert_eq!(
        err,
        "seedance-fix build: warning: SEEDANCE_WHEEL_LINK='zgi' is not one of native, zig; \
         using native (docs/configuration.md)\n"
    );
    let (out, err) = settings(
        &py,
        &[("SEEDANCE_WHEEL_TARGET", "riscv64gc-unknown-linux-gnu")],
    );
    assert_eq!(out, unset);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "seedance-fix build: warning: SEEDANCE_WHEEL_TARGET='riscv64gc-unknown-linux-gnu'"
        ),
        "{err}"
    );
    let (out, err) = settings(&py, &[("SEEDANCE_WHEEL_LINK", "zig")]);
    assert!(out.starts_with("link=zig target="), "{out}");
    assert_eq!(err, "");
}
