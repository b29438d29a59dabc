//! Stray contexts: a process that works on one device and leaves a context on another where
//! it does nothing is explained once, when the context ends or at exit, and listed in the
//! exit summary; a process that works on two devices is not; the opt-in repair
//! (`SEEDANCE_STRAY_CONTEXT`) redirects or refuses the retain of device 0; an allocation
//! that fails for lack of memory lists the other processes NVML sees on the device.
//! Program: `tests/programs/stray.c`.

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};
use serde_json::Value;

fn run(devices: u32, args: &[&str], shim: bool) -> Run {
    Run::new("stray", shim)
        .env("FAKE_CUDA_DEVICE_COUNT", devices.to_string())
        .args(args)
}

/// The stray lines on stderr.
fn stray_lines(r: &Finished) -> Vec<String> {
    r.stderr()
        .lines()
        .filter(|l| l.starts_with("seedance: stray context"))
        .map(str::to_string)
        .collect()
}

fn summary(r: &Finished) -> Value {
    r.events("exit_summary")[0].clone()
}

fn expected_line(k: i32, tid_pid: u64) -> String {
    format!(
        "seedance: stray context on device 0: cuDevicePrimaryCtxRetain on thread {tid_pid} made a \
         context on device 0, but this process works on device {k} (3 launches, 1 allocation \
         (64.0 MiB)) and did nothing on device 0 (no launch, no allocation); its memory is \
         unknown without NVML; usual causes: a torch.distributed call (barrier, \
         destroy_process_group) made before torch.cuda.set_device({k}), a tensor created on the \
         default device cuda:0, a library that initialises device 0, CUDA_VISIBLE_DEVICES not \
         narrowed to one device per rank; fix: call torch.cuda.set_device({k}) \
         (cudaSetDevice({k})) before any other CUDA call, or give each rank \
         CUDA_VISIBLE_DEVICES=<its device>"
    )
}

fn pid(r: &Finished) -> u64 {
    r.records[0]["pid"].as_u64().unwrap()
}

#[test]
fn a_shutdown_that_retains_device_0_is_explained_at_exit_on_2_devices() {
    let plain = run(2, &["shutdown"], false).finish();
    let r = run(2, &["shutdown"], true).finish();
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 0\n"
    );
    assert_forwarded_unchanged(&plain.driver_calls, &r.driver_calls);
    // The main thread made the context: its tid is the pid.
    assert_eq!(stray_lines(&r), [expected_line(1, pid(&r))]);
    let ev = r.events("stray_context");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["device"], 0);
    assert_eq!(ev[0]["decided"], "exit");
    assert_eq!(ev[0]["function"], "cuDevicePrimaryCtxRetain");
    assert_eq!(ev[0]["working_devices"][0]["device"], 1);
    assert_eq!(ev[0]["working_devices"][0]["launches"], 3);
    assert_eq!(ev[0]["working_devices"][0]["bytes"], 64 << 20);
    assert_eq!(ev[0]["there"]["launches"], 0);
    assert!(ev[0]["context_bytes"].is_null());
    let s = summary(&r);
    assert_eq!(s["stray_contexts"].as_array().unwrap().len(), 1);
    assert_eq!(s["stray_contexts"][0]["device"], 0);
    let used: Vec<(i64, bool)> = s["device_use"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["device"].as_i64().unwrap(),
                u["worked"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(used, [(0, false), (1, true)]);
}

#[test]
fn a_released_stray_context_is_explained_when_it_ends() {
    let r = run(2, &["released"], true).finish();
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 0\ncuDevicePrimaryCtxRelease(0) -> 0\n"
    );
    assert_eq!(stray_lines(&r), [expected_line(1, pid(&r))]);
    let ev = r.events("stray_context");
    assert_eq!(ev.len(), 1, "once per device");
    assert_eq!(ev[0]["decided"], "context_end");
    // Live: written before the exit summary's records, right after the release.
    assert_eq!(summary(&r)["stray_contexts"][0]["decided"], "context_end");
}

#[test]
fn a_context_on_device_0_made_before_the_work_elsewhere_is_caught_at_exit() {
    let r = run(2, &["early"], true).finish();
    assert_eq!(r.stdout(), "worked on device 1\n");
    assert_eq!(stray_lines(&r), [expected_line(1, pid(&r))]);
    assert_eq!(r.events("stray_context")[0]["decided"], "exit");
}

