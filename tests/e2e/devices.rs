//! Device ordinals: a request for a device the process cannot have is explained,
//! and in fix mode sent to the next available device. Each test asserts which device the
//! fake driver received, the code the program got, and the text the user sees.

use seedance_e2e::Run;

fn lines_with<'a>(calls: &'a [String], prefix: &str) -> Vec<&'a str> {
    calls
        .iter()
        .filter(|l| l.starts_with(prefix))
        .map(String::as_str)
        .collect()
}

#[test]
fn cuda_visible_devices_renumbered_ordinal_1_goes_to_0() {
    let run = |shim: bool, mode: Option<&str>| {
        let mut r = Run::new("ordinals", shim).env("CUDA_VISIBLE_DEVICES", "1");
        if let Some(m) = mode {
            r = r.env("SEEDANCE_MODE", m);
        }
        r
    };
    let plain = run(false, None).arg("1").finish();
    assert_eq!(plain.output.status.code(), Some(1));
    assert_eq!(plain.stdout(), "ordinal 1: cuDeviceGet -> 101\n");

    let fixed = Run::new("ordinals", true)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .arg("1")
        .finish();
    assert_eq!(fixed.output.status.code(), Some(0), "{}", fixed.stderr());
    // Physical GPU 1 (bus 0x11) is the only visible device: ordinal 0.
    assert_eq!(fixed.stdout(), "ordinal 1 -> 0000:11:00.0\n");
    assert_eq!(
        lines_with(&fixed.driver_calls, "cuDeviceGet ordinal=1"),
        vec!["cuDeviceGet ordinal=1 -> 101"]
    );
    assert!(fixed
        .driver_calls
        .contains(&"cuDevicePrimaryCtxRetain dev=0 -> 0".to_string()));
    let err = fixed.stderr();
    assert_eq!(
        err,
        "seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 1 requested, 1 device \
         visible (ordinal 0 = physical GPU 1, Fake H200 #1, 0000:11:00.0); \
         CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or ordinal 0)\n\
         seedance: cuDeviceGet: fix: ordinal 1 -> ordinal 0 (physical GPU 1, Fake H200 #1, 0000:11:00.0): \
         ordinal 1 is not visible; set SEEDANCE_FALLBACK=off to keep the error\n"
    );
    let fault = &fixed.events("device_fault")[0];
    assert_eq!(fault["requested_ordinal"], 1);
    assert_eq!(fault["fault"], "invalid_ordinal");
    assert_eq!(fault["visible_devices"], 1);
    let fb = fixed.events("device_fallback");
    assert_eq!(fb.len(), 1);
    assert_eq!(fb[0]["chosen_ordinal"], 0);
    assert_eq!(fb[0]["chosen_pci_bus_id"], "0000:11:00.0");
    let summary = &fixed.events("exit_summary")[0];
    assert_eq!(summary["repairs"]["device_fallback"], 1);
    assert_eq!(summary["fallbacks"]["1"], 0);
    let topo = &fixed.events("session_start")[0]["topology"];
    assert_eq!(topo["devices"][0]["physical_index"], 1);
    assert_eq!(topo["nvml"]["present"], false);

    // observe: the same explanation, nothing changed.
    let observed = run(true, Some("observe")).arg("1").finish();
    assert_eq!(observed.output.status.code(), Some(1));
    assert_eq!(observed.stdout(), plain.stdout());
    assert_eq!(observed.stderr().lines().count(), 1);
    assert!(observed
        .stderr()
        .contains("CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0"));

    // fix with SEEDANCE_FALLBACK=off: explained, not repaired.
    let kept = run(true, None)
        .env("SEEDANCE_FALLBACK", "off")
        .arg("1")
        .finish();
    assert_eq!(kept.output.status.code(), Some(1));
    assert_eq!(kept.stdout(), plain.stdout());
    assert!(!kept.stderr().contains("fix:"));
}

