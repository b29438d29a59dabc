//! Test harness for the end-to-end tests: builds the shim and the fake driver, compiles the
//! C programs in `tests/programs/`, runs them as real processes with real `LD_PRELOAD`, and
//! reads back the trace and the fake driver's call log.
//!
//! The shim and the fake driver are cdylibs, which `cargo test` does not build for a test
//! of another package, so [`artifacts`] runs `cargo build` for them once per test binary.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod target;

/// Paths of the built libraries and programs, shared by every test in a binary.
pub struct Artifacts {
    /// `libseedance_fix.so`.
    pub shim: PathBuf,
    /// Directory holding the fake driver as `libcuda.so.1` and `libcuda.so`.
    pub fake_dir: PathBuf,
    /// Directory holding the compiled test programs.
    pub bin_dir: PathBuf,
    /// Directory holding the fake NVML as `libnvidia-ml.so.1` (on the library path only for
    /// runs that ask for it with [`Run::with_nvml`]).
    pub nvml_dir: PathBuf,
    _keep: tempfile::TempDir,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    // target/<profile>/deps/e2e-<hash> -> target/<profile>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Builds (once) and returns the artifacts.
pub fn artifacts() -> &'static Artifacts {
    static A: OnceLock<Artifacts> = OnceLock::new();
    A.get_or_init(build)
}

/// The shim's release build for the host (`target/release/libseedance_fix.so` under the
/// tests' target directory), built once, whatever profile the tests run in: for the
/// benchmarks whose counts mean something only with the release profile's inlining and LTO
/// (and which under valgrind take minutes with a debug build's start-up).
pub fn release_shim() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let mut cmd = cargo_build();
        cmd.args(["--release", "-p", "seedance-shim"]);
        run_cargo(cmd, "cargo build --release of the shim");
        // target/<profile> -> target/release (CARGO_TARGET_DIR, inherited, is the same).
        target_dir()
            .parent()
            .unwrap()
            .join("release/libseedance_fix.so")
    })
}

/// `cargo build` (the cargo running the tests) in the workspace root; arguments to add.
fn cargo_build() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).arg("build");
    cmd
}

