//! The trace writer: one JSON-lines file per process, written by a background thread.
//!
//! The calling thread only serializes the record and hands the line to
//! `tracing_appender::non_blocking` (a bounded queue drained by a worker thread), so a driver
//! call never waits on disk I/O. When the queue is full the line is dropped and counted
//! ([`TraceWriter::dropped`]); the exit summary reports that count. A write the file
//! refuses (disk full, I/O error) stops the writing for good: the caller's hook hears of it
//! once, that line and every later one are counted as dropped, and nothing is appended
//! after a line the failure may have cut (so the file stays whole lines plus at most one
//! cut last line, which the analyzer skips with a count).
//!
//! Files are created with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode 0600: a file or symlink
//! already at the path is an error, never overwritten or followed. A directory that is
//! world-writable without the sticky bit is refused. A missing directory is created, with
//! its missing parents, mode 0700, but only below an existing directory that passes the same
//! rule ([`ensure_dir`]).

use crate::schema::{Event, Record, TraceCut, SCHEMA_VERSION};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};

/// Lines the writer queue holds before it starts dropping (each line is one record).
pub const QUEUE_LINES: usize = 65_536;

/// Longest [`TraceWriter::close`] waits for queued lines to reach the file.
pub const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a trace file could not be opened.
#[derive(Debug)]
pub enum WriterError {
    /// The directory is world-writable and lacks the sticky bit: another user could
    /// replace our file.
    UnsafeDirectory(PathBuf),
    /// The directory could not be inspected or the file could not be created.
    Io(PathBuf, io::Error),
    /// The directory was missing and could not be created: `dir`, its nearest existing
    /// ancestor `below`, the directory whose creation failed and why.
    CreateDir {
        /// The trace directory asked for.
        dir: PathBuf,
        /// Its nearest existing ancestor.
        below: PathBuf,
        /// The directory that could not be created (`dir` or one of its missing parents).
        failed: PathBuf,
        /// The error of that creation.
        error: io::Error,
    },
    /// The directory was missing and its nearest existing ancestor is world-writable without
    /// the sticky bit, so nothing was created there.
    UnsafeAncestor {
        /// The trace directory asked for.
        dir: PathBuf,
        /// Its nearest existing ancestor.
        below: PathBuf,
    },
    /// The directory (or one of its parents) is a symbolic link whose target does not
    /// exist: nothing is created at the link's target.
    DanglingLink {
        /// The symbolic link.
        link: PathBuf,
        /// What it points to.
        target: PathBuf,
    },
}

/// A path as messages show it: at most 200 bytes (`seedance_core::text::clip`), control
/// characters escaped (`seedance_core::text::escape_controls`): the trace directory is the
/// user's value, and a newline in it must not start a `seedance:` line of its own.
pub fn shown(p: &Path) -> String {
    seedance_core::text::escape_controls(&seedance_core::text::clip(&p.to_string_lossy()))
        .into_owned()
}

impl fmt::Display for WriterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriterError::UnsafeDirectory(p) => write!(
                f,
                "{} is world-writable without the sticky bit; refusing to write a trace there",
                shown(p)
            ),
            WriterError::Io(p, e) => write!(f, "cannot create {}: {e}", shown(p)),
            WriterError::DanglingLink { link, target } => write!(
                f,
                "{} is a symbolic link to {}, which does not exist; create that directory or \
                 point SEEDANCE_TRACE_DIR at an existing one",
                shown(link),
                shown(target)
            ),
            WriterError::CreateDir {
                dir,
                below,
                failed,
                error,
            } => write!(
                f,
                "{} does not exist; tried to create it (mode 0700) below {}, but creating {} \
                 failed: {error}",
                shown(dir),
                shown(below),
                shown(failed)
            ),
            WriterError::UnsafeAncestor { dir, below } => write!(
                f,
                "{} does not exist and {} is world-writable without the sticky bit; refusing \
                 to create a trace directory there",
                shown(dir),
                shown(below)
            ),
        }
    }
}

impl std::error::Error for WriterError {}

/// A freshly created trace file and its path.
pub struct TraceFile {
    /// Where the file was created.
    pub path: PathBuf,
    pub(crate) file: File,
}