#[test]
fn eight_gpu_program_on_one_gpu_host_is_stable() {
    let r = Run::new("ordinals", true)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .args(&["6", "7", "6"])
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "ordinal 6 -> 0000:10:00.0\nordinal 7 -> 0000:10:00.0\nordinal 6 -> 0000:10:00.0\n"
    );
    let err = r.stderr();
    assert!(err.contains(
        "ordinal 6 requested, 1 device visible (ordinal 0 = physical GPU 0, Fake H200 #0, \
         0000:10:00.0); the program expects more GPUs than this host or container exposes; \
         use ordinals 0..0 or run it with fewer ranks per node"
    ));
    // One explanation and one announcement per distinct requested ordinal.
    assert_eq!(err.matches("ordinal 6 requested").count(), 1, "{err}");
    assert_eq!(
        err.matches("fix: ordinal 7 -> ordinal 0").count(),
        1,
        "{err}"
    );
    assert_eq!(r.events("device_fallback").len(), 2);
    let summary = &r.events("exit_summary")[0];
    assert_eq!(summary["repairs"]["device_fallback"], 3);
    assert_eq!(summary["fallbacks"], serde_json::json!({"6": 0, "7": 0}));
}

#[test]
fn busy_exclusive_process_device_moves_the_second_process() {
    for (create, call) in [
        (false, "cuDevicePrimaryCtxRetain"),
        (true, "cuCtxCreate_v2"),
    ] {
        let mut r = Run::new("ordinals", true)
            .with_nvml()
            .env("FAKE_CUDA_BUSY", "0");
        if create {
            r = r.arg("-c");
        }
        let r = r.arg("0").finish();
        assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
        assert_eq!(r.stdout(), "ordinal 0 -> 0000:11:00.0\n");
        let tried: Vec<&str> = lines_with(&r.driver_calls, call);
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert!(tried[0].ends_with("dev=0 -> 46"), "{tried:?}");
        assert!(tried[1].ends_with("dev=1 -> 0"), "{tried:?}");
        let err = r.stderr();
        assert!(
            err.contains(&format!(
                "seedance: {call}: CUDA_ERROR_DEVICE_UNAVAILABLE (46): ordinal 0 (physical GPU 0, \
                 Fake H200 #0, 0000:10:00.0) is unavailable (CUDA_ERROR_DEVICE_UNAVAILABLE): its \
                 compute mode is Exclusive_Process and 1 other process already holds it"
            )),
            "{err}"
        );
        assert!(err.contains("fix: ordinal 0 -> ordinal 1"), "{err}");
        assert_eq!(r.events("device_fault")[0]["fault"], "device_unavailable");
        assert_eq!(
            r.events("session_start")[0]["topology"]["nvml"]["present"],
            true
        );
    }
    // Without the shim the program fails.
    let plain = Run::new("ordinals", false)
        .env("FAKE_CUDA_BUSY", "0")
        .arg("0")
        .finish();
    assert_eq!(
        plain.stdout(),
        "ordinal 0: cuDevicePrimaryCtxRetain -> 46\n"
    );
}

#[test]
fn exclusions_and_minimum_free_memory_are_skipped() {
    // 3 devices, ordinal 5 -> start at 5 mod 3 = 2; 2 is excluded, so 0.
    let r = Run::new("ordinals", true)
        .env("FAKE_CUDA_DEVICE_COUNT", "3")
        .env("SEEDANCE_EXCLUDE_DEVICES", "2")
        .arg("5")
        .finish();
    assert_eq!(r.stdout(), "ordinal 5 -> 0000:10:00.0\n", "{}", r.stderr());
    // 2 devices, ordinal 4 -> start at 0, which has 1 GiB free (NVML) < 10 GiB: so 1.
    let r = Run::new("ordinals", true)
        .with_nvml()
        .env("FAKE_CUDA_FREE_MEM", "1073741824,85899345920")
        .env("SEEDANCE_MIN_FREE_MEMORY", "10GiB")
        .arg("4")
        .finish();
    assert_eq!(r.stdout(), "ordinal 4 -> 0000:11:00.0\n", "{}", r.stderr());
    // Every device excluded: the original error comes back, with the explanation.
    let r = Run::new("ordinals", true)
        .env(
            "SEEDANCE_EXCLUDE_DEVICES",
            "0,GPU-face5eed-0000-4000-8000-000000000001",
        )
        .arg("3")
        .finish();
    assert_eq!(r.output.status.code(), Some(1));
    assert_eq!(r.stdout(), "ordinal 3: cuDeviceGet -> 101\n");
    assert!(r
        .stderr()
        .contains("fix: no other device can take ordinal 3's work; returning the original error"));
}

