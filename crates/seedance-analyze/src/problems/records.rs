//! The problems of the traces' own records: records dropped by the shim or missing from the
//! files, traces cut by a refused write, processes without exit summary or session start.

use crate::aggregate::proc::Proc;
use crate::problems::parts::{
    hosts_of, listed, plural, processes_on_hosts, simple_problem, sorted,
};
use crate::problems::Input;
use crate::render::fmt;
use crate::report::{Problem, ProblemDetail, Severity};
use std::collections::BTreeSet;

/// `dropped_records`: records the shim could not write (exit summaries' `dropped_records`).
pub(crate) fn dropped_records(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
}

/// `missing_records`: gaps in sequence numbers beyond the records the shim counted as
/// dropped.
pub(crate) fn missing_records(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
}

/// `trace_cut`: processes whose trace ends at a refused write.
pub(crate) fn trace_cut(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
    let cut: Vec<&Proc> = sorted
        .iter()
        .copied()
        .filter(|p| p.agg.exit.is_none() && p.agg.trace_cut.is_some())
        .collect();
    if !cut.is_empty() {
        let hosts = hosts_of(&cut);
        let n = cut.len() as u64;
        let errors: BTreeSet<&str> = cut
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
}

/// `no_exit_summary`: processes killed or still running.
pub(crate) fn no_exit_summary(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
}

/// `no_session_start`: traces whose head is missing.
pub(crate) fn no_session_start(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
}

fn unexplained_missing(p: &Proc) -> u64 {
    let dropped = p.agg.exit.as_ref().map_or(0, |e| e.dropped_records);
    p.agg.missing_records().saturating_sub(dropped)
}
