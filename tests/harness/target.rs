//! Running the end-to-end suite against another architecture's builds under qemu-user.
//!
//! `SEEDANCE_E2E_TARGET=aarch64-unknown-linux-gnu` makes the harness build the shim, the fake
//! driver and the fake NVML with `cargo build --target aarch64-unknown-linux-gnu` (linked by
//! the cross linker named in `.cargo/config.toml`), compile the C programs with
//! `aarch64-linux-gnu-gcc`, and start every program as
//!
//! ```text
//! qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_PRELOAD=.. -E LD_LIBRARY_PATH=.. program args..
//! ```
//!
//! The test binary itself, and host tools such as the analyzer, stay native. The loader's
//! variables (`LD_*`) reach the guest's dynamic loader through qemu's `-E`, never the host's
//! environment: a dynamically linked qemu would otherwise try to preload the aarch64 shim into
//! itself. Every other variable stays in the environment, which qemu hands to the guest
//! unchanged (so `/proc/self/environ`, which qemu does not emulate, shows them too).
//!
//! The kernel here has no `binfmt_misc` handler for aarch64 (none can be registered in the
//! sandbox or in CI), so a guest that `exec`s an aarch64 file gets `ENOEXEC`. The one test
//! program that execs (`tests/programs/exec_child.c`) execs through the interpreter named by
//! `SEEDANCE_TEST_EXEC_VIA` when it is set; the harness sets it to qemu, and
//! `QEMU_LD_PREFIX` to the sysroot, so the exec'd child runs under qemu with the environment
//! its parent gave it. That needs the statically linked `qemu-aarch64-static`: a dynamically
//! linked qemu started with the guest's environment would try the aarch64 `LD_PRELOAD` itself.
//!
//! Tests that cannot run under qemu-user call [`skip_under_emulation`] with the reason;
//! docs/reliability.md lists them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment variable naming the target triple to test (unset: the host's).
pub const TARGET_VAR: &str = "SEEDANCE_E2E_TARGET";

/// A target other than the host, its tools and how its programs are started.
#[derive(Debug)]
pub struct Cross {
    /// Rust target triple, e.g. `aarch64-unknown-linux-gnu`.
    pub triple: String,
    /// The C cross compiler (Debian's `gcc-aarch64-linux-gnu`).
    pub cc: String,
    /// qemu-user for the target: `qemu-aarch64-static` if installed, else `qemu-aarch64`.
    pub qemu: PathBuf,
    /// Whether [`Cross::qemu`] is statically linked (needed for exec'd children).
    pub qemu_static: bool,
    /// The target's C library and loader (Debian's `libc6-dev-arm64-cross`), qemu's `-L`.
    pub sysroot: PathBuf,
}

/// The cross target asked for with `SEEDANCE_E2E_TARGET`, or `None` for native runs. Panics
/// with the reason if the target is not supported or its tools are missing: a run that asked
/// for aarch64 must not quietly test x86-64.
pub fn cross() -> Option<&'static Cross> {
    static C: OnceLock<Option<Cross>> = OnceLock::new();
    C.get_or_init(|| {
        let triple = std::env::var(TARGET_VAR).ok().filter(|t| !t.is_empty())?;
        let host = if cfg!(target_arch = "x86_64") {
            "x86_64-unknown-linux-gnu"
        } else {
            "aarch64-unknown-linux-gnu"
        };
        if triple == host {
            return None;
        }
        let (cc, qemu, sysroot) = match triple.as_str() {
            "aarch64-unknown-linux-gnu" => (
                "aarch64-linux-gnu-gcc",
                "qemu-aarch64",
                "/usr/aarch64-linux-gnu",
            ),
            other => panic!(
                "{TARGET_VAR}={other}: the harness runs only aarch64-unknown-linux-gnu under qemu"
            ),
        };
        let on_path = |name: &str| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(name))
                    .find(|f| f.is_file())
            })
        };
        assert!(
            on_path(cc).is_some(),
            "{TARGET_VAR}={triple} needs {cc} (Debian: gcc-aarch64-linux-gnu)"
        );
        let sysroot = PathBuf::from(sysroot);
        assert!(
            sysroot.join("lib/ld-linux-aarch64.so.1").exists(),
            "{TARGET_VAR}={triple} needs the sysroot {} (Debian: libc6-dev-arm64-cross)",
            sysroot.display()
        );
        let (qemu, qemu_static) = match on_path(&format!("{qemu}-static")) {
            Some(q) => (q, true),
            None => (
                on_path(qemu).unwrap_or_else(|| {
                    panic!("{TARGET_VAR}={triple} needs {qemu} (Debian: qemu-user-static)")
                }),
                false,
            ),
        };
        Some(Cross {
            triple,
            cc: cc.to_string(),
            qemu,
            qemu_static,
            sysroot,
        })
    })
    .as_ref()
}