#[test]
fn malformed_cuda_visible_devices_is_explained() {
    let r = Run::new("ordinals", true)
        .env("CUDA_VISIBLE_DEVICES", "0,abc,1")
        .arg("1")
        .finish();
    assert_eq!(r.output.status.code(), Some(0));
    assert_eq!(r.stdout(), "ordinal 1 -> 0000:10:00.0\n");
    assert!(r.stderr().contains(
        "CUDA_VISIBLE_DEVICES=0,abc,1: entry \"abc\" (position 2) is not a GPU index, a GPU- \
         UUID or a MIG- id; the driver ignores it and everything after it, so only ordinal 0 \
         (physical GPU 0) is visible"
    ));
}

#[test]
fn malformed_seedance_values_warn_and_default() {
    let r = Run::new("ordinals", true)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .env("SEEDANCE_FALLBACK", "maybe")
        .env("SEEDANCE_MIN_FREE_MEMORY", "lots")
        .env("SEEDANCE_EXCLUDE_DEVICES", "GPU-zz,7x")
        .arg("1")
        .finish();
    // Defaults: fallback on, no minimum, no exclusions: repaired as usual.
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "ordinal 1 -> 0000:11:00.0\n");
    let err = r.stderr();
    assert!(
        err.contains("seedance: SEEDANCE_FALLBACK=\"maybe\" is not a boolean"),
        "{err}"
    );
    assert!(
        err.contains("seedance: SEEDANCE_MIN_FREE_MEMORY=\"lots\" is not a size"),
        "{err}"
    );
    assert_eq!(err.matches("SEEDANCE_EXCLUDE_DEVICES").count(), 2, "{err}");
    // Every bad value is announced at start-up, before the fault and its repair.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "{err}");
    assert!(
        lines[..4]
            .iter()
            .all(|l| l.starts_with("seedance: SEEDANCE_")),
        "{err}"
    );
    assert!(lines[4].starts_with("seedance: cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101)"));
    assert!(lines[5].starts_with("seedance: cuDeviceGet: fix: ordinal 1 -> ordinal 0"));
}

#[test]
fn the_demo_program_is_repaired() {
    let r = Run::new("wrong_ordinal", true)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "wrong_ordinal: work done on ordinal 0 (0000:11:00.0)\n"
    );
    let plain = Run::new("wrong_ordinal", false)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .finish();
    assert_eq!(plain.output.status.code(), Some(1));
    assert_eq!(
        plain.stdout(),
        "wrong_ordinal: cuDeviceGet(&dev, gpu) failed: CUDA_ERROR_INVALID_DEVICE (101)\n"
    );
}

