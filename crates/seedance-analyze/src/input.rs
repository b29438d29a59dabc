//! Reading traces: finding files, decompressing, splitting lines, parsing records.
//!
//! Every file is read in blocks of [`READ_BUFFER`] bytes into one reused buffer
//! ([`LineReader`]); the whole lines of a block are checked for UTF-8 at once and parsed in
//! place, without copying; lines longer than [`MAX_LINE_BYTES`] are skipped (and counted)
//! without being held in memory. A file is
//! gzip-compressed when it starts with the gzip magic bytes, whatever its name.
//!
//! A file is taken for a trace when the first line of it that is valid JSON is a trace
//! record; a file whose first JSON line is something else, or which has no JSON line among
//! its first [`DETECT_LINES`] lines, is skipped and counted (a directory of traces often
//! holds a README or a log too).
//!
//! [`parse_line`] parses in two steps: one pass into borrowed fields (the envelope, the
//! `event` kind and the `call_failed` fields, which are most of a big trace), then, only for
//! the rare kinds (`session_start`, `exit_summary`, `device_fault`, `device_fallback`,
//! `launch_fault`, `alloc_fault`), a second pass into the lenient types of
//! [`crate::records`].

use crate::aggregate::{Aggregate, FileState};
use crate::records::{
    AllocFaultInfo, CallFailedRepeatsInfo, DeviceFallbackInfo, DeviceFaultInfo, ExitInfo,
    LaunchFaultInfo, LifetimeFaultInfo, LifetimeRepairInfo, SessionInfo, StrayInfo,
};
use crate::Error;
use flate2::read::MultiGzDecoder;
use rayon::prelude::*;
use serde::de::{self, IgnoredAny, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Lines longer than this (bytes, after decompression) are skipped and counted as
/// oversized. No record the shim writes comes near it.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// How many lines of a file are looked at to decide whether it is a trace at all.
pub const DETECT_LINES: usize = 64;

/// Most bytes of one over-long line read before the file is known to be a trace: past
/// this (twice [`MAX_LINE_BYTES`]) the file is not a trace (`/dev/zero`, a binary blob).
pub const NOT_TRACE_SKIP_LIMIT: u64 = 2 * MAX_LINE_BYTES as u64;

/// Size of each read from a file (after decompression), and of its line buffer.
pub const READ_BUFFER: usize = 256 << 10;

/// Options of an analysis run.
#[derive(Default)]
pub struct Options<'a> {
    /// Called from the reading threads with the number of bytes just read from disk
    /// (compressed bytes for gzip files); drives a progress bar.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
}

/// A string that borrows from the line when it has no escapes and is owned otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The first, loose pass over a line: envelope, kind, and the `call_failed` fields.
/// Unknown fields are skipped without being built.
#[derive(Deserialize)]
struct Flat<'a> {
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
    #[serde(borrow)]
    event: Option<Str<'a>>,
    #[serde(borrow)]
    function: Option<Str<'a>>,
    result: Option<u32>,
    #[serde(borrow)]
    result_name: Option<Str<'a>>,
    #[serde(borrow)]
    args: Option<&'a RawValue>,
}

/// The fallback pass, for records of unknown kinds whose fields clash in type with the
/// `call_failed` fields of [`Flat`].
#[derive(Deserialize)]
struct Envelope<'a> {
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
    #[serde(borrow)]
    event: Option<Str<'a>>,
}

/// The envelope fields every record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Schema version.
    pub v: u32,
    /// Sequence number within the process.
    pub seq: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id (0 when absent).
    pub tid: u64,
}

/// A `call_failed` event, borrowing from the line where it can.
#[derive(Debug, Clone)]
pub struct CallFailedRef<'a> {
    /// Exported symbol called.
    pub function: Cow<'a, str>,
    /// CUresult number.
    pub result: u32,
    /// CUresult name as the shim wrote it, if it did.
    pub result_name: Option<Cow<'a, str>>,
    /// The arguments object, unparsed.
    pub args: Option<RawArgs<'a>>,
}

/// The JSON text of a value, checked to be valid JSON, borrowed from the line (what a
/// `&serde_json::value::RawValue` holds, without building one: the fast path of
/// [`parse_line`] validates the text itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawArgs<'a>(pub(crate) &'a str);

impl<'a> RawArgs<'a> {
    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }
}

