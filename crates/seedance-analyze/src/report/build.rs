//! The report builder: turns a finished [`Aggregate`] into a [`Report`] (the schema in
//! [`crate::report`]), section by section; the repairs, process health and device contexts
//! sections are [`crate::report::repairs`]'s, [`crate::report::health`]'s and
//! [`crate::report::device_contexts`]'s, the problems those of the finders of
//! [`crate::problems`].

use crate::aggregate::proc::{compute_mode_name, session_devices, topology_device, Proc};
use crate::aggregate::{Aggregate, ExplainedKind, Timeline};
use crate::problems;
use crate::read::records::DeviceEntry;
use crate::render::fmt;
use crate::report::health;
use crate::report::repairs;
use crate::report::{
    DeviceReport, ErrorsOverTime, FileError, FunctionReport, HostReport, InputReport, Overview,
    ProcessDevice, ProcessFault, ProcessReport, ProcessStatus, ProcessTopology, Report, TimeBucket,
    VisibilityStop, REPORT_VERSION,
};
use crate::SatAdd;
use std::collections::{BTreeMap, BTreeSet};

/// Builds the report from a finished aggregate; `paths` are the inputs as given.
pub fn build_report(agg: Aggregate, paths: &[String]) -> Report {
    let procs: Vec<Proc> = agg.processes.iter().map(Proc::new).collect();
    let input = input_report(&agg, paths);
    let processes = process_reports(&procs);
    let devices = device_reports(&procs);
    let functions = function_reports(&procs);
    let hosts = host_reports(&procs);
    let repairs = repairs::repairs_report(&procs);
    let device_contexts = crate::report::device_contexts::device_contexts(&procs);
    let problems = problems::find(&problems::Input {
        agg: &agg,
        procs: &procs,
        device_contexts: &device_contexts,
    });
    let overview = overview(&procs, &hosts, &devices, &functions);
    Report {
        report_version: REPORT_VERSION,
        input,
        overview,
        problems,
        hosts,
        processes,
        devices,
        functions,
        errors_over_time: errors_over_time(&agg.timeline),
        repairs,
        process_health: health::process_health(&procs),
        device_contexts,
    }
}

fn input_report(agg: &Aggregate, paths: &[String]) -> InputReport {
    let c = &agg.counters;
    InputReport {
        paths: paths.to_vec(),
        files_seen: c.files_seen,
        files_read: c.files_read,
        gzip_files: c.gzip_files,
        files_skipped: c.files_skipped,
        skipped_files: c.skipped_files.clone(),
        empty_files: c.empty_files,
        unreadable_files: c.unreadable_files,
        files_with_read_errors: c.files_with_read_errors,
        errors: c
            .errors
            .iter()
            .map(|(p, e)| FileError {
                path: p.clone(),
                error: e.clone(),
            })
            .collect(),
        bytes: c.bytes,
        bytes_uncompressed: c.bytes_uncompressed,
        lines: c.lines,
        records: c.records,
        records_by_kind: c.records_by_kind.clone(),
        malformed_lines: c.malformed_lines,
        truncated_lines: c.truncated_lines,
        oversized_lines: c.oversized_lines,
        newer_schema_records: c.newer_schema_records,
        unknown_event_kinds: c.unknown_event_kinds.clone(),
    }
}