#[test]
fn cuda_set_device_through_the_shared_runtime_is_repaired() {
    let plain = Run::new("set_device", false)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .arg("1")
        .finish();
    assert_eq!(plain.output.status.code(), Some(1));
    assert_eq!(plain.stdout(), "cudaSetDevice(1) -> 101, last error 101\n");
    let r = Run::new("set_device", true)
        .env("CUDA_VISIBLE_DEVICES", "1")
        .arg("1")
        .finish();
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    // The runtime was asked again for ordinal 0, the only visible device (physical GPU 1).
    assert_eq!(
        r.stdout(),
        "cudaSetDevice(1) -> 0, last error 0\nruntime device 0, context on 0000:11:00.0\n"
    );
    assert!(r.stderr().contains("seedance: cudaSetDevice: cudaErrorInvalidDevice (101): ordinal 1 requested, 1 device visible"), "{}", r.stderr());
    assert_eq!(r.summary_count("cudaSetDevice"), (1, 1));
    let fb = r.events("device_fallback");
    assert_eq!(fb[0]["function"], "cudaSetDevice");
    assert_eq!(fb[0]["chosen_ordinal"], 0);
    assert_eq!(
        r.events("device_fault")[0]["result_name"],
        "cudaErrorInvalidDevice"
    );
}

/// The runs of a question scenario: without the shim, then with it in each mode.
fn in_every_mode(devices: &str, args: &[&str]) -> Vec<(&'static str, seedance_e2e::Finished)> {
    let mut runs = vec![(
        "native",
        Run::new("probes", false)
            .env("FAKE_CUDA_DEVICE_COUNT", devices)
            .args(args)
            .finish(),
    )];
    for mode in ["off", "observe", "fix"] {
        runs.push((
            mode,
            Run::new("probes", true)
                .env("FAKE_CUDA_DEVICE_COUNT", devices)
                .env("SEEDANCE_MODE", mode)
                .args(args)
                .finish(),
        ));
    }
    runs
}

fn questions(r: &seedance_e2e::Finished) -> serde_json::Value {
    r.events("exit_summary")[0]["device_questions"].clone()
}

/// `while (cuDeviceGet(&d, n) == CUDA_SUCCESS) n++;` counts the driver's devices in every
/// mode (fix mode used to "repair" every ordinal, so the loop never stopped), prints
/// nothing, and the end of the loop is counted as a question, not an error or a repair.
#[test]
fn a_probing_loop_counts_the_drivers_devices_in_every_mode() {
    for devices in ["1", "2", "3"] {
        for (mode, r) in in_every_mode(devices, &["loop"]) {
            assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
            assert_eq!(r.stdout(), format!("loop: {devices} devices\n"), "{mode}");
            assert_eq!(r.stderr(), "", "{mode}");
            if mode == "observe" || mode == "fix" {
                assert!(r.events("device_fault").is_empty(), "{mode}");
                assert!(r.events("device_fallback").is_empty(), "{mode}");
                assert!(r.events("call_failed").is_empty(), "{mode}");
                let s = &r.events("exit_summary")[0];
                assert_eq!(s["repairs"], serde_json::json!({}), "{mode}");
                assert_eq!(
                    s["functions"]["cuDeviceGet"]["errors_by_result"],
                    serde_json::json!({}),
                    "{mode}"
                );
                assert_eq!(
                    questions(&r),
                    serde_json::json!({"cuDeviceGet": {"past_last_device": 1}}),
                    "{mode}"
                );
            }
        }
    }
    // A loop that keeps asking past the end (ordinals 0..63) asks questions all the way,
    // counted per call (2..31 past the last device, 32..63 above what any driver reports),
    // and is still silent.
    for (mode, r) in in_every_mode("2", &["scan"]) {
        assert_eq!(r.stdout(), "scan: 2 of 64 ordinals found\n", "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        if mode == "fix" {
            assert_eq!(
                questions(&r),
                serde_json::json!({"cuDeviceGet": {"past_last_device": 30, "above_max_devices": 32}})
            );
            assert_eq!(r.summary_count("cuDeviceGet"), (64, 62));
        }
    }
}

