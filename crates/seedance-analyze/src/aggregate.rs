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
//!
//! The pieces: [`Counters`] (the input), [`ProcessAgg`] (one process), [`Timeline`] (errors
//! over time), and [`FileState`] (one file while it is read), re-exported here.

use crate::counters::bump_capped;
pub use crate::counters::{Counters, MAX_KINDS, MAX_LISTED_FILES, OTHER_KINDS};
pub use crate::file_state::FileState;
use crate::file_state::{FailedTable, PENDING_BUCKET_NS};
use crate::line::{CallFailedRef, Head, Line};
pub use crate::process_agg::{
    Examples, ExplainedAgg, ExplainedKind, Failures, FallbackAgg, FaultAgg, FaultValueKey,
    LifetimeAgg, ProcessAgg, SeqSet, MAX_EXAMPLES, MAX_EXAMPLE_LEN, MAX_FAULT_TEXTS,
    MAX_FAULT_VALUES, MAX_SEQ_RANGES,
};
use crate::records::{AllocFaultInfo, LaunchFaultInfo, LifetimeFaultInfo};
pub use crate::timeline::{Timeline, MAX_BUCKETS, TIMELINE_BASE_NS};
use crate::SatAdd;
use std::collections::{BTreeMap, HashMap};

/// The highest trace schema version this analyzer was written for: it reads every kind and
/// field of versions up to this one. Records with a higher `v` are counted as
/// `newer_schema_records` (their known kinds and fields are still read). Deliberately not
/// `seedance_trace::SCHEMA_VERSION`: the shim's version moves ahead when the schema grows,
/// and this one only when the analyzer has learnt the new version.
pub const KNOWN_SCHEMA_VERSION: u32 = 5;

/// Result key of a `lifetime_fault` found before the call reached the driver, when no
/// `lifetime_repair` of the same function says what the program got: the call went on to the
/// driver (observe mode) and its result is not in the trace.
pub const NOT_CALLED: &str = "(not recorded)";

/// Distinct device faults, and distinct device fallbacks, kept per process (the shim writes
/// one record per distinct function and ordinal, so a real trace has a handful); records
/// past it are counted, not kept.
pub const MAX_DEVICE_KEYS: usize = 256;

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
                // What the program got is the repair's result: a fault found before the
                // call reached the driver has none of its own (`(not called)`).
                if let Some(e) = p
                    .lifetime_faults
                    .iter_mut()
                    .find(|((_, f), e)| *f == r.function && e.results.contains_key(NOT_CALLED))
                    .map(|(_, e)| e)
                {
                    let got = seedance_cuda::CUresult(r.result)
                        .name()
                        .map_or_else(|| r.result.to_string(), str::to_string);
                    if let Some(n) = e.results.get_mut(NOT_CALLED) {
                        *n -= 1;
                        if *n == 0 {
                            e.results.remove(NOT_CALLED);
                        }
                    }
                    *e.results.entry(got).or_default() += 1;
                }
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
            Line::TraceCut(h, c) => {
                self.counters.note_kind("trace_cut", false);
                let i = self.process(file, h.pid);
                let p = &mut self.processes[i];
                p.touch(&h);
                p.trace_cut = Some(c.error);
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
mod tests;