/// Arguments `cargo build` needs for the target (none for native runs).
pub fn cargo_args() -> Vec<String> {
    match cross() {
        Some(c) => vec!["--target".into(), c.triple.clone()],
        None => Vec::new(),
    }
}

/// Where cargo puts the target's artifacts, given the host's profile directory
/// (`target/<profile>` becomes `target/<triple>/<profile>`).
pub fn profile_dir(host_profile_dir: &Path) -> PathBuf {
    match cross() {
        Some(c) => {
            let profile = host_profile_dir.file_name().unwrap();
            host_profile_dir
                .parent()
                .unwrap()
                .join(&c.triple)
                .join(profile)
        }
        None => host_profile_dir.to_path_buf(),
    }
}

/// The C compiler for the test programs.
pub fn cc() -> &'static str {
    cross().map_or("cc", |c| c.cc.as_str())
}

/// `SEEDANCE_NVML_TIMEOUT` (ms) of emulated runs that do not set their own.
pub const EMULATED_NVML_TIMEOUT_MS: &str = "60000";

/// A command with an empty environment that runs the target's `program`: the program itself
/// natively, else qemu with the sysroot and the variables an exec'd child needs to run under
/// qemu as well. Call [`finalize`] on it (after every variable is set) before starting it.
pub fn command(program: &Path) -> Command {
    match cross() {
        None => {
            let mut cmd = Command::new(program);
            cmd.env_clear();
            cmd
        }
        Some(c) => {
            let mut cmd = Command::new(&c.qemu);
            cmd.arg("-L").arg(&c.sysroot).arg(program).env_clear();
            cmd.env("QEMU_LD_PREFIX", &c.sysroot);
            // Loading and starting the fake NVML (a debug Rust library) under qemu takes 1 to
            // 3 s of wall time on a loaded 2-core machine, past the shim's default 2000 ms
            // wait: the runs that do not set their own wait get a minute. The tests of the
            // default wait itself are skipped under emulation (docs/reliability.md).
            cmd.env("SEEDANCE_NVML_TIMEOUT", EMULATED_NVML_TIMEOUT_MS);
            if c.qemu_static {
                cmd.env("SEEDANCE_TEST_EXEC_VIA", &c.qemu);
            }
            cmd
        }
    }
}

/// Moves the dynamic loader's variables (`LD_*`) of a command made with [`command`], possibly
/// wrapped in another tool (with the environment cleared, as [`command`] leaves it), from the
/// host environment to qemu's `-E` options, so they reach the guest's loader and not the
/// host's. Native commands are returned unchanged.
pub fn finalize(cmd: Command) -> Command {
    let Some(c) = cross() else {
        return cmd;
    };
    let mut argv: Vec<OsString> = std::iter::once(cmd.get_program().to_owned())
        .chain(cmd.get_args().map(|a| a.to_owned()))
        .collect();
    let Some(at) = argv.iter().position(|a| Path::new(a) == c.qemu) else {
        return cmd;
    };
    let mut host_env = Vec::new();
    let mut guest = Vec::new();
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) if k.to_string_lossy().starts_with("LD_") => {
                let mut kv = k.to_owned();
                kv.push("=");
                kv.push(v);
                guest.push(OsString::from("-E"));
                guest.push(kv);
            }
            Some(v) => host_env.push((k.to_owned(), v.to_owned())),
            None => {}
        }
    }
    argv.splice(at + 1..at + 1, guest);
    let mut out = Command::new(&argv[0]);
    out.args(&argv[1..]).env_clear().envs(host_env);
    if let Some(dir) = cmd.get_current_dir() {
        out.current_dir(dir);
    }
    out
}

/// How much longer a program takes under emulation than natively, for the tests' upper
/// bounds on wall time: qemu translates every instruction, and on a loaded 2-core machine a
/// start-up alone took 1 to 3 s (native: 10 to 50 ms).
pub const EMULATION_SLOWDOWN: u32 = 10;

/// An upper bound on a run's wall time: `native` itself, times [`EMULATION_SLOWDOWN`] under
/// emulation. Lower bounds (a wait that must have happened) are never scaled.
pub fn wall_time_bound(native: std::time::Duration) -> std::time::Duration {
    match cross() {
        Some(_) => native * EMULATION_SLOWDOWN,
        None => native,
    }
}

/// True (after printing why) when the suite runs under emulation and the calling test cannot:
/// `why` says what qemu-user lacks. docs/reliability.md lists every such test.
pub fn skip_under_emulation(why: &str) -> bool {
    match cross() {
        Some(c) => {
            eprintln!("skipped under {} ({}): {why}", c.qemu.display(), c.triple);
            true
        }
        None => false,
    }
}
