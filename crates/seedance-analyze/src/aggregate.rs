//! Mergeable aggregates: what is kept of the input while it streams by.
//!
//! Everything here grows with the number of distinct keys (processes, functions, CUresult
//! names, event kinds, time buckets), never with the number of lines: per-key counters,
//! at most [`MAX_EXAMPLES`] argument examples per (function, result) kept by a rule that
//! does not depend on reading order, and an error histogram whose bucket width doubles
//! whenever it would exceed [`MAX_BUCKETS`] buckets.
//!
//! Aggregates of different files are combined with [`Aggregate::merge`]; the result does
//! not depend on the order of the merges, so parallel reading gives the same report as
//! sequential reading.

use crate::line::{CallFailedRef, Head, Line};
use crate::records::{AllocFaultInfo, ExitInfo, LaunchFaultInfo, LifetimeFaultInfo, SessionInfo};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The highest trace schema version this analyzer was written for: it reads every kind and
/// field of versions up to this one. Records with a higher `v` are counted as
/// `newer_schema_records` (their known kinds and fields are still read). Deliberately not
/// `seedance_trace::SCHEMA_VERSION`: the shim's version moves ahead when the schema grows,
/// and this one only when the analyzer has learnt the new version.
pub const KNOWN_SCHEMA_VERSION: u32 = 5;

/// Result key of a `lifetime_fault` found before the call reached the driver.
pub const NOT_CALLED: &str = "(not called)";
/// Argument examples kept per (function, CUresult) and process.
pub const MAX_EXAMPLES: usize = 5;
/// Longer argument objects are not kept as examples.
pub const MAX_EXAMPLE_LEN: usize = 256;
/// Distinct unknown event kinds counted by name; further kinds are counted under
/// [`OTHER_KINDS`].
pub const MAX_KINDS: usize = 256;
/// Name under which unknown kinds past [`MAX_KINDS`] are counted.
pub const OTHER_KINDS: &str = "(other kinds)";
/// Most buckets in the errors-over-time histogram.
pub const MAX_BUCKETS: usize = 512;

/// The finest width of the errors-over-time buckets, nanoseconds (1 ms); the width is
/// always this times a power of two.
pub const TIMELINE_BASE_NS: u64 = 1_000_000;
/// Paths kept for each list of problem files (skipped, unreadable); the counts stay exact.
pub const MAX_LISTED_FILES: usize = 20;
/// Distinct device faults, and distinct device fallbacks, kept per process (the shim writes
/// one record per distinct function and ordinal, so a real trace has a handful); records
/// past it are counted, not kept.
pub const MAX_DEVICE_KEYS: usize = 256;
/// Distinct (limit, requested, ...) values kept per launch or allocation fault key and
/// process; records past it are counted, their values not kept.
pub const MAX_FAULT_VALUES: usize = 32;
/// Distinct explanations and driver messages kept per launch or allocation fault key and
/// process (the smallest, which keeps the choice independent of reading order).
pub const MAX_FAULT_TEXTS: usize = 5;

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
    /// Lines over [`crate::input::MAX_LINE_BYTES`].
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

    fn note_kind(&mut self, kind: &str, unknown: bool) {
        bump_capped(&mut self.records_by_kind, kind, 1);
        if unknown {
            bump_capped(&mut self.unknown_event_kinds, kind, 1);
        }
    }

    fn merge(&mut self, o: Counters) {
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
    fn finish(&mut self) {
        self.skipped_files.sort();
        self.skipped_files.truncate(MAX_LISTED_FILES);
        self.errors.sort();
        self.errors.truncate(MAX_LISTED_FILES);
    }
}

fn bump_capped(map: &mut BTreeMap<String, u64>, key: &str, n: u64) {
    if let Some(v) = map.get_mut(key) {
        v.sat_add(n);
    } else if map.len() < MAX_KINDS || key == OTHER_KINDS {
        map.insert(key.to_string(), n);
    } else {
        map.entry(OTHER_KINDS.to_string()).or_default().sat_add(n);
    }
}

/// Up to [`MAX_EXAMPLES`] distinct argument objects (raw JSON text) with their counts: the
/// lexicographically smallest ones seen, which keeps the choice, and the counts of those
/// kept, independent of reading and merging order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Examples(pub Vec<(String, u64)>);

impl Examples {
    /// Counts `n` occurrences of `args`.
    pub fn add(&mut self, args: &str, n: u64) {
        if args.len() > MAX_EXAMPLE_LEN {
            return;
        }
        // Full, and past the largest kept: not kept (the common case, decided with one
        // comparison).
        if self.0.len() >= MAX_EXAMPLES && self.0.last().is_some_and(|(l, _)| args > l.as_str()) {
            return;
        }
        match self.0.binary_search_by(|(s, _)| s.as_str().cmp(args)) {
            Ok(i) => self.0[i].1.sat_add(n),
            Err(i) => {
                if i < MAX_EXAMPLES {
                    self.0.insert(i, (args.to_string(), n));
                    self.0.truncate(MAX_EXAMPLES);
                }
            }
        }
    }

