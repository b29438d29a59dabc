//! The `cuda_error` problems: one per CUresult seen (counts from exit summaries, which are
//! complete, plus `call_failed` records of processes without one), with the functions
//! involved, argument examples and facts from the session starts that bear on the cause.
//! The remediation text comes from [`crate::explain`].
//!
//! Errors that the shim explained as device faults (a `device_fault` record of the same
//! process, function and result) are left out of the `cuda_error` problems: they are the
//! `device_fault` problems of [`crate::faults`], and the `cuda_error` problem of the same
//! result, if errors remain, says how many it left to them. Launch and allocation faults
//! (schema 3) likewise: the errors they account for (see [`crate::explained`]) are the
//! `launch_fault` and `alloc_fault` problems'. Lifetime faults (schema 4) too: the errors of
//! a (function, result) that a `lifetime_fault` of the same process names are the
//! `lifetime_fault` problem's.

use crate::aggregate::{Examples, ExplainedKind, MAX_EXAMPLES};
use crate::explain;
use crate::fmt;
use crate::parts::{cvd, name_counts, plural, processes_on_hosts, tally};
use crate::proc::Proc;
use crate::report::{ArgExample, NameCount, Problem, ProblemKind, Severity};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

fn severity_of(code: Option<u32>) -> Severity {
    match code {
        // CUDA_ERROR_NOT_READY, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: polling and
        // idempotent set-up; CUDA_ERROR_DEINITIALIZED: the runtime's own teardown.
        Some(600) | Some(704) | Some(4) => Severity::Info,
        Some(500) => Severity::Warning,
        _ => Severity::Error,
    }
}

/// Whether the errors counted under `functions` are the CUDA runtime's entry-point
/// probes: `cuGetProcAddress(_v2)` answering `CUDA_ERROR_NOT_FOUND` (500), how the runtime
/// learns which entry points a driver has (traces of schema 4 and older count them as
/// errors; schema 5 keeps them in the exit summary's `runtime_probes`).
fn only_probes(code: Option<u32>, functions: &[NameCount]) -> bool {
    code == Some(500)
        && functions
            .iter()
            .all(|f| matches!(f.name.as_str(), "cuGetProcAddress" | "cuGetProcAddress_v2"))
}

/// Results the shim treats as device faults when a device-taking call returns them
/// (`CUDA_ERROR_INVALID_DEVICE`, `CUDA_ERROR_DEVICE_UNAVAILABLE`, and
/// `CUDA_ERROR_OUT_OF_MEMORY` for context creation).
const DEVICE_FAULT_CODES: [u32; 3] = [101, 46, 2];

/// The CUDA runtime's own final `cuDevicePrimaryCtxRelease`, made from its teardown after
/// the driver shut down, gets `CUDA_ERROR_DEINITIALIZED` at every healthy exit (measured on
/// an H200, driver 580.159); the shim neither announces it nor lists it in the exit
/// summary's `calls_after_deinit`. Not a problem: a process whose exit summary lists the
/// release among its calls after deinitialisation keeps it.
fn runtime_teardown_release(p: &Proc, function: &str) -> bool {
    function.starts_with("cuDevicePrimaryCtxRelease")
        && p.agg
            .exit
            .as_ref()
            .is_some_and(|e| !e.calls_after_deinit.contains_key(function))
}

