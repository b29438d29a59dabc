//! `seedance-fix run` as a user runs it: real processes, the shim found beside the launcher
//! (`target/<profile>/`), the fake driver (`--fake-driver`, or `LD_LIBRARY_PATH`), the test
//! programs of `tests/programs/` built by the end-to-end harness.

use seedance_e2e::artifacts;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn launcher() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_seedance-fix"))
}

/// A command with a clean environment: PATH, TMPDIR (a private directory, to see what the
/// launcher leaves behind) and the given variables.
fn command(exe: &Path, tmp: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TMPDIR", tmp)
        .args(args);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn program(name: &str) -> String {
    artifacts().bin_dir.join(name).display().to_string()
}

/// `seedance-fix run --fake-driver OPTIONS -- PROGRAM ARGS`, PROGRAM a test program, with
/// [`command`]'s environment.
fn run_fake(tmp: &Path, options: &[&str], prog: &str, args: &[&str]) -> Command {
    let prog = program(prog);
    let mut all = vec!["run", "--fake-driver"];
    all.extend_from_slice(options);
    all.push("--");
    all.push(&prog);
    all.extend_from_slice(args);
    command(&launcher(), tmp, &all)
}

fn shim() -> PathBuf {
    std::fs::canonicalize(launcher().parent().unwrap().join("libseedance_fix.so")).unwrap()
}

#[test]
fn a_healthy_program_runs_unchanged_and_quietly() {
    let a = artifacts();
    let tmp = tempfile::tempdir().unwrap();
    let ordinals = program("ordinals");
    let plain: Output = command(Path::new(&ordinals), tmp.path(), &["0", "1"])
        .env("LD_LIBRARY_PATH", &a.fake_dir)
        .env("FAKE_CUDA_DEVICE_COUNT", "2")
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stdout));
    let run = run_fake(tmp.path(), &[], "ordinals", &["0", "1"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), text(&plain.stdout));
    assert_eq!(text(&run.stderr), "");
    // Nothing to say: the private trace directory (and the fake driver's link) are gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_closed_stderr_pipe_leaves_the_exit_status_the_commands() {
    // `seedance-fix run ... 2>&1 | head -3`: the reader goes away before the summary is
    // written. The launcher's own lines are lost; its status stays the command's (0 here).
    // Before, eprint! panicked on the broken pipe and the launcher exited 101.
    let tmp = tempfile::tempdir().unwrap();
    let mut child = run_fake(tmp.path(), &[], "ordinals", &["1"])
        .env("CUDA_VISIBLE_DEVICES", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_repaired_fault_is_summarized_and_the_trace_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let traces = tmp.path().join("new/traces");
    let run = run_fake(
        tmp.path(),
        &["--trace-dir", traces.to_str().unwrap()],
        "ordinals",
        &["1"],
    )
    .env("CUDA_VISIBLE_DEVICES", "1")
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), "ordinal 1 -> 0000:11:00.0\n");
    let err = text(&run.stderr);
    // The shim's two lines, then the summary of this run.
    assert!(
        err.starts_with(
            "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 1 requested"
        ),
        "{err}"
    );
    assert!(err.contains("\nseedance-fix: what the shim saw in this run\nSUMMARY\n  1 process on 1 host, 1 device"), "{err}");
    assert!(
        err.contains("   1. [warning] device fault: ordinal 1 requested but not visible"),
        "{err}"
    );
    assert!(
        err.contains("REPAIRS\n  1 call repaired in 1 process by the fix mode\n"),
        "{err}"
    );
    let files: Vec<PathBuf> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(
        err.ends_with(&format!(
            "seedance-fix: traces: {}  (full report: seedance-analyze summary {})\n",
            traces.display(),
            files[0].display()
        )),
        "{err}"
    );
    // A second run into the same directory reports only itself.
    let again = run_fake(
        tmp.path(),
        &["--trace-dir", traces.to_str().unwrap()],
        "ordinals",
        &["0"],
    )
    .output()
    .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(text(&again.stderr), "");
    assert_eq!(std::fs::read_dir(&traces).unwrap().count(), 2);
}

