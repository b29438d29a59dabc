//! The exit summary: the call counters, failures by result, and what every fault module
//! counted (repairs, fallbacks, device questions, the lifetime report, stray contexts) and
//! the runtime's probes (`crate::rt::probes`), in the trace's `exit_summary` form. The one
//! place that reads them all.

use crate::hooks::ids::HookId;
use crate::rt::{config, output};
use seedance_cuda::CUresult;
use seedance_hotpath::Counters;
use seedance_trace::{ExitSummary, FunctionStats};
use std::collections::BTreeMap;

/// The current counters as a summary, for the periodic metrics file; `None` before the
/// session exists or in a forked child.
pub fn current() -> Option<ExitSummary> {
    if config::forked() {
        return None;
    }
    build(output::trace_writer().map_or(0, |w| w.dropped()))
}

/// The counters as an exit summary (also what the metrics file shows); `None` when nothing
/// was ever reported (no session state). `dropped` is the trace writer's count of dropped
/// records.
pub fn build(dropped: u64) -> Option<ExitSummary> {
    let st = output::collected()?;
    let mut counts = Counters::global().snapshot();
    // Successful allocations and frees are counted on each thread's held-allocation line.
    for (id, n) in crate::faults::alloc::HELD_COUNTED
        .iter()
        .zip(seedance_hotpath::work::held_counts())
    {
        counts[*id as usize].calls += n;
    }
    let mut functions: BTreeMap<String, FunctionStats> = BTreeMap::new();
    for id in HookId::ALL {
        let c = counts[*id as usize];
        if c.calls > 0 {
            functions.insert(
                id.name().to_string(),
                FunctionStats {
                    calls: c.calls,
                    errors: c.errors,
                    ..FunctionStats::default()
                },
            );
        }
    }
    for ((fid, code), n) in st.errors {
        let Some(id) = HookId::ALL.get(fid) else {
            continue;
        };
        let key = match CUresult(code).name() {
            Some(name) if *id != HookId::cudaSetDevice => name.to_string(),
            _ => code.to_string(),
        };
        let stats = functions.entry(id.name().to_string()).or_default();
        *stats.errors_by_result.entry(key).or_insert(0) += n;
    }
    for ((fid, code), n) in crate::rt::deferred::recovered_counts() {
        let Some(id) = HookId::ALL.get(fid) else {
            continue;
        };
        let key = CUresult(code)
            .name()
            .map_or_else(|| code.to_string(), str::to_string);
        let stats = functions.entry(id.name().to_string()).or_default();
        *stats.recovered_by_result.entry(key).or_insert(0) += n;
    }
    let mut repairs = crate::faults::devices::repairs();
    repairs.extend(crate::faults::lifetime::report::repairs());
    let mut summary = ExitSummary {
        duration_ns: seedance_trace::writer::now_ns().saturating_sub(st.start_ns),
        functions,
        dropped_records: dropped + st.held_dropped,
        procaddr_unmatched: st.unmatched,
        repairs,
        fallbacks: crate::faults::devices::fallbacks(),
        device_questions: crate::faults::devices::questions(),
        unknown_orderings: crate::faults::hazard::unknown_orderings(),
        untouched_entry_points: crate::rt::probes::untouched_names(),
        ..ExitSummary::default()
    };
    if let Some(r) = crate::faults::lifetime::exit::exit_report_if_ready() {
        summary.live_contexts = r.live_contexts.clone();
        summary.leaked_allocations = r.leaked_allocations.clone();
        summary.unsynchronized_streams = r.unsynchronized_streams.clone();
        summary.calls_after_deinit = r.calls_after_deinit.clone();
    }
    (summary.device_use, summary.stray_contexts) = crate::faults::lifetime::stray::stray_summary();
    summary.runtime_probes = crate::rt::probes::probes();
    Some(summary)
}

/// The device memory still held, by library, largest first
/// ([`crate::faults::alloc::holders_by_device`]). Cold: once, at exit.
pub fn memory_holders() -> Vec<seedance_trace::MemoryHolder> {
    let mut v: Vec<seedance_trace::MemoryHolder> = crate::faults::alloc::holders_by_device()
        .into_iter()
        .map(
            |((device, library), (allocations, bytes))| seedance_trace::MemoryHolder {
                library,
                device,
                allocations,
                bytes,
            },
        )
        .collect();
    v.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.library.cmp(&b.library))
    });
    v
}

/// Most bytes of `/proc/self/maps` read for the library list (a process maps a few hundred
/// files; a pathological one cannot make the exit read without end).
const MAX_MAPS_BYTES: u64 = 4 << 20;

/// The CUDA libraries mapped into the process now, with their file-name versions
/// ([`seedance_core::libraries`]). Cold: once, at exit.
pub fn cuda_libraries() -> Vec<seedance_trace::CudaLibrary> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let Ok(f) = std::fs::File::open("/proc/self/maps") else {
        return Vec::new();
    };
    if f.take(MAX_MAPS_BYTES).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    seedance_core::libraries::from_maps(&String::from_utf8_lossy(&bytes))
        .into_iter()
        .map(|l| seedance_trace::CudaLibrary {
            name: l.name.to_string(),
            path: l.path,
            version: l.version,
        })
        .collect()
}