/// One classified line.
#[derive(Debug)]
pub enum Line<'a> {
    /// Empty or whitespace only.
    Blank,
    /// Not JSON (or not UTF-8): garbage or a cut line.
    Malformed,
    /// Valid JSON, but not a trace record (no envelope or no `event`).
    NotRecord,
    /// A record of a known kind whose fields do not match the schema.
    BadRecord(Head, &'static str),
    /// A `session_start` record.
    SessionStart(Head, Box<SessionInfo>),
    /// A `call_failed` record.
    CallFailed(Head, CallFailedRef<'a>),
    /// An `exit_summary` record.
    ExitSummary(Head, Box<ExitInfo>),
    /// A `device_fault` record (schema 2).
    DeviceFault(Head, Box<DeviceFaultInfo>),
    /// A `device_fallback` record (schema 2).
    DeviceFallback(Head, Box<DeviceFallbackInfo>),
    /// A `launch_fault` record (schema 3).
    LaunchFault(Head, Box<LaunchFaultInfo>),
    /// An `alloc_fault` record (schema 3).
    AllocFault(Head, Box<AllocFaultInfo>),
    /// A `lifetime_fault` record (schema 4).
    LifetimeFault(Head, Box<LifetimeFaultInfo>),
    /// A `lifetime_repair` record (schema 4).
    LifetimeRepair(Head, Box<LifetimeRepairInfo>),
    /// A `stray_context` record (schema 5).
    StrayContext(Head, Box<StrayInfo>),
    /// A `host_hazard` record (schema 5): read with the fields it shares with a
    /// `lifetime_fault` (`function`, `kind`, `repaired`, `explanation`).
    HostHazard(Head, Box<LifetimeFaultInfo>),
    /// A `call_failed_repeats` record (schema 5).
    CallFailedRepeats(Head, Box<CallFailedRepeatsInfo>),
    /// A record of a kind this analyzer does not know (a later schema version).
    Unknown(Head, Cow<'a, str>),
}

impl Line<'_> {
    /// The envelope, for lines that are trace records.
    pub fn head(&self) -> Option<Head> {
        match self {
            Line::BadRecord(h, _)
            | Line::SessionStart(h, _)
            | Line::CallFailed(h, _)
            | Line::ExitSummary(h, _)
            | Line::DeviceFault(h, _)
            | Line::DeviceFallback(h, _)
            | Line::LaunchFault(h, _)
            | Line::AllocFault(h, _)
            | Line::LifetimeFault(h, _)
            | Line::LifetimeRepair(h, _)
            | Line::StrayContext(h, _)
            | Line::HostHazard(h, _)
            | Line::CallFailedRepeats(h, _)
            | Line::Unknown(h, _) => Some(*h),
            _ => None,
        }
    }
}

fn head_of(
    v: Option<u32>,
    seq: Option<u64>,
    ts_ns: Option<u64>,
    pid: Option<u32>,
    tid: Option<u64>,
) -> Option<Head> {
    Some(Head {
        v: v?,
        seq: seq?,
        ts_ns: ts_ns?,
        pid: pid?,
        tid: tid.unwrap_or(0),
    })
}

/// Kinds of event this analyzer knows.
pub const KNOWN_KINDS: [&str; 12] = [
    "session_start",
    "call_failed",
    "exit_summary",
    "device_fault",
    "device_fallback",
    "launch_fault",
    "alloc_fault",
    "lifetime_fault",
    "lifetime_repair",
    "stray_context",
    "host_hazard",
    "call_failed_repeats",
];

/// Parses one line (without its newline). Never panics, whatever the bytes.
///
/// A `call_failed` record in the shim's usual shape is read by a hand-written scanner
/// ([`crate::fast`]); every other line, and any line the scanner is unsure of, by serde.
pub fn parse_line(line: &[u8]) -> Line<'_> {
    let line = trim_ascii(line);
    if line.first() == Some(&b'{') {
        if let Some((head, c)) = std::str::from_utf8(line)
            .ok()
            .and_then(crate::fast::call_failed)
        {
            return Line::CallFailed(head, c);
        }
    }
    parse_line_serde(line)
}

/// [`parse_line`] of a line known to be UTF-8 (the same answer, without checking it again).
pub(crate) fn parse_text(line: &str) -> Line<'_> {
    let line = line.trim_ascii();
    if line.starts_with('{') {
        if let Some((head, c)) = crate::fast::call_failed(line) {
            return Line::CallFailed(head, c);
        }
    }
    parse_line_serde(line.as_bytes())
}

