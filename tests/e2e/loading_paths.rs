//! The three loading paths: linked `-lcuda`, cudart-style `cuGetProcAddress`, and
//! PyTorch-style `dlsym` of versioned names. Each runs with and without the shim; results
//! must be identical and the trace must count every call exactly.

use seedance_e2e::{assert_forwarded_unchanged, Run};

/// Calls and errors the shared workload (tests/programs/workload.h) makes, by the exported
/// symbol of the ABI variant each reaches.
const WORKLOAD: &[(&str, u64, u64)] = &[
    ("cuCtxCreate_v2", 1, 0),
    ("cuCtxDestroy_v2", 1, 0),
    ("cuCtxSynchronize_v2", 1, 0),
    ("cuDeviceGet", 2, 1),
    ("cuDeviceGetCount", 1, 0),
    ("cuDevicePrimaryCtxRelease_v2", 1, 0),
    ("cuDevicePrimaryCtxRetain", 1, 0),
    ("cuDriverGetVersion", 1, 0),
    ("cuInit", 1, 0),
    ("cuLaunchKernel", 2, 1),
    ("cuLaunchKernel_ptsz", 1, 0),
    ("cuMemAlloc_v2", 2, 1),
    ("cuMemFree_v2", 1, 0),
    ("cuMemFreeHost", 1, 0),
    ("cuMemHostAlloc", 1, 0),
    ("cuStreamSynchronize_ptsz", 1, 0),
];

fn check_path(program: &str, extra: &[(&str, u64, u64)]) {
    // The workload asks for ordinal 7 on purpose and expects CUDA_ERROR_INVALID_DEVICE;
    // SEEDANCE_FALLBACK=off keeps the explanation but not the repair, so the program sees
    // exactly what the driver said.
    // Every call the program made must reach the fake driver unchanged and in order; the
    // only other calls are the shim's own device queries (for the explanation of the
    // deliberate bad ordinal).
    let plain = Run::new(program, false)
        .env_remove("SEEDANCE_TRACE_DIR")
        .finish();
    let shimmed = Run::new(program, true)
        .env_remove("SEEDANCE_TRACE_DIR")
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(plain.output.status.code(), Some(0), "{}", plain.stdout());
    assert_eq!(
        shimmed.output.status.code(),
        Some(0),
        "{}",
        shimmed.stdout()
    );
    assert_eq!(plain.stdout(), shimmed.stdout());
    assert!(plain.stdout().contains("failures=0"));
    assert!(!plain.driver_calls.is_empty());
    assert_forwarded_unchanged(&plain.driver_calls, &shimmed.driver_calls);

    // With a trace: exact counts per ABI variant, and the driver's version in session_start.
    let traced = Run::new(program, true)
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(traced.output.status.code(), Some(0));
    assert_eq!(traced.stdout(), plain.stdout());
    assert_eq!(traced.trace_files, 1);
    let mut expected: Vec<(String, u64, u64)> = WORKLOAD
        .iter()
        .chain(extra)
        .map(|(n, c, e)| (n.to_string(), *c, *e))
        .collect();
    expected.sort();
    let mut got: Vec<(String, u64, u64)> = traced
        .summary_calls()
        .into_iter()
        .map(|(name, calls)| {
            let (_, errors) = traced.summary_count(&name);
            (name, calls, errors)
        })
        .collect();
    got.sort();
    assert_eq!(got, expected);
    let start = traced.events("session_start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["driver_version"], 13000);
    assert_eq!(start[0]["devices"].as_array().unwrap().len(), 2);
    assert_eq!(start[0]["devices"][1]["name"], "Fake H200 #1");
    assert_eq!(start[0]["devices"][1]["pci_bus_id"], "0000:11:00.0");
    assert_eq!(traced.records[0]["event"], "session_start");
    assert_eq!(traced.records.last().unwrap()["event"], "exit_summary");
    assert_eq!(
        traced.events("exit_summary")[0]["procaddr_unmatched"],
        serde_json::json!([])
    );
}

#[test]
fn linked_with_lcuda() {
    check_path("linked", &[]);
}

#[test]
fn cudart_style_get_proc_address() {
    // 1 look-up of "cuGetProcAddress" through the dlsym'd pointer, 1 unknown symbol
    // (CUDA_ERROR_NOT_FOUND), 16 entry points.
    check_path("cudart_style", &[("cuGetProcAddress_v2", 18, 1)]);
}

#[test]
fn pytorch_style_dlsym_of_versioned_names() {
    check_path("dlsym_style", &[]);
}
