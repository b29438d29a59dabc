//! Launch and allocation faults (trace schema 3): the `launch_fault` and `alloc_fault`
//! problems.
//!
//! The shim writes a `launch_fault` (`alloc_fault`) record, instead of `call_failed`, for a
//! kernel launch (allocation) that failed for a reason it can name: the check that failed,
//! the limit in force, the value asked for, and its explanation. One problem per (kind,
//! function, check) over all processes, with the distinct values, the shim's explanations
//! and the driver's own messages. Its `count` is the failed calls these records account for
//! ([`crate::report`]'s `explained_shares`): the function's errors with that result (exit
//! summary) less its `call_failed` records, at least one per record; the `cuda_error`
//! problem of the same result leaves them out.

use crate::aggregate::proc::Proc;
use crate::aggregate::{ExplainedAgg, ExplainedKind, FaultValueKey};
use crate::problems::parts::{listed, plural, processes_on_hosts, ranked, tally};
use crate::render::fmt;
use crate::report::{
    CallFaultDetail, FaultValue, NameCount, Problem, ProblemDetail, ProblemKind, Severity,
};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

/// Explanations and driver messages kept per problem.
const MAX_TEXTS: usize = 5;
/// Values kept per problem.
const MAX_VALUES: usize = 10;

/// The unit of a launch check's `limit` and `requested` (allocations: bytes).
pub(crate) fn unit(kind: ExplainedKind, check: &str) -> Option<&'static str> {
    match kind {
        ExplainedKind::Alloc => Some("bytes"),
        ExplainedKind::Launch => match check {
            "block_dim" | "threads_per_block" | "func_max_threads" | "launch_bounds" => {
                Some("threads")
            }
            "grid_dim" | "cooperative_grid" | "cluster_dim" => Some("blocks"),
            "shared_memory" => Some("bytes"),
            _ => None,
        },
    }
}

/// The check in words, for a title.
fn check_words(kind: ExplainedKind, check: &str, negative: bool) -> String {
    let s = match (kind, check) {
        (ExplainedKind::Launch, "block_dim") => "block dimension over the device's limit",
        (ExplainedKind::Launch, "threads_per_block") => {
            "more threads per block than the device allows"
        }
        (ExplainedKind::Launch, "func_max_threads") => {
            "more threads per block than the kernel allows (registers)"
        }
        (ExplainedKind::Launch, "launch_bounds") => {
            "more threads per block than the kernel's __launch_bounds__ allow"
        }
        (ExplainedKind::Launch, "grid_dim") => "grid dimension over the device's limit",
        (ExplainedKind::Launch, "zero_dim") => "a grid or block dimension of 0",
        (ExplainedKind::Launch, "shared_memory") => {
            "more dynamic shared memory than the kernel allows"
        }
        (ExplainedKind::Launch, "cluster_dim") => {
            "cluster dimensions that the grid or the device does not allow"
        }
        (ExplainedKind::Launch, "cooperative_grid") => {
            "cooperative grid larger than fits on the device at once"
        }
        (ExplainedKind::Launch, "no_context") => "launch without a current context",
        (ExplainedKind::Launch, "stream_context") => "stream of another context",
        (ExplainedKind::Launch, "destroyed_context") => "launch in a destroyed context",
        (ExplainedKind::Launch, "unknown") => "launch failure the shim could not name",
        (ExplainedKind::Alloc, "zero_size") => "allocation of 0 bytes",
        (ExplainedKind::Alloc, "exceeds_total") if negative => {
            "allocation larger than the device's memory (a negative size converted to size_t)"
        }
        (ExplainedKind::Alloc, "exceeds_total") => "allocation larger than the device's memory",
        (ExplainedKind::Alloc, "granularity") => {
            "size not a multiple of the allocation granularity"
        }
        (ExplainedKind::Alloc, "out_of_memory") => "out of memory",
        (ExplainedKind::Alloc, "unknown") => "allocation failure the shim could not name",
        (_, other) => return format!("check {other}"),
    };
    s.to_string()
}

