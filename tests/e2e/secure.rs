//! A process running with `AT_SECURE` (setuid, setgid, or file capabilities) ignores every
//! `SEEDANCE_*` variable: no trace, no metrics file, no driver library override, no mode,
//! quiet or fallback setting; it runs with the defaults (mode `fix`).
//!
//! In secure mode the dynamic loader ignores `LD_PRELOAD` paths, so the shim is loaded the
//! way it reaches setuid programs in production: from `/etc/ld.so.preload`. Each run is
//! one `unshare -m` (a private mount namespace, gone when the run ends) that mounts a tmpfs
//! holding the shim, the fake driver (as `libcuda.so.1`, found through the program's
//! absolute `DT_RUNPATH`, which the loader honours in secure mode), a second copy of the
//! fake driver (the "attacker" library named by `SEEDANCE_LIBCUDA`) and the program
//! `secure_probe`; then an overlay over `/etc` whose `ld.so.preload` names the shim. The
//! machine's own `/etc` is never written.
//!
//! The same program, with the same `SEEDANCE_*` variables, runs once without privilege (as
//! `nobody`: the control, which must show every variable's effect) and once each as a
//! setuid-`nobody` binary started by root, a setgid-`nogroup` binary started by root, and a
//! file-capability binary started by `nobody` (each must show `at_secure=1` and none of the
//! effects). The program asks for ordinal 1 on a one-device host: in `observe` mode
//! (the control) the error stays; in the default `fix` mode (ignored variables) the request
//! goes to ordinal 0.
//!
//! Needs root with `CAP_SYS_ADMIN` (mount namespaces); without it the tests say why and
//! return. As root, any failure to set up fails the test.

use seedance_e2e::artifacts;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `nobody` and `nogroup` on Debian and most distributions; only the numbers are used.
const NOBODY: u32 = 65534;

/// How the program is started.
#[derive(Clone, Copy, PartialEq, Debug)]
enum How {
    /// As `nobody` (real and effective), no privilege: `AT_SECURE` is 0.
    Plain,
    /// Owned by `nobody`, mode 4755, started by root: euid `nobody` != ruid root.
    Setuid,
    /// Group `nogroup`, mode 2755, started by root: egid != rgid.
    Setgid,
    /// `cap_net_bind_service+ep`, started by `nobody`: capabilities raised by exec.
    FileCap,
}

impl How {
    fn name(self) -> &'static str {
        match self {
            How::Plain => "plain",
            How::Setuid => "setuid",
            How::Setgid => "setgid",
            How::FileCap => "filecap",
        }
    }

    /// The first line the program prints: AT_SECURE and its real and effective ids.
    fn identity(self) -> String {
        let (secure, uid, euid, gid, egid) = match self {
            How::Plain => (0, NOBODY, NOBODY, NOBODY, NOBODY),
            How::Setuid => (1, 0, NOBODY, 0, 0),
            How::Setgid => (1, 0, 0, 0, NOBODY),
            How::FileCap => (1, NOBODY, NOBODY, NOBODY, NOBODY),
        };
        format!("at_secure={secure} uid={uid} euid={euid} gid={gid} egid={egid}")
    }
}

/// Runs in the new mount namespace as root: `$1` mount point, `$2` shim, `$3` fake driver,
/// `$4` program, `$5` how; the rest are the program's arguments. A setup step that fails
/// exits 97 with `setup failed: <step>` on stderr.
const SETUP: &str = r#"
step() { "$@" || { echo "setup failed: $*" >&2; exit 97; }; }
X=$1 SHIM=$2 FAKE=$3 PROBE=$4 HOW=$5
shift 5
for tool in mount setpriv; do
  step command -v "$tool" >/dev/null
done
step mount -t tmpfs -o mode=0755 seedance-secure "$X"
step mkdir "$X/upper" "$X/work" "$X/lib" "$X/driver" "$X/attacker" "$X/bin"
step cp "$SHIM" "$X/lib/libseedance_fix.so"
step cp "$FAKE" "$X/driver/libcuda.so.1"
step cp "$FAKE" "$X/attacker/libcuda.so.1"
P="$X/bin/secure_probe"
step cp "$PROBE" "$P"
AS_NOBODY="setpriv --reuid 65534 --regid 65534 --clear-groups"
case $HOW in
  plain) RUN="$AS_NOBODY" ;;
  setuid) step chown 65534 "$P"; step chmod 4755 "$P"; RUN="" ;;
  setgid) step chgrp 65534 "$P"; step chmod 2755 "$P"; RUN="" ;;
  filecap) step setcap cap_net_bind_service+ep "$P"; RUN="$AS_NOBODY" ;;
  *) echo "setup failed: unknown mode $HOW" >&2; exit 97 ;;