/// Values a program passes knowing they are wrong get the driver's code in every mode, with
/// no stderr: -1, `INT_MIN`, `cuDevicePrimaryCtxRetain(-1)`, `cuCtxCreate` on device 12345
/// (32 or more: no driver reports that many devices).
#[test]
fn negative_tests_get_the_drivers_code_in_every_mode() {
    let args = ["minus1", "intmin", "retain", "create"];
    let expected = "cuDeviceGet(-1) -> 101\n\
                    cuDeviceGet(INT_MIN) -> 101\n\
                    cuDevicePrimaryCtxRetain(-1) -> 101\n\
                    cuCtxCreate_v2(dev=12345) -> 101\n";
    for (mode, r) in in_every_mode("2", &args) {
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), expected, "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        let retains = lines_with(&r.driver_calls, "cuDevicePrimaryCtxRetain");
        assert_eq!(
            retains,
            ["cuDevicePrimaryCtxRetain dev=-1 -> 101"],
            "{mode}"
        );
        let creates = lines_with(&r.driver_calls, "cuCtxCreate_v2");
        assert_eq!(
            creates,
            ["cuCtxCreate_v2 flags=0 dev=12345 -> 101"],
            "{mode}"
        );
        if mode == "fix" {
            assert!(r.events("device_fault").is_empty());
            assert!(r.events("device_fallback").is_empty());
            assert_eq!(
                questions(&r),
                serde_json::json!({
                    "cuDeviceGet": {"negative": 2},
                    "cuDevicePrimaryCtxRetain": {"negative": 1},
                    "cuCtxCreate_v2": {"above_max_devices": 1},
                })
            );
            // The analyzer sees no problem in them (nor a newer schema).
            let dir = tempfile::tempdir().unwrap();
            let lines: Vec<String> = r.records.iter().map(|v| v.to_string()).collect();
            std::fs::write(dir.path().join("probes.jsonl"), lines.join("\n") + "\n").unwrap();
            let report = crate::signals::analyze(dir.path());
            assert_eq!(report["problems"], serde_json::json!([]), "{report}");
            assert_eq!(report["processes"][0]["errors"], 4, "{report}");
        }
    }
}

/// One device asked for by mistake is still repaired, also after the program enumerated
/// the devices: rank 1 in a 1-GPU container, ordinal 6 after a probing loop. Ordinal 1
/// after the repaired 6 keeps the answer the probing loop got for it (a question: one
/// ordinal, one answer for the process).
#[test]
fn one_device_mistakes_are_still_repaired() {
    let plain = Run::new("ordinals", false)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .arg("1")
        .finish();
    assert_eq!(plain.stdout(), "ordinal 1: cuDeviceGet -> 101\n");
    let rank = Run::new("ordinals", true)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .arg("1")
        .finish();
    assert_eq!(rank.output.status.code(), Some(0), "{}", rank.stderr());
    assert_eq!(rank.stdout(), "ordinal 1 -> 0000:10:00.0\n");
    assert!(rank
        .stderr()
        .contains("seedance: cuDeviceGet: fix: ordinal 1 -> ordinal 0"));

    let args = ["loop", "get:6", "get:1"];
    let plain = Run::new("probes", false)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .args(&args)
        .finish();
    assert_eq!(
        plain.stdout(),
        "loop: 1 devices\ncuDeviceGet(6) -> 101, device -1\ncuDeviceGet(1) -> 101, device -1\n"
    );
    let r = Run::new("probes", true)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .args(&args)
        .finish();
    assert_eq!(
        r.stdout(),
        "loop: 1 devices\ncuDeviceGet(6) -> 0, device 0\ncuDeviceGet(1) -> 101, device -1\n"
    );
    let err = r.stderr();
    assert_eq!(err.lines().count(), 2, "{err}");
    assert_eq!(
        err.matches("ordinal 6 requested, 1 device visible").count(),
        1
    );
    assert_eq!(err.matches("fix: ordinal 6 -> ordinal 0").count(), 1);
    assert_eq!(r.events("device_fallback").len(), 1);
    assert_eq!(
        questions(&r),
        serde_json::json!({"cuDeviceGet": {"past_last_device": 2}})
    );
    // observe: the mistakes explained, the question not; nothing changed.
    let o = Run::new("probes", true)
        .env("FAKE_CUDA_DEVICE_COUNT", "1")
        .env("SEEDANCE_MODE", "observe")
        .args(&args)
        .finish();
    assert_eq!(o.stdout(), plain.stdout());
    assert_eq!(o.stderr().lines().count(), 1, "{}", o.stderr());
    assert_eq!(o.events("device_fault").len(), 1);
}