/// [`parse_line`] without the fast path: serde only.
pub(crate) fn parse_line_serde(line: &[u8]) -> Line<'_> {
    let line = trim_ascii(line);
    if line.is_empty() {
        return Line::Blank;
    }
    if line[0] != b'{' {
        // Records are objects; anything else is at best some other JSON.
        return if serde_json::from_slice::<IgnoredAny>(line).is_ok() {
            Line::NotRecord
        } else {
            Line::Malformed
        };
    }
    match serde_json::from_slice::<Flat>(line) {
        Ok(f) => {
            let (Some(head), Some(kind)) = (head_of(f.v, f.seq, f.ts_ns, f.pid, f.tid), f.event)
            else {
                return Line::NotRecord;
            };
            classify(
                line,
                head,
                kind.0,
                f.function,
                f.result,
                f.result_name,
                f.args,
            )
        }
        Err(_) => match serde_json::from_slice::<Envelope>(line) {
            Ok(e) => {
                let (Some(head), Some(kind)) =
                    (head_of(e.v, e.seq, e.ts_ns, e.pid, e.tid), e.event)
                else {
                    return Line::NotRecord;
                };
                if KNOWN_KINDS.contains(&kind.0.as_ref()) {
                    Line::BadRecord(head, known_kind(&kind.0))
                } else {
                    Line::Unknown(head, kind.0)
                }
            }
            Err(_) => {
                if serde_json::from_slice::<IgnoredAny>(line).is_ok() {
                    Line::NotRecord
                } else {
                    Line::Malformed
                }
            }
        },
    }
}

fn known_kind(kind: &str) -> &'static str {
    KNOWN_KINDS
        .iter()
        .copied()
        .find(|k| *k == kind)
        .unwrap_or("unknown")
}

fn classify<'a>(
    line: &'a [u8],
    head: Head,
    kind: Cow<'a, str>,
    function: Option<Str<'a>>,
    result: Option<u32>,
    result_name: Option<Str<'a>>,
    args: Option<&'a RawValue>,
) -> Line<'a> {
    match kind.as_ref() {
        "call_failed" => match (function, result) {
            (Some(function), Some(result)) => Line::CallFailed(
                head,
                CallFailedRef {
                    function: function.0,
                    result,
                    result_name: result_name.map(|s| s.0),
                    args: args.map(|a| RawArgs(a.get())),
                },
            ),
            _ => Line::BadRecord(head, "call_failed"),
        },
        "session_start" => match serde_json::from_slice::<SessionInfo>(line) {
            Ok(s) => Line::SessionStart(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "session_start"),
        },
        "exit_summary" => match serde_json::from_slice::<ExitInfo>(line) {
            Ok(s) => Line::ExitSummary(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "exit_summary"),
        },
        "device_fault" => match serde_json::from_slice::<DeviceFaultInfo>(line) {
            Ok(s) => Line::DeviceFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "device_fault"),
        },
        "device_fallback" => match serde_json::from_slice::<DeviceFallbackInfo>(line) {
            Ok(s) => Line::DeviceFallback(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "device_fallback"),
        },
        "launch_fault" => match serde_json::from_slice::<LaunchFaultInfo>(line) {
            Ok(s) => Line::LaunchFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "launch_fault"),
        },
        "alloc_fault" => match serde_json::from_slice::<AllocFaultInfo>(line) {
            Ok(s) => Line::AllocFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "alloc_fault"),
        },
        "lifetime_fault" => match serde_json::from_slice::<LifetimeFaultInfo>(line) {
            Ok(s) => Line::LifetimeFault(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "lifetime_fault"),
        },
        "lifetime_repair" => match serde_json::from_slice::<LifetimeRepairInfo>(line) {
            Ok(s) => Line::LifetimeRepair(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "lifetime_repair"),
        },
        "stray_context" => match serde_json::from_slice::<StrayInfo>(line) {
            Ok(s) => Line::StrayContext(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "stray_context"),
        },
        "host_hazard" => match serde_json::from_slice::<LifetimeFaultInfo>(line) {
            Ok(s) => Line::HostHazard(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "host_hazard"),
        },
        "call_failed_repeats" => match serde_json::from_slice::<CallFailedRepeatsInfo>(line) {
            Ok(s) => Line::CallFailedRepeats(head, Box::new(s)),
            Err(_) => Line::BadRecord(head, "call_failed_repeats"),
        },
        _ => Line::Unknown(head, kind),
    }
}

fn trim_ascii(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// The outcome of reading one raw line from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawLine {
    /// The line ended with a newline (false for the last line of a file cut short).
    pub newline: bool,
    /// The line was longer than the limit; the buffer holds only its start.
    pub oversized: bool,
    /// Bytes the line took in the stream, newline included.
    pub len: u64,
}