/// What to do, most likely fix first.
fn remediation(kind: ExplainedKind, check: &str, facts: &Facts) -> Vec<String> {
    let mut v: Vec<&str> = Vec::new();
    match (kind, check) {
        (ExplainedKind::Launch, "block_dim") => v.push(
            "Keep each block dimension within the device's limits (x and y at most 1024, z at \
             most 64 on current GPUs) and the product within the threads-per-block limit; the \
             values above name the limit broken.",
        ),
        (ExplainedKind::Launch, "threads_per_block") => v.push(
            "Use at most the device's threads per block (1024 on current GPUs) for \
             blockDim.x * blockDim.y * blockDim.z, and cover the work with more blocks.",
        ),
        (ExplainedKind::Launch, "func_max_threads") => v.push(
            "The kernel uses too many registers for this block size: launch it with at most \
             its own limit (cuFuncGetAttribute CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, or \
             cudaOccupancyMaxPotentialBlockSize), or build it with __launch_bounds__ or \
             -maxrregcount so that it uses fewer registers.",
        ),
        (ExplainedKind::Launch, "launch_bounds") => v.push(
            "The kernel was compiled with __launch_bounds__ (or .maxntid) below this block \
             size: launch it with at most that many threads per block, or raise the bound in \
             its source and rebuild.",
        ),
        (ExplainedKind::Launch, "grid_dim") => v.push(
            "Keep gridDim.y and gridDim.z at most 65535: put the long extent in x (up to \
             2^31-1) or loop over it inside the kernel.",
        ),
        (ExplainedKind::Launch, "zero_dim") => v.push(
            "A grid or block dimension of 0 usually comes from an empty input: skip the launch \
             when there is no work.",
        ),
        (ExplainedKind::Launch, "shared_memory") => v.push(
            "Above 48 KiB of dynamic shared memory a kernel must opt in: call cuFuncSetAttribute \
             (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) or cudaFuncSetAttribute \
             (cudaFuncAttributeMaxDynamicSharedMemorySize) before the launch, up to the \
             device's opt-in maximum; or use less.",
        ),
        (ExplainedKind::Launch, "cluster_dim") => v.push(
            "Make every grid dimension a multiple of the cluster's, and keep a cluster at 8 \
             blocks or fewer (16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED on \
             compute capability 9.x).",
        ),
        (ExplainedKind::Launch, "cooperative_grid") => v.push(
            "A cooperative grid must be resident on the device at once: launch at most the \
             occupancy (cuOccupancyMaxActiveBlocksPerMultiprocessor) times the SM count, and \
             loop over the rest of the work inside the kernel.",
        ),
        (ExplainedKind::Launch, "no_context") => v.push(
            "Make a context current on every thread that launches (cuCtxSetCurrent, \
             cuCtxPushCurrent, or cudaSetDevice in the runtime API): a new thread starts \
             without one.",
        ),
        (ExplainedKind::Launch, "stream_context") => v.push(
            "Use a stream only in the context (and on the device) it was created in: make that \
             context current before the launch, or create the stream in the current context.",
        ),
        (ExplainedKind::Launch, "destroyed_context") => v.push(
            "A context was destroyed (cuCtxDestroy, cuDevicePrimaryCtxRelease or Reset) while \
             still in use: destroy contexts only after every thread is done with them, and make \
             a live context current before launching.",
        ),
        (ExplainedKind::Alloc, "zero_size") => v.push(
            "Skip the allocation when the size is 0: it usually comes from an empty tensor or a \
             size computed from an empty input.",
        ),
        (ExplainedKind::Alloc, "exceeds_total") => {
            if facts.negative > 0 {
                v.push(
                    "A negative size was converted to size_t: check the arithmetic that \
                     computed it (a subtraction that went below 0, an int overflow).",
                );
            }
            if facts.negative < facts.processes {
                v.push(
                    "No allocation of that size fits on the device: split the data, shard the \
                     model, or use a device with more memory.",
                );
            }
        }
        (ExplainedKind::Alloc, "granularity") => v.push(
            "Round cuMemCreate sizes up to a multiple of cuMemGetAllocationGranularity \
             (CU_MEM_ALLOC_GRANULARITY_MINIMUM; 2 MiB on current GPUs).",
        ),
        (ExplainedKind::Alloc, "out_of_memory") => {
            if facts.host {
                v.push(
                    "Pinned host memory cannot be swapped and may be capped by RLIMIT_MEMLOCK or \
                     a container's memory limit: pin less, or keep the rest in pageable memory.",
                );
            }
            if facts.genuine > 0 || facts.fragmented == 0 {
                v.push(
                    "Free what is no longer needed or ask for less (a smaller batch, model \
                     shards, caching allocator limits such as PYTORCH_CUDA_ALLOC_CONF), and \
                     check nvidia-smi for other processes on the device.",
                );
            }
            if facts.fragmented > 0 {
                v.push(
                    "When the request is smaller than the free memory, that memory is \
                     fragmented or held back by a caching allocator or a pool: allocate fewer, \
                     larger blocks early, release cached memory (torch.cuda.empty_cache()) or \
                     lower the pool's release threshold.",
                );
            }
            if facts.rooms {
                v.push(
                    "Another device had room: spread the work over the GPUs (one process per \
                     GPU, CUDA_VISIBLE_DEVICES or LOCAL_RANK to device per rank).",
                );
            }
        }
        _ => v.push(
            "The shim could not name the limit: the driver's message above says what it \
             refused; run `seedance-analyze explain` on the result for the usual causes.",
        ),
    }
    v.into_iter().map(str::to_string).collect()
}