/// Runs `probes` with `args` on `devices` fake devices (and `CUDA_VISIBLE_DEVICES` when
/// given) without the shim and in observe, fix, and fix with `SEEDANCE_FALLBACK=off`.
fn probes_runs(
    devices: &str,
    cvd: Option<&str>,
    args: &[&str],
) -> Vec<(&'static str, seedance_e2e::Finished)> {
    let run = |shim: bool, mode: Option<&str>, fallback: Option<&str>| {
        let mut r = Run::new("probes", shim)
            .env("FAKE_CUDA_DEVICE_COUNT", devices)
            .args(args);
        if let Some(c) = cvd {
            r = r.env("CUDA_VISIBLE_DEVICES", c);
        }
        if let Some(m) = mode {
            r = r.env("SEEDANCE_MODE", m);
        }
        if let Some(f) = fallback {
            r = r.env("SEEDANCE_FALLBACK", f);
        }
        r.finish()
    };
    vec![
        ("native", run(false, None, None)),
        ("observe", run(true, Some("observe"), None)),
        ("fix", run(true, Some("fix"), None)),
        ("fallback_off", run(true, Some("fix"), Some("off"))),
    ]
}

/// The rank mistake after a count query: `cuDeviceGetCount` answers 1, then
/// `cuDeviceGet(1)` (rank 1 on a 1-GPU host, or the physical id used as an ordinal under
/// `CUDA_VISIBLE_DEVICES=1`). Explained in observe, repaired in fix (the context and the
/// allocation then work on device 0), the driver's error with `SEEDANCE_FALLBACK=off`,
/// whose name the announcement gives. Before, every mode was silent.
#[test]
fn the_count_right_after_the_count_is_the_rank_mistake() {
    for (devices, cvd) in [("1", None), ("2", Some("1"))] {
        let runs = probes_runs(devices, cvd, &["rank"]);
        let native = "rank 1 of 1: cuDeviceGet -> 101\n";
        for (mode, r) in &runs {
            assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
            let err = r.stderr();
            match *mode {
                "native" => assert_eq!(r.stdout(), native),
                "fix" => {
                    assert_eq!(
                        r.stdout(),
                        "rank 1 of 1: cuDeviceGet -> 0, device 0, work -> 0\n",
                        "{cvd:?}"
                    );
                    assert_eq!(err.lines().count(), 2, "{err}");
                    assert!(
                        err.lines()
                            .last()
                            .unwrap()
                            .contains("fix: ordinal 1 -> ordinal 0 (physical GPU ")
                            && err.ends_with("set SEEDANCE_FALLBACK=off to keep the error\n"),
                        "{err}"
                    );
                    assert_eq!(r.events("device_fallback").len(), 1);
                    assert_eq!(questions(r), serde_json::json!({}));
                }
                _ => {
                    assert_eq!(r.stdout(), native, "{mode}");
                    assert_eq!(err.lines().count(), 1, "{mode}: {err}");
                    assert!(
                        err.contains("cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101): ordinal 1 requested, 1 device visible"),
                        "{mode}: {err}"
                    );
                    assert_eq!(r.events("device_fault").len(), 1, "{mode}");
                }
            }
            if cvd.is_some() && *mode != "native" {
                assert!(
                    err.contains("CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0"),
                    "{mode}: {err}"
                );
            }
        }
    }
}