esac
# Only this namespace sees the overlay: the machine's /etc is left as it is.
step mount -t overlay seedance-etc -o "lowerdir=/etc,upperdir=$X/upper,workdir=$X/work" /etc
step sh -c 'printf "%s\n" "$1" > /etc/ld.so.preload' sh "$X/lib/libseedance_fix.so"
exec $RUN "$P" "$@"
"#;

/// Prints why the test is skipped and returns `true` if it cannot run here.
fn skip(test: &str) -> bool {
    if seedance_e2e::target::skip_under_emulation(
        "AT_SECURE comes from the kernel's exec of the setuid, setgid or file-capability file, \
         and under qemu-user the kernel execs qemu, not the program",
    ) {
        return true;
    }
    match seedance_e2e::mount_namespace_unavailable() {
        Some(why) => {
            seedance_e2e::say_skipped(&format!("secure::{test}"), &why);
            true
        }
        None => false,
    }
}

/// A directory whose every ancestor `nobody` can search: the temporary directory, or
/// `/tmp` if some ancestor of it is closed.
fn searchable_base() -> PathBuf {
    let base = std::env::temp_dir();
    let open = base
        .ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if open {
        base
    } else {
        PathBuf::from("/tmp")
    }
}

/// One run's private directory: the compiled program, the mount point of the run's tmpfs,
/// and the trace directory (mode 1777, so `nobody` may write there).
struct Sandbox {
    dir: tempfile::TempDir,
}

/// What a run left behind.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Names of the files in the trace directory (traces and metrics files).
    files: Vec<String>,
    /// Records of the trace files, parsed.
    records: Vec<Value>,
    /// The mount point, as the program saw it.
    root: PathBuf,
    /// The `SEEDANCE_*` variables the run was given.
    vars: Vec<(&'static str, String)>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("seedance-secure-")
            .tempdir_in(searchable_base())
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Sandbox { dir };
        std::fs::create_dir(s.root()).unwrap();
        std::fs::create_dir(s.traces()).unwrap();
        std::fs::set_permissions(s.traces(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        s.compile();
        s
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn traces(&self) -> PathBuf {
        self.dir.path().join("traces")
    }

    fn probe(&self) -> PathBuf {
        self.dir.path().join("secure_probe")
    }

    /// `secure_probe` linked against the fake driver, with an absolute `DT_RUNPATH` to the
    /// driver directory inside the run's tmpfs (no `LD_LIBRARY_PATH` in secure mode).
    fn compile(&self) {
        let a = artifacts();
        let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("programs");
        let out = Command::new("cc")
            .current_dir(&programs)
            .args(["-O1", "-Wall", "-o"])
            .arg(self.probe())
            .arg("secure_probe.c")
            .arg(format!("-L{}", a.fake_dir.display()))
            .arg("-lcuda")
            .arg("-Wl,--enable-new-dtags")
            .arg(format!(
                "-Wl,-rpath,{}",
                self.root().join("driver").display()
            ))
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "compiling secure_probe failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `secure_probe 1` started as `how`, with the shim in `/etc/ld.so.preload` and
    /// every `SEEDANCE_*` variable below set.
    fn run(&self, how: How) -> Outcome {
        let a = artifacts();
        let root = self.root();
        let traces = self.traces();
        let vars = seedance_vars(&root, &traces);
        let out = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", SETUP, "sh"])
            .arg(&root)
            .arg(&a.shim)
            .arg(a.fake_dir.join("libcuda.so.1"))
            .arg(self.probe())
            .arg(how.name())
            .arg("1")
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("FAKE_CUDA_DEVICE_COUNT", "1")
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run unshare");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.code() != Some(97) && !stderr.contains("setup failed"),
            "{how:?}: setting up the namespace failed:\n{stderr}"
        );
        assert!(
            !stderr.contains("unshare: "),
            "{how:?}: unshare failed as root:\n{stderr}"
        );
        let mut files = Vec::new();
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&traces).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".jsonl") {
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    records.push(serde_json::from_str(line).unwrap_or_else(|e| {
                        panic!("bad trace line in {}: {e}: {line}", path.display())
                    }));
                }
            }
            files.push(name);
        }
        files.sort();
        Outcome {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            files,
            records,
            root,
            vars,
        }
    }
}

/// The variables every run gets, each with an effect the control run shows: a trace and a
/// metrics file, `observe` (the bad ordinal is not repaired), `SEEDANCE_FALLBACK=off` (nor
/// would it be in `fix`), silence on stderr, and another driver library.
fn seedance_vars(root: &Path, traces: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("SEEDANCE_MODE", "observe".into()),
        ("SEEDANCE_TRACE_DIR", traces.display().to_string()),
        (
            "SEEDANCE_LIBCUDA",
            root.join("attacker/libcuda.so.1").display().to_string(),
        ),
        ("SEEDANCE_QUIET", "1".into()),
        ("SEEDANCE_FALLBACK", "off".into()),
        (
            "SEEDANCE_METRICS_FILE",
            traces.join("metrics-%p.prom").display().to_string(),
        ),
    ]
}

