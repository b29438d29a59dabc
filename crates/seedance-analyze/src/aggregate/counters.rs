//! The input counters of an aggregate: files, bytes, lines and records read, and what was
//! skipped, each capped where it lists names.

use crate::SatAdd;
use std::collections::BTreeMap;

/// Distinct unknown event kinds counted by name; further kinds are counted under
/// [`OTHER_KINDS`].
pub const MAX_KINDS: usize = 256;

/// Name under which unknown kinds past [`MAX_KINDS`] are counted.
pub const OTHER_KINDS: &str = "(other kinds)";

/// Paths kept for each list of problem files (skipped, unreadable); the counts stay exact.
pub const MAX_LISTED_FILES: usize = 20;

/// Input counters: what was read, and what could not be used.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counters {
    /// Files looked at.
    pub files_seen: u64,
    /// Files read as traces.
    pub files_read: u64,
    /// Of those, gzip-compressed.
    pub gzip_files: u64,
    /// Files that are not traces and were skipped.
    pub files_skipped: u64,
    /// The first [`MAX_LISTED_FILES`] skipped files.
    pub skipped_files: Vec<String>,
    /// Files with no content (or only blank lines).
    pub empty_files: u64,
    /// Files (or directories) that could not be opened or read at all.
    pub unreadable_files: u64,
    /// Trace files whose reading stopped early on an I/O or decompression error.
    pub files_with_read_errors: u64,
    /// The first [`MAX_LISTED_FILES`] errors: path and message.
    pub errors: Vec<(String, String)>,
    /// Bytes read from disk (compressed size for gzip files), all files.
    pub bytes: u64,
    /// Bytes of trace lines after decompression.
    pub bytes_uncompressed: u64,
    /// Lines of trace files.
    pub lines: u64,
    /// Records used (known or unknown kind).
    pub records: u64,
    /// Records per event kind, known and unknown.
    pub records_by_kind: BTreeMap<String, u64>,
    /// Lines that are not records: garbage, other JSON, or known kinds with bad fields.
    pub malformed_lines: u64,
    /// Last lines of a file without a newline that do not parse (a trace cut short).
    pub truncated_lines: u64,
    /// Lines over [`crate::read::input::MAX_LINE_BYTES`].
    pub oversized_lines: u64,
    /// Records with a schema version newer than this analyzer's.
    pub newer_schema_records: u64,
    /// Records of unknown kinds, by kind.
    pub unknown_event_kinds: BTreeMap<String, u64>,
}

impl Counters {
    pub(crate) fn note_skipped(&mut self, path: &str) {
        self.files_skipped += 1;
        if self.skipped_files.len() < MAX_LISTED_FILES {
            self.skipped_files.push(path.to_string());
        }
    }

    pub(crate) fn note_unreadable(&mut self, path: &str, error: String) {
        self.unreadable_files += 1;
        self.note_error(path, error);
    }

    pub(crate) fn note_read_error(&mut self, path: &str, error: String) {
        self.files_with_read_errors += 1;
        self.note_error(path, error);
    }

    fn note_error(&mut self, path: &str, error: String) {
        if self.errors.len() < MAX_LISTED_FILES {
            self.errors.push((path.to_string(), error));
        }
    }

    pub(crate) fn note_kind(&mut self, kind: &str, unknown: bool) {
        bump_capped(&mut self.records_by_kind, kind, 1);
        if unknown {
            bump_capped(&mut self.unknown_event_kinds, kind, 1);
        }
    }

    pub(crate) fn merge(&mut self, o: Counters) {
        self.files_seen.sat_add(o.files_seen);
        self.files_read.sat_add(o.files_read);
        self.gzip_files.sat_add(o.gzip_files);
        self.files_skipped.sat_add(o.files_skipped);
        self.skipped_files.extend(o.skipped_files);
        self.empty_files.sat_add(o.empty_files);
        self.unreadable_files.sat_add(o.unreadable_files);
        self.files_with_read_errors
            .sat_add(o.files_with_read_errors);
        self.errors.extend(o.errors);
        self.bytes.sat_add(o.bytes);
        self.bytes_uncompressed.sat_add(o.bytes_uncompressed);
        self.lines.sat_add(o.lines);
        self.records.sat_add(o.records);
        for (k, n) in o.records_by_kind {
            bump_capped(&mut self.records_by_kind, &k, n);
        }
        self.malformed_lines.sat_add(o.malformed_lines);
        self.truncated_lines.sat_add(o.truncated_lines);
        self.oversized_lines.sat_add(o.oversized_lines);
        self.newer_schema_records.sat_add(o.newer_schema_records);
        for (k, n) in o.unknown_event_kinds {
            bump_capped(&mut self.unknown_event_kinds, &k, n);
        }
    }

    /// Sorts the path lists and cuts them to [`MAX_LISTED_FILES`], so that the outcome does
    /// not depend on the order files were merged in.
    pub(crate) fn finish(&mut self) {
        self.skipped_files.sort();
        self.skipped_files.truncate(MAX_LISTED_FILES);
        self.errors.sort();
        self.errors.truncate(MAX_LISTED_FILES);
    }
}

pub(crate) fn bump_capped(map: &mut BTreeMap<String, u64>, key: &str, n: u64) {
    if let Some(v) = map.get_mut(key) {
        v.sat_add(n);
    } else if map.len() < MAX_KINDS || key == OTHER_KINDS {
        map.insert(key.to_string(), n);
    } else {
        map.entry(OTHER_KINDS.to_string()).or_default().sat_add(n);
    }
}
