//! The problems of a report: what went wrong, ranked, each with what to do.
//!
//! One `cuda_error` problem per CUresult seen (counts from exit summaries, which are
//! complete, plus `call_failed` records of processes without one), with the functions
//! involved, argument examples and facts from the session starts that bear on the cause;
//! then problems of the traces themselves (dropped or missing records, processes without
//! exit summary, unreadable input). The remediation text comes from [`crate::explain`].
//!
//! Errors that the shim explained as device faults (a `device_fault` record of the same
//! process, function and result) are left out of the `cuda_error` problems: they are the
//! `device_fault` problems of [`crate::faults`], and the `cuda_error` problem of the same
//! result, if errors remain, says how many it left to them. Launch and allocation faults
//! (schema 3) likewise: the errors they account for (see [`crate::explained`]) are the
//! `launch_fault` and `alloc_fault` problems'. Lifetime faults (schema 4) too: the errors of
//! a (function, result) that a `lifetime_fault` of the same process names are the
//! `lifetime_fault` problem's.

use crate::aggregate::{Aggregate, Examples, ExplainedKind, MAX_EXAMPLES};
use crate::explain;
use crate::fmt;
use crate::proc::Proc;
use crate::report::{host_label, ArgExample, NameCount, Problem, ProblemKind, Severity};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

/// Processes listed by name in the context of a problem.
const LISTED_PROCESSES: usize = 10;

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

