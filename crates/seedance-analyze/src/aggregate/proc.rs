//! Per-process numbers the report builder and the problem finders share, computed once
//! per process from its aggregate ([`Proc`]), and look-ups in a session's devices.

use crate::aggregate::{ExplainedKind, ProcessAgg};
use crate::problems::curesult;
use crate::read::records::{DeviceEntry, SessionInfo, TopologyDevice};
use crate::report::{host_label, ProcessExplained};
use crate::SatAdd;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Function -> (calls, errors, errors by result name or number).
pub(crate) type ByFunction<'a> = BTreeMap<&'a str, (u64, u64, BTreeMap<Cow<'a, str>, u64>)>;

/// A launch or allocation fault of a process: (kind, function, check, result number).
pub(crate) type ExplainedKey<'a> = (ExplainedKind, &'a str, &'a str, u32);

/// Errors a process's launch and allocation faults account for, by (function, result key
/// as in [`ByFunction`], kind).
pub(crate) type ExplainedByResult<'a> = BTreeMap<(&'a str, String, ExplainedKind), u64>;

/// Per-process numbers, computed once.
pub(crate) struct Proc<'a> {
    pub(crate) agg: &'a ProcessAgg,
    pub(crate) calls: Option<u64>,
    pub(crate) errors: u64,
    /// Function -> (calls, errors, errors by result).
    pub(crate) by_function: ByFunction<'a>,
    pub(crate) errors_by_result: BTreeMap<String, u64>,
    /// Calls repaired, by kind (see [`RepairKind::calls`](crate::report::RepairKind::calls)).
    pub(crate) repairs: BTreeMap<String, u64>,
    /// Failed calls counted for each launch or allocation fault (see [`explained_shares`]).
    pub(crate) explained: BTreeMap<ExplainedKey<'a>, u64>,
    /// The same summed per (function, result key as in `by_function`): the errors of the
    /// `cuda_error` problems leave out, per kind.
    pub(crate) explained_by_result: ExplainedByResult<'a>,
}

/// Splits `total` in proportion to `weights` (largest remainders, ties to the first).
pub(crate) fn split(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|w| *w as u128).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<u128> = weights.iter().map(|w| total as u128 * *w as u128).collect();
    let mut out: Vec<u64> = exact.iter().map(|e| (e / sum) as u64).collect();
    let mut rest = total - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(exact[i] % sum), i));
    for i in order {
        if rest == 0 {
            break;
        }
        out[i] += 1;
        rest -= 1;
    }
    out
}

/// The failed calls of each launch or allocation fault of a process, and per (function,
/// result key) how many of the function's errors with that result they account for.
///
/// The shim writes one record per distinct (function, check, requested value) and no
/// `call_failed` for the failures it explains, while failures it cannot explain stay
/// `call_failed` records. So the explained failures of a (function, result) are its errors
/// (exit summary) less its `call_failed` records, and at least one per record; without an
/// exit summary, one per record. When several checks share a function and result, these
/// failures are split in proportion to the checks' records (the exit summary counts by
/// result only).
fn explained_shares<'a>(
    p: &'a ProcessAgg,
    by_function: &ByFunction<'a>,
) -> (BTreeMap<ExplainedKey<'a>, u64>, ExplainedByResult<'a>) {
    let mut shares = BTreeMap::new();
    let mut by_result = BTreeMap::<_, u64>::new();
    // (function, result number) -> its faults: (key, records, result key).
    type Member<'b> = (ExplainedKey<'b>, u64, String);
    let mut groups: BTreeMap<(&str, u32), Vec<Member>> = BTreeMap::new();
    for ((kind, f, check, r), e) in &p.explained {
        groups.entry((f.as_str(), *r)).or_default().push((
            (*kind, f.as_str(), check.as_str(), *r),
            e.records,
            e.result_key(*r),
        ));
    }
    // Errors not yet given to a fault, by (function, result key): two groups can match one
    // key (the same name written with different numbers), and share it.
    let mut avail: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for (f, (_, _, by)) in by_function {
        for (k, n) in by {
            avail.insert((f, k.as_ref()), *n);
        }
    }
    for ((f, r), members) in groups {
        let name = members[0].2.clone();
        let matches = |k: &str| k == name || curesult::code_of(k) == Some(r);
        // The function's errors with this result, by the key they are counted under.
        let counted: Vec<(&str, u64)> = avail
            .range((f, "")..)
            .take_while(|((ff, _), _)| *ff == f)
            .filter(|((_, k), n)| **n > 0 && matches(k))
            .map(|((_, k), n)| (*k, *n))
            .collect();
        let errors: u64 = crate::sat_sum(counted.iter().map(|(_, n)| *n));
        let records: u64 = crate::sat_sum(members.iter().map(|m| m.1));
        let share = if p.exit.is_some() {
            let plain: u64 = p
                .failed
                .get(f)
                .map(|m| {
                    crate::sat_sum(
                        m.iter()
                            .filter(|(k, fl)| matches(k) || fl.code == r)
                            .map(|(_, fl)| fl.count),
                    )
                })
                .unwrap_or(0);
            errors.saturating_sub(plain).max(records).min(errors)
        } else {
            records.min(errors)
        };
        let weights: Vec<u64> = members.iter().map(|m| m.1).collect();
        let mut per_kind: BTreeMap<ExplainedKind, u64> = BTreeMap::new();
        for (m, n) in members.iter().zip(split(share, &weights)) {
            shares.insert(m.0, n);
            per_kind.entry(m.0 .0).or_default().sat_add(n);
        }
        // Take the kinds' shares from the counted keys in order.
        for (kind, mut n) in per_kind {
            for (k, _) in &counted {
                let Some(left) = avail.get_mut(&(f, *k)) else {
                    continue;
                };
                let take = n.min(*left);
                if take > 0 {
                    by_result
                        .entry((f, k.to_string(), kind))
                        .or_default()
                        .sat_add(take);
                    *left -= take;
                    n -= take;
                }
            }
        }
    }
    (shares, by_result)
}