#[test]
fn a_process_that_works_on_two_devices_is_not_alarmed() {
    let r = run(2, &["two"], true).finish();
    assert_eq!(r.stdout(), "worked on device 0\nworked on device 1\n");
    assert_eq!(r.stderr(), "");
    assert!(r.events("stray_context").is_empty());
    let s = summary(&r);
    assert!(s["stray_contexts"].as_array().unwrap().is_empty());
    let worked: Vec<bool> = s["device_use"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["worked"].as_bool().unwrap())
        .collect();
    assert_eq!(worked, [true, true]);
    // And one device alone is silent too.
    let r = run(2, &["alone"], true).finish();
    assert_eq!(r.stderr(), "");
    assert!(r.events("stray_context").is_empty());
}

/// Contexts that ended before any work (each device probed for its free memory, then the
/// work on one) are not stray at exit, created or primary.
#[test]
fn contexts_that_ended_before_the_work_are_not_stray() {
    for scenario in ["probe", "probe_primary"] {
        let plain = run(8, &[scenario], false).finish();
        assert_eq!(plain.stdout(), "probed 8 devices\nworked on device 1\n");
        for mode in ["observe", "fix"] {
            let r = run(8, &[scenario], true)
                .env("SEEDANCE_MODE", mode)
                .finish();
            assert_eq!(r.output.status.code(), Some(0), "{scenario} {mode}");
            assert_eq!(r.stdout(), plain.stdout(), "{scenario} {mode}");
            assert_eq!(r.stderr(), "", "{scenario} {mode}");
            assert!(r.events("stray_context").is_empty(), "{scenario} {mode}");
            let s = summary(&r);
            assert!(s["stray_contexts"].as_array().unwrap().is_empty());
            assert_eq!(s["device_use"].as_array().unwrap().len(), 8);
        }
    }
}

#[test]
fn every_rank_of_8_that_touches_device_0_is_explained_and_rank_0_is_not() {
    for rank in 0..8 {
        let k = rank.to_string();
        let r = run(8, &["shutdown", &k], true).finish();
        let lines = stray_lines(&r);
        if rank == 0 {
            assert!(lines.is_empty(), "{lines:?}");
            assert_eq!(r.stderr(), "");
        } else {
            assert_eq!(lines, [expected_line(rank, pid(&r))], "rank {rank}");
            let ev = r.events("stray_context");
            assert_eq!(ev[0]["working_devices"][0]["device"], rank);
        }
    }
}

#[test]
fn nvml_names_the_memory_the_stray_context_holds() {
    let r = run(2, &["shutdown"], true)
        .with_nvml()
        .env("FAKE_NVML_PROCESSES", "0:self:524288000,1:self:1073741824")
        .finish();
    let lines = stray_lines(&r);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].contains(
            "did nothing on device 0 (no launch, no allocation); it holds 500.0 MiB of device 0's \
             memory (NVML, this process's used memory there); usual causes"
        ),
        "{}",
        lines[0]
    );
    let ev = r.events("stray_context");
    assert_eq!(ev[0]["context_bytes"], 524_288_000);
    // NVML present but this process not listed (another PID namespace).
    let r = run(2, &["shutdown"], true).with_nvml().finish();
    assert!(stray_lines(&r)[0].contains(
        "its memory is unknown: NVML does not list this process on device 0 (another PID \
         namespace); "
    ));
}

#[test]
fn observe_mode_reports_the_same_and_changes_nothing() {
    let plain = run(2, &["shutdown"], false).finish();
    let r = run(2, &["shutdown"], true)
        .env("SEEDANCE_MODE", "observe")
        .env("SEEDANCE_STRAY_CONTEXT", "redirect")
        .finish();
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(stray_lines(&r).len(), 1);
    assert!(r
        .driver_calls
        .contains(&"cuDevicePrimaryCtxRetain dev=0 -> 0".to_string()));
}

