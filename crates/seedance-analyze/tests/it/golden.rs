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
    assert_eq!(r["report_version"], 2);
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
    assert_eq!(t["bucket_ns"], 1_000_000_000u64);
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
    assert_eq!(d["report_version"], 2);
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