/// Facts about the processes of one problem that choose the remediation.
#[derive(Default)]
struct Facts {
    processes: u64,
    /// Processes with a negative size (wrapped to `size_t`).
    negative: u64,
    /// Processes with an out-of-memory failure larger than the free memory.
    genuine: u64,
    /// Processes with one smaller than the free memory (and none larger).
    fragmented: u64,
    /// Another device had room in some process.
    rooms: bool,
    /// Pinned host memory.
    host: bool,
}

/// The values of a `launch_fault` or `alloc_fault` problem in words ([`value_text`]);
/// none for other kinds.
pub(crate) fn value_texts(p: &Problem) -> Vec<String> {
    p.call_fault()
        .map(|d| {
            d.values
                .iter()
                .map(|v| value_text(p.kind(), d, v))
                .collect()
        })
        .unwrap_or_default()
}

/// One value of a problem in words: `requested 1,056 threads, limit 1,024 threads (device
/// 0; 1 process)`, `requested 2.0 GiB (2,147,483,648 bytes), 768.0 MiB free of 80.0 GiB: a
/// genuine shortage (device 0; 1 process)`.
pub(crate) fn value_text(kind: ProblemKind, d: &CallFaultDetail, v: &FaultValue) -> String {
    let check = d.check.as_str();
    let host = d.functions.iter().any(|f| f.name.contains("Host"));
    let mut t = String::new();
    if kind == ProblemKind::AllocFault {
        match (v.requested, v.requested_signed.filter(|s| *s < 0)) {
            (Some(r), Some(s)) => t.push_str(&format!(
                "requested {} bytes ({} as a signed size: a negative size converted to size_t)",
                fmt::count(r),
                fmt::signed(s)
            )),
            (Some(r), None) => t.push_str(&format!("requested {}", fmt::bytes_exact(r))),
            (None, _) => t.push_str("requested size unknown"),
        }
        match (check, v.limit) {
            ("zero_size", _) => {}
            ("exceeds_total", Some(l)) => t.push_str(&format!(", total memory {}", fmt::bytes(l))),
            ("granularity", Some(l)) => {
                t.push_str(&format!(", granularity {}", fmt::bytes_exact(l)))
            }
            ("out_of_memory", l) => {
                match (v.free_bytes.or(l), v.total_bytes) {
                    (Some(free), Some(total)) => t.push_str(&format!(
                        ", {} free of {}",
                        fmt::bytes(free),
                        fmt::bytes(total)
                    )),
                    (Some(free), None) => t.push_str(&format!(", {} free", fmt::bytes(free))),
                    _ => t.push_str(", free memory unknown"),
                }
                match v.shortage {
                    Some(true) => t.push_str(": a genuine shortage"),
                    Some(false) => t.push_str(
                        ": less than the free memory (fragmentation, or memory held back by an \
                         allocator)",
                    ),
                    None => {}
                }
            }
            (_, Some(l)) => t.push_str(&format!(", limit {}", fmt::bytes_exact(l))),
            (_, None) => {}
        }
    } else {
        let u = |n: u64| match d.unit.as_deref() {
            Some("bytes") => fmt::bytes_exact(n),
            Some(u) => format!("{} {u}", fmt::count(n)),
            None => fmt::count(n),
        };
        match (check, v.requested, v.limit) {
            ("zero_dim", r, l) => t.push_str(&format!(
                "requested a grid or block dimension of {}, limit at least {}",
                r.unwrap_or(0),
                l.unwrap_or(1)
            )),
            (_, r, l) => {
                let mut parts = Vec::new();
                if let Some(r) = r {
                    parts.push(format!("requested {}", u(r)));
                }
                if let Some(l) = l {
                    parts.push(format!("limit {}", u(l)));
                }
                t.push_str(&parts.join(", "));
            }
        }
    }
    let place = match v.device {
        Some(d) => format!("device {d}"),
        None if host => "pinned host memory".to_string(),
        None => "device unknown".to_string(),
    };
    t.push_str(&format!(
        " ({place}; {} {})",
        fmt::count(v.processes),
        plural(v.processes, "process", "processes")
    ));
    t
}

