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
//! Parsing a line is [`crate::read::parse`]'s job, splitting a stream into lines
//! [`crate::read::reader`]'s; both are re-exported here.

use crate::aggregate::{Aggregate, FileState};
pub use crate::read::line::{CallFailedRef, Head, Line, RawArgs, KNOWN_KINDS};
use crate::read::parse::parse_text;
pub use crate::read::parse::{parse_line, Str};
pub use crate::read::reader::{read_line_bounded, split_lines, Block, LineReader, RawLine};
use crate::Error;
use flate2::read::MultiGzDecoder;
use rayon::prelude::*;
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

/// The object-storage URLs among `paths` (in order), and the local paths.
pub fn split_urls(paths: &[PathBuf]) -> (Vec<String>, Vec<PathBuf>) {
    let mut urls = Vec::new();
    let mut local = Vec::new();
    for p in paths {
        match p.to_str().filter(|s| crate::read::remote_url::is_url(s)) {
            Some(u) => urls.push(u.to_string()),
            None => local.push(p.clone()),
        }
    }
    (urls, local)
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

/// Reads every trace file under `paths` in parallel and merges the aggregates. A path that
/// is an object-storage URL (`s3://bucket/prefix/`, [`crate::read::remote_url::is_url`]) is read
/// through `crate::read::remote` (the `remote` feature; without it, an error).
pub fn analyze_paths(paths: &[PathBuf], options: &Options) -> Result<Aggregate, Error> {
    let (urls, local) = split_urls(paths);
    let (files, errors) = collect_files(&local)?;
    let mut agg = files
        .par_iter()
        .map(|f| read_file(f, options))
        .reduce(Aggregate::default, Aggregate::merge);
    for u in urls {
        agg = agg.merge(read_url(&u, options)?);
    }
    for (p, e) in errors {
        agg.counters.note_unreadable(&p.display().to_string(), e);
    }
    agg.finish();
    Ok(agg)
}

/// The aggregate of an object-storage URL (`crate::read::remote`, the `remote` feature).
#[cfg(feature = "remote")]
fn read_url(url: &str, options: &Options) -> Result<Aggregate, Error> {
    crate::read::remote::analyze_url(url, options).map_err(Error::Remote)
}

/// Without the `remote` feature an object-storage URL is an error naming the feature.
#[cfg(not(feature = "remote"))]
fn read_url(url: &str, _options: &Options) -> Result<Aggregate, Error> {
    Err(Error::Remote(crate::read::remote_url::unsupported(url)))
}

/// Reads one file into a fresh aggregate. I/O errors are recorded in it, never returned.
pub fn read_file(path: &Path, options: &Options) -> Aggregate {
    read_file_with(path, options, None)
}

/// Called with every line that [`Aggregate::record`] counts as a record (what the
/// report's `input.records` counts): the line's text and its classification. Lines of a file
/// that turns out not to be a trace never reach it. `export` builds its log records here,
/// so that it reads exactly the records `summary` reads ([`crate::export::otlp`]).
pub type RecordHook<'h> = &'h mut dyn FnMut(&[u8], &Line<'_>);

/// [`read_file`], handing every record to `hook` as it goes by.
pub fn read_file_with(path: &Path, options: &Options, hook: Option<RecordHook<'_>>) -> Aggregate {
    let name = path.display().to_string();
    match File::open(path) {
        Ok(f) => read_reader(&name, f, options, hook),
        Err(e) => {
            let mut agg = Aggregate::default();
            agg.counters.files_seen += 1;
            agg.counters.note_unreadable(&name, e.to_string());
            agg
        }
    }
}

/// [`read_file_with`] of a file's bytes already in memory (an object fetched from object
/// storage, `crate::read::remote`), named `name` in the report.
pub fn read_bytes_with(
    name: &str,
    data: &[u8],
    options: &Options,
    hook: Option<RecordHook<'_>>,
) -> Aggregate {
    read_reader(name, data, options, hook)
}

fn read_reader<R: Read>(
    name: &str,
    inner: R,
    options: &Options,
    hook: Option<RecordHook<'_>>,
) -> Aggregate {
    let name = name.to_string();
    let mut agg = Aggregate::default();
    agg.counters.files_seen += 1;
    let mut raw = BufReader::with_capacity(
        64 << 10,
        Counting {
            inner,
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
        let o = read_stream(&mut reader, &name, &mut agg, hook);
        agg.counters.bytes += reader.get_ref().get_ref().bytes;
        o
    } else {
        let o = read_stream(&mut raw, &name, &mut agg, hook);
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
struct Stream<'n, 'h> {
    name: &'n str,
    /// Sees every record counted ([`RecordHook`]).
    hook: Option<RecordHook<'h>>,
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

impl Stream<'_, '_> {
    /// Takes one line (`None`: oversized) and its text; returns the outcome when the file
    /// ends here.
    fn line(
        &mut self,
        agg: &mut Aggregate,
        line: Option<Line<'_>>,
        text: &[u8],
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
                    // The lines `Aggregate::record` counts as records: a head, and not a
                    // known kind with wrong fields.
                    if let Some(hook) = self.hook.as_mut() {
                        if !matches!(record, Line::BadRecord(..)) {
                            hook(text, &record);
                        }
                    }
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
                    let t = text.get(range).unwrap_or("");
                    let line = (!raw.oversized).then(|| parse_text(t));
                    if let Some(o) = self.line(agg, line, t.as_bytes(), raw) {
                        return Some(o);
                    }
                }
            }
            Err(_) => {
                for (range, raw) in split_lines(block, MAX_LINE_BYTES) {
                    let t = &block[range];
                    let line = (!raw.oversized).then(|| parse_line(t));
                    if let Some(o) = self.line(agg, line, t, raw) {
                        return Some(o);
                    }
                }
            }
        }
        None
    }
}

fn read_stream<R: Read>(
    reader: &mut R,
    name: &str,
    agg: &mut Aggregate,
    hook: Option<RecordHook<'_>>,
) -> Outcome {
    let mut lines = LineReader::new(READ_BUFFER, MAX_LINE_BYTES);
    let mut s = Stream {
        name,
        hook,
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
                let text = line;
                let line = (!raw.oversized).then(|| parse_line(text));
                s.line(agg, line, text, raw)
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