/// Runs `cmd`, panicking with its stderr under `what` if it fails.
fn run_cargo(mut cmd: Command, what: &str) {
    let out = cmd.output().expect("run cargo build");
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build() -> Artifacts {
    let host_profile_dir = target_dir();
    let release = host_profile_dir.file_name().is_some_and(|n| n == "release");
    let profile_dir = target::profile_dir(&host_profile_dir);
    let mut cmd = cargo_build();
    cmd.args(["-p", "seedance-shim", "-p", "fake-cuda", "-p", "fake-nvml"]);
    cmd.args(target::cargo_args());
    if release {
        cmd.arg("--release");
    }
    run_cargo(cmd, "cargo build of the shim and fake driver");
    let keep = tempfile::tempdir().unwrap();
    let fake_dir = keep.path().join("driver");
    let bin_dir = keep.path().join("bin");
    let nvml_dir = keep.path().join("nvml");
    std::fs::create_dir_all(&nvml_dir).unwrap();
    std::fs::copy(
        profile_dir.join("libnvidia_ml.so"),
        nvml_dir.join("libnvidia-ml.so.1"),
    )
    .unwrap();
    std::fs::create_dir_all(&fake_dir).unwrap();
    std::fs::create_dir_all(&bin_dir).unwrap();
    for name in ["libcuda.so.1", "libcuda.so"] {
        std::fs::copy(profile_dir.join("libcuda.so"), fake_dir.join(name)).unwrap();
    }
    let src = workspace_root().join("tests/programs");
    let cc = |out: &str, args: &[&str]| {
        let status = Command::new(target::cc())
            .arg("-O1")
            .arg("-Wall")
            .arg("-o")
            .arg(bin_dir.join(out))
            .args(args)
            .current_dir(&src)
            .status()
            .expect("run cc");
        assert!(status.success(), "compiling {out} failed");
    };
    let l = format!("-L{}", fake_dir.display());
    cc("linked", &["linked.c", &l, "-lcuda"]);
    cc("cudart_style", &["cudart_style.c", "-ldl"]);
    cc("dlsym_style", &["dlsym_style.c", "-ldl"]);
    cc("runtime_probe", &["runtime_probe.c", "-ldl"]);
    cc("no_cuda", &["no_cuda.c", "-ldl"]);
    cc("libs", &["libs.c", "-ldl", "-lpthread"]);
    cc("timer_signals", &["timer_signals.c", &l, "-lcuda"]);
    cc("missing_driver", &["missing_driver.c", "-ldl", "-lpthread"]);
    cc("ordinals", &["ordinals.c", &l, "-lcuda"]);
    cc("probes", &["probes.c", &l, "-lcuda", "-lpthread"]);
    cc("fork_child", &["fork_child.c", &l, "-lcuda"]);
    cc("stress", &["stress.c", &l, "-lcuda", "-lpthread"]);
    cc(
        "pinned_threads",
        &["pinned_threads.c", &l, "-lcuda", "-lpthread"],
    );
    cc(
        "sync_threads",
        &["sync_threads.c", &l, "-lcuda", "-lpthread"],
    );
    cc("repeat_failures", &["repeat_failures.c", &l, "-lcuda"]);
    cc("daemon_fds", &["daemon_fds.c", &l, "-lcuda"]);
    cc("ctx_churn", &["ctx_churn.c", &l, "-lcuda"]);
    cc("trace_limit", &["trace_limit.c", &l, "-lcuda"]);
    cc(
        "guard_threads",
        &["guard_threads.c", &l, "-lcuda", "-lpthread"],
    );
    cc("launch_faults", &["launch_faults.c", &l, "-lcuda"]);
    cc("alloc_faults", &["alloc_faults.c", &l, "-lcuda"]);
    cc("capture_sync", &["capture_sync.c", &l, "-lcuda"]);
    cc(
        "libholder_a.so",
        &["-shared", "-fPIC", "holder_a.c", &l, "-lcuda"],
    );
    let lholder = format!("-L{}", bin_dir.display());
    cc(
        "holder_main",
        &["holder_main.c", &lholder, "-lholder_a", &l, "-lcuda"],
    );
    cc(
        "static_runtime_select",
        &["static_runtime_select.c", &l, "-lcuda"],
    );
    cc("recovered", &["recovered.c", &l, "-lcuda", "-lpthread"]);
    cc("lifetime", &["lifetime.c", &l, "-lcuda"]);
    cc("stray", &["stray.c", &l, "-lcuda"]);
    cc("hazards", &["hazards.c", &l, "-lcuda", "-lpthread", "-ldl"]);
    cc(
        "legacy_streams",
        &["legacy_streams.c", &l, "-lcuda", "-lpthread"],
    );
    cc("host_guard", &["host_guard.c", &l, "-lcuda", "-lpthread"]);
    cc("payloads", &["payloads.c", &l, "-lcuda"]);
    cc("exec_child", &["exec_child.c", &l, "-lcuda"]);
    cc(
        "signals_wait",
        &["signals_wait.c", &l, "-lcuda", "-lpthread"],
    );
    cc(
        "libcudart.so.13",
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcudart.so.13",
            "fake_cudart.c",
            &l,
            "-lcuda",
        ],
    );
    std::os::unix::fs::symlink("libcudart.so.13", bin_dir.join("libcudart.so")).unwrap();
    let lbin = format!("-L{}", bin_dir.display());
    cc(
        "set_device",
        &["set_device_main.c", &lbin, "-lcudart", &l, "-lcuda"],
    );
    let example = workspace_root().join("examples/wrong_ordinal.c");
    cc("wrong_ordinal", &[example.to_str().unwrap(), &l, "-lcuda"]);
    cc("libnext_base.so", &["-shared", "-fPIC", "next_base.c"]);
    cc(
        "libnext_probe.so",
        &["-shared", "-fPIC", "next_probe.c", "-ldl"],
    );
    let lb = format!("-L{}", bin_dir.display());
    cc("next_main", &["next_main.c", &lb, "-lnext_base"]);
    cc(
        "libteardown.so",
        &["-shared", "-fPIC", "teardown_lib.c", &l, "-lcuda"],
    );
    // --no-as-needed: main uses no symbol of libteardown, but must load it.
    cc(
        "teardown_main",
        &[
            "teardown_main.c",
            &lb,
            "-Wl,--no-as-needed",
            "-lteardown",
            &l,
            "-lcuda",
        ],
    );
    // Early calls (e2e::early): a library whose constructors call the driver, a program
    // whose .preinit_array and constructor do, and one that dlopens the library
    // (-rdynamic: the library calls back into it).
    cc(
        "libearly_ctor.so",
        &["-shared", "-fPIC", "early_ctor.c", &l, "-lcuda"],
    );
    cc(
        "early_main",
        &[
            "early_main.c",
            &lb,
            "-Wl,--no-as-needed",
            "-learly_ctor",
            &l,
            "-lcuda",
        ],
    );
    cc(
        "early_dlopen",
        &[
            "-rdynamic",
            "early_dlopen.c",
            &l,
            "-lcuda",
            "-ldl",
            "-lpthread",
        ],
    );
    cc("early_once", &["early_once.c", &l, "-lcuda", "-lpthread"]);
    cc("signal_calls", &["signal_calls.c", &l, "-lcuda"]);
    cc("reopen", &["reopen.c", "-ldl"]);
    cc(
        "cancel_calls",
        &["cancel_calls.c", &l, "-lcuda", "-lpthread"],
    );
    cc(
        "libearly_alloc.so",
        &["-shared", "-fPIC", "early_alloc.c", "-ldl"],
    );
    cc(
        "early_alloc_main",
        &["early_alloc_main.c", &l, "-lcuda", "-ldl"],
    );
    Artifacts {
        shim: profile_dir.join("libseedance_fix.so"),
        fake_dir,
        bin_dir,
        nvml_dir,
        _keep: keep,
    }
}