#[test]
fn the_fake_driver_comes_with_the_fake_nvml() {
    let tmp = tempfile::tempdir().unwrap();
    let traces = tmp.path().join("traces");
    let run = run_fake(
        tmp.path(),
        &["--trace-dir", traces.to_str().unwrap()],
        "ordinals",
        &["1"],
    )
    .env("CUDA_VISIBLE_DEVICES", "1")
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    assert!(!err.contains("NVML"), "{err}");
    let files: Vec<PathBuf> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let trace = std::fs::read_to_string(&files[0]).unwrap();
    let session: serde_json::Value = serde_json::from_str(trace.lines().next().unwrap()).unwrap();
    assert_eq!(session["event"], "session_start");
    let topology = &session["topology"];
    assert_eq!(topology["nvml"]["present"], true, "{topology}");
    // NVML's view of the fake host: physical GPU 1 of 2, the fake driver's bus id.
    let devices = topology["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{topology}");
    assert_eq!(devices[0]["physical_index"], 1, "{topology}");
    assert_eq!(devices[0]["pci_bus_id"], "0000:11:00.0", "{topology}");
    // The full report has no "NVML could not be loaded" note either.
    let full = Command::new(launcher().with_file_name("seedance-analyze"))
        .args(["summary", files[0].to_str().unwrap()])
        .output()
        .unwrap();
    let full = text(&full.stdout);
    assert!(full.contains("SUMMARY"), "{full}");
    assert!(!full.contains("NVML could not be loaded"), "{full}");
}

#[test]
fn the_report_option_writes_html_and_keeps_the_traces() {
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("r.html");
    let run = run_fake(
        tmp.path(),
        &["--report", html.to_str().unwrap()],
        "ordinals",
        &["0"],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "{}",
        &page[..80.min(page.len())]
    );
    let err = text(&run.stderr);
    assert!(
        err.starts_with(&format!("seedance-fix: report: {}\n", html.display())),
        "{err}"
    );
    assert!(err.contains("seedance-fix: traces: "), "{err}");
}

#[test]
fn exit_status_and_signals_are_the_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let l = launcher();
    let code = |script: &str| {
        command(&l, tmp.path(), &["run", "--", "sh", "-c", script])
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(code("exit 7"), Some(7));
    assert_eq!(code("exit 0"), Some(0));
    assert_eq!(code("kill -TERM $$"), Some(128 + 15));
    assert_eq!(code("kill -KILL $$"), Some(128 + 9));
    let missing = command(&l, tmp.path(), &["run", "--", "/nonexistent/prog"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
    assert!(
        text(&missing.stderr).starts_with("seedance-fix: cannot run /nonexistent/prog: "),
        "{}",
        text(&missing.stderr)
    );
}

/// The private trace directory (no `--trace-dir`, no `SEEDANCE_TRACE_DIR`) is the
/// owner's alone while the command runs: mode 0700 whatever the umask (the README says so).
/// The command prints the mode of the directory the launcher handed it.
#[test]
fn the_private_trace_directory_is_mode_0700() {
    let tmp = tempfile::tempdir().unwrap();
    let script = "umask; stat -c %a \"$SEEDANCE_TRACE_DIR\"";
    for umask in ["022", "002", "000"] {
        let run = command(
            Path::new("/bin/sh"),
            tmp.path(),
            &[
                "-c",
                &format!("umask {umask}; exec \"$0\" run -- sh -c '{script}'"),
                launcher().to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
        assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
        let out = text(&run.stdout);
        let mode = out.lines().last().unwrap_or_default();
        assert_eq!(mode, "700", "umask {umask}: {out}");
    }
}

/// A signal sent to the launcher (by a supervisor, `timeout`, Kubernetes) reaches the
/// command, whose own handler decides the exit status. (The command gives up after 30 s
/// with status 99, so a launcher that does not forward fails the test instead of hanging
/// it.)
#[test]
fn signals_sent_to_the_launcher_reach_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    for (sig, name) in [(2, "INT"), (15, "TERM"), (1, "HUP"), (3, "QUIT")] {
        let script = format!(
            "trap 'echo got {name}; exit {}' {name}; echo ready; i=0; \
             while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 99",
            40 + sig
        );
        let mut child = command(&launcher(), tmp.path(), &["run", "--", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let st = Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        // Waited for first: a launcher that did not forward would end by the signal itself.
        assert_eq!(child.wait().unwrap().code(), Some(40 + sig), "SIG{name}");
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("got {name}\n"));
    }
}

#[test]
fn ld_preload_keeps_what_was_there_and_mode_is_passed() {
    let a = artifacts();
    let tmp = tempfile::tempdir().unwrap();
    let other = a.nvml_dir.join("libnvidia-ml.so.1");
    let out = command(
        &launcher(),
        tmp.path(),
        &[
            "run",
            "--mode",
            "observe",
            "--",
            "sh",
            "-c",
            "echo \"$LD_PRELOAD|$SEEDANCE_MODE\"",
        ],
    )
    .env("LD_PRELOAD", &other)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{}:{}|observe\n", shim().display(), other.display())
    );
}

#[test]
fn version_names_shim_analyzer_and_schema() {
    let out = Command::new(launcher()).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = env!("CARGO_PKG_VERSION");
    assert_eq!(
        text(&out.stdout),
        format!(
            "seedance-fix {v}\nshim {v}: {}\nanalyzer {v} (report version {})\ntrace schema {}\n",
            shim().display(),
            seedance_analyze::REPORT_VERSION,
            seedance_trace::SCHEMA_VERSION
        )
    );
}

/// Without a shim beside it the launcher still runs the command, unchanged, with one line
/// saying where it looked (fail open).
#[test]
fn without_a_shim_the_command_runs_as_without_it() {
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("bin");
    std::fs::create_dir(&alone).unwrap();
    let exe = alone.join("seedance-fix");
    place_launcher(&exe);
    let out = command(
        &exe,
        tmp.path(),
        &["run", "--", "sh", "-c", "echo \"[$LD_PRELOAD]\""],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "[]\n");
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "seedance-fix: cannot find libseedance_fix.so (looked in {}, ",
            alone.join("libseedance_fix.so").display()
        )),
        "{err}"
    );
}

