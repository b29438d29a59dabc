//! The problems a report lists: one module per problem kind or family of kinds, each with
//! its finder.

pub(crate) mod cuda_error;
pub mod curesult;
pub(crate) mod device_fault;
pub(crate) mod input;
pub(crate) mod launch_alloc;
pub(crate) mod lifetime;
pub(crate) mod parts;
pub(crate) mod records;
pub(crate) mod stray_context;
pub(crate) mod topology;
pub(crate) mod versions;

use crate::aggregate::proc::Proc;
use crate::aggregate::Aggregate;
use crate::report::{DeviceContexts, Problem};

/// What the finders read: the aggregate, its processes and the `device_contexts` section.
pub(crate) struct Input<'a> {
    /// The whole aggregate (input counters, schema versions).
    pub agg: &'a Aggregate,
    /// One entry per process.
    pub procs: &'a [Proc<'a>],
    /// The `device_contexts` section of the report.
    pub device_contexts: &'a [DeviceContexts],
}

/// A problem finder: appends the problems of its kinds to `out`.
type Finder = fn(&Input, &mut Vec<Problem>);

/// Every finder, in the order they run (the report sorts their problems afterwards).
const FINDERS: &[Finder] = &[
    |i, out| cuda_error::cuda_problems(i.procs, out),
    |i, out| device_fault::device_fault_problems(i.procs, out),
    |i, out| launch_alloc::launch_alloc_problems(i.procs, out),
    |i, out| lifetime::lifetime_problems(i.procs, out),
    |i, out| stray_context::stray_problems(i.procs, i.device_contexts, out),
    |i, out| topology::topology_problems(i.procs, out),
    records::dropped_records,
    records::missing_records,
    versions::runtime_newer_than_driver,
    versions::procaddr_unmatched,
    records::trace_cut,
    records::no_exit_summary,
    records::no_session_start,
    input::malformed_input,
    input::unreadable_files,
    versions::mixed_driver_versions,
    input::newer_schema,
];

/// The problems of `input`, most severe first, then most frequent, then by title, ranked
/// from 1.
pub(crate) fn find(input: &Input) -> Vec<Problem> {
    let mut problems = Vec::new();
    for finder in FINDERS {
        finder(input, &mut problems);
    }
    problems.sort_by(|a, b| {
        (a.severity, std::cmp::Reverse(a.count), &a.title).cmp(&(
            b.severity,
            std::cmp::Reverse(b.count),
            &b.title,
        ))
    });
    for (i, p) in problems.iter_mut().enumerate() {
        p.rank = i as u32 + 1;
    }
    problems
}