/// Reads the next line into `buf` (cleared first), keeping at most `max` bytes of it and
/// discarding the rest. Returns `None` at the end of the stream.
pub fn read_line_bounded<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<RawLine>> {
    buf.clear();
    let mut len = 0u64;
    let mut oversized = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((len > 0).then_some(RawLine {
                newline: false,
                oversized,
                len,
            }));
        }
        let (chunk, used, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !oversized {
            if buf.len() + chunk.len() <= max {
                buf.extend_from_slice(chunk);
            } else {
                oversized = true;
            }
        }
        len += used as u64;
        reader.consume(used);
        if done {
            return Ok(Some(RawLine {
                newline: true,
                oversized,
                len,
            }));
        }
    }
}

/// Splits a stream into lines in place: reads large blocks into one buffer and hands out
/// the whole lines in it as one slice ([`Block::Lines`], split by [`split_lines`]), without
/// copying them. Gives the same lines, lengths and flags as repeated [`read_line_bounded`]
/// calls with the same `max`; a line longer than `max` that has not ended yet is skipped
/// as it streams by (the buffer never holds more than `max` bytes of a line plus one
/// block).
pub struct LineReader {
    buf: Vec<u8>,
    /// Start of the next line in `buf`.
    pos: usize,
    /// End of the data in `buf`.
    end: usize,
    /// `buf[pos..scanned]` is known to hold no newline.
    scanned: usize,
    /// Block size of each read.
    block: usize,
    max: usize,
    eof: bool,
    /// Most bytes of one over-long line skipped before the reader gives up on the stream
    /// (it then ends as if at end of file); `u64::MAX` for no limit.
    skip_limit: u64,
}

/// What [`LineReader::next_block`] hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Block<'a> {
    /// One or more whole lines, each with its newline (a line of it may be over the limit:
    /// [`split_lines`] tells).
    Lines(&'a [u8]),
    /// One line on its own: the last line of the stream when it has no newline, or a line
    /// over the limit that was skipped (empty, `oversized`).
    Line(&'a [u8], RawLine),
}

/// The lines of a [`Block::Lines`]: the range of each in the block, without its newline,
/// and how it was read (`oversized` when longer than `max`).
pub fn split_lines(
    block: &[u8],
    max: usize,
) -> impl Iterator<Item = (std::ops::Range<usize>, RawLine)> + '_ {
    let mut start = 0;
    memchr::memchr_iter(b'\n', block).map(move |nl| {
        let line = start..nl;
        start = nl + 1;
        let raw = RawLine {
            newline: true,
            oversized: line.len() > max,
            len: line.len() as u64 + 1,
        };
        (line, raw)
    })
}

impl LineReader {
    /// A reader handing out lines of at most `max` bytes, reading `block` bytes at a time.
    pub fn new(block: usize, max: usize) -> LineReader {
        let block = block.max(1);
        LineReader {
            buf: vec![0; block],
            pos: 0,
            end: 0,
            scanned: 0,
            block,
            max,
            eof: false,
            skip_limit: u64::MAX,
        }
    }

    /// Limits how much of one over-long line is skipped: past `bytes` the stream is treated
    /// as ended (a device like `/dev/zero` never ends its first line). The line is still
    /// reported, as oversized and without a newline.
    pub fn set_skip_limit(&mut self, bytes: u64) {
        self.skip_limit = bytes;
    }

    /// Reads into the free end of the buffer, after moving the current partial line to the
    /// front and growing the buffer if a whole block does not fit. Returns the bytes read.
    fn fill<R: Read>(&mut self, reader: &mut R) -> io::Result<usize> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.scanned -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() - self.end < self.block {
            self.buf.resize(self.end + self.block, 0);
        }
        loop {
            match reader.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    if n == 0 {
                        self.eof = true;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole lines, or line, or `None` at the end of the stream.
    pub fn next_block<R: Read>(&mut self, reader: &mut R) -> io::Result<Option<Block<'_>>> {
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.buf[self.scanned..self.end]) {
                let start = self.pos;
                self.pos = self.scanned + i + 1;
                self.scanned = self.pos;
                return Ok(Some(Block::Lines(&self.buf[start..self.pos])));
            }
            self.scanned = self.end;
            if self.end - self.pos > self.max {
                let raw = self.skip_line(reader)?;
                return Ok(Some(Block::Line(&[], raw)));
            }
            if self.eof {
                if self.pos == self.end {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.end;
                let raw = RawLine {
                    newline: false,
                    oversized: false,
                    len: (self.end - start) as u64,
                };
                return Ok(Some(Block::Line(&self.buf[start..self.end], raw)));
            }
            self.fill(reader)?;
        }
    }