/// A program whose own (static) CUDA runtime refuses `cudaSetDevice(1)` on a one-device
/// host after asking the driver for the count, as CuPy 14 and cuda-python 13 do: no driver
/// call fails, so the shim has nothing to explain; the launcher says one line with the
/// count. The same program selecting a device it has says nothing.
#[test]
fn a_device_refused_above_the_driver_gets_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_fake(tmp.path(), &[], "static_runtime_select", &["1"])
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some("cudaErrorInvalidDevice: invalid device ordinal")
    );
    assert_eq!(
        lines.next(),
        Some(
            "seedance-fix: the program exited with status 1 after asking the driver for the \
             device count (1 device, ordinal 0), and no driver call failed: a device selection \
             may have been refused above the driver, by a CUDA runtime linked into the program \
             or an extension module (CuPy, cuda-python), which checks the ordinal against that \
             count itself"
        ),
        "{err}"
    );
    assert!(
        lines.next().unwrap().starts_with("seedance-fix: traces: "),
        "{err}"
    );
    assert_eq!(lines.next(), None, "{err}");

    let ok = run_fake(tmp.path(), &[], "static_runtime_select", &["0"])
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert_eq!(text(&ok.stdout), "device 0 of 1\n");
    assert_eq!(text(&ok.stderr), "");
}

/// The launcher copied to `root/bin/seedance-fix`, with empty files at the `files` paths
/// under `root` (an install layout; only the paths matter to `fake-driver`).
/// The launcher at `exe`: a hard link where the file system allows one, so that no
/// descriptor open for writing exists that a program spawned meanwhile by another test could
/// inherit (exec of a file open for writing fails with "Text file busy", seen under load);
/// else a copy written under another name and renamed into place.
fn place_launcher(exe: &Path) {
    if std::fs::hard_link(launcher(), exe).is_ok() {
        return;
    }
    let tmp = exe.with_extension("partial");
    std::fs::copy(launcher(), &tmp).unwrap();
    std::fs::rename(&tmp, exe).unwrap();
}

