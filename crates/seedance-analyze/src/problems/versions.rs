//! The problems of mismatched versions: a driver newer than the shim (entry points passed
//! through uninstrumented), different drivers across the processes, a CUDA runtime newer than
//! its driver.

use crate::aggregate::proc::Proc;
use crate::problems::parts::{hosts_of, plural, processes_on_hosts, simple_problem, sorted, tally};
use crate::problems::Input;
use crate::render::fmt;
use crate::report::{Problem, ProblemDetail, Severity};
use std::collections::{BTreeMap, BTreeSet};

/// `procaddr_unmatched`: entry points passed through uninstrumented (a driver newer than
/// the shim).
pub(crate) fn procaddr_unmatched(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
}

/// `mixed_driver_versions`: processes report different driver versions.
pub(crate) fn mixed_driver_versions(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
    let versions: BTreeSet<i32> = input
        .procs
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
}

/// One info problem per (host, runtime version, driver version) where a process's CUDA
/// runtime asked for entry points of a newer CUDA than its driver's (exit summaries'
/// `runtime_probes`, trace schema 5): `runtime 13.1 on a 13.0 driver: 136 entry points
/// unavailable`.
pub(crate) fn runtime_newer_than_driver(input: &Input, out: &mut Vec<Problem>) {
    let sorted = sorted(input.procs);
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
    let mut groups: BTreeMap<(String, i32, i32), Group> = BTreeMap::new();
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
