//! Shared by the test binaries: builds the fakes once, runs scenarios in child processes
//! (the fakes read their environment per process), and loads libraries with `dlopen`.
#![allow(dead_code)]

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Names the scenario a child process runs.
pub const SCENARIO_ENV: &str = "FAKE_NVML_TEST_SCENARIO";

/// `target/<profile>`, where cargo puts the cdylibs.
pub fn profile_dir() -> PathBuf {
    // target/<profile>/deps/<test>-<hash> -> target/<profile>
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// Builds `libnvidia_ml.so` and `libcuda.so` (once per test binary): `cargo test` does not
/// build a cdylib for the integration tests of its own package.
pub fn build_libs() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args([
            "build",
            "-p",
            "fake-nvml",
            "-p",
            "fake-cuda",
        ]);
        if profile_dir().file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("run cargo build");
        assert!(
            out.status.success(),
            "cargo build of the fakes failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// The built fake NVML.
pub fn nvml_path() -> PathBuf {
    profile_dir().join("libnvidia_ml.so")
}

/// The built fake CUDA driver.
pub fn cuda_path() -> PathBuf {
    profile_dir().join("libcuda.so")
}

/// Re-runs this test binary's `child` test with `SCENARIO_ENV=name` and only `env` set;
/// panics with its output when it fails.
pub fn run_scenario(name: &str, env: &[(&str, &str)]) -> Output {
    build_libs();
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env(SCENARIO_ENV, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn child");
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh path in the temp directory (removed if it exists).
pub fn temp_path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("fake-nvml-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// A library loaded with `dlopen`.
pub struct Lib {
    handle: *mut c_void,
}

impl Lib {
    /// `dlopen(name, RTLD_NOW | RTLD_LOCAL)`: a path, or a bare name the loader searches.
    pub fn open(name: &Path) -> Lib {
        let c = CString::new(name.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: `c` is a valid C string; dlopen has no other preconditions.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {} failed", name.display());
        Lib { handle }
    }

    /// `dlsym(name)`, which must exist.
    pub fn addr(&self, name: &str) -> *mut c_void {
        let c = CString::new(name).expect("name");
        // SAFETY: `handle` came from dlopen and `c` is a valid C string.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        assert!(!p.is_null(), "{name} not exported");
        p
    }

    /// The export `name` as a function pointer of type `F`.
    pub fn f<F: Copy>(&self, name: &str) -> F {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        let p = self.addr(name);
        // SAFETY: `F` is a function-pointer type of the same size as a data pointer, and the
        // caller names the export whose C signature `F` spells.
        unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
    }
}