/// Counts of values, rendered `"a" (2), unset (1)`, most frequent first.
pub(crate) fn tally(values: impl IntoIterator<Item = String>) -> String {
    let mut m: BTreeMap<String, u64> = BTreeMap::new();
    for v in values {
        *m.entry(v).or_default() += 1;
    }
    let mut v: Vec<(String, u64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.iter()
        .map(|(k, n)| {
            format!(
                "{k} ({n} {})",
                if *n == 1 { "process" } else { "processes" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn cvd(p: &Proc) -> String {
    match p
        .agg
        .session
        .as_ref()
        .map(|s| s.cuda_visible_devices.as_deref())
    {
        Some(Some(v)) => format!("CUDA_VISIBLE_DEVICES={v:?}"),
        Some(None) => "unset".to_string(),
        None => "no session start".to_string(),
    }
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
                if p.fault_covers(f, r) {
                    to_faults.entry(r).or_default().sat_add(n);
                    continue;
                }
                if p.lifetime_covers(f, r) {
                    to_lifetime.entry(r).or_default().sat_add(n);
                    continue;
                }
                let mut n = *n;
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
                a.hosts.insert(host_label(&p.hostname()));
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
    for (result, a) in by_result {
        let mut functions: Vec<NameCount> = a
            .functions
            .iter()
            .map(|(f, n)| NameCount {
                name: f.to_string(),
                count: *n,
            })
            .collect();
        functions.sort_by(|x, y| y.count.cmp(&x.count).then_with(|| x.name.cmp(&y.name)));
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
            Some(c) if explain::is_known(c) => {
                explain::steps(c).iter().map(|s| s.to_string()).collect()
            }
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

pub(crate) fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

pub(crate) fn processes_on_hosts(procs: u64, hosts: usize) -> String {
    format!(
        "{procs} {} on {hosts} {}",
        plural(procs, "process", "processes"),
        plural(hosts as u64, "host", "hosts")
    )
}

fn describe(p: &Proc) -> String {
    let exe = p
        .agg
        .session
        .as_ref()
        .and_then(|s| s.executable.as_deref())
        .unwrap_or("?");
    format!(
        "{} pid {} {} ({})",
        host_label(&p.hostname()),
        p.agg.pid,
        exe,
        p.agg.file
    )
}

pub(crate) fn simple_problem(
    kind: ProblemKind,
    severity: Severity,
    title: String,
    count: u64,
    affected: &[&Proc],
    context: Vec<String>,
    remediation: &[&str],
) -> Problem {
    let hosts: BTreeSet<String> = affected.iter().map(|p| host_label(&p.hostname())).collect();
    Problem {
        rank: 0,
        kind,
        severity,
        title,
        key: serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        code: None,
        result: None,
        count,
        processes: affected.len() as u64,
        hosts: hosts.into_iter().collect(),
        functions: Vec::new(),
        examples: Vec::new(),
        context,
        remediation: remediation.iter().map(|s| s.to_string()).collect(),
        fault: None,
        requested_ordinal: None,
        processes_repaired: None,
        explanations: Vec::new(),
        check: None,
        unit: None,
        values: Vec::new(),
        driver_messages: Vec::new(),
        processes_refused: None,
    }
}

pub(crate) fn listed(affected: &[&Proc]) -> Vec<String> {
    let mut v: Vec<String> = affected
        .iter()
        .take(LISTED_PROCESSES)
        .map(|p| describe(p))
        .collect();
    if affected.len() > LISTED_PROCESSES {
        v.push(format!(
            "... and {} more",
            affected.len() - LISTED_PROCESSES
        ));
    }
    v
}

pub(crate) fn other_problems(agg: &Aggregate, procs: &[Proc], out: &mut Vec<Problem>) {
    let mut sorted: Vec<&Proc> = procs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.hostname(), a.start(), a.agg.pid, &a.agg.file).cmp(&(
            b.hostname(),
            b.start(),
            b.agg.pid,
            &b.agg.file,
        ))
    });

    let dropped: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.exit.as_ref().is_some_and(|e| e.dropped_records > 0))
        .collect();
    if !dropped.is_empty() {
        let n: u64 = crate::sat_sum(
            dropped
                .iter()
                .map(|p| p.agg.exit.as_ref().map_or(0, |e| e.dropped_records)),
        );
        let hosts: BTreeSet<String> = dropped.iter().map(|p| host_label(&p.hostname())).collect();
        out.push(simple_problem(
            ProblemKind::DroppedRecords,
            Severity::Warning,
            format!(
                "{} trace {} dropped by the shim in {}",
                fmt::count(n),
                plural(n, "record", "records"),
                processes_on_hosts(dropped.len() as u64, hosts.len())
            ),
            n,
            &dropped,
            listed(&dropped),
            &[
                "The shim's writer queue overflowed or the trace file could not be written. The \
                 exit summaries' call and error counts are still complete; only details \
                 (call_failed records) are missing.",
                "Write traces to a local disk, not a network file system, and check that it is \
                 not full.",
                "A storm of failing calls fills the queue: fix the most frequent error above first.",
            ],
        ));
    }

    let missing: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| unexplained_missing(p) > 0)
        .collect();
    if !missing.is_empty() {
        let n: u64 = crate::sat_sum(missing.iter().map(|p| unexplained_missing(p)));
        let hosts: BTreeSet<String> = missing.iter().map(|p| host_label(&p.hostname())).collect();
        out.push(simple_problem(
            ProblemKind::MissingRecords,
            Severity::Warning,
            format!(
                "{} trace {} missing (gaps in sequence numbers) in {}",
                fmt::count(n),
                plural(n, "record", "records"),
                processes_on_hosts(missing.len() as u64, hosts.len())
            ),
            n,
            &missing,
            listed(&missing),
            &[
                "Records were lost between the shim and this analysis: lines corrupted or cut, \
                 a file truncated or copied while being written, or records dropped by a process \
                 that never wrote its exit summary.",
                "Copy traces only after the processes ended, and check the input section for \
                 malformed lines.",
            ],
        ));
    }

    runtime_newer_than_driver(&sorted, out);

    let unmatched: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| {
            p.agg
                .exit
                .as_ref()
                .is_some_and(|e| !e.procaddr_unmatched.is_empty())
        })
        .collect();
    if !unmatched.is_empty() {
        let names: BTreeSet<&str> = unmatched
            .iter()
            .filter_map(|p| p.agg.exit.as_ref())
            .flat_map(|e| e.procaddr_unmatched.iter().map(String::as_str))
            .collect();
        let hosts: BTreeSet<String> = unmatched
            .iter()
            .map(|p| host_label(&p.hostname()))
            .collect();
        out.push(simple_problem(
            ProblemKind::ProcaddrUnmatched,
            Severity::Warning,
            format!(
                "{} driver {} passed through uninstrumented (cuGetProcAddress returned an \
                 unknown variant) in {}",
                names.len(),
                plural(names.len() as u64, "entry point", "entry points"),
                processes_on_hosts(unmatched.len() as u64, hosts.len())
            ),
            names.len() as u64,
            &unmatched,
            vec![format!(
                "entry points: {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            )],
            &[
                "The driver is newer than the shim's table of ABI variants: these calls were \
                 neither checked nor counted. Upgrade seedance-fix to a version that knows \
                 this driver.",
            ],
        ));
    }

    let no_exit: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.exit.is_none())
        .collect();
    if !no_exit.is_empty() {
        let hosts: BTreeSet<String> = no_exit.iter().map(|p| host_label(&p.hostname())).collect();
        let n = no_exit.len() as u64;
        out.push(simple_problem(
            ProblemKind::NoExitSummary,
            Severity::Warning,
            format!(
                "{} without an exit summary (killed or still running) on {} {}",
                format_args!("{n} {}", plural(n, "process", "processes")),
                hosts.len(),
                plural(hosts.len() as u64, "host", "hosts")
            ),
            n,
            &no_exit,
            listed(&no_exit),
            &[
                "The process was killed (OOM killer, SIGKILL, a job or pod time limit, a crash in \
                 native code) or was still running when the traces were collected: check the job's \
                 exit status and `dmesg` for the OOM killer.",
                "Its call counts are unknown; its errors are counted from its call_failed records \
                 and its fault records (at least one failed call each).",
            ],
        ));
    }

    let no_start: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.session.is_none())
        .collect();
    if !no_start.is_empty() {
        let n = no_start.len() as u64;
        out.push(simple_problem(
            ProblemKind::NoSessionStart,
            Severity::Warning,
            format!(
                "{n} {} without a session start record",
                plural(n, "trace", "traces")
            ),
            n,
            &no_start,
            listed(&no_start),
            &[
                "The beginning of the trace is missing (file cut or rotated, or its first line \
                 corrupted): host, executable and devices are unknown for these processes.",
            ],
        ));
    }

    let c = &agg.counters;
    let bad = c.malformed_lines + c.truncated_lines + c.oversized_lines;
    if bad > 0 {
        out.push(simple_problem(
            ProblemKind::MalformedInput,
            Severity::Info,
            format!(
                "{} of {} {} could not be read as trace records",
                fmt::count(bad),
                fmt::count(c.lines),
                plural(c.lines, "line", "lines")
            ),
            bad,
            &[],
            vec![format!(
                "malformed: {}, truncated last lines: {}, oversized: {}",
                c.malformed_lines, c.truncated_lines, c.oversized_lines
            )],
            &[
                "Truncated last lines are normal for processes that were killed. Other malformed \
                 lines mean the files were corrupted or mixed with other output: keep each trace \
                 file to the shim alone.",
            ],
        ));
    }

    if c.unreadable_files + c.files_with_read_errors > 0 {
        let n = c.unreadable_files + c.files_with_read_errors;
        out.push(simple_problem(
            ProblemKind::UnreadableFiles,
            Severity::Warning,
            format!(
                "{n} {} could not be read completely",
                plural(n, "file", "files")
            ),
            n,
            &[],
            c.errors.iter().map(|(p, e)| format!("{p}: {e}")).collect(),
            &["Check permissions and, for .gz files, that they were completely written."],
        ));
    }

    let versions: BTreeSet<i32> = procs
        .iter()
        .filter_map(|p| p.agg.session.as_ref().and_then(|s| s.driver_version))
        .collect();
    if versions.len() > 1 {
        let with: Vec<&Proc> = sorted
            .iter()
            .copied()
            .filter(|p| {
                p.agg
                    .session
                    .as_ref()
                    .and_then(|s| s.driver_version)
                    .is_some()
            })
            .collect();
        out.push(simple_problem(
            ProblemKind::MixedDriverVersions,
            Severity::Info,
            format!(
                "{} different driver versions across the processes: {}",
                versions.len(),
                versions.iter().map(|v| fmt::driver_version(*v)).collect::<Vec<_>>().join(", ")
            ),
            versions.len() as u64,
            &with,
            vec![format!(
                "driver versions: {}",
                tally(with.iter().map(|p| {
                    p.agg
                        .session
                        .as_ref()
                        .and_then(|s| s.driver_version)
                        .map(fmt::driver_version)
                        .unwrap_or_default()
                }))
            )],
            &["Errors that appear on some hosts only may follow the driver version: compare them."],
        ));
    }

    if c.newer_schema_records > 0 {
        out.push(simple_problem(
            ProblemKind::NewerSchema,
            Severity::Info,
            format!(
                "{} {} written with a newer trace schema than this analyzer knows",
                fmt::count(c.newer_schema_records),
                plural(c.newer_schema_records, "record", "records")
            ),
            c.newer_schema_records,
            &[],
            Vec::new(),
            &["Upgrade seedance-analyze to see the new event kinds; known fields are still read."],
        ));
    }
}

fn unexplained_missing(p: &Proc) -> u64 {
    let dropped = p.agg.exit.as_ref().map_or(0, |e| e.dropped_records);
    p.agg.missing_records().saturating_sub(dropped)
}

/// One info problem per (host, runtime version, driver version) where a process's CUDA
/// runtime asked for entry points of a newer CUDA than its driver's (exit summaries'
/// `runtime_probes`, trace schema 5): `runtime 13.1 on a 13.0 driver: 136 entry points
/// unavailable`.
fn runtime_newer_than_driver<'a>(sorted: &[&'a Proc<'a>], out: &mut Vec<Problem>) {
    type Group<'a> = (u64, Vec<&'a Proc<'a>>, BTreeSet<String>, BTreeSet<String>);
    let mut groups: BTreeMap<(String, i32, i32), Group<'a>> = BTreeMap::new();
    for p in sorted.iter().copied() {
        let Some(probes) = p.agg.exit.as_ref().and_then(|e| e.runtime_probes.as_ref()) else {
            continue;
        };
        let Some(runtime) = probes.max_cuda_version else {
            continue;
        };
        let Some(driver) = p.agg.session.as_ref().and_then(|s| s.driver_version) else {
            continue;
        };
        if runtime <= driver && probes.version_not_sufficient == 0 {
            continue;
        }
        let g = groups
            .entry((host_label(&p.hostname()), runtime, driver))
            .or_insert_with(|| (0, Vec::new(), BTreeSet::new(), BTreeSet::new()));
        g.0 = g.0.saturating_add(probes.version_not_sufficient);
        g.1.push(p);
        g.2.extend(probes.unavailable.iter().cloned());
        let libs = p.agg.exit.as_ref().map(|e| &e.cuda_libraries);
        for l in libs.into_iter().flatten() {
            g.3.insert(match &l.version {
                Some(v) => format!("{} {v}", l.name),
                None => l.name.clone(),
            });
        }
    }
    for ((host, runtime, driver), (n, procs, names, libs)) in groups {
        let mut context = vec![format!(
            "{host}: {} whose CUDA runtime asked for CUDA {} entry points of a CUDA {} \
             driver; the driver answered CUDA_ERROR_NOT_FOUND (symbolStatus \
             CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT), as expected",
            processes_on_hosts(procs.len() as u64, 1),
            fmt::driver_version(runtime),
            fmt::driver_version(driver)
        )];
        if !names.is_empty() {
            context.push(format!(
                "unavailable entry points: {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        if !libs.is_empty() {
            context.push(format!(
                "CUDA libraries loaded: {}",
                libs.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        let mut p = simple_problem(
            ProblemKind::RuntimeNewerThanDriver,
            Severity::Info,
            format!(
                "runtime {} on a {} driver: {} {} unavailable",
                fmt::driver_version(runtime),
                fmt::driver_version(driver),
                fmt::count(n),
                plural(n, "entry point", "entry points")
            ),
            n,
            &procs,
            context,
            &[
                "Nothing to fix: the runtime works with what the driver has. To use the newer \
                 entry points, install a driver of the runtime's CUDA version or newer.",
            ],
        );
        p.key = format!("runtime_newer_than_driver/{host}/{runtime}/{driver}");
        out.push(p);
    }
}
