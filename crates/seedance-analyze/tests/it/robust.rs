//! Bad input never stops the analysis: it is counted, exactly.

use super::{call_failed, exit_summary, run, session_start, write_trace};
use flate2::write::GzEncoder;
use flate2::Compression;
use seedance_analyze::report::{Problem, ProblemDetail, Severity};

/// Of a `lifetime_fault` problem, the processes where every such fault was repaired.
fn lifetime_repaired(p: &Problem) -> u64 {
    match &p.detail {
        ProblemDetail::LifetimeFault(d) => d.processes_repaired,
        _ => panic!("not a lifetime fault: {p:?}"),
    }
}
use seedance_analyze::{summarize, Options, Report};
use std::io::Write;
use std::path::{Path, PathBuf};

fn report(paths: &[PathBuf]) -> Report {
    summarize(paths, &Options::default()).unwrap()
}

fn healthy(dir: &Path, name: &str, pid: u32) -> PathBuf {
    write_trace(
        dir,
        name,
        &[
            &session_start(pid, 0, 1_000),
            &call_failed(
                pid,
                1,
                2_000,
                "cuDeviceGet",
                101,
                "CUDA_ERROR_INVALID_DEVICE",
            ),
            &exit_summary(
                pid,
                2,
                3_000,
                "cuDeviceGet",
                4,
                1,
                "CUDA_ERROR_INVALID_DEVICE",
            ),
        ],
        "",
    )
}

#[test]
fn truncated_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_trace(
        dir.path(),
        "t.jsonl",
        &[
            &session_start(7, 0, 1_000),
            &call_failed(7, 1, 2_000, "cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY"),
        ],
        r#"{"v":1,"seq":2,"ts_ns":3000,"pid":7,"tid":7,"event":"call_failed","function":"cuMem"#,
    );
    let r = report(&[p]);
    assert_eq!(r.input.lines, 3);
    assert_eq!(r.input.records, 2);
    assert_eq!(r.input.truncated_lines, 1);
    assert_eq!(r.input.malformed_lines, 0);
    assert_eq!(r.processes.len(), 1);
    assert_eq!(r.processes[0].errors, 1);
    assert_eq!(r.processes[0].calls, None);
    assert_eq!(r.overview.processes_without_exit_summary, 1);
}

/// A process killed during its very first write leaves one cut line: a trace file with a
/// truncated line, not a file that is "not a trace"; an unterminated line that does not
/// start like a record stays "not a trace".
#[test]
fn a_trace_whose_only_line_was_cut() {
    let dir = tempfile::tempdir().unwrap();
    let cut = r#"{"v":4,"seq":0,"ts_ns":1000,"pid":9,"tid":9,"event":"session_st"#;
    let p = dir.path().join("cut.jsonl");
    std::fs::write(&p, cut).unwrap();
    let r = report(&[p]);
    assert_eq!(r.input.files_read, 1);
    assert_eq!(r.input.files_skipped, 0);
    assert_eq!(r.input.lines, 1);
    assert_eq!(r.input.records, 0);
    assert_eq!(r.input.truncated_lines, 1);
    assert_eq!(r.input.malformed_lines, 0);
    assert_eq!(r.input.bytes_uncompressed, cut.len() as u64);
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "some notes without a newline").unwrap();
    let r = report(&[other]);
    assert_eq!(r.input.files_read, 0);
    assert_eq!(r.input.files_skipped, 1);
    assert_eq!(r.input.truncated_lines, 0);
}

#[test]
fn garbage_lines_between_records() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_trace(
        dir.path(),
        "g.jsonl",
        &[
            "\u{0}\u{1}binary junk",
            &session_start(8, 0, 1_000),
            "not json at all",
            "{\"v\":1,",
            "[1,2,3]",
            "",
            r#"{"v":1,"seq":1,"ts_ns":1,"pid":8,"tid":8,"event":"call_failed"}"#,
            &call_failed(8, 2, 2_000, "cuInit", 34, "CUDA_ERROR_STUB_LIBRARY"),
            "\u{fffd}\u{fffd}",
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.files_read, 1);
    assert_eq!(r.input.lines, 9);
    assert_eq!(r.input.records, 2);
    // junk before the first record, "not json", the cut object, the array, the call_failed
    // without its fields, and the replacement characters; the blank line is not counted.
    assert_eq!(r.input.malformed_lines, 6);
    assert_eq!(
        r.processes[0].errors_by_result["CUDA_ERROR_STUB_LIBRARY"],
        1
    );
}