    /// Adds every example of `other`.
    pub fn merge(&mut self, other: &Examples) {
        for (s, n) in &other.0 {
            self.add(s, *n);
        }
    }
}

/// `call_failed` records of one (function, CUresult) in one process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Failures {
    /// The CUresult number.
    pub code: u32,
    /// Records seen.
    pub count: u64,
    /// Argument examples.
    pub examples: Examples,
}

/// The `device_fault` records of one (function, requested ordinal, result) in one process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FaultAgg {
    /// The fault kind (`invalid_ordinal`, `device_unavailable`, ...).
    pub fault: String,
    /// The result's name, when the shim wrote one.
    pub result_name: Option<String>,
    /// Devices visible to the process.
    pub visible_devices: u32,
    /// The shim's explanation (of the first record).
    pub explanation: String,
    /// Records seen (normally 1).
    pub records: u64,
}

impl FaultAgg {
    /// The key the exit summary counts this result under: the name, else the number.
    pub fn result_key(&self, result: u32) -> String {
        self.result_name
            .clone()
            .unwrap_or_else(|| result.to_string())
    }
}

/// The `device_fallback` records of one (function, requested, chosen ordinal) in one process.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FallbackAgg {
    /// PCI bus id of the chosen device.
    pub chosen_pci_bus_id: Option<String>,
    /// Why the requested device could not be used.
    pub reason: String,
    /// What the repaired call returned.
    pub result: u32,
    /// The shim's announcement (of the first record).
    pub explanation: String,
    /// Records seen (normally 1).
    pub records: u64,
}

/// The `lifetime_fault` records of one (kind, function) in one process (trace schema 4).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LifetimeAgg {
    /// The shim's explanations, distinct (at most [`MAX_FAULT_TEXTS`], the smallest).
    pub explanations: BTreeSet<String>,
    /// Results the program got, by key (name, else number; `(not called)` when the shim
    /// found the hazard before the call reached the driver).
    pub results: BTreeMap<String, u64>,
    /// Some record said the fix mode repaired it.
    pub repaired_flag: bool,
    /// Records seen.
    pub records: u64,
}

/// Which kind of explained call failure (trace schema 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExplainedKind {
    /// A `launch_fault` record: a kernel launch over a limit, or without a usable context.
    Launch,
    /// An `alloc_fault` record: an allocation the driver refused.
    Alloc,
}

impl ExplainedKind {
    /// The event kind: `launch_fault`, `alloc_fault`.
    pub fn event(self) -> &'static str {
        match self {
            ExplainedKind::Launch => "launch_fault",
            ExplainedKind::Alloc => "alloc_fault",
        }
    }
}

/// The numbers of one `launch_fault` or `alloc_fault` record: what was asked for and the
/// limit it broke (launch: `limit`, `requested`; allocation: `limit_bytes`,
/// `requested_bytes`, `requested_signed`, `free_bytes`, `total_bytes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FaultValueKey {
    /// Ordinal of the device (`None`: no current context, host memory, or unknown).
    pub device: Option<i32>,
    /// The limit in force.
    pub limit: Option<u64>,
    /// The value asked for.
    pub requested: Option<u64>,
    /// Allocations: the requested size read as signed.
    pub requested_signed: Option<i64>,
    /// Allocations: free bytes at the moment of the failure.
    pub free_bytes: Option<u64>,
    /// Allocations: total bytes.
    pub total_bytes: Option<u64>,
}

/// The `launch_fault` or `alloc_fault` records of one (kind, function, check, result) in one
/// process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExplainedAgg {
    /// The result's name, when the shim wrote one.
    pub result_name: Option<String>,
    /// Records seen (the shim writes one per distinct requested value).
    pub records: u64,
    /// Of those, calls the shim refused before the driver saw them.
    pub refused: u64,
    /// Distinct values, with their records (at most [`MAX_FAULT_VALUES`]).
    pub values: BTreeMap<FaultValueKey, u64>,
    /// The shim's explanations (the [`MAX_FAULT_TEXTS`] smallest distinct ones).
    pub explanations: BTreeSet<String>,
    /// The driver's own messages (the [`MAX_FAULT_TEXTS`] smallest distinct ones).
    pub driver_messages: BTreeSet<String>,
    /// Allocations: the most the process held on the device at a failure, bytes and
    /// allocations (`process_live_bytes`, `process_live_allocations`).
    pub live: Option<(u64, u64)>,
    /// Allocations: other devices with room (ordinal -> most free bytes seen); `None` when
    /// no record knew (no NVML), empty when none had room.
    pub rooms: Option<BTreeMap<i32, u64>>,
}

impl ExplainedAgg {
    /// The key the exit summary counts this result under: the name, else the number.
    pub fn result_key(&self, result: u32) -> String {
        self.result_name
            .clone()
            .unwrap_or_else(|| result.to_string())
    }

    fn add_text(set: &mut BTreeSet<String>, text: &str) {
        if text.is_empty() || set.contains(text) {
            return;
        }
        set.insert(text.to_string());
        if set.len() > MAX_FAULT_TEXTS {
            set.pop_last();
        }
    }

