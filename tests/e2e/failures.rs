//! A failed call: a `call_failed` record with the function, code, name and arguments, and
//! one stderr line per distinct (function, code), however often it fails.

use seedance_e2e::Run;

#[test]
fn failed_calls_are_traced_and_announced_once() {
    let r = Run::new("linked", true).finish();
    assert_eq!(r.output.status.code(), Some(0));
    let failed = r.events("call_failed");
    let alloc: Vec<_> = failed
        .iter()
        .filter(|e| e["function"] == "cuMemAlloc_v2")
        .collect();
    assert_eq!(alloc.len(), 1);
    assert_eq!(alloc[0]["result"], 1);
    assert_eq!(alloc[0]["result_name"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(alloc[0]["args"]["bytesize"], 0);
    let dev: Vec<_> = failed
        .iter()
        .filter(|e| e["function"] == "cuDeviceGet")
        .collect();
    assert_eq!(dev.len(), 1);
    assert_eq!(dev[0]["args"]["ordinal"], 7);
    assert_eq!(dev[0]["result_name"], "CUDA_ERROR_INVALID_DEVICE");
    let launch: Vec<_> = failed
        .iter()
        .filter(|e| e["function"] == "cuLaunchKernel")
        .collect();
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["args"]["blockDimY"], 33);
    assert_eq!(launch[0]["args"]["f"], "0x1000");
    assert_eq!(failed.len(), 3);

    let err = r.stderr();
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("seedance: cuDeviceGet(device="), "{err}");
    assert!(
        err.contains("ordinal=7) returned CUDA_ERROR_INVALID_DEVICE (101)"),
        "{err}"
    );
    assert!(err.contains("cuMemAlloc_v2(dptr="), "{err}");
    let summary = &r.events("exit_summary")[0]["functions"]["cuDeviceGet"];
    assert_eq!(summary["errors_by_result"]["CUDA_ERROR_INVALID_DEVICE"], 1);
}

#[test]
fn quiet_silences_stderr_but_not_the_trace() {
    let r = Run::new("linked", true).env("SEEDANCE_QUIET", "1").finish();
    assert_eq!(r.stderr(), "");
    assert_eq!(r.events("call_failed").len(), 3);
}