#[test]
fn empty_and_blank_files() {
    let dir = tempfile::tempdir().unwrap();
    write_trace(dir.path(), "empty.jsonl", &[], "");
    write_trace(dir.path(), "blank.jsonl", &["", "   ", ""], "");
    let r = report(&[dir.path().to_path_buf()]);
    assert_eq!(r.input.files_seen, 2);
    assert_eq!(r.input.empty_files, 2);
    assert_eq!(r.input.files_read, 0);
    assert_eq!(r.input.lines, 0);
    assert!(r.processes.is_empty());
    assert!(r.problems.is_empty());
    // And the renderers cope with nothing.
    let text = seedance_analyze::render::text::render(&r);
    assert!(text.contains("PROBLEMS\n  none found\n"), "{text}");
    let html = seedance_analyze::render::html::render(&r);
    assert!(html.contains("No failed calls recorded"));
}

#[test]
fn gzip_reads_like_plain() {
    let dir = tempfile::tempdir().unwrap();
    let plain = healthy(dir.path(), "a.jsonl", 9);
    let gzdir = tempfile::tempdir().unwrap();
    // No .gz suffix on purpose: detection is by magic bytes.
    let gz = gzdir.path().join("a-compressed.trace");
    let mut enc = GzEncoder::new(std::fs::File::create(&gz).unwrap(), Compression::default());
    enc.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    enc.finish().unwrap();
    let a = report(std::slice::from_ref(&plain));
    let b = report(std::slice::from_ref(&gz));
    assert_eq!(b.input.gzip_files, 1);
    assert_eq!(b.input.files_read, 1);
    assert_eq!(b.input.records, 3);
    assert_eq!(b.input.bytes, std::fs::metadata(&gz).unwrap().len());
    assert_eq!(b.input.bytes_uncompressed, a.input.bytes_uncompressed);
    assert_eq!(a.functions, b.functions);
    assert_eq!(a.problems, b.problems);
}

#[test]
fn corrupt_gzip_keeps_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..2000u64 {
        text.push_str(&call_failed(
            5,
            i,
            1_000 + i,
            "cuInit",
            34,
            "CUDA_ERROR_STUB_LIBRARY",
        ));
        text.push('\n');
    }
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    let bytes = enc.finish().unwrap();
    let p = dir.path().join("cut.jsonl.gz");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let r = report(&[p]);
    assert_eq!(r.input.files_with_read_errors + r.input.unreadable_files, 1);
    assert!(
        r.input.records > 0 && r.input.records < 2000,
        "{}",
        r.input.records
    );
    assert_eq!(r.processes[0].errors, r.input.records);
}

#[test]
fn non_trace_files_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    healthy(dir.path(), "a.jsonl", 10);
    std::fs::write(dir.path().join("notes.txt"), "hello\nworld\n").unwrap();
    std::fs::write(dir.path().join("package.json"), "{\"name\":\"x\"}\n").unwrap();
    std::fs::write(
        dir.path().join("blob.bin"),
        (0..=255u8).cycle().take(100_000).collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(
        dir.path().join("sub/other.jsonl"),
        "{\"level\":\"info\",\"msg\":\"x\"}\n",
    )
    .unwrap();
    let r = report(&[dir.path().to_path_buf()]);
    assert_eq!(r.input.files_seen, 5);
    assert_eq!(r.input.files_read, 1);
    assert_eq!(r.input.files_skipped, 4);
    assert_eq!(r.input.malformed_lines, 0);
    assert_eq!(r.input.records, 3);
    let names: Vec<&str> = r
        .input
        .skipped_files
        .iter()
        .map(|s| s.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["blob.bin", "notes.txt", "package.json", "other.jsonl"]
    );
}

