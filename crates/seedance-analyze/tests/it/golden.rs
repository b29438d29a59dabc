//! Exact output of `summary` and `diff` on the fixtures, and the report's exact numbers.

use super::{golden, run};
use serde_json::Value;

#[test]
fn summary_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/fleet"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-fleet.txt", &out);
}

#[test]
fn summary_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/fleet"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-fleet.json", &out);
}

#[test]
fn summary_v2_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/v2"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v2.txt", &out);
}

#[test]
fn summary_v2_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/v2"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v2.json", &out);
}

#[test]
fn summary_v5_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/v5"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v5.txt", &out);
}

#[test]
fn summary_v5_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/v5"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v5.json", &out);
}

#[test]
fn summary_v5_html_has_the_device_contexts() {
    let (code, out, err) = run(&["summary", "--format", "html", "tests/fixtures/v5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("<h2>Device contexts</h2>") || out.contains(">Device contexts<"),
        "no section"
    );
    assert!(out.contains(
        "<td>vm</td><td class=\"n\">0</td><td class=\"n\">6</td><td class=\"n\">3</td><td \
         class=\"n\">3</td><td>1012.0 MiB by NVML, 1 more unknown</td>"
    ));
}

#[test]
fn summary_v3_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/v3"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v3.txt", &out);
}

#[test]
fn summary_v3_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/v3"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v3.json", &out);
}

#[test]
fn diff_v3_text() {
    let (code, out, err) = run(&["diff", "tests/fixtures/v3", "tests/fixtures/v3-after"]);
    assert_eq!(code, 0, "{err}");
    golden("diff-v3.txt", &out);
}

#[test]
fn diff_v3_json() {
    let (code, out, err) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/v3",
        "tests/fixtures/v3-after",
    ]);
    assert_eq!(code, 0, "{err}");
    golden("diff-v3.json", &out);
}

#[test]
fn diff_text() {
    let (code, out, err) = run(&["diff", "tests/fixtures/fleet", "tests/fixtures/after"]);
    assert_eq!(code, 0, "{err}");
    golden("diff.txt", &out);
}

#[test]
fn diff_json() {
    let (code, out, err) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/fleet",
        "tests/fixtures/after",
    ]);
    assert_eq!(code, 0, "{err}");
    golden("diff.json", &out);
}