/// Ordinal 1 under `CUDA_VISIBLE_DEVICES=1` is never silent, whatever the history: at the
/// end of an ascending enumeration (0 found, then 1) it keeps the driver's answer, so the
/// loop still counts one device in every mode, and it is explained once, naming the
/// variable.
#[test]
fn a_renumbered_ordinal_ending_an_enumeration_is_explained_not_repaired() {
    for (mode, r) in probes_runs("2", Some("1"), &["loop"]) {
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        assert_eq!(r.stdout(), "loop: 1 devices\n", "{mode}");
        if mode == "native" {
            continue;
        }
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{mode}: {err}");
        assert!(
            err.contains("CUDA_VISIBLE_DEVICES=1 made physical GPU 1 ordinal 0; use cuda:0 (or ordinal 0); not repaired: the request continues an enumeration of the devices"),
            "{mode}: {err}"
        );
        assert!(r.events("device_fallback").is_empty(), "{mode}");
        assert_eq!(
            questions(&r),
            serde_json::json!({"cuDeviceGet": {"past_last_device": 1}}),
            "{mode}"
        );
    }
}

/// One ordinal, one answer: ordinal 1 on a 1-GPU host asked through `cuDeviceGet`, again
/// after `cuDeviceGetCount`, through `cuDevicePrimaryCtxRetain`, and on another thread
/// after `cuDeviceGet(0)`. In fix mode every request is repaired to device 0 (before, the
/// second and the fourth got 101); in observe every one gets the driver's 101. When the
/// first request was a question ("is there a second GPU?" after ordinal 0 was found),
/// every later request gets the driver's answer too, silently, in every mode.
#[test]
fn one_ordinal_gets_one_answer_on_every_thread_and_entry_point() {
    let native = "same: cuDeviceGet(1) -> 101, device -1; after count 1 -> 101, device -1; \
                  cuDevicePrimaryCtxRetain(1) -> 101\n\
                  thread: cuDeviceGet(0) -> 0, cuDeviceGet(1) -> 101, device -1\n";
    for (mode, r) in probes_runs("1", None, &["same"]) {
        assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
        if mode == "fix" {
            assert_eq!(
                r.stdout(),
                "same: cuDeviceGet(1) -> 0, device 0; after count 1 -> 0, device 0; \
                 cuDevicePrimaryCtxRetain(1) -> 0\n\
                 thread: cuDeviceGet(0) -> 0, cuDeviceGet(1) -> 0, device 0\n"
            );
            assert_eq!(questions(&r), serde_json::json!({}));
        } else {
            assert_eq!(r.stdout(), native, "{mode}");
        }
    }
    let asked = "second: cuDeviceGet(0) -> 0, a second GPU: no\n";
    for (mode, r) in probes_runs("1", None, &["second", "same"]) {
        assert_eq!(r.stdout(), format!("{asked}{native}"), "{mode}");
        assert_eq!(r.stderr(), "", "{mode}");
        if mode != "native" {
            assert_eq!(
                questions(&r),
                serde_json::json!({
                    "cuDeviceGet": {"past_last_device": 4},
                    "cuDevicePrimaryCtxRetain": {"past_last_device": 1},
                }),
                "{mode}"
            );
        }
    }
}

