//! `seedance-fix`: runs a command with the seedance-fix shim preloaded, in one step.
//!
//! ```text
//! seedance-fix run [--mode off|observe|fix] [--trace-dir DIR] [--report FILE.html]
//!                  [--shim PATH] [--fake-driver] -- CMD ARGS...
//! seedance-fix fake-driver [--print-path]
//! seedance-fix --version
//! ```
//!
//! `run` finds `libseedance_fix.so` ([`locate`]), puts it first in `LD_PRELOAD` (keeping
//! what is there), points `SEEDANCE_TRACE_DIR` at `DIR` (else at `SEEDANCE_TRACE_DIR` from
//! the environment, else at a fresh private directory, mode 0700), runs the command with
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT forwarded to it, and exits with its status (128 + N
//! when a signal N ended it). At the end it reads the traces this run wrote (the files that
//! were not in the directory before) with the analyzer library and prints the SUMMARY,
//! PROBLEMS and REPAIRS of the text report to stderr ([`summary`]); when there is nothing
//! to say it prints nothing and removes the private directory.
//!
//! `fake-driver` says where the fake driver shipped with seedance-fix is and how to build a
//! program against it without a GPU; `--print-path` prints only its directory, for `-L`
//! (a wheel's or the tarball's `.../fake-cuda`, holding `libcuda.so.1` and the fake NVML;
//! in a cargo target directory that directory, where it is `libcuda.so`).
//!
//! Exit codes of its own: 2 bad usage; 126 the command cannot be executed; 127 the command
//! is not found. When the shim cannot be found the command runs without it, with one line
//! saying where it looked (fail open, docs/reliability.md).
#![forbid(unsafe_code)]

mod locate;
mod summary;

use clap::{Parser, Subcommand, ValueEnum};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Signals passed on to the command.
const FORWARDED: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

#[derive(Parser)]
#[command(
    name = "seedance-fix",
    about = "Runs a CUDA program with the seedance-fix shim: failing driver calls explained, \
             the allowed faults repaired, a trace written and summarized.",
    disable_version_flag = true
)]
struct Cli {
    /// Print the launcher's, the shim's, the analyzer's and the trace schema's versions.
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    /// Forward every call unchanged.
    Off,
    /// Explain and trace, change nothing.
    Observe,
    /// Observe, plus the announced repairs (the shim's default).
    Fix,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run CMD with the shim preloaded; summarize what it saw on stderr at the end.
    Run {
        /// SEEDANCE_MODE for the command (default: the environment's, else `fix`).
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Where the traces go (created, mode 0700, when missing). Default: the
        /// environment's SEEDANCE_TRACE_DIR, else a fresh private directory that is removed
        /// when there is nothing to report.
        #[arg(long, value_name = "DIR")]
        trace_dir: Option<PathBuf>,
        /// Also write the analyzer's HTML report of this run to FILE.
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        /// The shim to preload, instead of the one installed beside seedance-fix.
        #[arg(long, value_name = "PATH")]
        shim: Option<PathBuf>,
        /// Run against the fake driver shipped with seedance-fix (a scripted 2-GPU host,
        /// crates/fake-cuda) and its fake NVML (crates/fake-nvml, the same host) instead of
        /// the machine's libcuda and libnvidia-ml: for demos and for trying seedance-fix
        /// without a GPU. FAKE_CUDA_* variables script both.
        #[arg(long)]
        fake_driver: bool,
        /// The command and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },
    /// Where the fake driver shipped with seedance-fix is (the one `run --fake-driver`
    /// loads), and how to build a program against it without a GPU.
    FakeDriver {
        /// Print only the directory holding the fake driver, for `cc -L"$(seedance-fix
        /// fake-driver --print-path)" -l:libcuda.so.1` (`-l:libcuda.so` in a cargo target
        /// directory).
        #[arg(long)]
        print_path: bool,
    },
}

fn main() -> ExitCode {
    // clap prints usage errors to standard error and exits 2, `--help` to standard
    // output and exits 0.
    let cli = Cli::parse();
    if cli.version {
        out(&version_text());
        return ExitCode::SUCCESS;
    }
    match cli.command {
        Some(Cmd::Run {
            mode,
            trace_dir,
            report,
            shim,
            fake_driver,
            command,
        }) => run(RunArgs {
            mode,
            trace_dir,
            report,
            shim,
            fake_driver,
            command,
        }),
        Some(Cmd::FakeDriver { print_path }) => fake_driver(print_path),
        None => {
            err("seedance-fix: give a command: seedance-fix run -- CMD ARGS... (see --help)\n");
            ExitCode::from(2)
        }
    }
}

/// The `--version` text: the launcher, the shim it would preload (built from the same
/// sources, so the same version) and where it is, the analyzer and its report version, and
/// the trace schema version.
fn version_text() -> String {
    let v = env!("CARGO_PKG_VERSION");
    let shim = match locate::exe_dir().map(|d| locate::find_shim(&d)) {
        Some(Ok(p)) => p.display().to_string(),
        Some(Err(searched)) => format!("not found (looked in {})", shown(&searched)),
        None => "not found (the launcher's own path is unknown)".to_string(),
    };
    format!(
        "seedance-fix {v}\nshim {v}: {shim}\nanalyzer {v} (report version {})\ntrace schema {}\n",
        seedance_analyze::REPORT_VERSION,
        seedance_trace::SCHEMA_VERSION
    )
}

/// `seedance-fix fake-driver [--print-path]`: the directory holding the fake driver alone,
/// or what is there and the commands that use it. Exit 2 when this install has none.
fn fake_driver(print_path: bool) -> ExitCode {
    let driver = match locate::exe_dir().map(|d| locate::find_fake_driver(&d)) {
        Some(Ok(d)) => d,
        Some(Err(searched)) => {
            say(&format!(
                "no fake driver installed (looked in {})",
                shown(&searched)
            ));
            return ExitCode::from(2);
        }
        None => {
            say("cannot tell where seedance-fix is installed");
            return ExitCode::from(2);
        }
    };
    let nvml = locate::find_fake_nvml(&driver);
    let (dir, file) = match &driver {
        locate::FakeDriver::Dir(d) => (d.clone(), d.join("libcuda.so.1")),
        locate::FakeDriver::CargoFile(f) => (
            f.parent().map(Path::to_path_buf).unwrap_or_default(),
            f.clone(),
        ),
    };
    if print_path {
        out(&format!("{}\n", dir.display()));
        return ExitCode::SUCCESS;
    }
    out(&fake_driver_text(&dir, &file, nvml.as_deref()));
    ExitCode::SUCCESS
}

/// What `seedance-fix fake-driver` prints for the fake driver `file` in `dir`.
fn fake_driver_text(dir: &Path, file: &Path, nvml: Option<&Path>) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nvml = nvml.map_or("none".to_string(), |p| p.display().to_string());
    let dir_q = shell_quoted(&dir.display().to_string());
    let mut text = format!(
        "fake driver: {}\nfake NVML: {nvml}\nbuild: cc -o app app.c -L{dir_q} -l:{name}\n\
         run: seedance-fix run --fake-driver -- ./app\n",
        file.display()
    );
    if name == "libcuda.so.1" {
        text.push_str(&format!(
            "run without the shim: LD_LIBRARY_PATH={dir_q} ./app\n"
        ));
    }
    text
}

