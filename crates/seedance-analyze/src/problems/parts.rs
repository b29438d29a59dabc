//! Building blocks the problem finders share: counting and listing the processes a
//! problem concerns, plural words, and the common shape of a [`Problem`].

use crate::aggregate::proc::Proc;
use crate::report::{NameCount, Problem, ProblemDetail, Severity};
use std::collections::{BTreeMap, BTreeSet};

/// Explanations kept per problem.
pub(crate) const MAX_EXPLANATIONS: usize = 5;

/// Processes listed by name in the context of a problem.
const LISTED_PROCESSES: usize = 10;

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
    format!("{} pid {} {} ({})", p.host(), p.agg.pid, exe, p.agg.file)
}

pub(crate) fn simple_problem(
    detail: ProblemDetail,
    severity: Severity,
    title: String,
    count: u64,
    affected: &[&Proc],
    context: Vec<String>,
    remediation: &[&str],
) -> Problem {
    let hosts = hosts_of(affected);
    Problem {
        rank: 0,
        severity,
        title,
        key: detail.kind().name(),
        count,
        processes: affected.len() as u64,
        hosts: hosts.into_iter().collect(),
        context,
        remediation: remediation.iter().map(|s| s.to_string()).collect(),
        detail,
    }
}

/// The processes by host name, start time, pid and file: the order processes are listed in.
pub(crate) fn sorted<'a>(procs: &'a [Proc<'a>]) -> Vec<&'a Proc<'a>> {
    let mut sorted: Vec<&Proc> = procs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.hostname(), a.start(), a.agg.pid, &a.agg.file).cmp(&(
            b.hostname(),
            b.start(),
            b.agg.pid,
            &b.agg.file,
        ))
    });
    sorted
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

/// Whether a problem's processes were repaired, in words: `all` when every one was, `not
/// repaired` when none was, `{some} in N of them` otherwise.
pub(crate) fn repair_outcome(all_repaired: bool, repaired: u64, all: &str, some: &str) -> String {
    if all_repaired {
        all.to_string()
    } else if repaired == 0 {
        "not repaired".to_string()
    } else {
        format!("{some} in {repaired} of them")
    }
}

/// The hosts of `procs`, each once, by name.
pub(crate) fn hosts_of(procs: &[&Proc]) -> BTreeSet<String> {
    procs.iter().map(|p| p.host()).collect()
}

/// Functions with their counts, most first, then by name.
pub(crate) fn name_counts(m: &BTreeMap<&str, u64>) -> Vec<NameCount> {
    let mut v: Vec<NameCount> = m
        .iter()
        .map(|(f, n)| NameCount {
            name: f.to_string(),
            count: *n,
        })
        .collect();
    v.sort_by(|x, y| y.count.cmp(&x.count).then_with(|| x.name.cmp(&y.name)));
    v
}

/// Most frequent first, then in text order; at most `max`.
pub(crate) fn ranked(m: BTreeMap<&str, u64>, max: usize) -> Vec<String> {
    let mut v: Vec<(&str, u64)> = m.into_iter().collect();
    v.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    v.into_iter()
        .take(max)
        .map(|(s, _)| s.to_string())
        .collect()
}