pub(crate) fn cuda_problems(procs: &[Proc], out: &mut Vec<Problem>) {
    struct Acc<'a> {
        count: u64,
        functions: BTreeMap<&'a str, u64>,
        procs: Vec<&'a Proc<'a>>,
        hosts: BTreeSet<String>,
        examples: BTreeMap<&'a str, Examples>,
        code: Option<u32>,
        /// Errors of functions that a `device_fallback` of the same process repaired
        /// (traces without `device_fault` records).
        repaired: u64,
        /// "function ordinal a -> b" -> processes.
        fallbacks: BTreeMap<String, u64>,
    }
    let mut by_result: BTreeMap<&str, Acc> = BTreeMap::new();
    // Errors left to the device_fault, launch_fault and alloc_fault problems, by result.
    let mut to_faults: BTreeMap<&str, u64> = BTreeMap::new();
    let mut to_lifetime: BTreeMap<&str, u64> = BTreeMap::new();
    let mut to_explained: BTreeMap<(&str, ExplainedKind), u64> = BTreeMap::new();
    // Failures the programs recovered from, by result: info, never a cuda_error problem.
    let mut recovered: BTreeMap<&str, Recovered> = BTreeMap::new();
    for p in procs {
        for (f, (_, _, by)) in &p.by_function {
            for (r, n) in by {
                if *n == 0 {
                    continue;
                }
                let r: &str = r.as_ref();
                if r == "CUDA_ERROR_DEINITIALIZED" && runtime_teardown_release(p, f) {
                    continue;
                }
                if p.version_probes_cover(f, r) {
                    // Counted by the runtime_newer_than_driver problem (info).
                    continue;
                }
                if p.fault_covers(f, r) {
                    to_faults.entry(r).or_default().sat_add(n);
                    continue;
                }
                if p.lifetime_covers(f, r) {
                    to_lifetime.entry(r).or_default().sat_add(n);
                    continue;
                }
                let mut n = *n;
                let back = p.recovered(f, r).min(n);
                if back > 0 {
                    let a = recovered.entry(r).or_default();
                    a.count.sat_add(back);
                    a.functions.entry(f).or_default().sat_add(back);
                    if !a.procs.iter().any(|q| std::ptr::eq(*q, p)) {
                        a.procs.push(p);
                    }
                    a.hosts.insert(p.host());
                    n -= back;
                }
                if n == 0 {
                    continue;
                }
                for (kind, k) in p.explained_errors(f, r) {
                    let k = k.min(n);
                    if k > 0 {
                        to_explained.entry((r, kind)).or_default().sat_add(k);
                        n -= k;
                    }
                }
                if n == 0 {
                    continue;
                }
                let n = &n;
                let a = by_result.entry(r).or_insert_with(|| Acc {
                    count: 0,
                    functions: BTreeMap::new(),
                    procs: Vec::new(),
                    hosts: BTreeSet::new(),
                    examples: BTreeMap::new(),
                    code: explain::code_of(r),
                    repaired: 0,
                    fallbacks: BTreeMap::new(),
                });
                a.count.sat_add(n);
                a.functions.entry(f).or_default().sat_add(n);
                if !a.procs.iter().any(|q| std::ptr::eq(*q, p)) {
                    a.procs.push(p);
                }
                a.hosts.insert(p.host());
                if a.code.is_some_and(|c| DEVICE_FAULT_CODES.contains(&c)) {
                    let mut repaired = false;
                    for (ff, req, chosen) in p.agg.fallbacks.keys() {
                        if ff == f {
                            repaired = true;
                            *a.fallbacks
                                .entry(format!("{ff} ordinal {req} -> {chosen}"))
                                .or_default() += 1;
                        }
                    }
                    if repaired {
                        a.repaired.sat_add(n);
                    }
                }
            }
        }
        for (f, m) in &p.agg.failed {
            for (r, fl) in m {
                if p.version_probes_cover(f, r) {
                    continue;
                }
                if let Some(a) = by_result.get_mut(r.as_str()) {
                    a.code = a.code.or(Some(fl.code));
                    a.examples
                        .entry(f.as_str())
                        .or_default()
                        .merge(&fl.examples);
                }
            }
        }
    }
    recovered_problems(recovered, out);
    for (result, a) in by_result {
        let functions = name_counts(&a.functions);
        let mut examples: Vec<ArgExample> = a
            .examples
            .iter()
            .flat_map(|(f, ex)| {
                ex.0.iter().map(move |(args, n)| ArgExample {
                    function: f.to_string(),
                    args: serde_json::from_str(args).unwrap_or(serde_json::Value::Null),
                    count: *n,
                })
            })
            .collect();
        examples.sort_by(|x, y| {
            y.count
                .cmp(&x.count)
                .then_with(|| x.function.cmp(&y.function))
                .then_with(|| x.args.to_string().cmp(&y.args.to_string()))
        });
        examples.truncate(MAX_EXAMPLES);
        // Arguments that differ call by call (pointers, handles) give examples seen once
        // each: one of them says as much as five.
        if examples.len() == MAX_EXAMPLES
            && examples.iter().all(|e| e.count == 1)
            && a.count > MAX_EXAMPLES as u64
        {
            examples.truncate(1);
        }
        let mut context = Vec::new();
        match a.code {
            Some(101) | Some(100) => {
                context.push(format!(
                    "visible devices in the affected processes: {}",
                    tally(a.procs.iter().map(|p| match &p.agg.session {
                        Some(s) => s.devices.len().to_string(),
                        None => "unknown".to_string(),
                    }))
                ));
                context.push(format!(
                    "CUDA_VISIBLE_DEVICES in the affected processes: {}",
                    tally(a.procs.iter().map(|p| cvd(p)))
                ));
            }
            Some(2) => {
                let mems: BTreeSet<String> = a
                    .procs
                    .iter()
                    .filter_map(|p| p.agg.session.as_ref())
                    .flat_map(|s| s.devices.iter())
                    .map(|d| {
                        format!(
                            "{} {}",
                            d.name.as_deref().unwrap_or("device"),
                            d.total_mem_bytes
                                .map(fmt::bytes)
                                .unwrap_or_else(|| "?".into())
                        )
                    })
                    .collect();
                if !mems.is_empty() {
                    context.push(format!(
                        "device memory in the affected processes: {}",
                        mems.into_iter().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            Some(34) => {
                context.push(format!(
                    "libcuda loaded from: {}",
                    tally(a.procs.iter().map(|p| {
                        p.agg
                            .session
                            .as_ref()
                            .and_then(|s| s.libcuda_path.clone())
                            .unwrap_or_else(|| "unknown".to_string())
                    }))
                ));
            }
            _ => {}
        }
        if a.repaired > 0 {
            let list: Vec<String> = a
                .fallbacks
                .iter()
                .map(|(k, n)| format!("{k} ({n} {})", plural(*n, "process", "processes")))
                .collect();
            context.push(format!(
                "{} of these {} {} in functions that the fix mode repaired by fallback in the \
                 same process (device_fallback records): {}",
                fmt::count(a.repaired),
                fmt::count(a.count),
                plural(a.count, "error was", "errors were"),
                list.join(", ")
            ));
        }
        if let Some(n) = to_faults.get(result) {
            context.push(format!(
                "{} more {} with this result {} device faults, counted in the device_fault \
                 {} instead",
                fmt::count(*n),
                plural(*n, "error", "errors"),
                plural(*n, "was a", "were"),
                plural(*n, "problem", "problems")
            ));
        }
        if let Some(n) = to_lifetime.get(result) {
            context.push(format!(
                "{} more {} with this result {} lifetime faults, counted in the lifetime_fault \
                 {} instead",
                fmt::count(*n),
                plural(*n, "error", "errors"),
                plural(*n, "was a", "were"),
                plural(*n, "problem", "problems")
            ));
        }
        for kind in [ExplainedKind::Launch, ExplainedKind::Alloc] {
            if let Some(n) = to_explained.get(&(result, kind)) {
                let (what, whats) = match kind {
                    ExplainedKind::Launch => ("a launch fault", "launch faults"),
                    ExplainedKind::Alloc => ("an allocation fault", "allocation faults"),
                };
                context.push(format!(
                    "{} more {} with this result {} {}, counted in the {} {} instead",
                    fmt::count(*n),
                    plural(*n, "error", "errors"),
                    plural(*n, "was", "were"),
                    plural(*n, what, whats),
                    kind.event(),
                    plural(*n, "problem", "problems")
                ));
            }
        }
        let name_code = match a.code {
            Some(c) if c.to_string() != result => format!("{result} ({c})"),
            _ => result.to_string(),
        };
        let remediation: Vec<String> = match a.code {
            Some(c) if explain::is_known(c) => explain::remediation(c),
            _ => vec![format!(
                "This code is not in the {} table; run `seedance-analyze explain {}` and check the \
                 driver's cuda.h.",
                explain::TABLE_VERSION,
                a.code.map(|c| c.to_string()).unwrap_or_else(|| result.to_string())
            )],
        };
        let nprocs = a.procs.len() as u64;
        let mut severity = severity_of(a.code);
        if only_probes(a.code, &functions) {
            severity = Severity::Info;
            context.insert(
                0,
                "expected: the CUDA runtime asks cuGetProcAddress for every entry point it \
                 knows, and a driver older than the runtime answers CUDA_ERROR_NOT_FOUND for \
                 those it lacks (version probes, not faults)"
                    .to_string(),
            );
        } else if a.code == Some(4) {
            context.insert(
                0,
                "expected at exit: calls made after the driver shut down (the runtime's own \
                 teardown); see process_health for calls after deinitialisation"
                    .to_string(),
            );
        }
        out.push(Problem {
            rank: 0,
            kind: ProblemKind::CudaError,
            severity,
            title: format!(
                "{name_code}: {} {} in {}",
                fmt::count(a.count),
                plural(a.count, "error", "errors"),
                processes_on_hosts(nprocs, a.hosts.len())
            ),
            key: format!("cuda_error/{result}"),
            code: a.code,
            result: Some(result.to_string()),
            count: a.count,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            functions,
            examples,
            context,
            remediation,
            fault: None,
            requested_ordinal: None,
            processes_repaired: None,
            explanations: Vec::new(),
            check: None,
            unit: None,
            values: Vec::new(),
            driver_messages: Vec::new(),
            processes_refused: None,
        });
    }
}

/// Failures of one result that the programs recovered from.
#[derive(Default)]
struct Recovered<'a> {
    count: u64,
    functions: BTreeMap<&'a str, u64>,
    procs: Vec<&'a Proc<'a>>,
    hosts: BTreeSet<String>,
}

/// One info problem per result whose failures the programs recovered from: the same entry
/// point succeeded on the same thread right after (the exit summary's
/// `recovered_by_result`). Counted, never a warning or an error.
fn recovered_problems(recovered: BTreeMap<&str, Recovered>, out: &mut Vec<Problem>) {
    for (result, a) in recovered {
        let code = explain::code_of(result);
        let name_code = match code {
            Some(c) if c.to_string() != result => format!("{result} ({c})"),
            _ => result.to_string(),
        };
        let nprocs = a.procs.len() as u64;
        out.push(Problem {
            rank: 0,
            kind: ProblemKind::CudaError,
            severity: Severity::Info,
            title: format!(
                "{name_code}: {} {} the program recovered from in {}",
                fmt::count(a.count),
                plural(a.count, "failure", "failures"),
                processes_on_hosts(nprocs, a.hosts.len())
            ),
            key: format!("cuda_error_recovered/{result}"),
            code,
            result: Some(result.to_string()),
            count: a.count,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            functions: name_counts(&a.functions),
            examples: Vec::new(),
            context: vec![
                "expected: the same entry point succeeded on the same thread right after (a \
                 retry once a context was current, or a fallback to another handle type or \
                 size); the failed calls are in the trace (call_failed) and counted in the \
                 exit summary's recovered_by_result"
                    .to_string(),
            ],
            remediation: vec![
                "Nothing to do: the program recovered from these failures by itself.".to_string(),
            ],
            fault: None,
            requested_ordinal: None,
            processes_repaired: None,
            explanations: Vec::new(),
            check: None,
            unit: None,
            values: Vec::new(),
            driver_messages: Vec::new(),
            processes_refused: None,
        });
    }
}