/// The enumeration forms on a 1-GPU host (docs/configuration.md, `SEEDANCE_FALLBACK`):
/// - a descending probe from 7: its first look-up is the rank mistake's shape (explained
///   once; repaired in fix, so fix counts 2), the rest are questions (before: 7 lines in
///   observe, 8 devices in fix);
/// - probing from 1 upwards: 1 is the mistake (repaired in fix), 2 the probe's end, so fix
///   stops at 1 (before: 7);
/// - "is there a second GPU?" after ordinal 0 was found: no, in every mode, silently.
#[test]
fn enumeration_forms_get_one_explanation_and_a_bounded_count() {
    let expect = [
        (
            "desc",
            "desc: 1 of 8 ordinals found\n",
            "desc: 2 of 8 ordinals found\n",
        ),
        (
            "from1",
            "from1: highest ordinal found 0\n",
            "from1: highest ordinal found 1\n",
        ),
    ];
    for (arg, native, fixed) in expect {
        for (mode, r) in probes_runs("1", None, &[arg]) {
            assert_eq!(r.output.status.code(), Some(0), "{mode}: {}", r.stderr());
            let err = r.stderr();
            let lines = err.lines().count();
            match mode {
                "native" => assert_eq!(r.stdout(), native),
                "fix" => {
                    assert_eq!(r.stdout(), fixed, "{arg}");
                    assert_eq!(lines, 2, "{arg}: {err}");
                }
                _ => {
                    assert_eq!(r.stdout(), native, "{arg} {mode}");
                    assert_eq!(lines, 1, "{arg} {mode}: {err}");
                }
            }
        }
    }
    for (mode, r) in probes_runs("1", None, &["second"]) {
        assert_eq!(
            r.stdout(),
            "second: cuDeviceGet(0) -> 0, a second GPU: no\n",
            "{mode}"
        );
        assert_eq!(r.stderr(), "", "{mode}");
    }
}

/// Hostile values cannot flood stderr or the trace: 30,000 bad `SEEDANCE_EXCLUDE_DEVICES`
/// entries give 5 warnings and one line counting the rest (before: one line each, 3 MB);
/// a 128 KiB `SEEDANCE_MODE` or `CUDA_VISIBLE_DEVICES` (the kernel's limit for one
/// environment string) is shown as its first 200 bytes and its length, in the messages
/// and in the trace's `session_start` (before: echoed whole, in every message that names it).
#[test]
fn hostile_values_are_echoed_in_bounded_lines() {
    let excl = "bad,".repeat(30_000);
    let mode = "x".repeat(131_000);
    let cvd = format!("0,{}", "9".repeat(131_000));
    let r = Run::new("ordinals", true)
        .env("SEEDANCE_EXCLUDE_DEVICES", &excl)
        .env("SEEDANCE_MODE", &mode)
        .env("CUDA_VISIBLE_DEVICES", &cvd)
        .arg("1")
        .finish();
    // A mode the shim cannot read means observe: the program sees what it sees natively.
    let native = Run::new("ordinals", false)
        .env("CUDA_VISIBLE_DEVICES", &cvd)
        .arg("1")
        .finish();
    assert_eq!(
        r.output.status.code(),
        native.output.status.code(),
        "{}",
        r.stderr()
    );
    assert_eq!(r.stdout(), native.stdout());
    let err = r.stderr();
    assert!(err.len() < 4096, "{} bytes of stderr", err.len());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "seedance: SEEDANCE_MODE=\"{}\"... (131000 bytes) is not one of off, observe, fix; \
             using observe",
            "x".repeat(200)
        )
    );
    for l in &lines[1..6] {
        assert_eq!(
            *l,
            "seedance: SEEDANCE_EXCLUDE_DEVICES: \"bad\" is not an ordinal, a GPU- UUID (or \
             prefix) or a PCI bus id (0000:1a:00.0); skipped"
        );
    }
    assert_eq!(
        lines[6],
        "seedance: SEEDANCE_EXCLUDE_DEVICES: 29995 more bad entries skipped (not shown)"
    );
    let shown_cvd = format!("0,{}... (131002 bytes)", "9".repeat(198));
    assert!(
        lines[7].contains(&format!("CUDA_VISIBLE_DEVICES={shown_cvd}")),
        "{}",
        lines[7]
    );
    assert!(lines.iter().all(|l| l.len() < 1024), "{err}");
    let start = &r.events("session_start")[0];
    assert_eq!(start["cuda_visible_devices"], shown_cvd.as_str());
    assert_eq!(
        start["topology"]["visibility"]["cuda_visible_devices"],
        shown_cvd.as_str()
    );
    let record_bytes = serde_json::to_string(start).unwrap().len();
    assert!(record_bytes < 8192, "session_start is {record_bytes} bytes");
}