/// `s` as one shell word: unchanged when it has nothing the shell would split or expand,
/// else in single quotes.
fn shell_quoted(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-=:,@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

struct RunArgs {
    mode: Option<Mode>,
    trace_dir: Option<PathBuf>,
    report: Option<PathBuf>,
    shim: Option<PathBuf>,
    fake_driver: bool,
    command: Vec<OsString>,
}

/// Where the traces go, and whether the launcher made the directory for this run only.
enum TraceDir {
    Given(PathBuf),
    Private(tempfile::TempDir),
}

impl TraceDir {
    fn path(&self) -> &Path {
        match self {
            TraceDir::Given(p) => p,
            TraceDir::Private(t) => t.path(),
        }
    }
}

fn say(msg: &str) {
    err(&format!("seedance-fix: {msg}\n"));
}

/// Writes `text` to stdout. A reader that went away (a closed pipe) loses the text, never the
/// command's exit status: `print!` would panic and exit 101.
fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
}

/// Writes `text` to stderr, as [`out`] does to stdout.
fn err(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn run(a: RunArgs) -> ExitCode {
    let exe_dir = locate::exe_dir();
    let (program, args) = a.command.split_first().expect("clap requires a command");
    let mut cmd = Command::new(program);
    cmd.args(args);

    let shim = match a.shim {
        Some(p) => Some(std::fs::canonicalize(&p).unwrap_or(p)),
        None => match exe_dir.as_deref().map(locate::find_shim) {
            Some(Ok(p)) => Some(p),
            Some(Err(searched)) => {
                say(&format!(
                    "cannot find {} (looked in {}); running the command without it (pass --shim PATH)",
                    locate::SHIM,
                    shown(&searched)
                ));
                None
            }
            None => {
                say("cannot tell where seedance-fix is installed; running the command without the shim (pass --shim PATH)");
                None
            }
        },
    };
    if let Some(s) = &shim {
        let existing = std::env::var("LD_PRELOAD").ok();
        cmd.env("LD_PRELOAD", locate::preload_with(s, existing.as_deref()));
    }
    if let Some(m) = a.mode {
        cmd.env(
            "SEEDANCE_MODE",
            match m {
                Mode::Off => "off",
                Mode::Observe => "observe",
                Mode::Fix => "fix",
            },
        );
    }
    // Kept until the command has exited: the fake driver's link lives in it.
    let mut _fake_link: Option<tempfile::TempDir> = None;
    if a.fake_driver {
        let dir = match exe_dir.as_deref().map(locate::find_fake_driver) {
            Some(Ok(driver)) => {
                // In the installed layouts the fake NVML is in the fake driver's directory
                // already; a cargo target directory needs links for both.
                let nvml = locate::find_fake_nvml(&driver);
                match driver {
                    locate::FakeDriver::Dir(d) => d,
                    locate::FakeDriver::CargoFile(f) => match link_fake(&f, nvml.as_deref()) {
                        Ok(t) => {
                            let d = t.path().to_path_buf();
                            _fake_link = Some(t);
                            d
                        }
                        Err(e) => {
                            say(&format!("--fake-driver: cannot link {}: {e}", f.display()));
                            return ExitCode::from(2);
                        }
                    },
                }
            }
            Some(Err(searched)) => {
                say(&format!(
                    "--fake-driver: no fake driver installed (looked in {})",
                    shown(&searched)
                ));
                return ExitCode::from(2);
            }
            None => {
                say("--fake-driver: cannot tell where seedance-fix is installed");
                return ExitCode::from(2);
            }
        };
        let existing = std::env::var("LD_LIBRARY_PATH").ok();
        cmd.env(
            "LD_LIBRARY_PATH",
            locate::prepend_path(&dir, existing.as_deref()),
        );
        if std::env::var_os("FAKE_CUDA_DEVICE_COUNT").is_none() {
            cmd.env("FAKE_CUDA_DEVICE_COUNT", "2");
        }
    }

    let env_dir = std::env::var_os("SEEDANCE_TRACE_DIR").filter(|d| !d.is_empty());
    let traces = match a.trace_dir.or(env_dir.map(PathBuf::from)) {
        Some(d) => {
            if let Err(e) = seedance_trace::writer::ensure_dir(&d) {
                say(&format!("no trace will be written: {e}"));
            }
            TraceDir::Given(d)
        }
        // Mode 0700 asked for explicitly: tempfile's default for a directory is 0777 less
        // the umask (0755 under the usual 022), readable by every user.
        None => match tempfile::Builder::new()
            .prefix("seedance-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
        {
            Ok(t) => TraceDir::Private(t),
            Err(e) => {
                say(&format!(
                    "cannot create a private trace directory in {}: {e}; running without a trace",
                    std::env::temp_dir().display()
                ));
                TraceDir::Given(PathBuf::new())
            }
        },
    };
    let tracing = !traces.path().as_os_str().is_empty();
    if tracing {
        cmd.env("SEEDANCE_TRACE_DIR", traces.path());
    } else {
        cmd.env_remove("SEEDANCE_TRACE_DIR");
    }
    let before = trace_files(traces.path());

    let code = match spawn_forwarding(&mut cmd) {
        Ok(code) => code,
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            say(&format!("cannot run {}: {e}", Path::new(program).display()));
            return ExitCode::from(code);
        }
    };

    if tracing {
        report_run(traces, &before, a.report.as_deref(), code);
    }
    ExitCode::from(code)
}

/// A private directory holding `libcuda.so.1` and `libcuda.so` links to the fake driver
/// `file` of a cargo target directory (cargo names the cdylib `libcuda.so`; programs load
/// `libcuda.so.1`), and a `libnvidia-ml.so.1` link to the fake NVML `nvml` when it was
/// built (`libnvidia_ml.so`), which the shim then loads by that name, as it loads the real one:
/// both fakes describe the same host.
fn link_fake(file: &Path, nvml: Option<&Path>) -> std::io::Result<tempfile::TempDir> {
    let t = tempfile::Builder::new()
        .prefix("seedance-fake-driver-")
        .tempdir()?;
    for name in ["libcuda.so.1", "libcuda.so"] {
        std::os::unix::fs::symlink(file, t.path().join(name))?;
    }
    if let Some(nvml) = nvml {
        std::os::unix::fs::symlink(nvml, t.path().join(locate::FAKE_NVML[0]))?;
    }
    Ok(t)
}

/// Runs `cmd`, forwarding the signals of [`FORWARDED`] that another process sends to the
/// launcher (a terminal's Ctrl-C already reaches the whole foreground process group, the
/// command included, so those are not sent twice). Returns the exit status, 128 + N for a
/// command ended by signal N.
fn spawn_forwarding(cmd: &mut Command) -> std::io::Result<u8> {
    // Registered before the command starts, so that a signal at any moment is forwarded
    // and never ends the launcher instead. A caught signal's handler is reset to the
    // default by exec, so the command sees the dispositions it would have without us.
    let signals = SignalsInfo::<WithOrigin>::new(FORWARDED);
    let mut child = cmd.spawn()?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let forwarder = match signals {
        Ok(mut s) => {
            let handle = s.handle();
            let t = std::thread::spawn(move || {
                for origin in s.forever() {
                    if matches!(origin.cause, Cause::Kernel) {
                        continue;
                    }
                    if let Ok(sig) = nix::sys::signal::Signal::try_from(origin.signal) {
                        let _ = nix::sys::signal::kill(pid, sig);
                    }
                }
            });
            Some((handle, t))
        }
        Err(e) => {
            say(&format!(
                "signals will not be forwarded to the command: {e}"
            ));
            None
        }
    };
    let status = child.wait()?;
    if let Some((handle, t)) = forwarder {
        handle.close();
        let _ = t.join();
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).min(255) as u8,
        (None, None) => 1,
    })
}