/// One run of a test program: what to set, and where its outputs land.
pub struct Run {
    cmd: Command,
    /// The trace directory (`SEEDANCE_TRACE_DIR`).
    pub trace_dir: tempfile::TempDir,
    /// The fake driver's call log (`FAKE_CUDA_LOG`).
    pub driver_log: PathBuf,
}

/// What a finished run left behind.
pub struct Finished {
    /// Exit status, stdout and stderr.
    pub output: Output,
    /// Every trace record, parsed, from every trace file in the trace directory.
    pub records: Vec<Value>,
    /// Number of trace files written.
    pub trace_files: usize,
    /// The fake driver's call log lines made on the program's own threads, in the order
    /// each thread made them. Calls made on the shim's background threads (the session
    /// record, NVML helper, metrics and exit threads, named `seedance-*`, which the fake
    /// driver tags: `crates/fake-support/src/log.rs`) are left out: they can land anywhere
    /// between the program's calls, so no assertion on order may see them (the exit's
    /// queries come after the program's last call). They are in
    /// [`Finished::shim_thread_calls`].
    pub driver_calls: Vec<String>,
    /// The calls made on the shim's own background threads, each still tagged with its
    /// thread: `[seedance-init] cuDriverGetVersion -> 0`.
    pub shim_thread_calls: Vec<String>,
}