#[test]
fn the_opt_in_redirect_retains_the_working_device_instead() {
    let r = run(2, &["released"], true)
        .env("SEEDANCE_STRAY_CONTEXT", "redirect")
        .finish();
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 0\ncuDevicePrimaryCtxRelease(0) -> 0\n"
    );
    let retains: Vec<&String> = r
        .driver_calls
        .iter()
        .filter(|l| {
            l.starts_with("cuDevicePrimaryCtxRetain") || l.starts_with("cuDevicePrimaryCtxRelease")
        })
        .collect();
    assert_eq!(
        retains,
        [
            "cuDevicePrimaryCtxRetain dev=1 -> 0",
            "cuDevicePrimaryCtxRetain dev=1 -> 0",
            "cuDevicePrimaryCtxRelease_v2 dev=1 -> 0",
        ],
        "device 0 never reaches the driver"
    );
    let ev = r.events("stray_context");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["decided"], "redirected");
    assert_eq!(ev[0]["redirected_to"], 1);
    let line = &stray_lines(&r)[0];
    assert!(line.ends_with(
        " [repaired: SEEDANCE_STRAY_CONTEXT=redirect retained device 1's primary context \
         instead; device 0 was not touched]"
    ));
    assert_eq!(summary(&r)["repairs"]["stray_context_redirect"], 1);
}

#[test]
fn the_opt_in_refusal_returns_device_unavailable() {
    let r = run(2, &["shutdown"], true)
        .env("SEEDANCE_STRAY_CONTEXT", "refuse")
        .finish();
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 46\n"
    );
    assert!(!r
        .driver_calls
        .iter()
        .any(|l| l.starts_with("cuDevicePrimaryCtxRetain dev=0")));
    assert_eq!(r.events("stray_context")[0]["decided"], "refused");
    assert!(stray_lines(&r)[0].ends_with(
        " [refused: SEEDANCE_STRAY_CONTEXT=refuse returned CUDA_ERROR_DEVICE_UNAVAILABLE (46) \
         without reaching the driver]"
    ));
    // Not applicable (device 0 already used): the retain goes through unchanged.
    let r = run(2, &["two"], true)
        .env("SEEDANCE_STRAY_CONTEXT", "refuse")
        .finish();
    assert_eq!(r.stdout(), "worked on device 0\nworked on device 1\n");
    assert_eq!(r.stderr(), "");
    // A bad value warns once and changes nothing.
    let r = run(2, &["shutdown"], true)
        .env("SEEDANCE_STRAY_CONTEXT", "move")
        .finish();
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 0\n"
    );
    assert!(r.stderr().contains(
        "SEEDANCE_STRAY_CONTEXT=\"move\" is not one of off, redirect, refuse; using off"
    ));
}

#[test]
fn an_exclusive_process_device_0_keeps_the_busy_device_explanation() {
    let r = run(2, &["shutdown"], true)
        .env("FAKE_CUDA_BUSY", "0")
        .env("SEEDANCE_MODE", "observe")
        .finish();
    assert_eq!(
        r.stdout(),
        "worked on device 1\ncuDevicePrimaryCtxRetain(0) -> 46\n"
    );
    let faults = r.events("device_fault");
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0]["result"], 46);
    assert!(r.events("stray_context").is_empty());
    assert!(stray_lines(&r).is_empty());
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
}

#[test]
fn an_out_of_memory_lists_the_other_processes_on_the_device() {
    let r = Run::new("alloc_faults", true)
        .env("FAKE_CUDA_FREE_MEM", "1073741824,")
        .env("FAKE_CUDA_DEVICE_COUNT", "2")
        .env(
            "FAKE_NVML_PROCESSES",
            "0:self:268435456,0:5001:629145600,0:5002:524288000",
        )
        .with_nvml()
        .arg("oom")
        .finish();
    let f = &r.events("alloc_fault")[0];
    assert!(f["explanation"].as_str().unwrap().ends_with(
        "; NVML lists 2 other processes holding memory on device 0: pid 5001 (600.0 MiB), pid \
         5002 (500.0 MiB); without them 1.1 GiB more would be free (whether they work on \
         another device is in their own traces: seedance-analyze summary lists stray contexts \
         per device)"
    ));
    let me = pid(&r);
    assert_eq!(
        f["processes_on_device"],
        serde_json::json!([
            {"pid": me, "used_bytes": 268435456u64, "this_process": true},
            {"pid": 5001, "used_bytes": 629145600u64, "this_process": false},
            {"pid": 5002, "used_bytes": 524288000u64, "this_process": false},
        ])
    );
    // Without NVML it says what is unknown.
    let r = Run::new("alloc_faults", true)
        .env("FAKE_CUDA_FREE_MEM", "1073741824,")
        .arg("oom")
        .finish();
    let f = &r.events("alloc_fault")[0];
    assert!(f["explanation"]
        .as_str()
        .unwrap()
        .ends_with("; which other processes hold memory on device 0 is unknown (no NVML)"));
    assert!(f["processes_on_device"].is_null());
}