fn process_reports(procs: &[Proc]) -> Vec<ProcessReport> {
    let mut out: Vec<ProcessReport> = procs
        .iter()
        .map(|p| {
            let a = p.agg;
            let s = a.session.as_ref();
            let start = p.start();
            let end = a.exit_ts_ns.unwrap_or(a.last_ts_ns).max(start);
            ProcessReport {
                hostname: p.hostname(),
                pid: a.pid,
                executable: s.and_then(|s| s.executable.clone()),
                argv: s.map(|s| s.argv.clone()).unwrap_or_default(),
                file: a.file.clone(),
                status: if a.exit.is_some() {
                    ProcessStatus::Exited
                } else if a.forked_child() {
                    ProcessStatus::ForkedChild
                } else if a.trace_cut.is_some() {
                    ProcessStatus::TraceCut
                } else {
                    ProcessStatus::NoExitSummary
                },
                has_session_start: s.is_some(),
                start_ts_ns: start,
                start_time: fmt::timestamp(start),
                end_ts_ns: end,
                duration_ns: a
                    .exit
                    .as_ref()
                    .map(|e| e.duration_ns)
                    .unwrap_or(end - start),
                mode: s.map(|s| s.mode.clone()),
                shim_version: s.map(|s| s.shim_version.clone()),
                driver_version: s.and_then(|s| s.driver_version),
                libcuda_path: s.and_then(|s| s.libcuda_path.clone()),
                cuda_visible_devices: s.and_then(|s| s.cuda_visible_devices.clone()),
                cuda_device_order: s.and_then(|s| s.cuda_device_order.clone()),
                devices: s
                    .map(|s| {
                        session_devices(s)
                            .iter()
                            .map(|d| {
                                let t = topology_device(s, d.ordinal);
                                ProcessDevice {
                                    ordinal: d.ordinal,
                                    name: d.name.clone(),
                                    pci_bus_id: d.pci_bus_id.clone(),
                                    total_mem_bytes: d.total_mem_bytes,
                                    uuid: t.and_then(|t| t.uuid.clone()),
                                    physical_index: t.and_then(|t| t.physical_index),
                                    nvml_index: t.and_then(|t| t.nvml_index),
                                    compute_mode: t
                                        .and_then(|t| t.compute_mode.as_deref())
                                        .map(compute_mode_name),
                                    free_mem_bytes: t.and_then(|t| t.free_mem_bytes),
                                    busy_processes: t.and_then(|t| t.busy_processes),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                calls: p.calls,
                errors: p.errors,
                errors_by_result: p.errors_by_result.clone(),
                records: a.records,
                dropped_records: a.exit.as_ref().map(|e| e.dropped_records).unwrap_or(0),
                missing_records: a.missing_records(),
                other_events: a.other_events,
                procaddr_unmatched: a
                    .exit
                    .as_ref()
                    .map(|e| e.procaddr_unmatched.clone())
                    .unwrap_or_default(),
                device_faults: a
                    .faults
                    .iter()
                    .map(|((f, o, r), fa)| ProcessFault {
                        function: f.clone(),
                        requested_ordinal: *o,
                        fault: fa.fault.clone(),
                        result: fa.result_key(*r),
                        repaired: p.repaired(f, *o),
                    })
                    .collect(),
                launch_faults: p.explained_list(ExplainedKind::Launch),
                alloc_faults: p.explained_list(ExplainedKind::Alloc),
                repairs: p.repairs.clone(),
                fallbacks: p.fallback_map(),
                topology: s
                    .and_then(|s| s.topology.as_ref())
                    .map(|t| ProcessTopology {
                        device_order: t.device_order.clone(),
                        order_warning: t.order_warning.clone(),
                        nvml_present: t.nvml.present,
                        nvml_reason: t.nvml.reason.clone(),
                        physical_count: t.visibility.physical_count,
                        stopped_at: t.visibility.stopped_at.as_ref().map(|x| VisibilityStop {
                            position: x.position,
                            entry: x.entry.clone(),
                            reason: x.reason.clone(),
                        }),
                    }),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (
            a.hostname.is_none(),
            &a.hostname,
            a.start_ts_ns,
            a.pid,
            &a.file,
        )
            .cmp(&(
                b.hostname.is_none(),
                &b.hostname,
                b.start_ts_ns,
                b.pid,
                &b.file,
            ))
    });
    out
}

pub(crate) type DeviceKey = (Option<String>, Option<String>, Option<String>, Option<i32>);

pub(crate) fn device_key(host: &Option<String>, d: &DeviceEntry) -> DeviceKey {
    match &d.pci_bus_id {
        // The PCI bus id identifies the device on its host, whatever its ordinal.
        Some(pci) => (host.clone(), Some(pci.to_ascii_lowercase()), None, None),
        None => (host.clone(), None, d.name.clone(), Some(d.ordinal)),
    }
}

fn device_reports(procs: &[Proc]) -> Vec<DeviceReport> {
    let mut map: BTreeMap<DeviceKey, DeviceReport> = BTreeMap::new();
    for p in procs {
        let host = p.hostname();
        let Some(s) = &p.agg.session else { continue };
        for d in session_devices(s).iter() {
            let e = map
                .entry(device_key(&host, d))
                .or_insert_with(|| DeviceReport {
                    hostname: host.clone(),
                    pci_bus_id: d.pci_bus_id.clone(),
                    name: None,
                    total_mem_bytes: None,
                    ordinals: Vec::new(),
                    processes: 0,
                    uuid: None,
                    physical_index: None,
                    nvml_index: None,
                    compute_mode: None,
                });
            e.name = e.name.take().or_else(|| d.name.clone());
            e.total_mem_bytes = e.total_mem_bytes.or(d.total_mem_bytes);
            if let Some(t) = topology_device(s, d.ordinal) {
                if e.uuid.is_none() {
                    e.uuid = t.uuid.clone();
                }
                if e.physical_index.is_none() && e.compute_mode.is_none() {
                    e.physical_index = t.physical_index;
                    e.compute_mode = t.compute_mode.as_deref().map(compute_mode_name);
                }
                e.nvml_index = e.nvml_index.or(t.nvml_index);
            }
            if !e.ordinals.contains(&d.ordinal) {
                e.ordinals.push(d.ordinal);
                e.ordinals.sort_unstable();
            }
            e.processes += 1;
        }
    }
    let mut out: Vec<DeviceReport> = map.into_values().collect();
    out.sort_by(|a, b| {
        (
            a.hostname.is_none(),
            &a.hostname,
            &a.pci_bus_id,
            a.ordinals.first(),
        )
            .cmp(&(
                b.hostname.is_none(),
                &b.hostname,
                &b.pci_bus_id,
                b.ordinals.first(),
            ))
    });
    out
}

fn function_reports(procs: &[Proc]) -> Vec<FunctionReport> {
    let mut map: BTreeMap<&str, FunctionReport> = BTreeMap::new();
    for p in procs {
        for (f, (calls, errors, by)) in &p.by_function {
            let e = map.entry(f).or_insert_with(|| FunctionReport {
                function: f.to_string(),
                calls: 0,
                errors: 0,
                errors_by_result: BTreeMap::new(),
                processes: 0,
                processes_without_exit_summary: 0,
            });
            e.calls.sat_add(calls);
            e.errors.sat_add(errors);
            for (r, n) in by {
                e.errors_by_result
                    .entry(r.to_string())
                    .or_default()
                    .sat_add(n);
            }
            e.processes += 1;
            if p.agg.exit.is_none() {
                e.processes_without_exit_summary += 1;
            }
        }
    }
    let mut out: Vec<FunctionReport> = map.into_values().collect();
    out.sort_by(|a, b| {
        (
            std::cmp::Reverse(a.errors),
            std::cmp::Reverse(a.calls),
            &a.function,
        )
            .cmp(&(
                std::cmp::Reverse(b.errors),
                std::cmp::Reverse(b.calls),
                &b.function,
            ))
    });
    out
}

fn host_reports(procs: &[Proc]) -> Vec<HostReport> {
    type Acc = (HostReport, BTreeSet<DeviceKey>, BTreeSet<String>);
    let mut map: BTreeMap<(bool, Option<String>), Acc> = BTreeMap::new();
    for p in procs {
        let host = p.hostname();
        let e = map
            .entry((host.is_none(), host.clone()))
            .or_insert_with(|| {
                (
                    HostReport {
                        hostname: host.clone(),
                        processes: 0,
                        processes_without_exit_summary: 0,
                        driver_versions: Vec::new(),
                        devices: 0,
                        calls: 0,
                        errors: 0,
                    },
                    BTreeSet::new(),
                    BTreeSet::new(),
                )
            });
        e.0.processes += 1;
        if p.agg.exit.is_none() && !p.agg.forked_child() {
            e.0.processes_without_exit_summary += 1;
        }
        e.0.calls.sat_add(p.calls.unwrap_or(0));
        e.0.errors.sat_add(p.errors);
        if let Some(s) = &p.agg.session {
            if let Some(v) = s.driver_version {
                e.2.insert(fmt::driver_version(v));
            }
            for d in session_devices(s).iter() {
                e.1.insert(device_key(&host, d));
            }
        }
    }
    map.into_values()
        .map(|(mut h, devs, drivers)| {
            h.devices = devs.len() as u64;
            h.driver_versions = drivers.into_iter().collect();
            h
        })
        .collect()
}

fn overview(
    procs: &[Proc],
    hosts: &[HostReport],
    devices: &[DeviceReport],
    functions: &[FunctionReport],
) -> Overview {
    let first = procs
        .iter()
        .filter(|p| p.agg.records > 0)
        .map(|p| p.agg.first_ts_ns)
        .min();
    let last = procs.iter().map(|p| p.agg.last_ts_ns).max();
    let mut modes = BTreeMap::new();
    let mut shims = BTreeMap::new();
    let mut drivers = BTreeMap::new();
    for p in procs {
        let s = p.agg.session.as_ref();
        let unknown = || "unknown".to_string();
        *modes
            .entry(s.map(|s| s.mode.clone()).unwrap_or_else(unknown))
            .or_default() += 1;
        *shims
            .entry(s.map(|s| s.shim_version.clone()).unwrap_or_else(unknown))
            .or_default() += 1;
        *drivers
            .entry(
                s.and_then(|s| s.driver_version)
                    .map(fmt::driver_version)
                    .unwrap_or_else(unknown),
            )
            .or_default() += 1;
    }
    let exited = procs.iter().filter(|p| p.agg.exit.is_some()).count() as u64;
    let forked = procs.iter().filter(|p| p.agg.forked_child()).count() as u64;
    Overview {
        hosts: hosts.len() as u64,
        processes: procs.len() as u64,
        processes_exited: exited,
        processes_without_exit_summary: procs.len() as u64 - exited - forked,
        processes_without_session_start: procs.iter().filter(|p| p.agg.session.is_none()).count()
            as u64,
        devices: devices.len() as u64,
        functions: functions.len() as u64,
        calls: crate::sat_sum(procs.iter().filter_map(|p| p.calls)),
        errors: crate::sat_sum(procs.iter().map(|p| p.errors)),
        first_ts_ns: first,
        last_ts_ns: last.filter(|_| first.is_some()),
        first_time: first.map(fmt::timestamp),
        last_time: last.filter(|_| first.is_some()).map(fmt::timestamp),
        modes,
        shim_versions: shims,
        driver_versions: drivers,
    }
}

fn errors_over_time(t: &Timeline) -> ErrorsOverTime {
    ErrorsOverTime {
        bucket_ns: t.width_ns,
        buckets: t
            .buckets
            .iter()
            .map(|(start, by)| TimeBucket {
                start_ns: *start,
                start_time: fmt::timestamp(*start),
                errors: crate::sat_sum(by.values().copied()),
                by_result: by.clone(),
            })
            .collect(),
    }
}