    /// Skips the rest of a line already known to be over `max` bytes.
    fn skip_line<R: Read>(&mut self, reader: &mut R) -> io::Result<RawLine> {
        let mut len = (self.end - self.pos) as u64;
        self.pos = 0;
        self.end = 0;
        self.scanned = 0;
        loop {
            if self.eof {
                return Ok(oversized(false, len));
            }
            if len >= self.skip_limit {
                self.eof = true;
                return Ok(oversized(false, len));
            }
            self.fill(reader)?;
            if let Some(i) = memchr::memchr(b'\n', &self.buf[..self.end]) {
                self.pos = i + 1;
                self.scanned = self.pos;
                return Ok(oversized(true, len + i as u64 + 1));
            }
            len += self.end as u64;
            self.end = 0;
        }
    }
}

fn oversized(newline: bool, len: u64) -> RawLine {
    RawLine {
        newline,
        oversized: true,
        len,
    }
}

/// Counts the bytes read from the file underneath and reports them to the progress hook.
struct Counting<'a, R> {
    inner: R,
    bytes: u64,
    progress: Option<&'a (dyn Fn(u64) + Sync)>,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        if let Some(p) = self.progress {
            p(n as u64);
        }
        Ok(n)
    }
}

/// The files to read, and the entries met while walking that could not be read.
pub type FileList = (Vec<PathBuf>, Vec<(PathBuf, String)>);

/// Expands `paths` into the list of files to read: files as given, directories walked
/// recursively (entries sorted by name; symbolic links to directories are not followed, to
/// avoid cycles). The same file reached twice is read once.
///
/// Errors only for a path given here that cannot be inspected; unreadable entries met
/// while walking are returned in the second list and counted later.
pub fn collect_files(paths: &[PathBuf]) -> Result<FileList, Error> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| Error::Path(p.clone(), e))?;
        if meta.is_dir() {
            walk(p, &mut files, &mut errors, &mut seen);
        } else {
            push_unique(p.clone(), &mut files, &mut seen);
        }
    }
    Ok((files, errors))
}

fn push_unique(p: PathBuf, files: &mut Vec<PathBuf>, seen: &mut HashSet<PathBuf>) {
    let key = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
    if seen.insert(key) {
        files.push(p);
    }
}

fn walk(
    dir: &Path,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<(PathBuf, String)>,
    seen: &mut HashSet<PathBuf>,
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            errors.push((dir.to_path_buf(), e.to_string()));
            return;
        }
    };
    let mut list: Vec<PathBuf> = Vec::new();
    for e in entries {
        match e {
            Ok(e) => list.push(e.path()),
            Err(e) => errors.push((dir.to_path_buf(), e.to_string())),
        }
    }
    list.sort();
    for p in list {
        let Ok(lmeta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if lmeta.is_dir() {
            walk(&p, files, errors, seen);
        } else if lmeta.is_file() {
            push_unique(p, files, seen);
        } else if lmeta.file_type().is_symlink() {
            // Follow links to files, never to directories.
            if std::fs::metadata(&p).map(|m| m.is_file()).unwrap_or(false) {
                push_unique(p, files, seen);
            }
        }
    }
}

/// Reads every trace file under `paths` in parallel and merges the aggregates.
pub fn analyze_paths(paths: &[PathBuf], options: &Options) -> Result<Aggregate, Error> {
    let (files, errors) = collect_files(paths)?;
    let mut agg = files
        .par_iter()
        .map(|f| read_file(f, options))
        .reduce(Aggregate::default, Aggregate::merge);
    for (p, e) in errors {
        agg.counters.note_unreadable(&p.display().to_string(), e);
    }
    agg.finish();
    Ok(agg)
}

/// Reads one file into a fresh aggregate. I/O errors are recorded in it, never returned.
pub fn read_file(path: &Path, options: &Options) -> Aggregate {
    let name = path.display().to_string();
    let mut agg = Aggregate::default();
    agg.counters.files_seen += 1;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            agg.counters.note_unreadable(&name, e.to_string());
            return agg;
        }
    };
    let mut raw = BufReader::with_capacity(
        64 << 10,
        Counting {
            inner: file,
            bytes: 0,
            progress: options.progress,
        },
    );
    let gzip = match raw.fill_buf() {
        Ok(b) => b.starts_with(&[0x1f, 0x8b]),
        Err(e) => {
            agg.counters.note_unreadable(&name, e.to_string());
            return agg;
        }
    };
    let outcome = if gzip {
        let mut reader = MultiGzDecoder::new(raw);
        let o = read_stream(&mut reader, &name, &mut agg);
        agg.counters.bytes += reader.get_ref().get_ref().bytes;
        o
    } else {
        let o = read_stream(&mut raw, &name, &mut agg);
        agg.counters.bytes += raw.get_ref().bytes;
        o
    };
    match outcome {
        Outcome::Empty => agg.counters.empty_files += 1,
        Outcome::NotTrace => agg.counters.note_skipped(&name),
        Outcome::Trace => {
            agg.counters.files_read += 1;
            if gzip {
                agg.counters.gzip_files += 1;
            }
        }
    }
    agg
}