fn summary(paths: &[&str]) -> Value {
    let mut args = vec!["summary", "--format", "json"];
    args.extend_from_slice(paths);
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn fleet_numbers() {
    let r = summary(&["tests/fixtures/fleet"]);
    assert_eq!(r["report_version"], 5);
    let i = &r["input"];
    assert_eq!(i["files_seen"], 7);
    assert_eq!(i["files_read"], 4);
    assert_eq!(i["files_skipped"], 2);
    assert_eq!(i["empty_files"], 1);
    assert_eq!(i["lines"], 19);
    assert_eq!(i["records"], 17);
    assert_eq!(i["malformed_lines"], 1);
    assert_eq!(i["truncated_lines"], 1);
    // A schema-1 fixture with a device_fallback record: the kind is known now.
    assert_eq!(i["records_by_kind"]["device_fallback"], 1);
    assert_eq!(i["unknown_event_kinds"], serde_json::json!({}));
    let rp = &r["repairs"];
    assert_eq!(
        rp["calls_repaired"], 1,
        "no exit summary count: the records"
    );
    assert_eq!(
        rp["fallbacks"],
        serde_json::json!([{"requested_ordinal": 2, "chosen_ordinal": 0,
            "chosen_pci_bus_id": "0000:1a:00.0", "processes": 1, "hosts": ["gpu-a"],
            "functions": ["cuDeviceGet"]}])
    );
    let o = &r["overview"];
    assert_eq!(o["hosts"], 3);
    assert_eq!(o["processes"], 4);
    assert_eq!(o["processes_without_exit_summary"], 1);
    // 50,412 (pid 1001) + 2 (2001) + 541 (3001); the killed 1002 adds no calls.
    assert_eq!(o["calls"], 50_955);
    // 3 + 1 + 13 from exit summaries, 4 call_failed records of the killed process.
    assert_eq!(o["errors"], 21);

    let procs = r["processes"].as_array().unwrap();
    let killed = procs.iter().find(|p| p["pid"] == 1002).unwrap();
    assert_eq!(killed["status"], "no_exit_summary");
    assert_eq!(killed["calls"], Value::Null);
    assert_eq!(killed["errors"], 4);
    assert_eq!(killed["errors_by_result"]["CUDA_ERROR_OUT_OF_MEMORY"], 4);
    assert_eq!(killed["missing_records"], 1);
    assert_eq!(killed["cuda_visible_devices"], "1");
    let stub = procs.iter().find(|p| p["pid"] == 2001).unwrap();
    assert_eq!(stub["dropped_records"], 2);
    assert_eq!(stub["missing_records"], 2);
    assert_eq!(stub["driver_version"], Value::Null);

    let f = r["functions"].as_array().unwrap();
    let alloc = f.iter().find(|f| f["function"] == "cuMemAlloc_v2").unwrap();
    assert_eq!(alloc["calls"], 1200);
    assert_eq!(alloc["errors"], 3);
    assert_eq!(alloc["processes"], 2);
    assert_eq!(alloc["processes_without_exit_summary"], 1);
    let get = f.iter().find(|f| f["function"] == "cuDeviceGet").unwrap();
    assert_eq!(get["errors_by_result"]["CUDA_ERROR_INVALID_DEVICE"], 2);

    let problems = r["problems"].as_array().unwrap();
    let first = &problems[0];
    assert_eq!(first["rank"], 1);
    assert_eq!(first["severity"], "error");
    assert_eq!(first["result"], "CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(first["code"], 2);
    assert_eq!(first["count"], 4);
    let inv = problems.iter().find(|p| p["code"] == 101).unwrap();
    assert_eq!(inv["count"], 3);
    assert_eq!(inv["examples"][0]["function"], "cuDeviceGet");
    assert_eq!(inv["examples"][0]["args"]["ordinal"], 2);
    assert_eq!(inv["examples"][0]["count"], 2);
    assert!(inv["remediation"][0]
        .as_str()
        .unwrap()
        .contains("CUDA_VISIBLE_DEVICES"));
    // No device_fault records in schema 1: the fallback is mentioned on the CUresult problem.
    assert!(inv["context"][2]
        .as_str()
        .unwrap()
        .starts_with("2 of these 3 errors were in functions that the fix mode repaired"));
    assert_eq!(inv["key"], "cuda_error/CUDA_ERROR_INVALID_DEVICE");
    let stub = problems.iter().find(|p| p["code"] == 34).unwrap();
    assert!(stub["context"][0]
        .as_str()
        .unwrap()
        .contains("stubs/libcuda.so"));
    let kinds: Vec<&str> = problems
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    for k in [
        "dropped_records",
        "no_exit_summary",
        "missing_records",
        "procaddr_unmatched",
        "malformed_input",
        "mixed_driver_versions",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let ready = problems
        .iter()
        .find(|p| p["result"] == "CUDA_ERROR_NOT_READY")
        .unwrap();
    assert_eq!(ready["severity"], "info");

    let devices = r["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    let shared = devices
        .iter()
        .find(|d| d["pci_bus_id"] == "0000:3a:00.0")
        .unwrap();
    assert_eq!(shared["ordinals"], serde_json::json!([0, 1]));
    assert_eq!(shared["processes"], 2);

    let t = &r["errors_over_time"];
    // 1 ms: the finest width; 9 errors are far fewer than 512 buckets.
    assert_eq!(t["bucket_ns"], 1_000_000u64);
    let total: u64 = t["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["errors"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 9, "one per call_failed record");
}

#[test]
fn same_report_whatever_the_file_order() {
    // Files listed one by one in reverse order give the same report as the directory.
    let mut files: Vec<String> = Vec::new();
    for sub in ["gpu-a", "gpu-b", "gpu-c"] {
        for e in
            std::fs::read_dir(super::crate_dir().join("tests/fixtures/fleet").join(sub)).unwrap()
        {
            let p = e.unwrap().path();
            files.push(format!(
                "tests/fixtures/fleet/{sub}/{}",
                p.file_name().unwrap().to_str().unwrap()
            ));
        }
    }
    files.push("tests/fixtures/fleet/README.md".into());
    files.sort();
    files.reverse();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let mut a = summary(&args);
    let mut b = summary(&["tests/fixtures/fleet"]);
    a["input"]["paths"] = Value::Null;
    b["input"]["paths"] = Value::Null;
    assert_eq!(a, b);
}

#[test]
fn diff_numbers() {
    let (code, out, _) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/fleet",
        "tests/fixtures/after",
    ]);
    assert_eq!(code, 0);
    let d: Value = serde_json::from_str(&out).unwrap();
    let new: Vec<(String, String, u64)> = d["new_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["function"].as_str().unwrap().into(),
                e["result"].as_str().unwrap().into(),
                e["count_b"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        new,
        vec![(
            "cuStreamDestroy_v2".into(),
            "CUDA_ERROR_INVALID_HANDLE".into(),
            1
        )]
    );
    let gone: Vec<&str> = d["disappeared_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["function"].as_str().unwrap())
        .collect();
    assert_eq!(
        gone,
        vec![
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuInit",
            "cuMemAllocAsync"
        ]
    );
    let changed = &d["changed_errors"][0];
    assert_eq!(
        (
            changed["function"].as_str(),
            changed["count_a"].as_u64(),
            changed["count_b"].as_u64()
        ),
        (Some("cuMemAlloc_v2"), Some(3), Some(1))
    );
    let launch = d["call_shifts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"] == "cuLaunchKernel")
        .unwrap();
    assert_eq!(launch["calls_a"], 48_500);
    assert_eq!(launch["calls_b"], 60_450);
    assert_eq!(launch["delta"], 11_950);
    assert_eq!(launch["delta_pct"], 24.6);
    assert_eq!(d["report_version"], 5);
    // Repairs by kind (calls repaired), no longer the unknown kinds.
    assert_eq!(d["new_repairs"], serde_json::json!([]));
    assert_eq!(
        d["repair_changes"],
        serde_json::json!([{"kind": "device_fallback", "count_a": 1, "count_b": 3}])
    );
    assert_eq!(
        d["new_event_kinds"],
        serde_json::json!([{"kind": "sync_before_destroy", "count_a": 0, "count_b": 2}])
    );
    assert_eq!(d["event_kind_changes"], serde_json::json!([]));
}

#[test]
fn v2_numbers() {
    let r = summary(&["tests/fixtures/v2"]);
    let i = &r["input"];
    assert_eq!(i["records_by_kind"]["device_fault"], 2);
    assert_eq!(i["records_by_kind"]["device_fallback"], 1);
    assert_eq!(i["unknown_event_kinds"], serde_json::json!({}));

    let problems = r["problems"].as_array().unwrap();
    // The device faults are their own problems, not cuda_error ones as well.
    assert!(
        !problems.iter().any(|p| p["kind"] == "cuda_error"),
        "{problems:#?}"
    );
    let fault = |key: &str| problems.iter().find(|p| p["key"] == key).unwrap();
    let unavailable = fault("device_fault/device_unavailable/1");
    assert_eq!(unavailable["severity"], "error");
    assert_eq!(unavailable["rank"], 1);
    assert_eq!(unavailable["code"], 46);
    assert_eq!(unavailable["processes"], 1);
    assert_eq!(unavailable["processes_repaired"], 0);
    assert_eq!(
        unavailable["functions"][0]["name"],
        "cuDevicePrimaryCtxRetain"
    );
    assert!(unavailable["explanations"][0]
        .as_str()
        .unwrap()
        .contains("compute mode is Exclusive_Process"));
    let invalid = fault("device_fault/invalid_ordinal/1");
    assert_eq!(invalid["severity"], "warning");
    assert_eq!(invalid["processes_repaired"], 1);
    assert_eq!(
        invalid["explanations"][0],
        "ordinal 1 requested, 1 device visible (ordinal 0 = physical GPU 1, Fake H200 #1, \
         0000:11:00.0); CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or \
         ordinal 0)"
    );
    assert!(invalid["context"][0]
        .as_str()
        .unwrap()
        .contains("ordinal 1 -> 0 (0000:11:00.0)"));
    let stop = fault("cuda_visible_devices_invalid/2,1,9,0/3");
    assert_eq!(stop["severity"], "warning");
    assert!(stop["title"].as_str().unwrap().contains("entry 3 (\"9\")"));
    let order = fault("device_order");
    assert!(order["context"][0]
        .as_str()
        .unwrap()
        .starts_with("CUDA_DEVICE_ORDER=\"PCI_BUS\""));

    let rp = &r["repairs"];
    assert_eq!(rp["calls_repaired"], 1);
    assert_eq!(
        rp["by_kind"],
        serde_json::json!([{"kind": "device_fallback", "calls": 1, "processes": 1}])
    );

    // The exit summaries still count the faulted calls as errors.
    assert_eq!(r["overview"]["errors"], 2);
    let procs = r["processes"].as_array().unwrap();
    let demo = procs.iter().find(|p| p["hostname"] == "vm").unwrap();
    assert_eq!(demo["repairs"], serde_json::json!({"device_fallback": 1}));
    assert_eq!(demo["fallbacks"], serde_json::json!({"1": 0}));
    assert_eq!(demo["device_faults"][0]["repaired"], true);
    assert_eq!(demo["topology"]["nvml_present"], false);
    assert_eq!(demo["devices"][0]["physical_index"], 1);
    assert_eq!(demo["devices"][0]["compute_mode"], "Default");
    let d = procs.iter().find(|p| p["hostname"] == "gpu-d").unwrap();
    assert_eq!(d["device_faults"][0]["repaired"], false);
    assert_eq!(d["topology"]["stopped_at"]["entry"], "9");

    let devices = r["devices"].as_array().unwrap();
    let busy = devices
        .iter()
        .find(|d| d["pci_bus_id"] == "0000:3a:00.0")
        .unwrap();
    assert_eq!(busy["nvml_index"], 1);
    assert_eq!(busy["uuid"], "GPU-5f1c2a3e-8d41-4b7a-9e20-1a2b3c4d5e01");
    assert_eq!(busy["compute_mode"], "Exclusive_Process");
}

#[test]
fn v2_html_has_repairs_and_topology() {
    let (code, out, err) = run(&["summary", "--format", "html", "tests/fixtures/v2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("<section id=\"repairs\"><h2>Repairs</h2>"));
    assert!(out.contains("<td><code>device_fallback</code></td>"));
    assert!(out.contains("<code>GPU-5f1c2a3e-8d41-4b7a-9e20-1a2b3c4d5e01</code>"));
    assert!(out.contains("Exclusive_Process"));
    assert!(out.contains("NVML absent in 1 process ("));
    assert!(out.contains("shim said: <q>ordinal 1 requested"));
}

/// Sum of the errors the problems that count failed calls account for: every error is in
/// exactly one of them (`cuda_error`, `launch_fault`, `alloc_fault`) when there are no
/// device faults.
fn error_problem_sum(r: &Value) -> u64 {
    r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            ["cuda_error", "launch_fault", "alloc_fault"].contains(&p["kind"].as_str().unwrap())
        })
        .map(|p| p["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn v3_numbers() {
    let r = summary(&["tests/fixtures/v3"]);
    let i = &r["input"];
    assert_eq!(i["records_by_kind"]["launch_fault"], 8);
    assert_eq!(i["records_by_kind"]["alloc_fault"], 5);
    assert_eq!(
        i["unknown_event_kinds"],
        serde_json::json!({"graph_fault": 1})
    );
    // Only the schema-6 process's records are newer than the analyzer.
    assert_eq!(i["newer_schema_records"], 4);
    assert_eq!(i["truncated_lines"], 1);

    // No double counting: every error is in one problem.
    assert_eq!(r["overview"]["errors"], 62);
    assert_eq!(error_problem_sum(&r), 62);

    let problems = r["problems"].as_array().unwrap();
    let p = |key: &str| {
        problems
            .iter()
            .find(|p| p["key"] == key)
            .unwrap_or_else(|| panic!("{key} missing: {problems:#?}"))
    };
    // pid 5001: 10 INVALID_VALUE errors of cuLaunchKernel, 2 call_failed records; the 8
    // others are split 2:1 by records between threads_per_block and grid_dim (5 and 3);
    // pid 5002 (no exit summary) and 6002 add one each.
    let tpb = p("launch_fault/cuLaunchKernel/threads_per_block");
    assert_eq!(tpb["severity"], "error");
    assert_eq!(tpb["count"], 7);
    assert_eq!(tpb["processes"], 3);
    assert_eq!(tpb["hosts"], serde_json::json!(["gpu-e", "gpu-f"]));
    assert_eq!(tpb["code"], 1);
    assert_eq!(tpb["unit"], "threads");
    assert_eq!(
        (
            tpb["values"][0]["requested"].as_u64(),
            tpb["values"][0]["limit"].as_u64(),
            tpb["values"][0]["processes"].as_u64()
        ),
        (Some(1056), Some(1024), Some(3))
    );
    assert_eq!(tpb["values"][1]["requested"], 2048);
    assert_eq!(tpb["explanations"].as_array().unwrap().len(), 2);
    assert_eq!(
        tpb["driver_messages"][0],
        "[cuLaunchKernel] too many threads per block: 1056 > 1024"
    );
    assert_eq!(p("launch_fault/cuLaunchKernel/grid_dim")["count"], 3);
    let plain = p("cuda_error/CUDA_ERROR_INVALID_VALUE");
    assert_eq!(
        plain["count"], 3,
        "the 2 unexplained launches and cuGraphLaunch"
    );
    assert_eq!(
        plain["functions"],
        serde_json::json!([{"name": "cuLaunchKernel", "count": 2}, {"name": "cuGraphLaunch", "count": 1}])
    );
    let ctx: Vec<&str> = plain["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(ctx.contains(&"41 more errors with this result were launch faults, counted in the launch_fault problems instead"), "{ctx:?}");
    assert!(ctx.contains(&"3 more errors with this result were allocation faults, counted in the alloc_fault problems instead"), "{ctx:?}");
    // All OUT_OF_MEMORY errors are allocation faults: no cuda_error problem for them.
    assert!(!problems
        .iter()
        .any(|p| p["key"] == "cuda_error/CUDA_ERROR_OUT_OF_MEMORY"));

    let oom = p("alloc_fault/cuMemAlloc_v2/out_of_memory");
    assert_eq!(
        oom["count"], 4,
        "3 from 5001's exit summary, 1 record of the killed 5002"
    );
    assert_eq!(oom["processes"], 2);
    assert_eq!(oom["values"][0]["shortage"], true);
    assert_eq!(oom["values"][0]["total_bytes"], 150_754_820_096u64);
    assert_eq!(oom["values"][1]["shortage"], false);
    let ctx = oom["context"].to_string();
    assert!(
        ctx.contains(
            "a genuine shortage (the request was larger than the free memory) in 1 process"
        ),
        "{ctx}"
    );
    assert!(
        ctx.contains("device 1 (136.0 GiB free) in 1 process"),
        "{ctx}"
    );
    let neg = p("alloc_fault/cuMemAllocAsync/exceeds_total");
    assert_eq!(neg["values"][0]["requested_signed"], -2048);
    assert!(neg["title"].as_str().unwrap().contains("negative size"));
    let smem = p("launch_fault/cuLaunchKernel_ptsz/shared_memory");
    assert_eq!(
        (smem["count"].as_u64(), smem["processes_refused"].as_u64()),
        (Some(30), Some(1))
    );
    assert_eq!(smem["values"][0]["requested"], 102_400);
    let ctx = p("launch_fault/cuLaunchKernel_ptsz/no_context");
    assert_eq!(
        (ctx["count"].as_u64(), ctx["unit"].as_str()),
        (Some(10), None)
    );
    assert_eq!(ctx["values"], serde_json::json!([]));
    let host = p("alloc_fault/cuMemHostAlloc/zero_size");
    assert_eq!(host["values"][0]["device"], Value::Null);
    assert_eq!(p("alloc_fault/cuMemCreate/granularity")["count"], 2);
    assert_eq!(
        p("launch_fault/cuLaunchKernel/unknown")["driver_messages"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    v3_process_faults_and_timeline(&r);
}

/// v3: the faults each process lists, and the fault records in the errors over time; the
/// no-double-counting invariant on the other fixtures.
fn v3_process_faults_and_timeline(r: &Value) {
    // Each process lists its faults with the errors counted for them.
    let procs = r["processes"].as_array().unwrap();
    let a = procs.iter().find(|p| p["pid"] == 5001).unwrap();
    let counts: Vec<(&str, u64)> = a["launch_faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["check"].as_str().unwrap(), f["errors"].as_u64().unwrap()))
        .collect();
    assert_eq!(counts, [("grid_dim", 3), ("threads_per_block", 5)]);
    assert_eq!(a["alloc_faults"].as_array().unwrap().len(), 2);

    // The fault records are in the errors over time.
    let total: u64 = r["errors_over_time"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["errors"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 15, "13 fault records and 2 call_failed records");

    // The other fixtures keep the invariant too (no device faults there... or, for v2, only
    // device faults, which count processes).
    for dir in [
        "tests/fixtures/fleet",
        "tests/fixtures/after",
        "tests/fixtures/v3-after",
    ] {
        let r = summary(&[dir]);
        assert_eq!(
            error_problem_sum(&r),
            r["overview"]["errors"].as_u64().unwrap(),
            "{dir}"
        );
    }
}

#[test]
fn v3_diff_by_function_and_check() {
    let (code, out, _) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/v3",
        "tests/fixtures/v3-after",
    ]);
    assert_eq!(code, 0);
    let d: Value = serde_json::from_str(&out).unwrap();
    let keys = |field: &str| -> Vec<(String, u64, u64)> {
        d[field]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    format!(
                        "{}/{}/{}",
                        c["kind"].as_str().unwrap(),
                        c["function"].as_str().unwrap(),
                        c["check"].as_str().unwrap()
                    ),
                    c["count_a"].as_u64().unwrap(),
                    c["count_b"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        keys("new_faults"),
        [
            (
                "launch_fault/cuLaunchCooperativeKernel/cooperative_grid".to_string(),
                0,
                1
            ),
            (
                "launch_fault/cuLaunchKernel/launch_bounds".to_string(),
                0,
                1
            ),
        ]
    );
    assert_eq!(
        keys("resolved_faults"),
        [
            (
                "launch_fault/cuLaunchKernel_ptsz/no_context".to_string(),
                10,
                0
            ),
            (
                "launch_fault/cuLaunchKernel/threads_per_block".to_string(),
                7,
                0
            ),
            ("alloc_fault/cuMemCreate/granularity".to_string(), 2, 0),
            (
                "alloc_fault/cuMemAllocAsync/exceeds_total".to_string(),
                1,
                0
            ),
            ("launch_fault/cuLaunchKernel/unknown".to_string(), 1, 0),
        ]
    );
    assert_eq!(
        keys("fault_changes"),
        [
            (
                "launch_fault/cuLaunchKernel_ptsz/shared_memory".to_string(),
                30,
                12
            ),
            ("alloc_fault/cuMemAlloc_v2/out_of_memory".to_string(), 4, 1),
            ("launch_fault/cuLaunchKernel/grid_dim".to_string(), 3, 2),
        ]
    );
    let new: Vec<&str> = d["new_problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert!(
        new.iter()
            .any(|t| t.starts_with("launch fault: cooperative grid")),
        "{new:?}"
    );
}

#[test]
fn v3_html_has_the_faults_section() {
    let (code, out, err) = run(&["summary", "--format", "html", "tests/fixtures/v3"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(
        "<section id=\"launch-and-allocation-faults\"><h2>Launch and allocation faults</h2>"
    ));
    assert_eq!(out.matches("<tr><td>launch</td>").count(), 5);
    assert_eq!(out.matches("<tr><td>allocation</td>").count(), 4);
    assert!(out.contains("requested 1,056 threads, limit 1,024 threads (device 0; 3 processes)"));
    assert!(out.contains("requested 18,446,744,073,709,549,568 bytes (-2,048 as a signed size"));
    assert!(out.contains(
        "driver said: <q>[cuLaunchKernel] too many threads per block: 1056 &gt; 1024</q>"
    ));
    let (_, fleet, _) = run(&["summary", "--format", "html", "tests/fixtures/fleet"]);
    assert!(fleet.contains("<p>No launch or allocation faults.</p>"));
}

#[test]
fn summary_v4_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/v4"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v4.txt", &out);
}

#[test]
fn summary_v4_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/v4"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v4.json", &out);
}

#[test]
fn diff_v4_text() {
    let (code, out, err) = run(&["diff", "tests/fixtures/v4", "tests/fixtures/v4-after"]);
    assert_eq!(code, 0, "{err}");
    golden("diff-v4.txt", &out);
}

#[test]
fn v4_numbers() {
    let r = summary(&["tests/fixtures/v4"]);
    assert_eq!(r["report_version"], 5);
    let i = &r["input"];
    assert_eq!(i["newer_schema_records"], 0);
    assert_eq!(i["records_by_kind"]["lifetime_fault"], 5);
    assert_eq!(i["records_by_kind"]["lifetime_repair"], 3);
    let problems = r["problems"].as_array().unwrap();
    let p = |key: &str| {
        problems
            .iter()
            .find(|p| p["key"] == key)
            .unwrap_or_else(|| panic!("no problem {key}"))
    };
    // Repaired in one of two processes: still an error.
    let pending = p("lifetime_fault/pending_work_at_destroy");
    assert_eq!(pending["severity"], "error");
    assert_eq!(pending["processes"], 2);
    assert_eq!(pending["processes_repaired"], 1);
    assert_eq!(pending["explanations"].as_array().unwrap().len(), 2);
    let uad = p("lifetime_fault/use_after_destroy");
    assert_eq!(uad["severity"], "error");
    assert_eq!(uad["functions"].as_array().unwrap().len(), 2);
    // Repaired everywhere: a warning.
    let pinned = p("lifetime_fault/pinned_memory_in_use");
    assert_eq!(pinned["severity"], "warning");
    assert_eq!(pinned["processes_repaired"], 1);
    // The 709 the use after destroy got is the lifetime problem's, not a cuda_error's.
    assert!(problems
        .iter()
        .all(|p| p["key"] != "cuda_error/CUDA_ERROR_CONTEXT_IS_DESTROYED"));
    // Repairs: the exit summary's counts (which include the records'), and the records of
    // the process without one; no double counting.
    let rp = &r["repairs"];
    assert_eq!(rp["calls_repaired"], 5);
    assert_eq!(rp["processes"], 2);
    let kind = |k: &str| {
        rp["by_kind"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == k)
            .unwrap()["calls"]
            .clone()
    };
    assert_eq!(kind("synchronize_before_destroy"), 3);
    assert_eq!(kind("synchronize_before_free"), 1);
    assert_eq!(kind("already_released"), 1);
    // Process health: only 7001 left something behind; primary-retained leaks not counted.
    let h = r["process_health"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["pid"], 7001);
    assert_eq!(h[0]["live_contexts"], 1);
    assert_eq!(h[0]["leaked_allocations"], 3);
    assert_eq!(h[0]["leaked_bytes"], 805_306_368u64);
    assert_eq!(h[0]["unsynchronized_streams"], 1);
    assert_eq!(h[0]["unsynchronized_work"], 6);
    assert_eq!(h[0]["calls_after_deinit"], 2);
    // Older fixtures have no process health: the field is left out.
    let old = summary(&["tests/fixtures/v3"]);
    assert!(old.get("process_health").is_none());
}

#[test]
fn v4_diff_by_fault_kind() {
    let (code, out, err) = run(&[
        "diff",
        "--format",
        "json",
        "tests/fixtures/v4",
        "tests/fixtures/v4-after",
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    let keys = |k: &str| -> Vec<(String, String)> {
        d[k].as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["kind"].as_str().unwrap().to_string(),
                    c["check"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(
        keys("new_faults"),
        vec![("lifetime_fault".into(), "device_memory_in_use".into())]
    );
    let resolved = keys("resolved_faults");
    assert_eq!(resolved.len(), 3, "{resolved:?}");
    assert!(resolved.contains(&("lifetime_fault".into(), "use_after_destroy".into())));
}

#[test]
fn v4_html_has_process_health() {
    let (code, out, err) = run(&["summary", "--format", "html", "tests/fixtures/v4"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("<section id=\"process-health\">"));
    assert!(out.contains("768.0 MiB"));
    let (_, old, _) = run(&["summary", "--format", "html", "tests/fixtures/v3"]);
    assert!(!old.contains("process-health"));
}

/// The demo program in observe mode, then in fix mode (real traces of the shim on the fake
/// driver): the device fault is on both sides, now repaired, so it is a changed problem
/// (error -> warning), not a new or resolved one.
#[test]
fn diff_observe_to_fix_shows_the_repair_as_a_changed_problem() {
    let (code, out, err) = run(&["diff", "tests/fixtures/observe", "tests/fixtures/fix"]);
    assert_eq!(code, 0, "{err}");
    golden("diff-observe-fix.txt", &out);
    assert!(out.contains("CHANGED PROBLEMS (on both sides)\n  [warning, was error] device fault"));
}

#[test]
fn summary_v5_probes_text() {
    let (code, out, err) = run(&["summary", "tests/fixtures/v5-probes"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v5-probes.txt", &out);
}

#[test]
fn summary_v5_probes_json() {
    let (code, out, err) = run(&["summary", "--format", "json", "tests/fixtures/v5-probes"]);
    assert_eq!(code, 0, "{err}");
    golden("summary-v5-probes.json", &out);
}

/// A runtime newer than its driver: the version probes are info, per host, with the
/// runtime and driver versions and the libraries loaded; the probes a schema-4 shim counted
/// as errors are info too; no problem is a warning or an error.
#[test]
fn v5_version_probes_are_info_not_errors() {
    let r = summary(&["tests/fixtures/v5-probes"]);
    assert_eq!(r["report_version"], 5);
    let problems = r["problems"].as_array().unwrap();
    assert!(
        problems.iter().all(|p| p["severity"] == "info"),
        "{problems:?}"
    );
    let p = &problems[0];
    assert_eq!(p["kind"], "runtime_newer_than_driver");
    assert_eq!(p["key"], "runtime_newer_than_driver/h200-a/13010/13000");
    assert_eq!(
        p["title"],
        "runtime 13.1 on a 13.0 driver: 136 entry points unavailable"
    );
    assert_eq!(p["count"], 136);
    assert_eq!(p["processes"], 2);
    assert_eq!(p["hosts"], serde_json::json!(["h200-a"]));
    let context = p["context"].as_array().unwrap();
    assert!(context.iter().any(|c| c
        == "CUDA libraries loaded: cublas 13.2.0.9, cuda 580.159.04, cudart 13.1.80, torch_cuda"));
    let old = &problems[1];
    assert_eq!(old["kind"], "cuda_error");
    assert_eq!(old["result"], "CUDA_ERROR_NOT_FOUND");
    assert_eq!(old["hosts"], serde_json::json!(["h200-b"]));
    let (_, text, _) = run(&["summary", "--format", "html", "tests/fixtures/v5-probes"]);
    assert!(text.contains("runtime 13.1 on a 13.0 driver: 136 entry points unavailable"));
}

/// Version probes as driver 580 answers them (`CUDA_ERROR_INVALID_VALUE` above its own
/// version), in a trace of a shim that counted them as errors: the fleet report ranks them
/// as one info problem whose numbers are the trace's (136 look-ups, the runtime's and the
/// driver's versions, the driver's answer), and the one real `CUDA_ERROR_INVALID_VALUE`
/// (a copy) is the only error. Before, the report's first problem was `[error]
/// CUDA_ERROR_INVALID_VALUE (1): 137 errors` with `cuGetProcAddress_v2 (136)`.
#[test]
fn version_probes_answered_invalid_value_are_info() {
    let r = summary(&["tests/fixtures/v5-invalid-value"]);
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    let err = &problems[0];
    assert_eq!(err["severity"], "error");
    assert_eq!(err["result"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(err["count"], 1);
    assert_eq!(
        err["functions"],
        serde_json::json!([{"name": "cuMemcpyHtoD_v2", "count": 1}])
    );
    assert!(err["examples"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["function"] == "cuMemcpyHtoD_v2"));
    let info = &problems[1];
    assert_eq!(info["severity"], "info");
    assert_eq!(info["kind"], "runtime_newer_than_driver");
    assert_eq!(
        info["title"],
        "runtime 13.3 on a 13.0 driver: 136 entry points unavailable"
    );
    assert_eq!(info["count"], 136);
    assert_eq!(
        info["context"][0],
        "h200-c: 1 process on 1 host whose CUDA runtime asked for CUDA 13.3 entry points of a \
         CUDA 13.0 driver; the driver answered CUDA_ERROR_INVALID_VALUE to 136 look-ups of a \
         version above its own: version probes, as expected"
    );
}
