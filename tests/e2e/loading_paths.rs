//! The three loading paths: linked `-lcuda`, cudart-style `cuGetProcAddress`, and
//! PyTorch-style `dlsym` of versioned names. Each runs with and without the shim; results
//! must be identical and the trace must count every call exactly.

use seedance_e2e::{assert_forwarded_unchanged, Run};
use serde_json::Value;

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
    ("cuEventCreate", 1, 0),
    ("cuEventDestroy_v2", 1, 0),
    ("cuEventRecordWithFlags_ptsz", 1, 0),
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
    // (CUDA_ERROR_NOT_FOUND: a probe, counted as a call, not an error), 19 entry points.
    check_path("cudart_style", &[("cuGetProcAddress_v2", 21, 0)]);
}

#[test]
fn pytorch_style_dlsym_of_versioned_names() {
    check_path("dlsym_style", &[]);
}

/// A CUDA 13.1 runtime on a 13.0 driver probes entry points the driver lacks: the answers
/// (`CUDA_ERROR_NOT_FOUND`, `symbolStatus` version-not-sufficient) are how it learns what
/// the driver has. Forwarded unchanged, no stderr, no `call_failed` record, counted as
/// calls and not errors; the exit summary keeps the runtime's version, what it could not
/// have, and the CUDA libraries the process loaded.
#[test]
fn a_newer_runtime_probing_an_older_driver_is_evidence_not_errors() {
    let plain = Run::new("runtime_probe", false)
        .env("FAKE_CUDA_DRIVER_VERSION", "13000")
        .finish();
    let expected = "cuGetProcAddress 13010 -> 0 status 0 (found)\n\
                    cuInit 13010 -> 0 status 0 (found)\n\
                    cuDriverGetVersion 13010 -> 0 status 0 (found)\n\
                    cuFutureEntryPointA 13010 -> 500 status 2\n\
                    cuFutureEntryPointB 13010 -> 500 status 2\n\
                    cuFutureEntryPointA 13010 -> 500 status 2\n\
                    cuNoSuchEntryPoint 13000 -> 500 status 1\n\
                    cuInit -> 0\ncuDriverGetVersion -> 0 (13000)\n";
    assert_eq!(plain.stdout(), expected);
    let r = Run::new("runtime_probe", true)
        .env("FAKE_CUDA_DRIVER_VERSION", "13000")
        .finish();
    assert_eq!(r.output.status.code(), Some(0));
    assert_eq!(r.stdout(), expected);
    assert_eq!(r.stderr(), "");
    assert_forwarded_unchanged(&plain.driver_calls, &r.driver_calls);
    assert!(r.events("call_failed").is_empty());
    // 1 look-up through dlsym's pointer + 6 through the wrapper it returned.
    assert_eq!(r.summary_count("cuGetProcAddress_v2"), (7, 0));
    let s = &r.events("exit_summary")[0];
    assert_eq!(
        s["runtime_probes"],
        serde_json::json!({
            "lookups": 7,
            "max_cuda_version": 13010,
            "version_not_sufficient": 3,
            "symbol_not_found": 1,
            "unavailable": ["cuFutureEntryPointA", "cuFutureEntryPointB"],
        })
    );
    assert_eq!(r.events("session_start")[0]["driver_version"], 13000);
    let libs = s["cuda_libraries"].as_array().unwrap();
    let driver: Vec<&Value> = libs.iter().filter(|l| l["name"] == "cuda").collect();
    assert_eq!(driver.len(), 1, "{libs:?}");
    assert!(driver[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("/driver/libcuda.so.1"));
    assert_eq!(driver[0]["version"], "1");
}