fn installed(root: &Path, files: &[&str]) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("seedance-fix");
    place_launcher(&exe);
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }
    exe
}

/// `seedance-fix fake-driver --print-path` prints the directory holding the fake driver,
/// and nothing else, in each layout: a virtualenv (pip), `pip install --target`, the
/// release tarball and a cargo target directory.
#[test]
fn fake_driver_print_path_is_the_directory_of_the_fake_driver() {
    let tmp = tempfile::tempdir().unwrap();
    for (layout, dir) in [
        (
            "venv",
            "lib/python3.11/site-packages/seedance_fix/fake-cuda",
        ),
        ("site", "seedance_fix/fake-cuda"),
        ("tarball", "lib/fake-cuda"),
    ] {
        let root = tmp.path().join(layout);
        let exe = installed(
            &root,
            &[
                &format!("{dir}/libcuda.so.1"),
                &format!("{dir}/libnvidia-ml.so.1"),
            ],
        );
        let out = command(&exe, tmp.path(), &["fake-driver", "--print-path"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{layout}: {}",
            text(&out.stderr)
        );
        let want = std::fs::canonicalize(root.join(dir)).unwrap();
        assert_eq!(
            text(&out.stdout),
            format!("{}\n", want.display()),
            "{layout}"
        );
        assert_eq!(text(&out.stderr), "", "{layout}");
    }
    // A cargo target directory: the fake driver is libcuda.so beside the launcher (built
    // there by the end-to-end harness).
    let _ = artifacts();
    let out = command(&launcher(), tmp.path(), &["fake-driver", "--print-path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let want = std::fs::canonicalize(launcher().parent().unwrap()).unwrap();
    assert_eq!(text(&out.stdout), format!("{}\n", want.display()));
}

/// Without `--print-path`, the files and the commands that build and run a program against
/// them; with no fake driver installed, exit 2 and where it looked.
#[test]
fn fake_driver_says_how_to_build_and_run_against_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("venv");
    let dir = "lib/python3.11/site-packages/seedance_fix/fake-cuda";
    let exe = installed(
        &root,
        &[
            &format!("{dir}/libcuda.so.1"),
            &format!("{dir}/libnvidia-ml.so.1"),
        ],
    );
    let d = std::fs::canonicalize(root.join(dir)).unwrap();
    let d = d.display();
    let out = command(&exe, tmp.path(), &["fake-driver"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "fake driver: {d}/libcuda.so.1\n\
             fake NVML: {d}/libnvidia-ml.so.1\n\
             build: cc -o app app.c -L{d} -l:libcuda.so.1\n\
             run: seedance-fix run --fake-driver -- ./app\n\
             run without the shim: LD_LIBRARY_PATH={d} ./app\n"
        )
    );
    assert_eq!(text(&out.stderr), "");

    // A directory with a space is quoted for the shell in the commands.
    let spaced = tmp.path().join("my env");
    let exe = installed(&spaced, &["seedance_fix/fake-cuda/libcuda.so.1"]);
    let d = std::fs::canonicalize(spaced.join("seedance_fix/fake-cuda")).unwrap();
    let d = d.display();
    let out = command(&exe, tmp.path(), &["fake-driver"])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        format!(
            "fake driver: {d}/libcuda.so.1\n\
             fake NVML: none\n\
             build: cc -o app app.c -L'{d}' -l:libcuda.so.1\n\
             run: seedance-fix run --fake-driver -- ./app\n\
             run without the shim: LD_LIBRARY_PATH='{d}' ./app\n"
        )
    );

    // No fake driver: exit 2, one line naming the places searched.
    let bare = tmp.path().join("bare");
    let exe = installed(&bare, &[]);
    let b = std::fs::canonicalize(bare.join("bin")).unwrap();
    let b = b.display();
    for args in [&["fake-driver"][..], &["fake-driver", "--print-path"][..]] {
        let out = command(&exe, tmp.path(), args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "seedance-fix: no fake driver installed (looked in \
                 {b}/../seedance_fix/fake-cuda/libcuda.so.1, \
                 {b}/../lib/fake-cuda/libcuda.so.1, {b}/libcuda.so)\n"
            ),
            "{args:?}"
        );
    }
}