/// The problem detail of a fault of `kind`.
fn detail(kind: ExplainedKind, d: CallFaultDetail) -> ProblemDetail {
    match kind {
        ExplainedKind::Launch => ProblemDetail::LaunchFault(d),
        ExplainedKind::Alloc => ProblemDetail::AllocFault(d),
    }
}

/// The processes with faults of one (kind, function, check).
#[derive(Default)]
struct Acc<'a> {
    procs: Vec<&'a Proc<'a>>,
    hosts: BTreeSet<String>,
    errors: u64,
    /// Result number -> (its key, errors).
    results: BTreeMap<u32, (String, u64)>,
    /// Value -> (processes, records).
    values: BTreeMap<&'a FaultValueKey, (u64, u64)>,
    explanations: BTreeMap<&'a str, u64>,
    driver_messages: BTreeMap<&'a str, u64>,
    refused: u64,
    facts: Facts,
    unknown_free: u64,
    /// What the processes held themselves, in words, one per process.
    live: Vec<String>,
    /// Device -> (processes, most free bytes).
    rooms: BTreeMap<i32, (u64, u64)>,
    rooms_none: u64,
    rooms_unknown: u64,
}

/// Adds the faults of one process `p` of one (kind, function, check) to `a`.
fn add_process<'a>(
    a: &mut Acc<'a>,
    p: &'a Proc<'a>,
    (kind, f, check): (ExplainedKind, &'a str, &'a str),
    entries: Vec<(u32, &'a ExplainedAgg)>,
) {
    a.procs.push(p);
    a.hosts.insert(p.host());
    let mut values: BTreeMap<&FaultValueKey, u64> = BTreeMap::new();
    let mut explanations: BTreeSet<&str> = BTreeSet::new();
    let mut messages: BTreeSet<&str> = BTreeSet::new();
    let mut refused = false;
    let mut live: Option<(u64, u64)> = None;
    let mut rooms: Option<BTreeMap<i32, u64>> = None;
    for (r, ea) in entries {
        let n = p.explained.get(&(kind, f, check, r)).copied().unwrap_or(0);
        a.errors.sat_add(n);
        let e = a.results.entry(r).or_insert_with(|| (ea.result_key(r), 0));
        e.1.sat_add(n);
        for (v, k) in &ea.values {
            values.entry(v).or_default().sat_add(k);
        }
        explanations.extend(ea.explanations.iter().map(String::as_str));
        messages.extend(ea.driver_messages.iter().map(String::as_str));
        refused |= ea.refused > 0;
        if let Some(l) = ea.live {
            if live.is_none_or(|m| l.0 > m.0) {
                live = Some(l);
            }
        }
        if let Some(rs) = &ea.rooms {
            let m = rooms.get_or_insert_with(BTreeMap::new);
            for (d, free) in rs {
                let x = m.entry(*d).or_default();
                *x = (*x).max(*free);
            }
        }
    }
    let (mut negative, mut genuine, mut fragmented) = (false, false, false);
    for (v, k) in values {
        negative |= v.requested_signed.is_some_and(|s| s < 0);
        if check == "out_of_memory" {
            match shortage(check, v) {
                Some(true) => genuine = true,
                Some(false) => fragmented = true,
                None => {}
            }
        }
        let e = a.values.entry(v).or_default();
        e.0 += 1;
        e.1.sat_add(k);
    }
    a.facts.processes += 1;
    a.facts.negative.sat_add(u64::from(negative));
    if check == "out_of_memory" {
        if genuine {
            a.facts.genuine += 1;
        } else if fragmented {
            a.facts.fragmented += 1;
        } else {
            a.unknown_free += 1;
        }
        if let Some((bytes, allocations)) = live {
            a.live.push(if bytes == 0 && allocations == 0 {
                "none".to_string()
            } else {
                format!(
                    "{} in {} live {}",
                    fmt::bytes(bytes),
                    fmt::count(allocations),
                    plural(allocations, "allocation", "allocations")
                )
            });
        }
        match rooms {
            None => a.rooms_unknown += 1,
            Some(m) if m.is_empty() => a.rooms_none += 1,
            Some(m) => {
                for (d, free) in m {
                    let x = a.rooms.entry(d).or_default();
                    x.0 += 1;
                    x.1 = x.1.max(free);
                }
            }
        }
    }
    a.facts.host |= f.contains("Host");
    a.refused.sat_add(u64::from(refused));
    for e in explanations {
        *a.explanations.entry(e).or_default() += 1;
    }
    for m in messages {
        *a.driver_messages.entry(m).or_default() += 1;
    }
}