enum Outcome {
    Empty,
    NotTrace,
    Trace,
}

/// What is known of a file while its lines go by.
struct Stream<'n> {
    name: &'n str,
    file: FileState,
    /// Lines before the first record, while we do not yet know whether this is a trace.
    pending_lines: u64,
    pending_bytes: u64,
    pending_malformed: u64,
    /// Of those, lines over [`MAX_LINE_BYTES`].
    pending_oversized: u64,
    is_trace: bool,
    any_line: bool,
    /// The file's first line is unterminated and starts like a trace record (`{"v":`): a
    /// process killed during its very first write.
    cut_first_record: bool,
}

impl Stream<'_> {
    /// Takes one line (`None`: oversized); returns the outcome when the file ends here.
    fn line(
        &mut self,
        agg: &mut Aggregate,
        line: Option<Line<'_>>,
        raw: RawLine,
    ) -> Option<Outcome> {
        self.any_line = true;
        if !self.is_trace {
            self.pending_lines += 1;
            self.pending_bytes += raw.len;
            match &line {
                None => {
                    self.pending_malformed += 1;
                    self.pending_oversized += 1;
                }
                Some(Line::Malformed) => self.pending_malformed += 1,
                Some(Line::Blank) => {}
                Some(Line::NotRecord) => return Some(Outcome::NotTrace),
                Some(_) => {
                    self.is_trace = true;
                    // The lines before this one were garbage in a trace.
                    agg.counters.lines += self.pending_lines - 1;
                    agg.counters.bytes_uncompressed += self.pending_bytes - raw.len;
                    agg.counters.malformed_lines += self.pending_malformed - self.pending_oversized;
                    agg.counters.oversized_lines += self.pending_oversized;
                }
            }
            if !self.is_trace {
                if self.pending_lines >= DETECT_LINES as u64 {
                    return Some(Outcome::NotTrace);
                }
                return None;
            }
        }
        agg.counters.lines += 1;
        agg.counters.bytes_uncompressed += raw.len;
        match line {
            None => agg.counters.oversized_lines += 1,
            Some(Line::Blank) => {}
            Some(Line::Malformed) | Some(Line::NotRecord) => {
                if raw.newline {
                    agg.counters.malformed_lines += 1
                } else {
                    agg.counters.truncated_lines += 1
                }
            }
            Some(record) => {
                if !raw.newline && matches!(record, Line::BadRecord(..)) {
                    agg.counters.truncated_lines += 1;
                } else {
                    agg.record(&mut self.file, record);
                }
            }
        }
        None
    }

    /// Takes the whole lines of a block, checked for UTF-8 once for all of them (one line
    /// that is not UTF-8 sends the block line by line through the byte parser).
    fn lines(&mut self, agg: &mut Aggregate, block: &[u8]) -> Option<Outcome> {
        match std::str::from_utf8(block) {
            Ok(text) => {
                for (range, raw) in split_lines(block, MAX_LINE_BYTES) {
                    // A newline is always a character boundary: `get` cannot fail.
                    let line = (!raw.oversized).then(|| parse_text(text.get(range).unwrap_or("")));
                    if let Some(o) = self.line(agg, line, raw) {
                        return Some(o);
                    }
                }
            }
            Err(_) => {
                for (range, raw) in split_lines(block, MAX_LINE_BYTES) {
                    let line = (!raw.oversized).then(|| parse_line(&block[range]));
                    if let Some(o) = self.line(agg, line, raw) {
                        return Some(o);
                    }
                }
            }
        }
        None
    }
}