/// The trace files (`seedance-*.jsonl`) directly in `dir`.
fn trace_files(dir: &Path) -> HashSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("seedance-") && n.ends_with(".jsonl"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the traces the run added to `traces` and prints what they say (nothing when there
/// is nothing to say), and, for a command that exited with `status` not 0 without a
/// failing call, that a device selection may have been refused above the driver
/// ([`summary::refused_above_driver`]); writes the HTML report when asked.
fn report_run(traces: TraceDir, before: &HashSet<PathBuf>, html: Option<&Path>, status: u8) {
    let mut files: Vec<PathBuf> = trace_files(traces.path())
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    files.sort();
    let report = if files.is_empty() {
        None
    } else {
        match seedance_analyze::summarize(&files, &seedance_analyze::Options::default()) {
            Ok(r) => Some(r),
            Err(e) => {
                say(&format!("cannot read this run's traces: {e}"));
                None
            }
        }
    };
    if let Some(out) = html {
        match &report {
            Some(r) => match std::fs::write(out, seedance_analyze::render::html::render(r)) {
                Ok(()) => say(&format!("report: {}", out.display())),
                Err(e) => say(&format!("cannot write {}: {e}", out.display())),
            },
            None => say(&format!(
                "no trace found in {}; {} not written",
                traces.path().display(),
                out.display()
            )),
        }
    }
    let speak = report.as_ref().is_some_and(summary::worth_saying);
    if speak {
        let r = report.as_ref().expect("checked above");
        let text = summary::sections(r);
        err(&format!(
            "\nseedance-fix: what the shim saw in this run\n{text}"
        ));
    }
    let refused = report
        .as_ref()
        .and_then(|r| summary::refused_above_driver(r, status));
    if let Some(line) = &refused {
        say(line);
    }
    let speak = speak || refused.is_some();
    let keep = speak || html.is_some();
    match traces {
        TraceDir::Private(t) if keep => {
            let p = t.keep();
            say(&format!(
                "traces: {}  (full report: seedance-analyze summary {})",
                p.display(),
                p.display()
            ));
        }
        TraceDir::Private(t) => drop(t),
        TraceDir::Given(p) if speak => say(&format!(
            "traces: {}  (full report: seedance-analyze summary {})",
            p.display(),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        )),
        TraceDir::Given(_) => {}
    }
}