impl<'a> Proc<'a> {
    /// The failures of `function` with result key `result` that the program recovered
    /// from (the same entry point succeeded on the same thread right after), from the exit
    /// summary; 0 without one.
    pub(crate) fn recovered(&self, function: &str, result: &str) -> u64 {
        self.agg
            .exit
            .as_ref()
            .and_then(|e| e.functions.get(function))
            .and_then(|s| s.recovered_by_result.get(result))
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn new(p: &'a ProcessAgg) -> Proc<'a> {
        let mut by_function: ByFunction = BTreeMap::new();
        match &p.exit {
            Some(exit) => {
                for (f, s) in &exit.functions {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.0.sat_add(s.calls);
                    e.1.sat_add(s.errors);
                    for (r, n) in &s.errors_by_result {
                        e.2.entry(Cow::Borrowed(r.as_str())).or_default().sat_add(n);
                    }
                }
            }
            None => {
                for (f, m) in &p.failed {
                    let e = by_function.entry(f.as_str()).or_default();
                    for (r, fl) in m {
                        e.1.sat_add(fl.count);
                        e.2.entry(Cow::Borrowed(r.as_str()))
                            .or_default()
                            .sat_add(fl.count);
                    }
                }
                // Device faults are not written as call_failed: each record stands for at
                // least one failed call.
                for ((f, _, result), fa) in &p.faults {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.1.sat_add(fa.records);
                    let key = match &fa.result_name {
                        Some(n) => Cow::Borrowed(n.as_str()),
                        None => Cow::Owned(result.to_string()),
                    };
                    e.2.entry(key).or_default().sat_add(fa.records);
                }
                // Launch and allocation faults likewise.
                for ((_, f, _, result), ea) in &p.explained {
                    let e = by_function.entry(f.as_str()).or_default();
                    e.1.sat_add(ea.records);
                    let key = match &ea.result_name {
                        Some(n) => Cow::Borrowed(n.as_str()),
                        None => Cow::Owned(result.to_string()),
                    };
                    e.2.entry(key).or_default().sat_add(ea.records);
                }
            }
        }
        let mut errors_by_result = BTreeMap::<_, u64>::new();
        for (_, _, m) in by_function.values() {
            for (r, n) in m {
                errors_by_result
                    .entry(r.to_string())
                    .or_default()
                    .sat_add(n);
            }
        }
        let mut repairs: BTreeMap<String, u64> = p
            .exit
            .as_ref()
            .map(|e| {
                e.repairs
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| (k.clone(), *n))
                    .collect()
            })
            .unwrap_or_default();
        if p.fallback_events > 0 {
            let n = repairs.entry("device_fallback".to_string()).or_default();
            *n = (*n).max(p.fallback_events);
        }
        // The shim counts lifetime repairs in the exit summary's `repairs` too (every
        // repaired call, the records only the first of each function): the records count
        // only when they are more (no exit summary).
        let mut lifetime: BTreeMap<&str, u64> = BTreeMap::new();
        for ((kind, _), n) in &p.lifetime_repairs {
            lifetime.entry(kind).or_default().sat_add(n);
        }
        for (kind, n) in lifetime {
            let e = repairs.entry(kind.to_string()).or_default();
            *e = (*e).max(n);
        }
        let (explained, explained_by_result) = explained_shares(p, &by_function);
        Proc {
            agg: p,
            calls: p
                .exit
                .as_ref()
                .map(|_| crate::sat_sum(by_function.values().map(|v| v.0))),
            errors: crate::sat_sum(by_function.values().map(|v| v.1)),
            by_function,
            errors_by_result,
            repairs,
            explained,
            explained_by_result,
        }
    }

    pub(crate) fn hostname(&self) -> Option<String> {
        self.agg.session.as_ref().and_then(|s| s.hostname.clone())
    }

    /// The host name as the report shows it ([`host_label`]).
    pub(crate) fn host(&self) -> String {
        host_label(&self.hostname())
    }

    pub(crate) fn start(&self) -> u64 {
        self.agg.session_ts_ns.unwrap_or(self.agg.first_ts_ns)
    }

    /// Whether the errors of `function` with result `result` (a name or a number) are
    /// device faults of this process: the shim classifies by function and result, so all
    /// of them are, and it wrote `device_fault` instead of `call_failed` for them.
    pub(crate) fn fault_covers(&self, function: &str, result: &str) -> bool {
        let code = curesult::code_of(result);
        self.agg.faults.iter().any(|((f, _, r), fa)| {
            f == function && (fa.result_key(*r) == result || code == Some(*r))
        })
    }

    /// Whether the errors of `function` counted under `result` are the CUDA runtime's
    /// version probes as driver 580 answers them: `cuGetProcAddress(_v2)` answering
    /// `CUDA_ERROR_INVALID_VALUE` in a process whose runtime asked for a `cudaVersion` above
    /// the driver's (docs/design.md, fact 11). Traces of shims that did not know that answer
    /// count them as errors; newer ones count them in `runtime_probes.above_driver_version`.
    pub(crate) fn version_probes_cover(&self, function: &str, result: &str) -> bool {
        matches!(function, "cuGetProcAddress" | "cuGetProcAddress_v2")
            && (result == "CUDA_ERROR_INVALID_VALUE" || curesult::code_of(result) == Some(1))
            && self.runtime_above_driver()
    }

    /// Whether this process's CUDA runtime asked for entry points of a CUDA newer than its
    /// driver (the exit summary's highest `cudaVersion` against the session's driver).
    pub(crate) fn runtime_above_driver(&self) -> bool {
        let runtime = self
            .agg
            .exit
            .as_ref()
            .and_then(|e| e.runtime_probes.as_ref())
            .and_then(|r| r.max_cuda_version);
        let driver = self.agg.session.as_ref().and_then(|s| s.driver_version);
        matches!((runtime, driver), (Some(r), Some(d)) if r > d)
    }

    /// Errors of `cuGetProcAddress(_v2)` that [`Proc::version_probes_cover`] takes as version
    /// probes.
    pub(crate) fn version_probe_errors(&self) -> u64 {
        let mut n = 0u64;
        for (f, (_, _, by)) in &self.by_function {
            for (r, k) in by {
                if self.version_probes_cover(f, r.as_ref()) {
                    n = n.saturating_add(*k);
                }
            }
        }
        n
    }

    /// Whether a `lifetime_fault` of this process explains the errors of `function` with
    /// the result counted under `result` (the shim writes one record per distinct function,
    /// kind and context, and counts every such error in the exit summary).
    pub(crate) fn lifetime_covers(&self, function: &str, result: &str) -> bool {
        self.agg
            .lifetime_faults
            .iter()
            .any(|((_, f), la)| f == function && la.results.contains_key(result))
    }

    /// Errors of `function` with the result counted under `result` that launch or
    /// allocation faults account for, per kind.
    pub(crate) fn explained_errors(
        &self,
        function: &str,
        result: &str,
    ) -> [(ExplainedKind, u64); 2] {
        let get = |k| {
            self.explained_by_result
                .get(&(function, result.to_string(), k))
                .copied()
                .unwrap_or(0)
        };
        [
            (ExplainedKind::Launch, get(ExplainedKind::Launch)),
            (ExplainedKind::Alloc, get(ExplainedKind::Alloc)),
        ]
    }

    /// The launch (or allocation) faults of this process as the report lists them.
    pub(crate) fn explained_list(&self, kind: ExplainedKind) -> Vec<ProcessExplained> {
        self.agg
            .explained
            .iter()
            .filter(|((k, _, _, _), _)| *k == kind)
            .map(|((k, f, check, r), ea)| ProcessExplained {
                function: f.clone(),
                check: check.clone(),
                result: ea.result_key(*r),
                records: ea.records,
                errors: self
                    .explained
                    .get(&(*k, f.as_str(), check.as_str(), *r))
                    .copied()
                    .unwrap_or(0),
                refused_before_driver: ea.refused > 0,
            })
            .collect()
    }

    /// Whether a `device_fallback` of `function` for `requested` follows in this process.
    pub(crate) fn repaired(&self, function: &str, requested: i32) -> bool {
        self.agg
            .fallbacks
            .keys()
            .any(|(f, r, _)| f == function && *r == requested)
    }

    /// The process's fallbacks, requested -> chosen: the exit summary's, and those of the
    /// `device_fallback` records.
    pub(crate) fn fallback_map(&self) -> BTreeMap<String, i32> {
        let mut m: BTreeMap<String, i32> = self
            .agg
            .exit
            .as_ref()
            .map(|e| e.fallbacks.clone())
            .unwrap_or_default();
        for (_, r, c) in self.agg.fallbacks.keys() {
            m.entry(r.to_string()).or_insert(*c);
        }
        m
    }
}

/// The topology device of `ordinal` in a session start.
pub(crate) fn topology_device(s: &SessionInfo, ordinal: i32) -> Option<&TopologyDevice> {
    s.topology
        .as_ref()
        .and_then(|t| t.devices.iter().find(|d| d.ordinal == ordinal))
}

/// PCI bus id of `ordinal` in the process's session start.
pub(crate) fn chosen_pci(p: &Proc, ordinal: i32) -> Option<String> {
    let s = p.agg.session.as_ref()?;
    topology_device(s, ordinal)
        .and_then(|d| d.pci_bus_id.clone())
        .or_else(|| {
            s.devices
                .iter()
                .find(|d| d.ordinal == ordinal)
                .and_then(|d| d.pci_bus_id.clone())
        })
        .map(|s| s.to_ascii_lowercase())
}

/// The devices of a session start: the `devices` list, or, when that is empty, those of
/// the topology.
pub(crate) fn session_devices(s: &SessionInfo) -> Cow<'_, [DeviceEntry]> {
    match &s.topology {
        Some(t) if s.devices.is_empty() && !t.devices.is_empty() => Cow::Owned(
            t.devices
                .iter()
                .map(|d| DeviceEntry {
                    ordinal: d.ordinal,
                    name: d.name.clone(),
                    pci_bus_id: d.pci_bus_id.clone(),
                    total_mem_bytes: d.total_mem_bytes,
                })
                .collect(),
        ),
        _ => Cow::Borrowed(&s.devices),
    }
}

/// A compute mode as nvidia-smi prints it, from the trace's spelling.
pub(crate) fn compute_mode_name(mode: &str) -> String {
    match mode {
        "default" => "Default".into(),
        "exclusive_thread" => "Exclusive_Thread".into(),
        "prohibited" => "Prohibited".into(),
        "exclusive_process" => "Exclusive_Process".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_is_proportional_and_exact() {
        assert_eq!(split(8, &[2, 1]), [5, 3]);
        assert_eq!(split(3, &[1, 1]), [2, 1]);
        assert_eq!(split(0, &[4, 1]), [0, 0]);
        assert_eq!(split(7, &[0, 0]), [0, 0]);
        assert_eq!(
            split(u64::MAX, &[u64::MAX, 1]).iter().sum::<u64>(),
            u64::MAX
        );
    }
}