#[test]
fn oversized_line_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let huge = format!(
        r#"{{"v":1,"seq":1,"ts_ns":1,"pid":3,"tid":3,"event":"call_failed","function":"{}","result":1,"args":{{}}}}"#,
        "x".repeat(seedance_analyze::read::input::MAX_LINE_BYTES)
    );
    let p = write_trace(
        dir.path(),
        "big.jsonl",
        &[
            &session_start(3, 0, 1),
            &huge,
            &call_failed(3, 2, 5, "cuInit", 3, "CUDA_ERROR_NOT_INITIALIZED"),
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.oversized_lines, 1);
    assert_eq!(r.input.records, 2);
    assert_eq!(r.processes[0].missing_records, 1);
}

#[test]
fn unknown_kinds_are_counted_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_trace(
        dir.path(),
        "u.jsonl",
        &[
            &session_start(4, 0, 1),
            r#"{"v":99,"seq":1,"ts_ns":2,"pid":4,"tid":4,"event":"stream_repaired","requested_ordinal":3,"chosen_ordinal":0}"#,
            r#"{"v":99,"seq":2,"ts_ns":3,"pid":4,"tid":4,"event":"launch_explained","function":{"nested":true},"result":"weird"}"#,
            r#"{"v":99,"seq":3,"ts_ns":4,"pid":4,"tid":4,"event":"stream_repaired"}"#,
            // Known kinds of a later version: read, extra fields ignored.
            r#"{"v":99,"seq":4,"ts_ns":5,"pid":4,"tid":4,"event":"device_fallback","function":"cuDeviceGet","requested_ordinal":3,"chosen_ordinal":0,"chosen_pci_bus_id":null,"reason":"x","result":0,"explanation":"y","new_field":[1]}"#,
            // A known kind without its required fields: malformed.
            r#"{"v":99,"seq":5,"ts_ns":6,"pid":4,"tid":4,"event":"device_fallback"}"#,
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.records, 5);
    assert_eq!(r.input.malformed_lines, 1);
    assert_eq!(r.input.newer_schema_records, 4);
    assert_eq!(r.input.unknown_event_kinds["stream_repaired"], 2);
    assert_eq!(r.input.unknown_event_kinds["launch_explained"], 1);
    assert!(!r.input.unknown_event_kinds.contains_key("device_fallback"));
    assert_eq!(r.input.records_by_kind["device_fallback"], 1);
    assert_eq!(r.processes[0].other_events, 3);
    assert_eq!(r.repairs.fallbacks[0].requested_ordinal, 3);
}