    fn add(
        &mut self,
        value: FaultValueKey,
        refused: bool,
        explanation: &str,
        driver: Option<&str>,
    ) {
        self.records += 1;
        if refused {
            self.refused += 1;
        }
        if let Some(n) = self.values.get_mut(&value) {
            *n += 1;
        } else if self.values.len() < MAX_FAULT_VALUES {
            self.values.insert(value, 1);
        }
        Self::add_text(&mut self.explanations, explanation);
        if let Some(d) = driver {
            Self::add_text(&mut self.driver_messages, d);
        }
    }
}

/// Everything kept about one process (one session of one pid in one file).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessAgg {
    /// The file the records came from.
    pub file: String,
    /// Process id.
    pub pid: u32,
    /// The `session_start` event, if the trace has it.
    pub session: Option<SessionInfo>,
    /// Time of the `session_start` record.
    pub session_ts_ns: Option<u64>,
    /// Earliest and latest record time.
    pub first_ts_ns: u64,
    /// Latest record time.
    pub last_ts_ns: u64,
    /// Records of this process.
    pub records: u64,
    /// Lowest sequence number seen.
    pub min_seq: u64,
    /// Highest sequence number seen.
    pub max_seq: u64,
    /// The `exit_summary` event, if the process wrote one (the last one if several).
    pub exit: Option<ExitInfo>,
    /// Time of the `exit_summary` record.
    pub exit_ts_ns: Option<u64>,
    /// `call_failed` records by function, then by CUresult name.
    pub failed: HashMap<String, HashMap<String, Failures>>,
    /// `call_failed` records in all.
    pub failed_events: u64,
    /// Records of unknown kinds.
    pub other_events: u64,
    /// `device_fault` records by (function, requested ordinal, result number).
    pub faults: BTreeMap<(String, i32, u32), FaultAgg>,
    /// `device_fault` records in all.
    pub fault_events: u64,
    /// `device_fallback` records by (function, requested ordinal, chosen ordinal).
    pub fallbacks: BTreeMap<(String, i32, i32), FallbackAgg>,
    /// `device_fallback` records in all.
    pub fallback_events: u64,
    /// `launch_fault` and `alloc_fault` records by (kind, function, check, result number).
    pub explained: BTreeMap<(ExplainedKind, String, String, u32), ExplainedAgg>,
    /// `launch_fault` and `alloc_fault` records in all.
    pub explained_events: u64,
    /// `lifetime_fault` records by (kind, function) (schema 4).
    pub lifetime_faults: BTreeMap<(String, String), LifetimeAgg>,
    /// `lifetime_repair` records by (kind, function) (schema 4).
    pub lifetime_repairs: BTreeMap<(String, String), u64>,
    /// `lifetime_fault` and `lifetime_repair` records in all.
    pub lifetime_events: u64,
    /// `stray_context` records by device (schema 5; the first per device).
    pub strays: BTreeMap<i32, crate::records::StrayInfo>,
    /// Devices where an allocation failed for lack of memory, with the other processes'
    /// pids NVML listed there at the failures (schema 5: `processes_on_device`).
    pub oom_devices: BTreeMap<i32, BTreeSet<u32>>,
}

impl ProcessAgg {
    fn new(file: &str, pid: u32) -> ProcessAgg {
        ProcessAgg {
            file: file.to_string(),
            pid,
            first_ts_ns: u64::MAX,
            min_seq: u64::MAX,
            ..ProcessAgg::default()
        }
    }

    fn touch(&mut self, head: &Head) {
        self.records += 1;
        self.first_ts_ns = self.first_ts_ns.min(head.ts_ns);
        self.last_ts_ns = self.last_ts_ns.max(head.ts_ns);
        self.min_seq = self.min_seq.min(head.seq);
        self.max_seq = self.max_seq.max(head.seq);
    }

    /// Sequence numbers between the first (0 when the session start is present) and the
    /// last seen that no record carries: dropped, lost or corrupted records.
    pub fn missing_records(&self) -> u64 {
        if self.records == 0 {
            return 0;
        }
        let first = if self.session.is_some() {
            0
        } else {
            self.min_seq
        };
        (self.max_seq - first.min(self.max_seq))
            .saturating_add(1)
            .saturating_sub(self.records)
    }
}

/// Errors over time, by CUresult name, from `call_failed` records.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Bucket width, nanoseconds: one second times a power of two.
    pub width_ns: u64,
    /// Bucket start (a multiple of the width) -> CUresult name -> errors.
    pub buckets: BTreeMap<u64, BTreeMap<String, u64>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            // 1 ms: a run of milliseconds gets bars of milliseconds; longer runs coarsen
            // (doubling) to at most MAX_BUCKETS buckets.
            width_ns: TIMELINE_BASE_NS,
            buckets: BTreeMap::new(),
        }
    }
}