impl Run {
    /// `program` (from the compiled test programs) with the fake driver on the library path,
    /// `shim` preloaded or not, and a fresh trace directory.
    pub fn new(program: &str, shim: bool) -> Run {
        let a = artifacts();
        let trace_dir = tempfile::tempdir().unwrap();
        let driver_log = trace_dir.path().join("driver-calls.log");
        let mut cmd = target::command(&a.bin_dir.join(program));
        cmd.env("PATH", "/usr/bin:/bin")
            .env(
                "LD_LIBRARY_PATH",
                format!("{}:{}", a.fake_dir.display(), a.bin_dir.display()),
            )
            .env("FAKE_CUDA_DEVICE_COUNT", "2")
            .env("FAKE_CUDA_LOG", &driver_log);
        let traces = trace_dir.path().join("traces");
        std::fs::create_dir(&traces).unwrap();
        cmd.env("SEEDANCE_TRACE_DIR", &traces);
        if shim {
            cmd.env("LD_PRELOAD", &a.shim);
        }
        Run {
            cmd,
            trace_dir,
            driver_log,
        }
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Run {
        self.cmd.env(k, v);
        self
    }

    /// Puts the fake NVML (`crates/fake-nvml`) on the library path, describing the same
    /// host as the fake driver.
    pub fn with_nvml(mut self) -> Run {
        let a = artifacts();
        self.cmd.env(
            "LD_LIBRARY_PATH",
            format!(
                "{}:{}:{}",
                a.fake_dir.display(),
                a.bin_dir.display(),
                a.nvml_dir.display()
            ),
        );
        self
    }

    /// Adds a command-line argument.
    pub fn arg(mut self, a: &str) -> Run {
        self.cmd.arg(a);
        self
    }

    /// Adds command-line arguments.
    pub fn args(mut self, a: &[&str]) -> Run {
        self.cmd.args(a);
        self
    }

    /// Removes an environment variable for the run.
    pub fn env_remove(mut self, k: &str) -> Run {
        self.cmd.env_remove(k);
        self
    }

    /// Runs the program under `wrapper` (a tool and its options, e.g. valgrind): the command
    /// line becomes `wrapper.. program args..` with the same environment, so `LD_PRELOAD`
    /// reaches the program through the tool. Arguments added later still go to the program.
    pub fn wrapped_in<S: AsRef<std::ffi::OsStr>>(mut self, wrapper: &[S]) -> Run {
        let (tool, options) = wrapper.split_first().expect("a wrapper command");
        let mut cmd = Command::new(tool);
        cmd.args(options)
            .arg(self.cmd.get_program())
            .args(self.cmd.get_args())
            .env_clear();
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        self.cmd = cmd;
        self
    }

    /// Runs the program to completion and collects its outputs.
    pub fn finish(self) -> Finished {
        let output = target::finalize(self.cmd)
            .output()
            .expect("run test program");
        collect(output, self.trace_dir.path(), &self.driver_log)
    }

    /// Runs the program to completion, killing it and failing the test if it is still
    /// running after `deadline` (a deadlock would otherwise hang the test).
    pub fn finish_within(self, deadline: std::time::Duration) -> Finished {
        let mut running = self.spawn();
        let started = std::time::Instant::now();
        while running
            .child
            .try_wait()
            .expect("wait for test program")
            .is_none()
        {
            if started.elapsed() > deadline {
                let _ = running.child.kill();
                let r = running.finish();
                panic!(
                    "still running after {deadline:?} (deadlock?); killed. stdout: {:?} \
                     stderr: {:?}",
                    r.stdout(),
                    r.stderr()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        running.finish()
    }

    /// Starts the program and returns at once, with stdin, stdout and stderr piped: the test
    /// can write to it, watch its output and trace while it runs, signal it, and then collect
    /// everything with [`Running::finish`].
    pub fn spawn(self) -> Running {
        use std::process::Stdio;
        let mut child = target::finalize(self.cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start test program");
        let drain = |mut from: Box<dyn std::io::Read + Send>| {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let to = std::sync::Arc::clone(&buf);
            let thread = std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = from.read(&mut chunk) {
                    to.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
            (buf, Some(thread))
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        Running {
            child,
            trace_dir: self.trace_dir,
            driver_log: self.driver_log,
            stdout,
            stderr,
        }
    }
}

/// Output of a running program as read so far, and the thread reading it.
type Drained = (
    std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    Option<std::thread::JoinHandle<()>>,
);

/// A test program started with [`Run::spawn`]. Its trace directory lives as long as this.
pub struct Running {
    /// The process (stdin piped; stdout and stderr are read by threads of the harness).
    pub child: std::process::Child,
    /// The trace directory (`SEEDANCE_TRACE_DIR` is its `traces` subdirectory).
    pub trace_dir: tempfile::TempDir,
    /// The fake driver's call log (`FAKE_CUDA_LOG`).
    pub driver_log: PathBuf,
    stdout: Drained,
    stderr: Drained,
}

impl Running {
    /// The directory the shim writes its trace files to.
    pub fn traces(&self) -> PathBuf {
        self.trace_dir.path().join("traces")
    }

    /// What the program wrote to stdout so far.
    pub fn stdout_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stdout.0.lock().unwrap()).into_owned()
    }

    /// Waits for the program to end (closing its stdin first) and collects its outputs, as
    /// [`Run::finish`] does. The trace directory stays until `self` is dropped.
    pub fn finish(&mut self) -> Finished {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait for test program");
        let take = |d: &mut Drained| {
            if let Some(thread) = d.1.take() {
                thread.join().unwrap();
            }
            std::mem::take(&mut *d.0.lock().unwrap())
        };
        let output = Output {
            status,
            stdout: take(&mut self.stdout),
            stderr: take(&mut self.stderr),
        };
        collect(output, self.trace_dir.path(), &self.driver_log)
    }
}

/// Reads back what a run left in `trace_dir` and the driver log.
fn collect(output: Output, trace_dir: &Path, driver_log: &Path) -> Finished {
    let mut records = Vec::new();
    let mut trace_files = 0;
    let traces = trace_dir.join("traces");
    for entry in std::fs::read_dir(&traces).unwrap() {
        let path = entry.unwrap().path();
        trace_files += 1;
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            records.push(
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("bad trace line in {}: {e}: {line}", path.display())
                }),
            );
        }
    }
    let (shim_thread_calls, driver_calls): (Vec<String>, Vec<String>) =
        std::fs::read_to_string(driver_log)
            .map(|s| s.lines().map(normalize_host_pointer).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .partition(|l| l.starts_with("[seedance-"));
    Finished {
        output,
        records,
        trace_files,
        driver_calls,
        shim_thread_calls,
    }
}

/// Host addresses from `malloc` differ between runs (ASLR); the fake driver's log lines
/// are compared with every `ptr=`, `src=` or `dst=` value outside the fake's device address
/// range (0x7000_0000_0000 up) replaced by `<host>`.
fn normalize_host_pointer(line: &str) -> String {
    line.split(' ')
        .map(|tok| {
            for key in ["ptr=", "src=", "dst="] {
                if let Some(v) = tok.strip_prefix(key) {
                    let device = u64::from_str_radix(v.trim_start_matches("0x"), 16)
                        .is_ok_and(|a| (0x7000_0000_0000..0x7100_0000_0000).contains(&a));
                    if !device {
                        return format!("{key}<host>");
                    }
                }
            }
            tok.to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Finished {
    /// This run, after asserting that it exited 0 (the message shows its stdout and stderr).
    pub fn ok(self) -> Finished {
        assert_eq!(
            self.output.status.code(),
            Some(0),
            "{}\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }

    /// Every call the driver received, the program's threads' first, then the shim's
    /// background threads' (tag removed): for counting, never for order.
    pub fn all_driver_calls(&self) -> Vec<String> {
        let untagged = self.shim_thread_calls.iter().map(|l| {
            l.split_once("] ")
                .map_or(l.as_str(), |(_, rest)| rest)
                .to_string()
        });
        self.driver_calls.iter().cloned().chain(untagged).collect()
    }

    /// Standard output as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The records whose `event` is `kind`.
    pub fn events(&self, kind: &str) -> Vec<&Value> {
        self.records.iter().filter(|r| r["event"] == kind).collect()
    }

    /// Calls and errors of `function` in the exit summary, `(0, 0)` if absent.
    pub fn summary_count(&self, function: &str) -> (u64, u64) {
        let s = self.events("exit_summary");
        assert_eq!(
            s.len(),
            1,
            "expected one exit_summary, records: {:#?}",
            self.records
        );
        let f = &s[0]["functions"][function];
        (
            f["calls"].as_u64().unwrap_or(0),
            f["errors"].as_u64().unwrap_or(0),
        )
    }

    /// Every function in the exit summary with its call count.
    pub fn summary_calls(&self) -> Vec<(String, u64)> {
        let s = self.events("exit_summary");
        assert_eq!(s.len(), 1, "expected one exit_summary");
        s[0]["functions"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v["calls"].as_u64().unwrap()))
            .collect()
    }
}

/// Driver queries the shim makes itself (for the session record and explanations). They are
/// the only lines a shimmed run's driver log may have beyond the program's own.
const SHIM_QUERIES: &[&str] = &[
    "cuDriverGetVersion ",
    "cuDeviceGetCount ",
    "cuDeviceGet ",
    "cuDeviceGetName ",
    "cuDeviceGetPCIBusId ",
    "cuDeviceTotalMem_v2 ",
    "cuDeviceGetUuid_v2 ",
    "cuDeviceGetAttribute ",
    // Launch and allocation faults: the driver-log callback at start-up, and the launch and allocation
    // explanations' queries after a failure.
    "cuLogsRegisterCallback ",
    "cuCtxGetDevice ",
    "cuCtxGetCurrent ",
    "cuStreamGetCtx ",
    "cuFuncGetAttribute ",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor ",
    "cuMemGetInfo_v2 ",
    "cuPointerGetAttribute ",
    "cuMemGetAllocationGranularity ",
    // Context lifetime: the lifetime checks confirm pending work (cuStreamQuery, with the context
    // pushed for a default stream), find the allocations a destroyed context took with it
    // (cuPointerGetAttribute) and whether a released primary context ended.
    "cuStreamQuery ",
    "cuCtxPushCurrent_v2 ",
    "cuCtxPopCurrent_v2 ",
    "cuDevicePrimaryCtxGetState ",
];

/// Shim queries whose answer may be an error without anything being wrong: a stream still
/// busy (600), an address the driver no longer knows (1).
const SHIM_QUERIES_MAY_FAIL: &[(&str, &[&str])] = &[
    ("cuStreamQuery ", &["-> 600", "-> 709", "-> 400"]),
    ("cuPointerGetAttribute ", &["-> 1"]),
];

/// Asserts that every call the program made reached the driver unchanged and in order:
/// `plain` (the driver log without the shim) is a subsequence of `shimmed`, and every other
/// line of `shimmed` is one of the shim's own successful device queries.
pub fn assert_forwarded_unchanged(plain: &[String], shimmed: &[String]) {
    let mut want = plain.iter().peekable();
    let mut extra = Vec::new();
    for line in shimmed {
        if want.peek() == Some(&line) {
            want.next();
        } else {
            extra.push(line);
        }
    }
    let missing: Vec<_> = want.collect();
    assert!(
        missing.is_empty(),
        "calls missing or changed under the shim: {missing:#?}\nshimmed log: {shimmed:#?}"
    );
    for line in extra {
        let query = SHIM_QUERIES
            .iter()
            .any(|q| format!("{line} ").starts_with(q) || line.starts_with(q));
        let may_fail = SHIM_QUERIES_MAY_FAIL.iter().any(|(q, codes)| {
            format!("{line} ").starts_with(q) && codes.iter().any(|c| line.ends_with(c))
        });
        assert!(
            query && (line.ends_with("-> 0") || may_fail),
            "unexpected extra driver call under the shim: {line}"
        );
    }
}

/// Finds an optional tool a test needs (valgrind, setcap, ...) on `PATH`, trying each of
/// `names`. When none is there the test must not fail on a machine without it: this writes
/// `<test>: skipped: <names[0]> not found on PATH ...` straight to the test process's
/// stderr (not through `eprintln!`, which libtest captures, so the skip shows in a plain
/// `cargo test`) and returns `None`, unless `<require_var>=1` (CI sets it, having
/// installed the tool), when it panics instead. Any other value of the variable counts as
/// unset.
pub fn optional_tool(test: &str, names: &[&str], require_var: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file());
    if found.is_some() {
        return found;
    }
    let required = std::env::var(require_var).is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: {} not found on PATH, and {require_var}=1 says it must run",
        names[0]
    );
    say_skipped(
        test,
        &format!(
            "{} not found on PATH (set {require_var}=1 to make that a failure)",
            names[0]
        ),
    );
    None
}

/// Writes `<test>: skipped: <why>` to the test process's stderr, past libtest's capture.
pub fn say_skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{test}: skipped: {why}");
}

/// Why a test that needs a private mount namespace (`unshare -m`, as root) cannot run here,
/// if it cannot: not root, or no `CAP_SYS_ADMIN`. CI runs as root, so there it runs.
pub fn mount_namespace_unavailable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let euid = field("Uid:")
        .split_whitespace()
        .nth(1)
        .map(str::to_string)
        .unwrap_or_default();
    if euid != "0" {
        return Some(format!(
            "not root (euid {euid}): a setuid binary and a private mount namespace need root"
        ));
    }
    let cap_eff = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(0);
    const CAP_SYS_ADMIN: u32 = 21;
    if cap_eff & (1 << CAP_SYS_ADMIN) == 0 {
        return Some("root without CAP_SYS_ADMIN: unshare -m is refused".into());
    }
    None
}