/// Schema-2 records written by hand: a process killed after a device fault (its errors come
/// from the device_fault records), faults repaired in one process and not in another, and
/// a CUresult with both device faults and plain failures.
#[test]
fn device_faults_and_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let fault = |pid: u32, seq: u64, function: &str, ordinal: i32| {
        format!(
            r#"{{"v":2,"seq":{seq},"ts_ns":{},"pid":{pid},"tid":{pid},"event":"device_fault","function":"{function}","requested_ordinal":{ordinal},"result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","fault":"invalid_ordinal","visible_devices":1,"explanation":"ordinal {ordinal} requested, 1 device visible"}}"#,
            seq + 1
        )
    };
    let fallback = |pid: u32, seq: u64, function: &str, ordinal: i32| {
        format!(
            r#"{{"v":2,"seq":{seq},"ts_ns":{},"pid":{pid},"tid":{pid},"event":"device_fallback","function":"{function}","requested_ordinal":{ordinal},"chosen_ordinal":0,"chosen_pci_bus_id":"0000:1A:00.0","reason":"ordinal {ordinal} is not visible","result":0,"explanation":"fix: ordinal {ordinal} -> ordinal 0"}}"#,
            seq + 1
        )
    };
    // pid 1: repaired, exit summary with 5 repaired calls and 5 errors of cuDeviceGet.
    let exit1 = r#"{"v":2,"seq":3,"ts_ns":9,"pid":1,"tid":1,"event":"exit_summary","duration_ns":8,"functions":{"cuDeviceGet":{"calls":5,"errors":5,"errors_by_result":{"CUDA_ERROR_INVALID_DEVICE":5}},"cuCtxGetDevice":{"calls":2,"errors":2,"errors_by_result":{"CUDA_ERROR_INVALID_DEVICE":2}}},"dropped_records":0,"repairs":{"device_fallback":5},"fallbacks":{"2":0}}"#;
    let p1 = write_trace(
        dir.path(),
        "a.jsonl",
        &[
            &session_start(1, 0, 1),
            &fault(1, 1, "cuDeviceGet", 2),
            &fallback(1, 2, "cuDeviceGet", 2),
            exit1,
        ],
        "",
    );
    // pid 2: not repaired (observe mode in effect), killed: no exit summary.
    let p2 = write_trace(
        dir.path(),
        "b.jsonl",
        &[&session_start(2, 0, 1), &fault(2, 1, "cuDeviceGet", 2)],
        "",
    );
    let r = report(&[p1, p2]);
    let f: Vec<&Problem> = r
        .problems
        .iter()
        .filter(|p| p.key == "device_fault/invalid_ordinal/2")
        .collect();
    assert_eq!(f.len(), 1, "one problem per (fault, ordinal)");
    let f = f[0];
    assert_eq!(f.severity, Severity::Error, "one process was not repaired");
    let ProblemDetail::DeviceFault(d) = &f.detail else {
        panic!("{f:?}")
    };
    assert_eq!((f.processes, d.processes_repaired), (2, 1));
    assert_eq!(f.functions()[0].name, "cuDeviceGet");
    assert_eq!(
        f.functions()[0].count,
        6,
        "5 from the exit summary, 1 from the record"
    );
    assert!(
        f.title.ends_with("repaired by fallback in 1 of them"),
        "{}",
        f.title
    );
    // cuCtxGetDevice's INVALID_DEVICE errors are not device faults: a cuda_error problem
    // that says where the others went.
    let c = r
        .problems
        .iter()
        .find(|p| p.key == "cuda_error/CUDA_ERROR_INVALID_DEVICE")
        .unwrap();
    assert_eq!(c.count, 2);
    assert_eq!(c.functions().len(), 1);
    assert!(c
        .context
        .iter()
        .any(|x| x.starts_with("6 more errors with this result were device faults")));
    // The killed process's errors come from its device_fault record.
    let killed = r.processes.iter().find(|p| p.pid == 2).unwrap();
    assert_eq!(killed.errors, 1);
    assert_eq!(killed.errors_by_result["CUDA_ERROR_INVALID_DEVICE"], 1);
    // Repairs: the exit summary's count wins over the single record.
    assert_eq!(r.repairs.calls_repaired, 5);
    assert_eq!(r.repairs.fallbacks.len(), 1);
    assert_eq!(
        r.repairs.fallbacks[0].chosen_pci_bus_id.as_deref(),
        Some("0000:1a:00.0")
    );
    let text = seedance_analyze::render::text::render(&r);
    assert!(
        text.contains("5 calls repaired in 1 process by the fix mode"),
        "{text}"
    );
}

#[test]
fn records_without_session_start_and_reused_pid() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_trace(
        dir.path(),
        "cat.jsonl",
        &[
            &call_failed(6, 5, 10, "cuInit", 100, "CUDA_ERROR_NO_DEVICE"),
            &session_start(6, 0, 100),
            &exit_summary(6, 1, 200, "cuInit", 1, 0, "x"),
            &session_start(6, 0, 300),
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.processes.len(), 2);
    assert_eq!(r.overview.processes_without_exit_summary, 1);
    assert_eq!(r.overview.processes_without_session_start, 0);
}

#[test]
fn html_is_self_contained_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let line = session_start(11, 0, 1).replace("/bin/app", "/tmp/<script>alert(1)</script>");
    let p = write_trace(
        dir.path(),
        "x.jsonl",
        &[
            &line,
            &call_failed(11, 1, 5, "cuInit", 34, "CUDA_ERROR_STUB_LIBRARY"),
        ],
        "",
    );
    let html = seedance_analyze::render::html::render(&report(&[p]));
    assert!(!html.contains("<script>alert"), "unescaped trace text");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no network references"
    );
    assert!(!html.contains("<link") && !html.contains(" src="));
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains("Session topology"));
}

