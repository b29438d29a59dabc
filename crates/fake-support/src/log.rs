//! The call-log writer shared by the fakes (`FAKE_CUDA_LOG`, `FAKE_NVML_LOG`).
//!
//! A [`CallLog`] opens the file named by its environment variable once, at the first use,
//! with `O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC`, mode 0644, and writes each line with a single
//! `write(2)`, so lines from several threads and processes sharing the file never
//! interleave. The file stays open for the life of the process.
//!
//! Line format: `<name>[ key=value]... -> <code>`, see [`format_line`]. A call made on one
//! of the shim's own threads (a thread whose name starts with `seedance-`: its session
//! record, NVML helper and metrics threads, `shim/src/exit/record.rs`, `shim/src/driver/nvml.rs`,
//! `shim/src/exit/metrics.rs`) is prefixed with that name in brackets,
//! `[seedance-init] cuDriverGetVersion -> 0`, so that a test can tell the calls the program's
//! threads made (in a fixed order) from the shim's background work (at any time); see
//! [`SHIM_THREAD_PREFIX`].

use std::ffi::OsString;
use std::fmt::Display;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::OnceLock;

/// One log line, newline included: `name args -> code`, or `name -> code` when `args` is
/// empty. `code` is written with `Display` (decimal for the status numbers).
pub fn format_line(name: &str, args: &str, code: impl Display) -> String {
    if args.is_empty() {
        format!("{name} -> {code}\n")
    } else {
        format!("{name} {args} -> {code}\n")
    }
}

/// Names of the shim's own threads start with this (`seedance-init`, `seedance-nvml`,
/// `seedance-metrics`, `seedance-trace`, `seedance-exit`); calls made on them are tagged in
/// the log.
pub const SHIM_THREAD_PREFIX: &str = "seedance-";