impl Timeline {
    /// Counts `n` errors named `name` at `ts_ns`.
    pub fn add(&mut self, ts_ns: u64, name: &str, n: u64) {
        let start = ts_ns - ts_ns % self.width_ns;
        let b = self.buckets.entry(start).or_default();
        if let Some(v) = b.get_mut(name) {
            v.sat_add(n);
        } else {
            b.insert(name.to_string(), n);
        }
        if self.buckets.len() > MAX_BUCKETS {
            self.coarsen(self.width_ns.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, mut width: u64) {
        loop {
            if width != self.width_ns {
                let old = std::mem::take(&mut self.buckets);
                self.width_ns = width;
                for (start, names) in old {
                    let b = self.buckets.entry(start - start % width).or_default();
                    for (name, n) in names {
                        b.entry(name).or_default().sat_add(n);
                    }
                }
            }
            if self.buckets.len() <= MAX_BUCKETS || width >= 1 << 62 {
                return;
            }
            width *= 2;
        }
    }

    /// Adds every bucket of `other`, at the coarser of the two widths.
    pub fn merge(&mut self, other: Timeline) {
        let width = self.width_ns.max(other.width_ns);
        self.coarsen(width);
        for (start, names) in other.buckets {
            for (name, n) in names {
                self.add(start, &name, n);
            }
        }
    }
}

/// Per-file state while a file is read: which process each pid's records belong to, and
/// the `call_failed` records not yet added to their processes (see [`Aggregate::end_file`]).
pub struct FileState {
    name: String,
    by_pid: HashMap<u32, usize>,
    last: Option<(u32, usize)>,
    failed: FailedTable,
    /// `call_failed` records after the first, not yet in `Counters::records_by_kind`.
    failed_kind_pending: u64,
    /// Whether the first `call_failed` record was counted in `records_by_kind` (it decides
    /// whether the kind gets its own entry there or goes to [`OTHER_KINDS`]).
    failed_kind_seen: bool,
}

/// The `call_failed` records of one file by (process, function, result key), each kind of
/// record found by a hash of its key bytes instead of a lookup by string per record in the
/// process's maps and the timeline.
#[derive(Default)]
struct FailedTable {
    /// Key hash -> first slot with that hash (the others follow `FailedSlot::next`).
    index: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    slots: Vec<FailedSlot>,
}

/// The `call_failed` records of one (process, function, result key) in one file.
struct FailedSlot {
    next: Option<u32>,
    process: usize,
    function: String,
    /// The result key (name, else number).
    key: String,
    /// The CUresult number of the first record.
    code: u32,
    count: u64,
    examples: Examples,
    /// Errors over time not yet in the timeline: their one-second bucket, and how many.
    bucket: u64,
    pending: u64,
}

/// Keys of [`FailedTable::index`] are hashes already.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// An FxHash-style hash (multiply and rotate, eight bytes at a time): fast on short keys,
/// and only used to find candidates that are then compared byte for byte.
#[inline]
fn fx_add(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

#[inline]
fn fx_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = fx_add(h, u64::from_le_bytes(c.try_into().unwrap_or_default()));
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    fx_add(fx_add(h, u64::from_le_bytes(last)), bytes.len() as u64)
}

/// Width of the buckets `call_failed` errors are held in before they reach the timeline:
/// its finest width, so holding them changes nothing.
const PENDING_BUCKET_NS: u64 = TIMELINE_BASE_NS;

impl FailedTable {
    /// The slot of (process, function, key), created with `code` if new.
    #[inline]
    fn slot(&mut self, process: usize, function: &str, key: &str, code: u32) -> &mut FailedSlot {
        let h = fx_bytes(
            fx_bytes(process as u64, function.as_bytes()),
            key.as_bytes(),
        );
        let mut at = self.index.get(&h).copied();
        let mut last = None;
        while let Some(id) = at {
            let s = &self.slots[id as usize];
            if s.process == process && s.function == function && s.key == key {
                return &mut self.slots[id as usize];
            }
            last = Some(id);
            at = s.next;
        }
        let id = self.slots.len() as u32;
        match last {
            Some(l) => self.slots[l as usize].next = Some(id),
            None => {
                self.index.insert(h, id);
            }
        }
        self.slots.push(FailedSlot {
            next: None,
            process,
            function: function.to_string(),
            key: key.to_string(),
            code,
            count: 0,
            examples: Examples::default(),
            bucket: 0,
            pending: 0,
        });
        &mut self.slots[id as usize]
    }
}

/// The aggregate of some traces: input counters, processes, the error histogram.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Aggregate {
    /// What was read.
    pub counters: Counters,
    /// Every process seen.
    pub processes: Vec<ProcessAgg>,
    /// Errors over time.
    pub timeline: Timeline,
}

impl Aggregate {
    /// Starts reading a file named `name`.
    pub fn begin_file(&mut self, name: &str) -> FileState {
        FileState {
            name: name.to_string(),
            by_pid: HashMap::new(),
            last: None,
            failed: FailedTable::default(),
            failed_kind_pending: 0,
            failed_kind_seen: false,
        }
    }