#[test]
fn missing_path_is_an_error_with_exit_code_2() {
    let (code, out, err) = run(&["summary", "tests/fixtures/no-such-dir"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("no-such-dir"), "{err}");
}

#[test]
fn html_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let (code, stdout, err) = run(&[
        "summary",
        "--format",
        "html",
        "-o",
        out.to_str().unwrap(),
        "tests/fixtures/fleet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty());
    let html = std::fs::read_to_string(out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("CUDA_ERROR_INVALID_DEVICE"));
    assert!(html.contains("no exit summary (killed or still running)"));
}

/// The analyzer knows schema 5 (whose only addition, `exit_summary.device_questions`, it
/// leaves out of the problems: questions are not faults): schema 3 records are not
/// "newer"; schema 6 records are, and their known kinds are still read.
#[test]
fn schema_5_is_known_and_6_is_newer() {
    assert_eq!(seedance_analyze::aggregate::KNOWN_SCHEMA_VERSION, 5);
    let dir = tempfile::tempdir().unwrap();
    let launch = |v: u32, seq: u64| {
        format!(
            r#"{{"v":{v},"seq":{seq},"ts_ns":{seq},"pid":12,"tid":12,"event":"launch_fault","function":"cuLaunchKernel","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","check":"block_dim","limit":64,"requested":65,"device":0,"grid":[1,1,1],"block":[1,1,65],"shared_mem_bytes":0,"refused_before_driver":false,"explanation":"block (1,1,65): blockDim.z = 65 is over device 0's limit of 64","driver_message":null,"later":{{"x":1}}}}"#
        )
    };
    let p = write_trace(
        dir.path(),
        "v.jsonl",
        &[
            &session_start(12, 0, 1).replace(r#""v":1"#, r#""v":3"#),
            &launch(3, 1),
            &launch(6, 2).replace(r#""requested":65"#, r#""requested":66"#),
            // Without its check, a launch fault says nothing: malformed.
            r#"{"v":3,"seq":3,"ts_ns":3,"pid":12,"tid":12,"event":"launch_fault","function":"cuLaunchKernel","result":1}"#,
            r#"{"v":3,"seq":4,"ts_ns":4,"pid":12,"tid":12,"event":"alloc_fault","check":"zero_size","result":1}"#,
            // A field of the wrong shape that the analyzer reads leniently.
            r#"{"v":3,"seq":5,"ts_ns":5,"pid":12,"tid":12,"event":"alloc_fault","function":"cuMemAlloc_v2","result":2,"check":"out_of_memory","requested_bytes":10,"other_devices_with_room":"lots"}"#,
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.newer_schema_records, 1);
    assert_eq!(r.input.malformed_lines, 2);
    assert_eq!(r.input.records_by_kind["launch_fault"], 2);
    assert_eq!(r.input.records_by_kind["alloc_fault"], 1);
    assert!(r.input.unknown_event_kinds.is_empty());
    let newer = r
        .problems
        .iter()
        .find(|p| p.kind() == seedance_analyze::report::ProblemKind::NewerSchema)
        .unwrap();
    assert_eq!(newer.count, 1);
    let f = r
        .problems
        .iter()
        .find(|p| p.key == "launch_fault/cuLaunchKernel/block_dim")
        .unwrap();
    // No exit summary: one failed call per record.
    assert_eq!((f.count, f.call_fault().unwrap().values.len()), (2, 2));
    let oom = r
        .problems
        .iter()
        .find(|p| p.key == "alloc_fault/cuMemAlloc_v2/out_of_memory")
        .unwrap();
    assert_eq!(
        oom.call_fault().unwrap().values[0].shortage,
        None,
        "free memory unknown"
    );
    // The result's name is missing: counted under the number, as the shim would.
    assert_eq!(r.processes[0].errors_by_result["2"], 1);
}

/// Exit summaries that disagree with the fault records (a record for a function the summary
/// does not list, more records than errors) neither panic nor count an error twice.
#[test]
fn fault_records_and_summary_disagreeing() {
    let dir = tempfile::tempdir().unwrap();
    let alloc = |seq: u64, bytes: u64| {
        format!(
            r#"{{"v":3,"seq":{seq},"ts_ns":{seq},"pid":13,"tid":13,"event":"alloc_fault","function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY","check":"out_of_memory","requested_bytes":{bytes},"requested_signed":{bytes},"limit_bytes":5,"device":0,"free_bytes":5,"total_bytes":100,"process_live_bytes":0,"process_live_allocations":0,"other_devices_with_room":[],"refused_before_driver":false,"explanation":"x","driver_message":null}}"#
        )
    };
    let launch = r#"{"v":3,"seq":4,"ts_ns":4,"pid":13,"tid":13,"event":"launch_fault","function":"cuLaunchKernel","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","check":"grid_dim","limit":65535,"requested":65536,"device":0,"grid":[1,65536,1],"block":[1,1,1],"shared_mem_bytes":0,"refused_before_driver":false,"explanation":"y","driver_message":null}"#;
    let p = write_trace(
        dir.path(),
        "d.jsonl",
        &[
            &session_start(13, 0, 1),
            &alloc(1, 10),
            &alloc(2, 20),
            &alloc(3, 30),
            launch,
            // One OUT_OF_MEMORY error for three records; no cuLaunchKernel at all.
            &exit_summary(13, 5, 9, "cuMemAlloc_v2", 4, 1, "CUDA_ERROR_OUT_OF_MEMORY"),
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.overview.errors, 1);
    let counted: u64 = r
        .problems
        .iter()
        .filter(|p| {
            matches!(
                p.kind(),
                seedance_analyze::report::ProblemKind::CudaError
                    | seedance_analyze::report::ProblemKind::LaunchFault
                    | seedance_analyze::report::ProblemKind::AllocFault
            )
        })
        .map(|p| p.count)
        .sum();
    assert_eq!(counted, 1);
    let grid = r
        .problems
        .iter()
        .find(|p| p.key == "launch_fault/cuLaunchKernel/grid_dim")
        .unwrap();
    assert_eq!((grid.count, grid.processes), (0, 1));
    assert!(r
        .problems
        .iter()
        .any(|p| p.key == "alloc_fault/cuMemAlloc_v2/out_of_memory" && p.count == 1));
}

#[test]
fn lifetime_records_are_read_leniently() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_trace(
        dir.path(),
        "l.jsonl",
        &[
            &session_start(21, 0, 1),
            // Without its kind, a lifetime fault says nothing: malformed.
            r#"{"v":4,"seq":1,"ts_ns":2,"pid":21,"tid":21,"event":"lifetime_fault","function":"cuCtxDestroy_v2"}"#,
            r#"{"v":4,"seq":2,"ts_ns":3,"pid":21,"tid":21,"event":"lifetime_repair","kind":"already_released"}"#,
            // Only the required fields, and a field from a later schema.
            r#"{"v":4,"seq":3,"ts_ns":4,"pid":21,"tid":21,"event":"lifetime_fault","function":"cuEventSynchronize","kind":"event_after_reset","later":1}"#,
            // A list of the wrong shape is read as empty; the rest of the summary is kept.
            r#"{"v":4,"seq":4,"ts_ns":5,"pid":21,"tid":21,"event":"exit_summary","duration_ns":4,"functions":{"cuInit":{"calls":1,"errors":0,"errors_by_result":{}}},"dropped_records":0,"live_contexts":"many","leaked_allocations":[{"device":1,"allocations":2,"bytes":4096}],"calls_after_deinit":[1]}"#,
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.malformed_lines, 2);
    assert_eq!(r.input.records_by_kind["lifetime_fault"], 1);
    assert_eq!(r.input.newer_schema_records, 0);
    let f = r
        .problems
        .iter()
        .find(|p| p.key == "lifetime_fault/event_after_reset")
        .unwrap();
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(lifetime_repaired(f), 0);
    assert_eq!(r.process_health.len(), 1);
    let h = &r.process_health[0];
    assert_eq!(
        (h.live_contexts, h.leaked_allocations, h.leaked_bytes),
        (0, 2, 4096)
    );
    assert_eq!(h.calls_after_deinit, 0);
    assert_eq!(r.processes[0].calls, Some(1));
}

#[test]
fn host_hazards_are_errors_and_repaired_ones_warnings_with_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let hazard = |pid: u32, repaired: bool| {
        format!(
            r#"{{"v":5,"seq":1,"ts_ns":2,"pid":{pid},"tid":{pid},"event":"host_hazard","function":"cuMemcpyDtoHAsync_v2","kind":"pinned_copy_race","range":{{"address":"0x7f0000000000","bytes":65536}},"made_by":"cuMemHostAlloc","first":{{"function":"cuMemcpyHtoDAsync_v2","stream":"0x5eed50000100","default_stream":null,"tid":{pid},"access":"read","offset":0,"bytes":65536}},"second":{{"function":"cuMemcpyDtoHAsync_v2","stream":"0x5eed50000200","default_stream":null,"tid":{pid},"access":"write","offset":0,"bytes":65536}},"repaired":{repaired},"repair":{},"explanation":"the second copy may run before the first one reads"}}"#,
            if repaired { r#""event_wait""# } else { "null" }
        )
    };
    let observe = write_trace(
        dir.path(),
        "o.jsonl",
        &[&session_start(31, 0, 1), &hazard(31, false)],
        "",
    );
    let r = report(std::slice::from_ref(&observe));
    assert_eq!(r.input.records_by_kind["host_hazard"], 1);
    assert_eq!(r.input.malformed_lines, 0);
    let p = r
        .problems
        .iter()
        .find(|p| p.key == "lifetime_fault/pinned_copy_race")
        .unwrap();
    assert_eq!(p.severity, Severity::Error);
    assert_eq!(lifetime_repaired(p), 0);
    let text = format!("{p:?}");
    assert!(text.contains("cuStreamWaitEvent"), "{text}");
    assert!(text.contains("the second copy may run before the first one reads"));

    let fixed = write_trace(
        dir.path(),
        "f.jsonl",
        &[&session_start(32, 0, 1), &hazard(32, true)],
        "",
    );
    let r = report(&[fixed]);
    let p = r
        .problems
        .iter()
        .find(|p| p.key == "lifetime_fault/pinned_copy_race")
        .unwrap();
    assert_eq!(p.severity, Severity::Warning);
    assert_eq!(lifetime_repaired(p), 1);
}

/// A device that never ends its first line is refused as not a trace after a bounded read
/// (`input::NOT_TRACE_SKIP_LIMIT`), where it was read without end before.
#[test]
fn dev_zero_is_not_a_trace_and_is_read_only_so_far() {
    let t0 = std::time::Instant::now();
    let r = report(&[PathBuf::from("/dev/zero")]);
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(r.input.files_read, 0);
    assert_eq!(r.input.files_skipped, 1);
    assert_eq!(r.input.skipped_files, ["/dev/zero"]);
    assert!(r.input.bytes <= seedance_analyze::read::input::NOT_TRACE_SKIP_LIMIT + (1 << 20));
    assert!(r.processes.is_empty());
}

/// An over-long line before the first record is counted as oversized, not malformed.
#[test]
fn an_over_long_first_line_is_oversized_not_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let huge = format!(
        r#"{{"v":1,"seq":0,"ts_ns":1,"pid":3,"tid":3,"event":"session_start","argv":["{}"]}}"#,
        "x".repeat(seedance_analyze::read::input::MAX_LINE_BYTES)
    );
    let p = write_trace(
        dir.path(),
        "big-first.jsonl",
        &[
            &huge,
            &call_failed(3, 1, 5, "cuInit", 3, "CUDA_ERROR_NOT_INITIALIZED"),
        ],
        "",
    );
    let r = report(&[p]);
    assert_eq!(r.input.files_read, 1);
    assert_eq!(r.input.oversized_lines, 1);
    assert_eq!(r.input.malformed_lines, 0);
    assert_eq!(r.input.records, 1);
}

/// Totals of hostile exit summaries (counts near `u64::MAX` in two processes) saturate
/// instead of wrapping or panicking.
#[test]
fn totals_saturate_instead_of_wrapping() {
    let dir = tempfile::tempdir().unwrap();
    let big = u64::MAX - 1;
    let mut paths = Vec::new();
    for pid in [21u32, 22] {
        paths.push(write_trace(
            dir.path(),
            &format!("t{pid}.jsonl"),
            &[
                &session_start(pid, 0, 1),
                &exit_summary(
                    pid,
                    1,
                    2,
                    "cuMemAlloc_v2",
                    big,
                    big,
                    "CUDA_ERROR_OUT_OF_MEMORY",
                ),
            ],
            "",
        ));
    }
    let r = report(&paths);
    assert_eq!(r.overview.calls, u64::MAX);
    assert_eq!(r.overview.errors, u64::MAX);
    let f = &r.functions[0];
    assert_eq!((f.calls, f.errors), (u64::MAX, u64::MAX));
    assert_eq!(f.errors_by_result["CUDA_ERROR_OUT_OF_MEMORY"], u64::MAX);
    let oom = r
        .problems
        .iter()
        .find(|p| p.key == "cuda_error/CUDA_ERROR_OUT_OF_MEMORY")
        .unwrap();
    assert_eq!(oom.count, u64::MAX);
    let (code, out, err) = run(&[
        "summary",
        "--format",
        "json",
        paths[0].to_str().unwrap(),
        paths[1].to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("18446744073709551615"));
}

/// A `call_failed_repeats` record (schema 5) counts its failures as that many
/// `call_failed` records would: with or without an exit summary, the error's count and
/// its argument examples include them.
#[test]
fn call_failed_repeats_count_as_their_failures() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![session_start(21, 0, 1_000)];
    for i in 0..10 {
        lines.push(call_failed(
            21,
            1 + i,
            2_000 + i,
            "cuDeviceGet",
            101,
            "CUDA_ERROR_INVALID_DEVICE",
        ));
    }
    lines.push(
        r#"{"v":5,"seq":11,"ts_ns":9000,"pid":21,"tid":21,"event":"call_failed_repeats","function":"cuDeviceGet","result":101,"result_name":"CUDA_ERROR_INVALID_DEVICE","count":990,"first_ts_ns":3000,"last_ts_ns":8000,"last_tid":21,"first_args":{},"last_args":{}}"#
            .to_string(),
    );
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let p = write_trace(dir.path(), "r.jsonl", &refs, "");
    let r = report(&[p]);
    assert_eq!(r.input.records_by_kind["call_failed_repeats"], 1);
    assert_eq!(r.input.malformed_lines, 0);
    assert!(r.input.unknown_event_kinds.is_empty());
    assert_eq!(r.overview.processes_without_exit_summary, 1);
    let problem = r
        .problems
        .iter()
        .find(|p| p.result() == Some("CUDA_ERROR_INVALID_DEVICE"))
        .expect("the error is reported");
    assert_eq!(problem.count, 1000);
}

/// A trace that ends with a `trace_cut` record (the trace's file refused a write): the
/// process is reported as cut by a refused write, with the error, not as killed; a trace
/// that just ends is still "killed or still running".
#[test]
fn a_trace_cut_by_a_refused_write_is_not_a_killed_process() {
    use seedance_analyze::report::{ProblemKind, ProcessStatus};
    let dir = tempfile::tempdir().unwrap();
    let cut = write_trace(
        dir.path(),
        "cut.jsonl",
        &[
            &session_start(7, 0, 1_000),
            &call_failed(7, 1, 2_000, "cuDeviceGet", 101, "CUDA_ERROR_INVALID_DEVICE"),
            r#"{"v":5,"seq":9,"ts_ns":3000,"pid":7,"tid":0,"event":"trace_cut","error":"No space left on device (os error 28)","os_error":28}"#,
        ],
        "",
    );
    let killed = write_trace(
        dir.path(),
        "killed.jsonl",
        &[&session_start(8, 0, 1_000)],
        "",
    );
    let r = report(&[cut.clone(), killed]);
    let status = |pid: u32| r.processes.iter().find(|p| p.pid == pid).unwrap().status;
    assert_eq!(status(7), ProcessStatus::TraceCut);
    assert_eq!(status(8), ProcessStatus::NoExitSummary);
    let p = r
        .problems
        .iter()
        .find(|p| p.kind() == ProblemKind::TraceCut)
        .expect("a trace_cut problem");
    assert_eq!(p.processes, 1);
    assert!(
        p.context
            .iter()
            .any(|c| c == "the write failed with: No space left on device (os error 28)"),
        "{:?}",
        p.context
    );
    let n = r
        .problems
        .iter()
        .find(|p| p.kind() == ProblemKind::NoExitSummary)
        .unwrap();
    assert_eq!(n.processes, 1);
    assert_eq!(r.input.malformed_lines + r.input.truncated_lines, 0);
    let (code, text, _) = run(&["summary", cut.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("trace cut by a refused write"), "{text}");
    assert!(!text.contains("OOM killer"), "{text}");
}
