//! What is kept of one process: its session start and exit summary, failing calls by
//! function and result with a few argument examples, and its faults, fallbacks and
//! lifetime records, each merged from its records by rules that do not depend on their
//! order.

use crate::line::Head;
use crate::records::{ExitInfo, SessionInfo};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Argument examples kept per (function, CUresult) and process.
pub const MAX_EXAMPLES: usize = 5;

/// Longer argument objects are not kept as examples.
pub const MAX_EXAMPLE_LEN: usize = 256;

/// Distinct (limit, requested, ...) values kept per launch or allocation fault key and
/// process; records past it are counted, their values not kept.
pub const MAX_FAULT_VALUES: usize = 32;

/// Distinct explanations and driver messages kept per launch or allocation fault key and
/// process (the smallest, which keeps the choice independent of reading order).
pub const MAX_FAULT_TEXTS: usize = 5;

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
    /// Results the program got, by key (name, else number; for a hazard the shim found
    /// before the call reached the driver, the result of its `lifetime_repair`, else
    /// `(not recorded)`).
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

    pub(crate) fn add(
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
    /// The sequence numbers seen, to tell gaps from repeats.
    pub seqs: SeqSet,
    /// The `exit_summary` event, if the process wrote one (the last one if several).
    pub exit: Option<ExitInfo>,
    /// Time of the `exit_summary` record.
    pub exit_ts_ns: Option<u64>,
    /// The error of the write the trace's file refused (`trace_cut`), if it was cut.
    pub trace_cut: Option<String>,
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
    /// A trace the shim wrote for a child forked after its parent initialised CUDA (a
    /// `forked_after_init` lifetime fault): written at once at the child's first failing
    /// call, it never has an exit summary, and none is missing.
    pub(crate) fn forked_child(&self) -> bool {
        self.exit.is_none()
            && self
                .lifetime_faults
                .keys()
                .any(|(kind, _)| kind == "forked_after_init")
    }

    pub(crate) fn new(file: &str, pid: u32) -> ProcessAgg {
        ProcessAgg {
            file: file.to_string(),
            pid,
            first_ts_ns: u64::MAX,
            min_seq: u64::MAX,
            ..ProcessAgg::default()
        }
    }

    pub(crate) fn touch(&mut self, head: &Head) {
        self.records += 1;
        self.first_ts_ns = self.first_ts_ns.min(head.ts_ns);
        self.last_ts_ns = self.last_ts_ns.max(head.ts_ns);
        self.min_seq = self.min_seq.min(head.seq);
        self.max_seq = self.max_seq.max(head.seq);
        self.seqs.insert(head.seq);
    }

    /// Sequence numbers between the first (0 when the session start is present and the
    /// numbers start there, as the shim writes them) and the last seen that no record
    /// carries: dropped, lost or corrupted records. A process whose records repeat a
    /// sequence number (the shim gives each record its own) has numbers that cannot be
    /// trusted: no gap is counted for it (0), rather than a count made of corrupt numbers.
    pub fn missing_records(&self) -> u64 {
        if self.records == 0 || self.seqs.repeats > 0 {
            return 0;
        }
        let first = if self.session.is_some() {
            0
        } else {
            self.min_seq
        };
        let distinct = self.seqs.distinct().unwrap_or(self.records);
        (self.max_seq - first.min(self.max_seq))
            .saturating_add(1)
            .saturating_sub(distinct)
    }
}

/// Most ranges a [`SeqSet`] keeps; a process whose numbers need more (a hostile trace:
/// every other number) is no longer checked for repeats.
pub const MAX_SEQ_RANGES: usize = 4096;

/// The sequence numbers of one process's records, as sorted, disjoint, non-adjacent
/// inclusive ranges: one range for a trace without gaps, whatever the order of its
/// records, so memory stays bounded by the gaps, never by the records.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SeqSet {
    ranges: Vec<(u64, u64)>,
    distinct: u64,
    /// More than [`MAX_SEQ_RANGES`] ranges were needed: no longer tracked.
    overflowed: bool,
    /// Records whose sequence number an earlier record of the process carried.
    pub repeats: u64,
}

impl SeqSet {
    /// Adds one record's sequence number.
    pub fn insert(&mut self, seq: u64) {
        if self.overflowed {
            return;
        }
        // The usual case: the next number.
        if let Some(last) = self.ranges.last_mut() {
            if last.1 != u64::MAX && seq == last.1 + 1 {
                last.1 = seq;
                self.distinct += 1;
                return;
            }
        }
        // The first range that starts after `seq`.
        let i = self.ranges.partition_point(|r| r.0 <= seq);
        if i > 0 && self.ranges[i - 1].1 >= seq {
            self.repeats += 1;
            return;
        }
        // Here `ranges[i - 1].1 < seq < ranges[i].0`: the `+ 1`s cannot overflow.
        let after_prev = i > 0 && self.ranges[i - 1].1 + 1 == seq;
        let before_next = i < self.ranges.len() && seq + 1 == self.ranges[i].0;
        match (after_prev, before_next) {
            (true, true) => {
                self.ranges[i - 1].1 = self.ranges[i].1;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].1 = seq,
            (false, true) => self.ranges[i].0 = seq,
            (false, false) => {
                if self.ranges.len() >= MAX_SEQ_RANGES {
                    self.overflowed = true;
                    self.ranges = Vec::new();
                    return;
                }
                self.ranges.insert(i, (seq, seq));
            }
        }
        self.distinct += 1;
    }

    /// How many different numbers were added; `None` once the set overflowed.
    pub fn distinct(&self) -> Option<u64> {
        (!self.overflowed).then_some(self.distinct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_set_counts_distinct_numbers_and_repeats_in_any_order() {
        let mut s = SeqSet::default();
        for n in [0, 1, 5, 3, 2, 4, 4, u64::MAX, u64::MAX, 7] {
            s.insert(n);
        }
        assert_eq!(s.ranges, [(0, 5), (7, 7), (u64::MAX, u64::MAX)]);
        assert_eq!((s.distinct(), s.repeats), (Some(8), 2));
        // Filling the gap joins the ranges.
        s.insert(6);
        assert_eq!(s.ranges, [(0, 7), (u64::MAX, u64::MAX)]);
    }

    #[test]
    fn seq_set_stops_tracking_past_its_bound() {
        let mut s = SeqSet::default();
        for n in 0..=MAX_SEQ_RANGES as u64 {
            s.insert(2 * n);
        }
        assert_eq!(s.distinct(), None);
        assert!(s.ranges.is_empty());
        s.insert(0);
        assert_eq!(s.repeats, 0);
    }

    #[test]
    fn repeated_numbers_count_no_gap() {
        let head = |seq| Head {
            v: 1,
            seq,
            ts_ns: 1,
            pid: 1,
            tid: 1,
        };
        let mut p = ProcessAgg::new("f", 1);
        p.session = Some(SessionInfo::default());
        for seq in [0, u64::MAX, u64::MAX] {
            p.touch(&head(seq));
        }
        assert_eq!(p.missing_records(), 0);
        let mut p = ProcessAgg::new("f", 1);
        for seq in [3, 6, 4] {
            p.touch(&head(seq));
        }
        assert_eq!(p.missing_records(), 1);
    }
}