    /// Ends the file `file`: adds its `call_failed` records to their processes and to the
    /// errors over time. [`Aggregate::record`] holds them per file until then.
    pub fn end_file(&mut self, file: FileState) {
        if file.failed_kind_pending > 0 {
            bump_capped(
                &mut self.counters.records_by_kind,
                "call_failed",
                file.failed_kind_pending,
            );
        }
        for s in file.failed.slots {
            if s.pending > 0 {
                self.timeline.add(s.bucket, &s.key, s.pending);
            }
            let by_result = self.processes[s.process]
                .failed
                .entry(s.function)
                .or_default();
            match by_result.entry(s.key) {
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let f = e.get_mut();
                    f.count.sat_add(s.count);
                    f.examples.merge(&s.examples);
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(Failures {
                        code: s.code,
                        count: s.count,
                        examples: s.examples,
                    });
                }
            }
        }
    }

    fn process(&mut self, file: &mut FileState, pid: u32) -> usize {
        if let Some((p, i)) = file.last {
            if p == pid {
                return i;
            }
        }
        let i = match file.by_pid.get(&pid) {
            Some(&i) => i,
            None => {
                self.processes.push(ProcessAgg::new(&file.name, pid));
                let i = self.processes.len() - 1;
                file.by_pid.insert(pid, i);
                i
            }
        };
        file.last = Some((pid, i));
        i
    }