impl TraceFile {
    /// Creates `<dir>/seedance-<host>-<pid>-<start_ns>.jsonl` exclusively, mode 0600.
    ///
    /// A missing `dir` is created first ([`ensure_dir`]).
    ///
    /// Errors: [`WriterError::UnsafeDirectory`] for a world-writable directory without the
    /// sticky bit; those of [`ensure_dir`] for a missing one; [`WriterError::Io`] when the
    /// directory cannot be inspected or the file exists.
    pub fn create(
        dir: &Path,
        host: &str,
        pid: u32,
        start_ns: u64,
    ) -> Result<TraceFile, WriterError> {
        ensure_dir(dir)?;
        let meta = std::fs::metadata(dir).map_err(|e| WriterError::Io(dir.to_path_buf(), e))?;
        if unsafe_mode(meta.mode()) {
            return Err(WriterError::UnsafeDirectory(dir.to_path_buf()));
        }
        let host: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("seedance-{host}-{pid}-{start_ns}.jsonl"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(&path)
            .map_err(|e| WriterError::Io(path.clone(), e))?;
        Ok(TraceFile { path, file })
    }
}

/// Not there: missing, or a component of the path is a file (the creation then fails and
/// says so).
fn missing_kind(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// World-writable without the sticky bit: another user could replace what we create there.
fn unsafe_mode(mode: u32) -> bool {
    mode & 0o002 != 0 && mode & 0o1000 == 0
}

/// Makes sure the trace directory `dir` exists. When it is missing, finds its nearest
/// existing ancestor, refuses when that ancestor is world-writable without the sticky bit
/// (the rule [`TraceFile::create`] applies to the directory itself), and creates each missing
/// component in turn with mode 0700 (before the umask). Another process creating the same
/// component at the same moment is not an error. A relative `dir` is taken from the current
/// directory.
///
/// Errors: [`WriterError::UnsafeAncestor`] for an unsafe ancestor; [`WriterError::CreateDir`]
/// when a component cannot be created (permission, a file in the way, read-only file
/// system); [`WriterError::Io`] when `dir` cannot be inspected for another reason than not
/// existing.
pub fn ensure_dir(dir: &Path) -> Result<(), WriterError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::metadata(dir) {
        Ok(_) => return Ok(()),
        Err(e) if missing_kind(&e) => {}
        Err(e) => return Err(WriterError::Io(dir.to_path_buf(), e)),
    }
    let mut missing = vec![dir.to_path_buf()];
    let mut below = dir.parent().map(Path::to_path_buf);
    let below = loop {
        let candidate = match below {
            Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
            Some(p) => p,
            None => PathBuf::from("/"),
        };
        match std::fs::metadata(&candidate) {
            Ok(m) => {
                if unsafe_mode(m.mode()) {
                    return Err(WriterError::UnsafeAncestor {
                        dir: dir.to_path_buf(),
                        below: candidate,
                    });
                }
                break candidate;
            }
            Err(e) if missing_kind(&e) => {
                below = candidate.parent().map(Path::to_path_buf);
                missing.push(candidate);
            }
            Err(error) => {
                return Err(WriterError::CreateDir {
                    dir: dir.to_path_buf(),
                    below: candidate.clone(),
                    failed: missing.last().cloned().unwrap_or_else(|| dir.to_path_buf()),
                    error,
                })
            }
        }
    };
    for p in missing.iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
            // "Missing" because it is a symbolic link to nothing: say so, rather than the
            // creation's "File exists".
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dangling(p).is_some() => {
                return Err(WriterError::DanglingLink {
                    link: p.clone(),
                    target: dangling(p).unwrap_or_default(),
                })
            }
            Err(error) => {
                return Err(WriterError::CreateDir {
                    dir: dir.to_path_buf(),
                    below,
                    failed: p.clone(),
                    error,
                })
            }
        }
    }
    Ok(())
}

/// The target of `p` when `p` is a symbolic link whose target does not exist.
fn dangling(p: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(p).ok()?;
    if !meta.file_type().is_symlink() || std::fs::metadata(p).is_ok() {
        return None;
    }
    std::fs::read_link(p).ok()
}

#[cfg(target_os = "linux")]
fn libc_o_nofollow() -> i32 {
    0o400_000
}

#[cfg(target_os = "macos")]
fn libc_o_nofollow() -> i32 {
    0x0100
}

