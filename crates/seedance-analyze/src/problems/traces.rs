//! The problems of the traces themselves: dropped or missing records, processes without
//! exit summary, unreadable input, newer schema versions, and CUDA runtimes newer than
//! their driver. The problems of the calls are in [`crate::problems::cuda_error`],
//! [`crate::problems::device_fault`], [`crate::problems::topology`], [`crate::problems::launch_alloc`], [`crate::problems::lifetime`] and
//! [`crate::problems::stray_context`].

use crate::aggregate::proc::Proc;
use crate::aggregate::Aggregate;
use crate::problems::parts::{hosts_of, listed, plural, processes_on_hosts, simple_problem, tally};
use crate::render::fmt;
use crate::report::{Problem, ProblemDetail, Severity};
use std::collections::{BTreeMap, BTreeSet};

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
        let hosts = hosts_of(&dropped);
        out.push(simple_problem(
            ProblemDetail::DroppedRecords,
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
        let hosts = hosts_of(&missing);
        out.push(simple_problem(
            ProblemDetail::MissingRecords,
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
        let hosts = hosts_of(&unmatched);
        out.push(simple_problem(
            ProblemDetail::ProcaddrUnmatched,
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

    let cut: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.exit.is_none() && p.agg.trace_cut.is_some())
        .collect();
    if !cut.is_empty() {
        let hosts = hosts_of(&cut);
        let n = cut.len() as u64;
        let errors: std::collections::BTreeSet<&str> = cut
            .iter()
            .filter_map(|p| p.agg.trace_cut.as_deref())
            .collect();
        let mut context = listed(&cut);
        context.push(format!(
            "the write failed with: {}",
            errors.into_iter().collect::<Vec<_>>().join("; ")
        ));
        out.push(simple_problem(
            ProblemDetail::TraceCut,
            Severity::Warning,
            format!(
                "{} whose trace was cut by a refused write (disk full or file size limit) on \
                 {} {}",
                format_args!("{n} {}", plural(n, "process", "processes")),
                hosts.len(),
                plural(hosts.len() as u64, "host", "hosts")
            ),
            n,
            &cut,
            context,
            &[
                "The file system holding the trace filled up (ENOSPC), or the process's file \
                 size limit was reached (EFBIG, ulimit -f): the trace ends at its trace_cut \
                 record. The process was not killed by this, but nothing it did afterwards, \
                 its exit summary included, is in the trace: free space there, or bound the \
                 trace with SEEDANCE_TRACE_MAX_BYTES.",
                "Its call counts are unknown; its errors are counted from the records written \
                 before the cut.",
            ],
        ));
    }

    let no_exit: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.exit.is_none() && !p.agg.forked_child() && p.agg.trace_cut.is_none())
        .collect();
    if !no_exit.is_empty() {
        let hosts = hosts_of(&no_exit);
        let n = no_exit.len() as u64;
        out.push(simple_problem(
            ProblemDetail::NoExitSummary,
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
            ProblemDetail::NoSessionStart,
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
            ProblemDetail::MalformedInput,
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
            ProblemDetail::UnreadableFiles,
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
            ProblemDetail::MixedDriverVersions,
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
            ProblemDetail::NewerSchema,
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
    /// Per (host, runtime, driver): look-ups answered version-not-sufficient, look-ups above
    /// the driver answered `CUDA_ERROR_INVALID_VALUE`, processes, names, libraries.
    #[derive(Default)]
    struct Group<'a> {
        not_sufficient: u64,
        invalid_value: u64,
        procs: Vec<&'a Proc<'a>>,
        names: BTreeSet<String>,
        libs: BTreeSet<String>,
    }
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
        let g = groups.entry((p.host(), runtime, driver)).or_default();
        g.not_sufficient = g
            .not_sufficient
            .saturating_add(probes.version_not_sufficient);
        // Older traces counted the INVALID_VALUE answers as errors of the look-up.
        let invalid = probes
            .above_driver_version
            .saturating_add(p.version_probe_errors());
        g.invalid_value = g.invalid_value.saturating_add(invalid);
        g.procs.push(p);
        g.names.extend(probes.unavailable.iter().cloned());
        let libs = p.agg.exit.as_ref().map(|e| &e.cuda_libraries);
        for l in libs.into_iter().flatten() {
            g.libs.insert(match &l.version {
                Some(v) => format!("{} {v}", l.name),
                None => l.name.clone(),
            });
        }
    }
    for ((host, runtime, driver), g) in groups {
        let Group {
            not_sufficient,
            invalid_value,
            procs,
            names,
            libs,
        } = g;
        let n = not_sufficient.saturating_add(invalid_value);
        let mut answers = Vec::new();
        if invalid_value > 0 {
            answers.push(format!(
                "CUDA_ERROR_INVALID_VALUE to {} {} of a version above its own",
                fmt::count(invalid_value),
                plural(invalid_value, "look-up", "look-ups")
            ));
        }
        if not_sufficient > 0 {
            answers.push(format!(
                "CUDA_ERROR_NOT_FOUND (symbolStatus CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) \
                 to {} {}",
                fmt::count(not_sufficient),
                plural(not_sufficient, "look-up", "look-ups")
            ));
        }
        let answered = if answers.is_empty() {
            "the driver refused none of them".to_string()
        } else {
            format!(
                "the driver answered {}: version probes, as expected",
                answers.join(" and ")
            )
        };
        let mut context = vec![format!(
            "{host}: {} whose CUDA runtime asked for CUDA {} entry points of a CUDA {} \
             driver; {answered}",
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
            ProblemDetail::RuntimeNewerThanDriver,
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