/// The calling thread's name when it is one of the shim's (see [`SHIM_THREAD_PREFIX`]),
/// read from `/proc/thread-self/comm` once per thread (std names a thread before it runs
/// any of its code, so the first call already sees the final name). The per-thread cache
/// is a plain `Cell` of `Copy` data, which has no destructor: calls made at exit, after
/// the thread's thread-local destructors ran (the shim's exit report queries the driver
/// then), still find it.
fn shim_thread_name() -> Option<String> {
    /// Not read yet, or the name (at most 15 bytes, the kernel's limit) and its length.
    type Cached = Option<Option<([u8; 16], usize)>>;
    thread_local! {
        static NAME: std::cell::Cell<Cached> = const { std::cell::Cell::new(None) };
    }
    let read = || {
        let comm = std::fs::read("/proc/thread-self/comm").ok()?;
        let name = comm.strip_suffix(b"\n").unwrap_or(&comm);
        if !name.starts_with(SHIM_THREAD_PREFIX.as_bytes()) || name.len() > 16 {
            return None;
        }
        let mut buf = [0u8; 16];
        buf[..name.len()].copy_from_slice(name);
        Some((buf, name.len()))
    };
    let cached = NAME.with(|n| match n.get() {
        Some(c) => c,
        None => {
            let c = read();
            n.set(Some(c));
            c
        }
    });
    cached.map(|(buf, len)| String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// Makes free text safe to embed as one `key=value` token: blanks, control characters and
/// non-ASCII become `?`.
pub fn token(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// An append-only call log named by an environment variable; meant for a `static`.
///
/// Logging is off when the variable is unset or empty, when the path holds a NUL byte
/// (stderr: `<who>: ignoring bad <VAR>="<path>"`) or when the file cannot be opened
/// (stderr: `<who>: cannot open <VAR>="<path>": <error>`).
#[derive(Debug)]
pub struct CallLog {
    who: &'static str,
    env: &'static str,
    file: OnceLock<Option<File>>,
}

impl CallLog {
    /// A log read from the variable `env`; `who` (the fake's name) prefixes its messages.
    /// Nothing is read or opened until the first [`CallLog::enabled`] or
    /// [`CallLog::record`].
    pub const fn new(who: &'static str, env: &'static str) -> CallLog {
        CallLog {
            who,
            env,
            file: OnceLock::new(),
        }
    }

    fn file(&self) -> Option<&File> {
        self.file
            .get_or_init(|| open(self.who, self.env, std::env::var_os(self.env)))
            .as_ref()
    }

    /// Whether calls are being recorded (opens the file at the first call).
    pub fn enabled(&self) -> bool {
        self.file().is_some()
    }

    /// Records one call when logging is on, as [`format_line`] writes it; `args` is only
    /// evaluated then.
    pub fn record(&self, name: &str, args: impl FnOnce() -> String, code: impl Display) {
        let Some(file) = self.file() else {
            return;
        };
        let line = format_line(name, &args(), code);
        match shim_thread_name() {
            Some(thread) => write_line(file, &format!("[{thread}] {line}")),
            None => write_line(file, &line),
        }
    }
}

/// Opens the log at `path` (the value of `env`), or says on stderr why not.
fn open(who: &str, env: &str, path: Option<OsString>) -> Option<File> {
    let path = path.filter(|p| !p.is_empty())?;
    let shown = path.to_string_lossy().into_owned();
    if path.as_bytes().contains(&0) {
        let _ = writeln!(std::io::stderr(), "{who}: ignoring bad {env}={shown:?}");
        return None;
    }
    // std adds O_CLOEXEC; append implies O_WRONLY.
    match OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(&path)
    {
        Ok(file) => Some(file),
        Err(err) => {
            let _ = writeln!(
                std::io::stderr(),
                "{who}: cannot open {env}={shown:?}: {err}"
            );
            None
        }
    }
}

/// Writes `line` with one `write(2)`, retried only when interrupted by a signal; other
/// errors and short writes are ignored (there is nobody to tell).
fn write_line(mut file: &File, line: &str) {
    loop {
        match file.write(line.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        assert_eq!(format_line("nvmlInit_v2", "", 0u32), "nvmlInit_v2 -> 0\n");
        assert_eq!(
            format_line("cuMemAlloc_v2", "bytes=1048576", 2u32),
            "cuMemAlloc_v2 bytes=1048576 -> 2\n"
        );
    }

    #[test]
    fn tokens() {
        assert_eq!(token("cuMemAlloc"), "cuMemAlloc");
        assert_eq!(token("a b\nc\u{e9}"), "a?b?c?");
        assert_eq!(token("GPU-x y\n\u{e9}"), "GPU-x?y??");
    }

    #[test]
    fn open_off_when_unset_or_empty() {
        assert!(open("t", "V", None).is_none());
        assert!(open("t", "V", Some(OsString::new())).is_none());
        assert!(open("t", "V", Some(OsString::from("a\0b"))).is_none());
        assert!(open("t", "V", Some(OsString::from("/nonexistent-dir/x/log"))).is_none());
    }

    #[test]
    fn shim_threads_are_named() {
        assert_eq!(shim_thread_name(), None);
        let on = |name: &str| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(shim_thread_name)
                .unwrap()
                .join()
                .unwrap()
        };
        assert_eq!(on("seedance-init").as_deref(), Some("seedance-init"));
        assert_eq!(on("worker-1"), None);
    }

    #[test]
    fn appends_whole_lines() {
        use std::os::unix::fs::PermissionsExt;
        let path =
            std::env::temp_dir().join(format!("fake-support-log-test-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, "earlier\n").unwrap();
        let file = open("t", "V", Some(path.clone().into_os_string())).unwrap();
        write_line(&file, &format_line("a", "", 0u32));
        write_line(&file, &format_line("b", "x=1", 7u32));
        drop(file);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "earlier\na -> 0\nb x=1 -> 7\n"
        );
        std::fs::remove_file(&path).unwrap();

        let file = open("t", "V", Some(path.clone().into_os_string())).unwrap();
        drop(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        // 0644 less the umask: never executable, never writable by group or others.
        assert_eq!(mode & 0o133, 0, "{mode:o}");
        std::fs::remove_file(&path).unwrap();
    }
}