/// Default per-process size limit of a trace (`SEEDANCE_TRACE_MAX_BYTES`): 64 MiB. A loop
/// of failing calls wrote about 65 MB/s of `call_failed` records before repeats were
/// counted instead (`crate::schema::REPEAT_RECORDS`); the limit bounds what any other
/// flood can take.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// Serializes records and queues them for the background writer thread.
pub struct TraceWriter {
    sink: NonBlocking,
    /// Bytes of lines accepted so far, and the most that may be.
    bytes: AtomicU64,
    max_bytes: u64,
    /// Records not written because the limit was reached.
    over_limit: AtomicU64,
    /// Set when [`TraceWriter::take_limit_reached`] first reported the limit.
    limit_reported: std::sync::atomic::AtomicBool,
    dropped: ErrorCounter,
    serialize_errors: AtomicU64,
    seq: Arc<AtomicU64>,
    pid: u32,
    guard: Mutex<Option<WorkerGuard>>,
    /// Lines the writer thread has written to the file.
    written: Arc<AtomicU64>,
    /// Lines lost to a failed write (and every line after it).
    write_failed: Arc<AtomicU64>,
}

/// What the writer thread is told when a write fails: called once, on that thread.
pub type WriteErrorHook = Box<dyn FnOnce(&io::Error) + Send + 'static>;

/// The trace file as the writer thread sees it: counts the lines it writes, so that
/// [`TraceWriter::close`] can wait until every queued line is on disk, and after a failed
/// write counts lines as lost instead of writing them.
struct CountingFile {
    file: Owned,
    lines: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    broken: bool,
    on_error: Option<WriteErrorHook>,
    /// Bytes of whole lines in the file: where a cut write is truncated back to.
    whole: u64,
    /// The sequence numbers of the records, for the `trace_cut` record's.
    seq: Arc<AtomicU64>,
}

impl CountingFile {
    /// After a refused write: the file is cut back to its last whole line (a write the
    /// disk took only in part leaves its allocated room there), and a `trace_cut` record
    /// saying why is written where it fits. Both are best effort: a file that takes
    /// nothing more keeps its cut line, which the analyzer skips and counts.
    fn mark_cut(&mut self, e: &io::Error) {
        use std::io::Seek;
        let whole = self.whole;
        let Some(f) = self.file.file.as_mut() else {
            return;
        };
        if f.set_len(whole).is_err() || f.seek(io::SeekFrom::Start(whole)).is_err() {
            return;
        }
        let record = Record {
            v: SCHEMA_VERSION,
            // The next number, not taken: nothing is written after this record, and close
            // waits only for the records it counts.
            seq: self.seq.load(Ordering::Relaxed),
            ts_ns: now_ns(),
            pid: std::process::id(),
            tid: 0,
            event: Event::TraceCut(TraceCut {
                error: e.to_string(),
                os_error: e.raw_os_error(),
            }),
        };
        if let Ok(mut line) = serde_json::to_vec(&record) {
            line.push(b'\n');
            if f.write_all(&line).is_err() {
                let _ = f.set_len(whole);
            }
        }
    }
}

/// The trace file's descriptor, checked before every use: the program may close any
/// descriptor (a daemon closes every one from 3 up) and get the same number back for a
/// file of its own. Before each write the descriptor's device and inode (`fstat`) are
/// compared with the file's; when they differ, or the descriptor is closed, the number is
/// forgotten without being closed (it is the program's now) and the file is opened again
/// by its path (append, `O_NOFOLLOW`), kept only if it is the same file. When that is
/// impossible (removed, replaced, no descriptor left) nothing more is written. The same
/// check comes before the descriptor is closed at the end. Between the check and the
/// write the program could still close and reuse the descriptor (two system calls, not
/// one); the window is that of one `write`.
struct Owned {
    file: Option<File>,
    path: PathBuf,
    /// `(st_dev, st_ino)` of the file when it was created.
    id: (u64, u64),
}

fn identity(f: &File) -> Option<(u64, u64)> {
    f.metadata().ok().map(|m| (m.dev(), m.ino()))
}

impl Owned {
    fn new(file: File, path: PathBuf) -> Owned {
        let id = identity(&file).unwrap_or((u64::MAX, u64::MAX));
        Owned {
            file: Some(file),
            path,
            id,
        }
    }