    /// Adds one parsed line of the file `file`. `call_failed` records are held in `file`
    /// and reach their processes and the errors over time at [`Aggregate::end_file`].
    pub fn record(&mut self, file: &mut FileState, line: Line<'_>) {
        let Some(head) = line.head() else {
            if !matches!(line, Line::Blank) {
                self.counters.malformed_lines += 1;
            }
            return;
        };
        if let Line::BadRecord(..) = line {
            self.counters.malformed_lines += 1;
            return;
        }
        self.counters.records += 1;
        if head.v > KNOWN_SCHEMA_VERSION {
            self.counters.newer_schema_records += 1;
        }
        match line {
            Line::SessionStart(h, s) => {
                self.counters.note_kind("session_start", false);
                // A second session start for a pid begins a new process (a pid reused in a
                // concatenated file, or an exec).
                let existing = file.by_pid.get(&h.pid).copied();
                let i = match existing {
                    Some(i)
                        if self.processes[i].session.is_none()
                            && self.processes[i].exit.is_none() =>
                    {
                        i
                    }
                    Some(_) => {
                        self.processes.push(ProcessAgg::new(&file.name, h.pid));
                        let i = self.processes.len() - 1;
                        file.by_pid.insert(h.pid, i);
                        file.last = Some((h.pid, i));
                        i
                    }
                    None => self.process(file, h.pid),
                };
                let p = &mut self.processes[i];
                p.touch(&h);
                p.session = Some(*s);
                p.session_ts_ns = Some(h.ts_ns);
            }
            Line::CallFailed(h, c) => {
                if file.failed_kind_seen {
                    file.failed_kind_pending += 1;
                } else {
                    self.counters.note_kind("call_failed", false);
                    file.failed_kind_seen = true;
                }
                let i = self.process(file, h.pid);
                self.call_failed(file, i, &h, c);
            }
            Line::ExitSummary(h, s) => {
                self.counters.note_kind("exit_summary", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                if !matches!(p.exit_ts_ns, Some(t) if t > h.ts_ns) {
                    p.exit = Some(*s);
                    p.exit_ts_ns = Some(h.ts_ns);
                }
            }
            Line::DeviceFault(h, f) => {
                self.counters.note_kind("device_fault", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                p.fault_events += 1;
                let f = *f;
                let name = f
                    .result_name
                    .clone()
                    .unwrap_or_else(|| f.result.to_string());
                self.timeline.add(h.ts_ns, &name, 1);
                let key = (f.function, f.requested_ordinal, f.result);
                if let Some(e) = p.faults.get_mut(&key) {
                    e.records += 1;
                } else if p.faults.len() < MAX_DEVICE_KEYS {
                    p.faults.insert(
                        key,
                        FaultAgg {
                            fault: f.fault,
                            result_name: f.result_name,
                            visible_devices: f.visible_devices,
                            explanation: f.explanation,
                            records: 1,
                        },
                    );
                }
            }
            Line::DeviceFallback(h, f) => {
                self.counters.note_kind("device_fallback", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                p.fallback_events += 1;
                let f = *f;
                let key = (f.function, f.requested_ordinal, f.chosen_ordinal);
                if let Some(e) = p.fallbacks.get_mut(&key) {
                    e.records += 1;
                } else if p.fallbacks.len() < MAX_DEVICE_KEYS {
                    p.fallbacks.insert(
                        key,
                        FallbackAgg {
                            chosen_pci_bus_id: f.chosen_pci_bus_id,
                            reason: f.reason,
                            result: f.result,
                            explanation: f.explanation,
                            records: 1,
                        },
                    );
                }
            }
            Line::LaunchFault(h, f) => {
                self.counters.note_kind("launch_fault", false);
                let i = self.process(file, h.pid);
                self.launch_fault(i, &h, *f);
            }
            Line::AllocFault(h, f) => {
                self.counters.note_kind("alloc_fault", false);
                let i = self.process(file, h.pid);
                self.alloc_fault(i, &h, *f);
            }
            Line::LifetimeFault(h, f) => {
                self.counters.note_kind("lifetime_fault", false);
                let i = self.process(file, h.pid);
                self.lifetime_fault(i, &h, *f);
            }
            Line::LifetimeRepair(h, r) => {
                self.counters.note_kind("lifetime_repair", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                p.lifetime_events += 1;
                let key = (r.kind, r.function);
                if p.lifetime_repairs.contains_key(&key)
                    || p.lifetime_repairs.len() < MAX_DEVICE_KEYS
                {
                    *p.lifetime_repairs.entry(key).or_default() += 1;
                }
            }
            Line::StrayContext(h, st) => {
                self.counters.note_kind("stray_context", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                if p.strays.len() < MAX_DEVICE_KEYS {
                    p.strays.entry(st.device).or_insert(*st);
                }
            }
            Line::HostHazard(h, f) => {
                // A pinned-copy race is a lifetime problem of its own kind; a repaired one
                // counts as repaired as a lifetime_repair of the same function would.
                self.counters.note_kind("host_hazard", false);
                let i = self.process(file, h.pid);
                if f.repaired {
                    let key = ("order_pinned_copies".to_string(), f.function.clone());
                    let p = &mut self.processes[i];
                    if p.lifetime_repairs.contains_key(&key)
                        || p.lifetime_repairs.len() < MAX_DEVICE_KEYS
                    {
                        *p.lifetime_repairs.entry(key).or_default() += 1;
                    }
                }
                self.lifetime_fault(i, &h, *f);
            }
            Line::CallFailedRepeats(h, r) => {
                self.counters.note_kind("call_failed_repeats", false);
                let i = self.process(file, h.pid);
                let r = *r;
                let number = r.result.to_string();
                let name = r.result_name.as_deref().unwrap_or(&number);
                let args = r.last_args.as_deref().map(|a| a.get());
                // At the time of the last of them: the record itself is written at exit.
                let at = Head {
                    ts_ns: if r.last_ts_ns > 0 {
                        r.last_ts_ns
                    } else {
                        h.ts_ns
                    },
                    ..h
                };
                self.failed_n(file, i, &at, &r.function, name, r.result, args, r.count);
            }
            Line::Unknown(h, kind) => {
                self.counters.note_kind(&kind, true);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                p.other_events += 1;
            }
            Line::Blank | Line::Malformed | Line::NotRecord | Line::BadRecord(..) => {}
        }
    }

    /// The entry of a launch or allocation fault, created unless the process has
    /// [`MAX_DEVICE_KEYS`] of them already; counts the record towards the process and the
    /// errors over time either way.
    fn explained_entry(
        &mut self,
        i: usize,
        h: &Head,
        key: (ExplainedKind, String, String, u32),
        result_name: Option<String>,
    ) -> Option<&mut ExplainedAgg> {
        let name = result_name.clone().unwrap_or_else(|| key.3.to_string());
        self.timeline.add(h.ts_ns, &name, 1);
        let p = &mut self.processes[i];
        p.touch(h);
        p.explained_events += 1;
        if !p.explained.contains_key(&key) && p.explained.len() >= MAX_DEVICE_KEYS {
            return None;
        }
        Some(p.explained.entry(key).or_insert_with(|| ExplainedAgg {
            result_name,
            ..ExplainedAgg::default()
        }))
    }

    fn launch_fault(&mut self, i: usize, h: &Head, f: LaunchFaultInfo) {
        let key = (ExplainedKind::Launch, f.function, f.check, f.result);
        let Some(e) = self.explained_entry(i, h, key, f.result_name) else {
            return;
        };
        let value = FaultValueKey {
            device: f.device,
            limit: f.limit,
            requested: f.requested,
            ..FaultValueKey::default()
        };
        e.add(
            value,
            f.refused_before_driver,
            &f.explanation,
            f.driver_message.as_deref(),
        );
    }

    fn alloc_fault(&mut self, i: usize, h: &Head, f: AllocFaultInfo) {
        if let (Some(d), "out_of_memory") = (f.device, f.check.as_str()) {
            let p = &mut self.processes[i];
            if p.oom_devices.contains_key(&d) || p.oom_devices.len() < MAX_DEVICE_KEYS {
                let pids = p.oom_devices.entry(d).or_default();
                for q in f.processes_on_device.iter().flatten() {
                    if !q.this_process && pids.len() < MAX_DEVICE_KEYS {
                        pids.insert(q.pid);
                    }
                }
            }
        }
        let key = (ExplainedKind::Alloc, f.function, f.check, f.result);
        let Some(e) = self.explained_entry(i, h, key, f.result_name) else {
            return;
        };
        let value = FaultValueKey {
            device: f.device,
            limit: f.limit_bytes,
            requested: f.requested_bytes,
            requested_signed: f.requested_signed.or(f.requested_bytes.map(|b| b as i64)),
            free_bytes: f.free_bytes,
            total_bytes: f.total_bytes,
        };
        e.add(
            value,
            f.refused_before_driver,
            &f.explanation,
            f.driver_message.as_deref(),
        );
        if let Some(bytes) = f.process_live_bytes {
            let allocations = f.process_live_allocations.unwrap_or(0);
            if e.live.is_none_or(|(b, _)| bytes > b) {
                e.live = Some((bytes, allocations));
            }
        }
        if let Some(rooms) = f.other_devices_with_room {
            let m = e.rooms.get_or_insert_with(BTreeMap::new);
            for r in rooms.into_iter().take(MAX_DEVICE_KEYS) {
                let v = m.entry(r.ordinal).or_default();
                *v = (*v).max(r.free_bytes);
            }
        }
    }

    fn lifetime_fault(&mut self, i: usize, h: &Head, f: LifetimeFaultInfo) {
        let result = match (&f.result_name, f.result) {
            (Some(n), _) => n.clone(),
            (None, Some(r)) => r.to_string(),
            (None, None) => NOT_CALLED.to_string(),
        };
        // Only hazards the program saw as an error count as errors over time.
        if f.result.is_some_and(|r| r != 0) {
            self.timeline.add(h.ts_ns, &result, 1);
        }
        let p = &mut self.processes[i];
        p.touch(h);
        p.lifetime_events += 1;
        let key = (f.kind, f.function);
        if !p.lifetime_faults.contains_key(&key) && p.lifetime_faults.len() >= MAX_DEVICE_KEYS {
            return;
        }
        let e = p.lifetime_faults.entry(key).or_default();
        e.records += 1;
        e.repaired_flag |= f.repaired;
        *e.results.entry(result).or_default() += 1;
        if !f.explanation.is_empty() {
            e.explanations.insert(f.explanation);
            while e.explanations.len() > MAX_FAULT_TEXTS {
                e.explanations.pop_last();
            }
        }
    }

    fn call_failed(&mut self, file: &mut FileState, i: usize, h: &Head, c: CallFailedRef<'_>) {
        // The same key the exit summary uses: the name the shim wrote, else the number
        // (codes newer than the shim's table, and runtime-API results such as
        // cudaSetDevice's, which the shim writes without a name).
        let number;
        let name: &str = match &c.result_name {
            Some(n) => n,
            None => {
                number = c.result.to_string();
                &number
            }
        };
        let args = c.args.map(|a| a.get());
        self.failed_n(file, i, h, &c.function, name, c.result, args, 1);
    }

    /// `n` failures of `function` with result `code` (`name`: its name or number), the
    /// arguments `args` (JSON text), at `h.ts_ns`: one `call_failed` record, or the count
    /// of a `call_failed_repeats` record.
    #[allow(clippy::too_many_arguments)]
    fn failed_n(
        &mut self,
        file: &mut FileState,
        i: usize,
        h: &Head,
        function: &str,
        name: &str,
        code: u32,
        args: Option<&str>,
        n: u64,
    ) {
        let p = &mut self.processes[i];
        p.touch(h);
        p.failed_events = p.failed_events.saturating_add(n);
        let s = file.failed.slot(i, function, name, code);
        s.count = s.count.saturating_add(n);
        if let Some(args) = args {
            s.examples.add(args, n);
        }
        let bucket = h.ts_ns - h.ts_ns % PENDING_BUCKET_NS;
        if s.bucket != bucket || s.pending == 0 {
            if s.pending > 0 {
                self.timeline.add(s.bucket, &s.key, s.pending);
            }
            s.bucket = bucket;
            s.pending = 0;
        }
        s.pending = s.pending.saturating_add(n);
    }

    /// Combines two aggregates (of disjoint sets of files).
    pub fn merge(mut self, other: Aggregate) -> Aggregate {
        self.counters.merge(other.counters);
        self.processes.extend(other.processes);
        self.timeline.merge(other.timeline);
        self
    }

    /// Puts the merged aggregate in its canonical order (processes by file and pid, path
    /// lists sorted), so that its contents do not depend on the merge order.
    pub fn finish(&mut self) {
        self.counters.finish();
        self.processes.sort_by(|a, b| {
            (a.file.as_str(), a.first_ts_ns, a.pid).cmp(&(b.file.as_str(), b.first_ts_ns, b.pid))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_keep_smallest_regardless_of_order() {
        let items = ["f", "a", "e", "b", "d", "c", "a", "g", "c"];
        let mut fwd = Examples::default();
        for s in items {
            fwd.add(s, 1);
        }
        let mut split_a = Examples::default();
        let mut split_b = Examples::default();
        for (i, s) in items.iter().rev().enumerate() {
            if i % 2 == 0 {
                split_a.add(s, 1)
            } else {
                split_b.add(s, 1)
            }
        }
        split_b.merge(&split_a);
        assert_eq!(fwd, split_b);
        assert_eq!(
            fwd.0,
            vec![
                ("a".into(), 2),
                ("b".into(), 1),
                ("c".into(), 2),
                ("d".into(), 1),
                ("e".into(), 1)
            ]
        );
    }

    #[test]
    fn examples_are_the_smallest_with_exact_counts() {
        let mut rng: u64 = 88172645463325252;
        let mut ex = Examples::default();
        let mut all: BTreeMap<String, u64> = BTreeMap::new();
        for _ in 0..5000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let s = format!("{{\"n\":{}}}", rng % 60);
            ex.add(&s, 1);
            *all.entry(s).or_default() += 1;
        }
        let want: Vec<(String, u64)> = all.into_iter().take(MAX_EXAMPLES).collect();
        assert_eq!(ex.0, want);
    }

    #[test]
    fn timeline_coarsens_and_merges_order_independently() {
        let mut one = Timeline::default();
        let mut a = Timeline::default();
        let mut b = Timeline::default();
        for s in 0..2000u64 {
            let ts = s * 1_000_000_000 + 5;
            one.add(ts, "X", 1);
            if s % 3 == 0 {
                a.add(ts, "X", 1)
            } else {
                b.add(ts, "X", 1)
            }
        }
        b.merge(a);
        assert_eq!(one, b);
        assert!(one.buckets.len() <= MAX_BUCKETS);
        // 2000 s over at most 512 buckets: 1 ms * 2^12.
        assert_eq!(one.width_ns, 4_096_000_000);
        assert_eq!(one.buckets.values().map(|m| m["X"]).sum::<u64>(), 2000);
    }

    #[test]
    fn kinds_are_capped() {
        let mut c = Counters::default();
        for i in 0..MAX_KINDS + 10 {
            c.note_kind(&format!("k{i}"), true);
        }
        assert_eq!(c.unknown_event_kinds.len(), MAX_KINDS + 1);
        assert_eq!(c.unknown_event_kinds[OTHER_KINDS], 10);
    }

    /// `call_failed` records held per file and added at the end of the file give what
    /// adding each record at once gives: counts, first codes, examples, errors over time
    /// and the records-by-kind counters (with the kinds' cap).
    #[test]
    fn held_call_failed_records_add_up_like_single_ones() {
        use crate::parse::parse_line;
        let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: u64| {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        };
        for (round, unknown_kinds) in [(0, 0), (1, 3), (2, MAX_KINDS + 5)].into_iter() {
            let mut lines = Vec::new();
            for k in 0..unknown_kinds {
                lines.push(format!(
                    r#"{{"v":1,"seq":0,"ts_ns":1,"pid":9,"event":"later_{k}"}}"#
                ));
            }
            for seq in 0..5000u64 {
                let pid = 1 + next(3);
                let ts = 1_000_000_000_000 + next(900) * 1_000_000_000 + next(1_000_000_000);
                let function = ["cuA", "cuB", "cuMemAlloc_v2"][next(3) as usize];
                let (result, name) = [
                    (2, Some("CUDA_ERROR_OUT_OF_MEMORY")),
                    (3, Some("CUDA_ERROR_OUT_OF_MEMORY")),
                    (101, None),
                    (101, Some("101")),
                ][next(4) as usize];
                let name = name
                    .map(|n| format!(r#","result_name":"{n}""#))
                    .unwrap_or_default();
                let args = match next(3) {
                    0 => String::new(),
                    _ => format!(r#","args":{{"n":{}}}"#, next(40)),
                };
                lines.push(format!(
                    r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"event":"call_failed","function":"{function}","result":{result}{name}{args}}}"#
                ));
                if next(500) == 0 {
                    lines.push(format!(
                        r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"event":"later_x"}}"#
                    ));
                }
            }
            let mut agg = Aggregate::default();
            let mut file = agg.begin_file("f");
            for l in &lines {
                agg.record(&mut file, parse_line(l.as_bytes()));
            }
            agg.end_file(file);

            // One record at a time, as before.
            let mut counters = Counters::default();
            let mut timeline = Timeline::default();
            let mut failed: BTreeMap<u32, HashMap<String, HashMap<String, Failures>>> =
                BTreeMap::new();
            for l in &lines {
                match parse_line(l.as_bytes()) {
                    Line::CallFailed(h, c) => {
                        counters.note_kind("call_failed", false);
                        let key = c
                            .result_name
                            .as_deref()
                            .map(str::to_string)
                            .unwrap_or_else(|| c.result.to_string());
                        let f = failed
                            .entry(h.pid)
                            .or_default()
                            .entry(c.function.to_string())
                            .or_default()
                            .entry(key.clone())
                            .or_insert_with(|| Failures {
                                code: c.result,
                                ..Failures::default()
                            });
                        f.count += 1;
                        if let Some(a) = c.args {
                            f.examples.add(a.get(), 1);
                        }
                        timeline.add(h.ts_ns, &key, 1);
                    }
                    Line::Unknown(_, kind) => counters.note_kind(&kind, true),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(
                agg.counters.records_by_kind, counters.records_by_kind,
                "{round}"
            );
            assert_eq!(agg.timeline, timeline, "{round}");
            for p in &agg.processes {
                if p.pid != 9 {
                    assert_eq!(p.failed, failed[&p.pid], "{round} {}", p.pid);
                }
            }
        }
    }
}
