//! A failed call: a `call_failed` record with the function, code, name and arguments, and
//! one stderr line per distinct (function, code), however often it fails. (Device faults get
//! a `device_fault` record instead; see `devices`.) `SEEDANCE_FALLBACK=off` keeps the
//! workload's deliberate `cuDeviceGet(7)` failing.

use seedance_e2e::Run;

#[test]
fn failed_calls_are_traced_and_announced_once() {
    let r = Run::new("linked", true)
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stdout());
    let failed = r.events("call_failed");
    let alloc: Vec<_> = failed
        .iter()
        .filter(|e| e["function"] == "cuMemAlloc_v2")
        .collect();
    assert_eq!(alloc.len(), 1);
    assert_eq!(alloc[0]["result"], 1);
    assert_eq!(alloc[0]["result_name"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(alloc[0]["args"]["bytesize"], 0);
    let dev = r.events("device_fault");
    assert_eq!(dev.len(), 1);
    assert_eq!(dev[0]["function"], "cuDeviceGet");
    assert_eq!(dev[0]["requested_ordinal"], 7);
    assert_eq!(dev[0]["result_name"], "CUDA_ERROR_INVALID_DEVICE");
    assert_eq!(dev[0]["fault"], "invalid_ordinal");
    assert_eq!(dev[0]["visible_devices"], 2);
    assert!(r.events("device_fallback").is_empty());
    let launch: Vec<_> = failed
        .iter()
        .filter(|e| e["function"] == "cuLaunchKernel")
        .collect();
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["args"]["blockDimY"], 33);
    assert_eq!(launch[0]["args"]["f"], "0x1000");
    assert_eq!(failed.len(), 2);

    let err = r.stderr();
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(
        err.contains(
            "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 7 requested, 2 devices visible"
        ),
        "{err}"
    );
    assert!(err.contains("cuMemAlloc_v2(dptr="), "{err}");
    let summary = &r.events("exit_summary")[0]["functions"]["cuDeviceGet"];
    assert_eq!(summary["errors_by_result"]["CUDA_ERROR_INVALID_DEVICE"], 1);
}

#[test]
fn quiet_silences_stderr_but_not_the_trace() {
    let r = Run::new("linked", true)
        .env("SEEDANCE_QUIET", "1")
        .env("SEEDANCE_FALLBACK", "off")
        .finish();
    assert_eq!(r.stderr(), "");
    assert_eq!(r.events("call_failed").len(), 2);
    assert_eq!(r.events("device_fault").len(), 1);
}