    /// The file, opened again if its descriptor no longer refers to it; `Err` when it
    /// cannot be had (nothing more is then written).
    fn checked(&mut self) -> io::Result<&mut File> {
        let ours = self
            .file
            .as_ref()
            .is_some_and(|f| identity(f) == Some(self.id));
        if !ours {
            if let Some(f) = self.file.take() {
                // The descriptor is the program's now (or closed): never close it.
                let _ = std::os::unix::io::IntoRawFd::into_raw_fd(f);
            }
            let f = OpenOptions::new()
                .append(true)
                .custom_flags(libc_o_nofollow())
                .open(&self.path)?;
            if identity(&f) != Some(self.id) {
                return Err(io::Error::other(format!(
                    "{} is no longer the trace file this process created",
                    shown(&self.path)
                )));
            }
            self.file = Some(f);
        }
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("no trace file"))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            if identity(&f) != Some(self.id) {
                let _ = std::os::unix::io::IntoRawFd::into_raw_fd(f);
            }
        }
    }
}

fn newlines(buf: &[u8]) -> u64 {
    buf.iter().filter(|&&b| b == b'\n').count() as u64
}

impl Write for CountingFile {
    /// Takes the whole of `buf` (one or more whole lines) or, once a write has failed,
    /// none of it: never an error, so the worker thread goes on draining the queue.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.broken {
            match self.file.checked().and_then(|f| f.write_all(buf)) {
                Ok(()) => {
                    self.lines.fetch_add(newlines(buf), Ordering::Release);
                    self.whole += buf.len() as u64;
                    return Ok(buf.len());
                }
                Err(e) => {
                    self.broken = true;
                    self.mark_cut(&e);
                    if let Some(hook) = self.on_error.take() {
                        hook(&e);
                    }
                }
            }
        }
        self.failed.fetch_add(newlines(buf), Ordering::Release);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.broken {
            return Ok(());
        }
        match self.file.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl TraceWriter {
    /// Starts the writer thread for `file`. The thread is named `seedance-trace`.
    /// `on_error` is called once, on that thread, if a write fails (disk full, I/O error);
    /// from then on nothing more is written and lines are counted as dropped.
    pub fn start(file: TraceFile, on_error: WriteErrorHook) -> TraceWriter {
        TraceWriter::start_with_limit(file, on_error, u64::MAX)
    }

    /// [`start`](Self::start), writing at most `max_bytes` bytes of records other than the
    /// exit summary and `call_failed_repeats` (which are always written, so that the end
    /// of the trace still says what happened); records past the limit are counted
    /// ([`TraceWriter::over_limit`]), not written.
    pub fn start_with_limit(
        file: TraceFile,
        on_error: WriteErrorHook,
        max_bytes: u64,
    ) -> TraceWriter {
        let written = Arc::new(AtomicU64::new(0));
        let write_failed = Arc::new(AtomicU64::new(0));
        let seq = Arc::new(AtomicU64::new(0));
        let (sink, guard) = NonBlockingBuilder::default()
            .lossy(true)
            .buffered_lines_limit(QUEUE_LINES)
            .thread_name("seedance-trace")
            .finish(CountingFile {
                file: Owned::new(file.file, file.path),
                lines: Arc::clone(&written),
                failed: Arc::clone(&write_failed),
                broken: false,
                on_error: Some(on_error),
                whole: 0,
                seq: Arc::clone(&seq),
            });
        let dropped = sink.error_counter();
        TraceWriter {
            sink,
            bytes: AtomicU64::new(0),
            max_bytes,
            over_limit: AtomicU64::new(0),
            limit_reported: std::sync::atomic::AtomicBool::new(false),
            dropped,
            written,
            serialize_errors: AtomicU64::new(0),
            seq,
            pid: std::process::id(),
            guard: Mutex::new(Some(guard)),
            write_failed,
        }
    }

    /// Queues one event, stamped with the next sequence number, the current wall-clock time
    /// and thread id `tid`. Never blocks on I/O; a full queue drops the line and counts it.
    pub fn emit(&self, tid: u64, event: Event) {
        let exempt = matches!(event, Event::ExitSummary(_) | Event::CallFailedRepeats(_));
        let record = Record {
            v: SCHEMA_VERSION,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            ts_ns: now_ns(),
            pid: self.pid,
            tid,
            event,
        };
        match serde_json::to_vec(&record) {
            Ok(mut line) => {
                line.push(b'\n');
                let len = line.len() as u64;
                let before = self.bytes.fetch_add(len, Ordering::Relaxed);
                if !exempt && before.saturating_add(len) > self.max_bytes {
                    self.bytes.fetch_sub(len, Ordering::Relaxed);
                    self.over_limit.fetch_add(1, Ordering::Relaxed);
                    // Its sequence number stays unused: a gap in `seq` is a record not
                    // written.
                    return;
                }
                // NonBlocking counts a full queue itself; write errors cannot happen here.
                let mut sink = self.sink.clone();
                let _ = sink.write_all(&line);
            }
            Err(_) => {
                self.serialize_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Records not written because the trace reached its size limit.
    pub fn over_limit(&self) -> u64 {
        self.over_limit.load(Ordering::Relaxed)
    }

    /// `true` once, after the first record over the size limit (for the one line that
    /// says so).
    pub fn take_limit_reached(&self) -> bool {
        self.over_limit() > 0 && !self.limit_reported.swap(true, Ordering::Relaxed)
    }

    /// The size limit, bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Lines the writer thread has written to the file so far (with [`dropped`](Self::dropped),
    /// how far the writing has come: the exit waits while it advances).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Records dropped so far: the queue was full, a record failed to serialize, or the
    /// file refused a write (that record and every later one).
    pub fn dropped(&self) -> u64 {
        self.dropped.dropped_lines() as u64
            + self.serialize_errors.load(Ordering::Relaxed)
            + self.write_failed.load(Ordering::Acquire)
    }

    /// Flushes every queued line to the file and stops the writer thread (waits at most
    /// [`CLOSE_WAIT`] for the queue to drain). Later [`emit`](Self::emit) calls are dropped. Idempotent.
    pub fn close(&self) {
        // tracing-appender's guard waits at most one second for its thread to drain the
        // queue; on a loaded machine that is not always enough (seen in CI with 32 busy
        // threads in another process). Wait here, up to CLOSE_WAIT, until every line that
        // was queued and not dropped has been written.
        let deadline = std::time::Instant::now() + CLOSE_WAIT;
        loop {
            let queued = self.seq.load(Ordering::Relaxed);
            let done = self.written.load(Ordering::Acquire) + self.dropped() + self.over_limit();
            if done >= queued || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let guard = match self.guard.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        drop(guard);
    }
}

/// Nanoseconds since the Unix epoch, 0 if the clock is before it.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Event, ExitSummary};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_lines_with_sequence_and_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let file = TraceFile::create(dir.path(), "host/x", 7, 99).unwrap();
        let path = file.path.clone();
        assert!(
            path.ends_with("seedance-host_x-7-99.jsonl"),
            "{}",
            path.display()
        );
        let w = TraceWriter::start(file, Box::new(|e| panic!("write failed: {e}")));
        for _ in 0..3 {
            w.emit(5, Event::ExitSummary(ExitSummary::default()));
        }
        w.close();
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<Record>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, vec![0, 1, 2]);
        assert_eq!(w.dropped(), 0);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn refuses_existing_file_and_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("seedance-h-1-2.jsonl")).unwrap();
        let err = TraceFile::create(dir.path(), "h", 1, 2).err().unwrap();
        assert!(matches!(err, WriterError::Io(..)), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn refuses_world_writable_dir_without_sticky_bit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = TraceFile::create(dir.path(), "h", 1, 2).err().unwrap();
        assert!(matches!(err, WriterError::UnsafeDirectory(_)), "{err}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(TraceFile::create(dir.path(), "h", 1, 2).is_ok());
    }

    #[test]
    fn creates_a_missing_directory_and_parents_mode_0700() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b/traces");
        let f = TraceFile::create(&dir, "h", 1, 2).unwrap();
        assert_eq!(f.path, dir.join("seedance-h-1-2.jsonl"));
        for p in [root.path().join("a"), root.path().join("a/b"), dir.clone()] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            // 0700 before the umask; a umask never adds bits.
            assert_eq!(mode & !0o700, 0, "{}: {mode:o}", p.display());
            assert_eq!(mode & 0o700, 0o700, "{}: {mode:o}", p.display());
        }
    }

    #[test]
    fn creates_nothing_below_a_world_writable_dir_without_sticky_bit() {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let dir = root.path().join("a/traces");
        let err = TraceFile::create(&dir, "h", 1, 2).err().unwrap();
        assert!(matches!(err, WriterError::UnsafeAncestor { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "{} does not exist and {} is world-writable without the sticky bit; refusing \
                 to create a trace directory there",
                dir.display(),
                root.path().display()
            )
        );
        assert!(!root.path().join("a").exists());
    }

    #[test]
    fn a_directory_that_cannot_be_created_says_what_was_tried() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("file"), b"").unwrap();
        let dir = root.path().join("file/traces");
        let err = TraceFile::create(&dir, "h", 1, 2).err().unwrap();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "{} does not exist; tried to create it (mode 0700) below {}, but creating {} failed: ",
                dir.display(),
                root.path().join("file").display(),
                dir.display()
            )),
            "{text}"
        );
    }

    #[test]
    fn a_dangling_symlink_as_the_directory_says_so() {
        let root = tempfile::tempdir().unwrap();
        let link = root.path().join("traces");
        std::os::unix::fs::symlink(root.path().join("gone"), &link).unwrap();
        let err = TraceFile::create(&link, "h", 1, 2).err().unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is a symbolic link to {}, which does not exist; create that directory or \
                 point SEEDANCE_TRACE_DIR at an existing one",
                link.display(),
                root.path().join("gone").display()
            )
        );
        assert!(!root.path().join("gone").exists());
    }

    /// /dev/full refuses every write with ENOSPC, as a full disk does: the hook hears it
    /// once, every record counts as dropped, and close returns at once instead of waiting
    /// CLOSE_WAIT for lines that will never be written.
    #[test]
    fn a_full_disk_drops_and_reports_once_without_stalling_close() {
        let file = TraceFile {
            path: PathBuf::from("/dev/full"),
            file: OpenOptions::new().write(true).open("/dev/full").unwrap(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let w = TraceWriter::start(file, Box::new(move |e| tx.send(e.raw_os_error()).unwrap()));
        for _ in 0..5 {
            w.emit(1, Event::ExitSummary(ExitSummary::default()));
        }
        let started = std::time::Instant::now();
        w.close();
        assert!(
            started.elapsed() < CLOSE_WAIT / 2,
            "close waited {:?}",
            started.elapsed()
        );
        assert_eq!(w.dropped(), 5);
        // 28: ENOSPC.
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![Some(28)]);
    }

    /// Past the size limit records are counted, not written, and close does not wait for
    /// them; the exit summary and call_failed_repeats are written anyway.
    #[test]
    fn records_past_the_size_limit_are_counted_not_written() {
        use crate::schema::{CallFailed, CallFailedRepeats};
        let dir = tempfile::tempdir().unwrap();
        let file = TraceFile::create(dir.path(), "h", 1, 2).unwrap();
        let path = file.path.clone();
        let w = TraceWriter::start_with_limit(file, Box::new(|e| panic!("{e}")), 1000);
        let failed = || {
            Event::CallFailed(CallFailed {
                function: "cuMemAlloc_v2".into(),
                result: 2,
                result_name: Some("CUDA_ERROR_OUT_OF_MEMORY".into()),
                args: Default::default(),
            })
        };
        for _ in 0..100 {
            w.emit(1, failed());
        }
        assert!(w.take_limit_reached());
        assert!(!w.take_limit_reached(), "said once");
        w.emit(
            1,
            Event::CallFailedRepeats(CallFailedRepeats {
                function: "cuMemAlloc_v2".into(),
                result: 2,
                result_name: None,
                count: 5,
                first_ts_ns: 1,
                last_ts_ns: 2,
                last_tid: 1,
                first_args: Default::default(),
                last_args: Default::default(),
            }),
        );
        w.emit(1, Event::ExitSummary(ExitSummary::default()));
        let started = std::time::Instant::now();
        w.close();
        assert!(started.elapsed() < CLOSE_WAIT / 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let written_failed = lines
            .iter()
            .filter(|l| l.contains("\"call_failed\""))
            .count();
        assert_eq!(written_failed as u64 + w.over_limit(), 100);
        assert!(
            written_failed > 0 && written_failed < 20,
            "{written_failed}"
        );
        let kept: usize = lines[..written_failed].iter().map(|l| l.len() + 1).sum();
        assert!(kept <= 1000, "{kept}");
        assert!(lines[written_failed].contains("\"call_failed_repeats\""));
        assert!(lines[written_failed + 1].contains("\"exit_summary\""));
        assert_eq!(w.dropped(), 0);
    }
}