/// What the program prints before the device work: identity, the `SEEDANCE_*` values it
/// sees (all of them: the loader does not strip them in secure mode, so it is the shim
/// that ignores them), and that the shim is loaded.
fn preamble(how: How, o: &Outcome) -> String {
    let mut s = how.identity() + "\n";
    for (k, v) in &o.vars {
        s += &format!("env {k}={v}\n");
    }
    s + "shim=1\n"
}

fn driver_line(root: &Path, dir: &str) -> String {
    format!("driver {}\n", root.join(dir).join("libcuda.so.1").display())
}

#[test]
fn unprivileged_run_honours_every_variable() {
    if skip("unprivileged_run_honours_every_variable") {
        return;
    }
    let o = Sandbox::new().run(How::Plain);
    let ctx = format!("stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    // observe: ordinal 1 is not repaired; SEEDANCE_LIBCUDA: the attacker copy is loaded
    // next to the program's own driver (and the shim forwards to it, see the trace).
    assert_eq!(o.code, Some(1), "{ctx}");
    assert_eq!(
        o.stdout,
        preamble(How::Plain, &o)
            + "ordinal 1: cuDeviceGet -> 101\n"
            + &driver_line(&o.root, "driver")
            + &driver_line(&o.root, "attacker"),
        "{ctx}"
    );
    // SEEDANCE_QUIET=1: not a word on stderr.
    assert_eq!(o.stderr, "", "{ctx}");
    // SEEDANCE_TRACE_DIR and SEEDANCE_METRICS_FILE: one trace, one metrics file.
    assert_eq!(o.files.len(), 2, "{:?}", o.files);
    assert!(o.files[0].starts_with("metrics-") && o.files[0].ends_with(".prom"));
    assert!(o.files[1].starts_with("seedance-") && o.files[1].ends_with(".jsonl"));
    let events =
        |kind: &str| -> Vec<&Value> { o.records.iter().filter(|r| r["event"] == kind).collect() };
    let start = events("session_start");
    assert_eq!(start.len(), 1, "{:#?}", o.records);
    assert_eq!(start[0]["mode"], "observe");
    assert_eq!(
        start[0]["libcuda_path"],
        o.root.join("attacker/libcuda.so.1").display().to_string()
    );
    let fault = events("device_fault");
    assert_eq!(fault.len(), 1, "{:#?}", o.records);
    assert_eq!(fault[0]["requested_ordinal"], 1);
    assert!(events("device_fallback").is_empty(), "{:#?}", o.records);
    assert_eq!(events("exit_summary").len(), 1, "{:#?}", o.records);
}

/// The run as `how` shows `AT_SECURE`, the shim loaded, and none of the variables' effects.
fn assert_ignored(how: How) {
    let o = Sandbox::new().run(how);
    let ctx = format!("stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    // fix (the default, not observe) with fallback on (not off): ordinal 1 goes to 0.
    // Only the program's own driver is loaded, not SEEDANCE_LIBCUDA's.
    assert_eq!(o.code, Some(0), "{ctx}");
    assert_eq!(
        o.stdout,
        preamble(how, &o) + "ordinal 1 -> 0000:10:00.0\n" + &driver_line(&o.root, "driver"),
        "{ctx}"
    );
    // Not quiet: the shim (loaded, so stderr is its own) explains and announces the repair.
    assert_eq!(
        o.stderr,
        "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 1 requested, 1 device \
         visible (ordinal 0 = physical GPU 0, Fake H200 #0, 0000:10:00.0); the program \
         expects more GPUs than this host or container exposes; use ordinals 0..0 or run it \
         with fewer ranks per node\n\
         seedance: cuDeviceGet: fix: ordinal 1 -> ordinal 0 (physical GPU 0, Fake H200 #0, \
         0000:10:00.0): ordinal 1 is not visible; set SEEDANCE_FALLBACK=off to keep the \
         error\n",
        "{ctx}"
    );
    // No trace and no metrics file, in a directory the process could write to.
    assert_eq!(o.files, Vec::<String>::new(), "{ctx}");
}

#[test]
fn setuid_run_ignores_every_variable() {
    if skip("setuid_run_ignores_every_variable") {
        return;
    }
    assert_ignored(How::Setuid);
}

#[test]
fn setgid_run_ignores_every_variable() {
    if skip("setgid_run_ignores_every_variable") {
        return;
    }
    assert_ignored(How::Setgid);
}

#[test]
fn file_capability_run_ignores_every_variable() {
    if skip("file_capability_run_ignores_every_variable") {
        return;
    }
    // The sandbox script runs `setcap` from PATH (Debian/Ubuntu package libcap2-bin).
    if seedance_e2e::optional_tool(
        "secure::file_capability_run_ignores_every_variable",
        &["setcap"],
        "SEEDANCE_REQUIRE_SETCAP",
    )
    .is_none()
    {
        return;
    }
    assert_ignored(How::FileCap);
}