fn read_stream<R: Read>(reader: &mut R, name: &str, agg: &mut Aggregate) -> Outcome {
    let mut lines = LineReader::new(READ_BUFFER, MAX_LINE_BYTES);
    let mut s = Stream {
        name,
        file: agg.begin_file(name),
        pending_lines: 0,
        pending_bytes: 0,
        pending_malformed: 0,
        pending_oversized: 0,
        is_trace: false,
        any_line: false,
        cut_first_record: false,
    };
    loop {
        // Until a record shows this is a trace, one line may not make us read without end.
        lines.set_skip_limit(if s.is_trace {
            u64::MAX
        } else {
            NOT_TRACE_SKIP_LIMIT
        });
        let early = match lines.next_block(reader) {
            Ok(Some(Block::Lines(block))) => s.lines(agg, block),
            Ok(Some(Block::Line(line, raw))) => {
                if !s.any_line && !raw.newline && line.starts_with(b"{\"v\":") {
                    s.cut_first_record = true;
                }
                let line = (!raw.oversized).then(|| parse_line(line));
                s.line(agg, line, raw)
            }
            Ok(None) => break,
            Err(e) => {
                if s.is_trace {
                    agg.counters.note_read_error(s.name, e.to_string());
                } else if !s.any_line {
                    // Not even one line: an unreadable or corrupt (e.g. bad gzip) file.
                    agg.counters.note_unreadable(s.name, e.to_string());
                    return Outcome::NotTrace;
                }
                break;
            }
        };
        if let Some(outcome) = early {
            return outcome;
        }
    }
    agg.end_file(s.file);
    if s.is_trace {
        Outcome::Trace
    } else if s.cut_first_record && s.pending_lines == 1 && s.pending_malformed == 1 {
        // A trace whose only line was cut: a trace file with one truncated line.
        agg.counters.lines += 1;
        agg.counters.bytes_uncompressed += s.pending_bytes;
        agg.counters.truncated_lines += 1;
        Outcome::Trace
    } else if !s.any_line || s.pending_malformed == 0 {
        // Nothing but blank lines counts as empty too.
        Outcome::Empty
    } else {
        Outcome::NotTrace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lines() {
        let data = b"abc\n0123456789\nxyz";
        let mut r = io::BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert_eq!(
            (buf.as_slice(), l.newline, l.oversized, l.len),
            (&b"abc"[..], true, false, 4)
        );
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert!(l.oversized && l.newline);
        assert_eq!(l.len, 11);
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert_eq!((buf.as_slice(), l.newline), (&b"xyz"[..], false));
        assert!(read_line_bounded(&mut r, &mut buf, 5).unwrap().is_none());
    }

    /// Hands out at most `step` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn split_bounded(data: &[u8], max: usize) -> Vec<(Vec<u8>, RawLine)> {
        let mut r = io::BufReader::with_capacity(7, data);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(l) = read_line_bounded(&mut r, &mut buf, max).unwrap() {
            out.push((if l.oversized { Vec::new() } else { buf.clone() }, l));
        }
        out
    }

    fn split_in_place(
        data: &[u8],
        block: usize,
        step: usize,
        max: usize,
    ) -> Vec<(Vec<u8>, RawLine)> {
        let mut r = Trickle { data, step };
        let mut lines = LineReader::new(block, max);
        let mut out = Vec::new();
        while let Some(b) = lines.next_block(&mut r).unwrap() {
            match b {
                Block::Lines(b) => {
                    assert_eq!(b.last(), Some(&b'\n'));
                    for (range, raw) in split_lines(b, max) {
                        out.push((
                            if raw.oversized {
                                Vec::new()
                            } else {
                                b[range].to_vec()
                            },
                            raw,
                        ));
                    }
                }
                Block::Line(l, raw) => out.push((l.to_vec(), raw)),
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn line_reader_splits_like_read_line_bounded(
            data in proptest::collection::vec(
                proptest::prop_oneof![8 => b'a'..=b'z', 1 => proptest::strategy::Just(b'\n')],
                0..3000,
            ),
            block in 1usize..300,
            step in 1usize..500,
            max in 0usize..120,
        ) {
            proptest::prop_assert_eq!(
                split_in_place(&data, block, step, max),
                split_bounded(&data, max)
            );
        }
    }

    #[test]
    fn line_reader_edges() {
        for data in [
            &b""[..],
            b"\n",
            b"\n\n",
            b"a",
            b"abc\n",
            b"abcdef\nxy",
            b"abcdefgh",
        ] {
            for block in 1..10 {
                for max in 0..10 {
                    assert_eq!(
                        split_in_place(data, block, 1000, max),
                        split_bounded(data, max),
                        "{data:?} {block} {max}"
                    );
                }
            }
        }
    }

    #[test]
    fn parses_call_failed_borrowed() {
        let l = br#"{"v":1,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","args":{"bytesize":1}}"#;
        match parse_line(l) {
            Line::CallFailed(h, c) => {
                assert_eq!(h.pid, 42);
                assert!(matches!(c.function, Cow::Borrowed("cuMemAlloc_v2")));
                assert_eq!(c.result, 2);
                assert_eq!(c.args.unwrap().get(), r#"{"bytesize":1}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_kind_with_clashing_field_types() {
        let l = br#"{"v":3,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"launch_explained","result":"moved","function":7}"#;
        match parse_line(l) {
            Line::Unknown(h, k) => {
                assert_eq!(k, "launch_explained");
                assert_eq!(h.v, 3);
            }
            other => panic!("{other:?}"),
        }
        // A known kind with fields of the wrong type is a bad record, not an unknown one.
        let l = br#"{"v":2,"seq":3,"ts_ns":10,"pid":42,"tid":43,"event":"device_fallback","result":"moved","function":7}"#;
        assert!(matches!(
            parse_line(l),
            Line::BadRecord(_, "device_fallback")
        ));
    }

    #[test]
    fn parses_device_fault_and_fallback() {
        let l = br#"{"v":2,"seq":1,"ts_ns":10,"pid":42,"tid":42,"event":"device_fault","function":"cuDeviceGet","requested_ordinal":1,"result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","fault":"invalid_ordinal","visible_devices":1,"explanation":"ordinal 1 requested, 1 device visible","later":[1]}"#;
        match parse_line(l) {
            Line::DeviceFault(h, f) => {
                assert_eq!(h.seq, 1);
                assert_eq!(
                    (f.function.as_str(), f.requested_ordinal, f.result),
                    ("cuDeviceGet", 1, 101)
                );
                assert_eq!(f.fault, "invalid_ordinal");
                assert_eq!(f.explanation, "ordinal 1 requested, 1 device visible");
            }
            other => panic!("{other:?}"),
        }
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fallback","function":"cuDeviceGet","requested_ordinal":1,"chosen_ordinal":0,"chosen_pci_bus_id":null,"reason":"ordinal 1 is not visible","result":0,"explanation":"fix: ordinal 1 -> ordinal 0"}"#;
        match parse_line(l) {
            Line::DeviceFallback(_, f) => {
                assert_eq!((f.requested_ordinal, f.chosen_ordinal), (1, 0));
                assert_eq!(f.chosen_pci_bus_id, None);
            }
            other => panic!("{other:?}"),
        }
        // Without the ordinals the record says nothing: malformed.
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fallback","function":"cuDeviceGet"}"#;
        assert!(matches!(
            parse_line(l),
            Line::BadRecord(_, "device_fallback")
        ));
        let l = br#"{"v":2,"seq":2,"ts_ns":11,"pid":42,"tid":42,"event":"device_fault","requested_ordinal":1}"#;
        assert!(matches!(parse_line(l), Line::BadRecord(_, "device_fault")));
    }

    #[test]
    fn session_topology_is_lenient() {
        let base = r#"{"v":2,"seq":0,"ts_ns":1,"pid":1,"tid":1,"event":"session_start","mode":"fix","devices":[]"#;
        let good = format!(
            r#"{base},"topology":{{"devices":[{{"ordinal":0,"uuid":"GPU-1","compute_mode":{{"unknown":7}},"physical_index":1}}],"visibility":{{"stopped_at":{{"position":2,"entry":"9","reason":"is out of range for 2 GPUs"}}}},"device_order":"PCI_BUS_ID","order_warning":null,"nvml":{{"present":false,"reason":"not found"}}}}}}"#
        );
        match parse_line(good.as_bytes()) {
            Line::SessionStart(_, s) => {
                let t = s.topology.unwrap();
                assert_eq!(t.devices[0].compute_mode.as_deref(), Some("7"));
                assert_eq!(t.devices[0].physical_index, Some(1));
                assert_eq!(t.visibility.stopped_at.unwrap().entry, "9");
                assert_eq!(t.nvml.reason.as_deref(), Some("not found"));
            }
            other => panic!("{other:?}"),
        }
        // A topology of the wrong shape is dropped; the session start is kept.
        let bad = format!(r#"{base},"topology":{{"devices":"none"}}}}"#);
        match parse_line(bad.as_bytes()) {
            Line::SessionStart(_, s) => {
                assert_eq!(s.mode, "fix");
                assert_eq!(s.topology, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn classification() {
        assert!(matches!(parse_line(b"  \r"), Line::Blank));
        assert!(matches!(parse_line(b"{\"v\":1,"), Line::Malformed));
        assert!(matches!(parse_line(b"[1,2]"), Line::NotRecord));
        assert!(matches!(parse_line(b"{\"name\":\"x\"}"), Line::NotRecord));
        assert!(matches!(
            parse_line(br#"{"v":1,"seq":0,"ts_ns":1,"pid":1,"tid":1,"event":"call_failed"}"#),
            Line::BadRecord(_, "call_failed")
        ));
        assert!(matches!(parse_line(b"\xff\xfe"), Line::Malformed));
    }
}