/// The launch and allocation faults of `procs` grouped by (kind, function, check).
fn group_faults<'a>(procs: &'a [Proc<'a>]) -> BTreeMap<(ExplainedKind, &'a str, &'a str), Acc<'a>> {
    let mut groups: BTreeMap<(ExplainedKind, &str, &str), Acc> = BTreeMap::new();
    for p in procs {
        let mut mine: BTreeMap<(ExplainedKind, &str, &str), Vec<_>> = BTreeMap::new();
        for ((kind, f, check, r), ea) in &p.agg.explained {
            mine.entry((*kind, f.as_str(), check.as_str()))
                .or_default()
                .push((*r, ea));
        }
        for ((kind, f, check), entries) in mine {
            let a = groups.entry((kind, f, check)).or_default();
            add_process(a, p, (kind, f, check), entries);
        }
    }
    groups
}

/// The values of a group, most processes first (at most [`MAX_VALUES`]).
fn values_of(a: &Acc, check: &str) -> Vec<FaultValue> {
    let mut values: Vec<FaultValue> = a
        .values
        .iter()
        .filter(|(v, _)| v.limit.is_some() || v.requested.is_some())
        .map(|(v, (procs, records))| FaultValue {
            device: v.device,
            limit: v.limit,
            requested: v.requested,
            requested_signed: v.requested_signed,
            free_bytes: v.free_bytes,
            total_bytes: v.total_bytes,
            shortage: shortage(check, v),
            processes: *procs,
            records: *records,
        })
        .collect();
    // Stable: the map's order breaks ties.
    values.sort_by_key(|v| std::cmp::Reverse((v.processes, v.records)));
    values.truncate(MAX_VALUES);
    values
}

/// The facts bearing on the cause of a group's faults; notes in `a.facts` whether another
/// device had room.
fn context_of(kind: ExplainedKind, check: &str, a: &mut Acc) -> Vec<String> {
    let procs_word = |n: u64| format!("{} {}", fmt::count(n), plural(n, "process", "processes"));
    let mut context = Vec::new();
    if check == "out_of_memory" && kind == ExplainedKind::Alloc {
        if a.facts.genuine > 0 {
            context.push(format!(
                "a genuine shortage (the request was larger than the free memory) in {}",
                procs_word(a.facts.genuine)
            ));
        }
        if a.facts.fragmented > 0 {
            context.push(format!(
                "the request was smaller than the free memory (fragmentation, or memory held \
                 back by a caching allocator, a pool or another process) in {}",
                procs_word(a.facts.fragmented)
            ));
        }
        if a.unknown_free > 0 {
            context.push(format!(
                "free memory at the failure unknown in {}",
                procs_word(a.unknown_free)
            ));
        }
        if !a.live.is_empty() {
            context.push(format!(
                "what the failing processes held themselves on the device: {}",
                tally(std::mem::take(&mut a.live))
            ));
        }
        if !a.rooms.is_empty() {
            let list: Vec<String> = a
                .rooms
                .iter()
                .map(|(d, (n, free))| {
                    format!(
                        "device {d} ({} free) in {}",
                        fmt::bytes(*free),
                        procs_word(*n)
                    )
                })
                .collect();
            context.push(format!(
                "other devices with room for the request (NVML): {}",
                list.join(", ")
            ));
            a.facts.rooms = true;
        }
        if a.rooms_none > 0 {
            context.push(format!(
                "no other visible device had room (NVML) in {}",
                procs_word(a.rooms_none)
            ));
        }
        if a.rooms_unknown > 0 && !a.facts.host {
            context.push(format!(
                "whether another device had room is unknown (no NVML) in {}",
                procs_word(a.rooms_unknown)
            ));
        }
    }
    if a.refused > 0 {
        context.push(format!(
            "refused by the shim before reaching the driver (SEEDANCE_VALIDATE=pre) in {}; \
             the program got the code the driver returns for this fault",
            procs_word(a.refused)
        ));
    }
    if a.procs.len() > 1 {
        context.extend(listed(&a.procs));
    }
    context
}

/// The `launch_fault` and `alloc_fault` problems: one per (kind, function, check).
pub(crate) fn launch_alloc_problems(procs: &[Proc], out: &mut Vec<Problem>) {
    for ((kind, function, check), mut a) in group_faults(procs) {
        let nprocs = a.procs.len() as u64;
        let (code, result) = a
            .results
            .iter()
            .max_by(|x, y| x.1 .1.cmp(&y.1 .1).then_with(|| y.0.cmp(x.0)))
            .map(|(c, (k, _))| (Some(*c), Some(k.clone())))
            .unwrap_or((None, None));
        let result_label = match (&result, code) {
            (Some(r), Some(c)) if *r != c.to_string() => format!(", {r} {c}"),
            (Some(r), _) => format!(", {r}"),
            _ => String::new(),
        };
        let unit = unit(kind, check);
        let values = values_of(&a, check);
        let context = context_of(kind, check, &mut a);
        let label = match kind {
            ExplainedKind::Launch => "launch fault",
            ExplainedKind::Alloc => "allocation fault",
        };
        out.push(Problem {
            rank: 0,
            severity: Severity::Error,
            title: format!(
                "{label}: {} in {function} ({check}{result_label}): {} {} in {}",
                check_words(kind, check, a.facts.negative > 0),
                fmt::count(a.errors),
                plural(a.errors, "error", "errors"),
                processes_on_hosts(nprocs, a.hosts.len())
            ),
            key: format!(
                "{}/{}/{}",
                kind.event(),
                key_part(function),
                key_part(check)
            ),
            count: a.errors,
            processes: nprocs,
            hosts: a.hosts.into_iter().collect(),
            context,
            remediation: remediation(kind, check, &a.facts),
            detail: detail(
                kind,
                CallFaultDetail {
                    code,
                    result,
                    functions: vec![NameCount {
                        name: function.to_string(),
                        count: a.errors,
                    }],
                    check: check.to_string(),
                    unit: unit.map(str::to_string),
                    values,
                    explanations: ranked(a.explanations, MAX_TEXTS),
                    driver_messages: ranked(a.driver_messages, MAX_TEXTS),
                    processes_refused: a.refused,
                },
            ),
        });
    }
}

/// A name as a part of a problem key: `%` and `/` written `%25` and `%2F`, so that keys of
/// different (function, check) pairs never collide.
fn key_part(s: &str) -> String {
    s.replace('%', "%25").replace('/', "%2F")
}

/// Out of memory: whether the request was larger than the free memory.
fn shortage(check: &str, v: &FaultValueKey) -> Option<bool> {
    if check != "out_of_memory" {
        return None;
    }
    Some(v.requested? > v.free_bytes.or(v.limit)?)
}
