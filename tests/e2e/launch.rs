//! Launch faults: a launch over a device or kernel limit is explained with the
//! limit, the value and the fix, in a `launch_fault` event and one stderr line per distinct
//! fault; the program gets the driver's own code, and with `SEEDANCE_VALIDATE=pre` the
//! launch is refused before it reaches the driver. Programs: `tests/programs/launch_faults.c`.

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};

fn run(scenario: &str, shim: bool) -> Finished {
    Run::new("launch_faults", shim)
        .env("FAKE_CUDA_FUNC_MAX_THREADS", "256")
        .arg(scenario)
        .finish()
}

/// Runs `scenario` without and with the shim: same output, every program call forwarded
/// unchanged; returns the shimmed run.
fn compare(scenario: &str) -> Finished {
    let plain = run(scenario, false);
    let shimmed = run(scenario, true);
    assert_eq!(plain.output.status.code(), Some(0), "{}", plain.stdout());
    assert_eq!(shimmed.stdout(), plain.stdout());
    assert_eq!(plain.stderr(), "");
    assert_forwarded_unchanged(&plain.driver_calls, &shimmed.driver_calls);
    shimmed
}

fn one_fault(r: &Finished) -> serde_json::Value {
    let f = r.events("launch_fault");
    assert_eq!(f.len(), 1, "{:#?}", r.records);
    assert!(r.events("call_failed").is_empty());
    f[0].clone()
}

#[test]
fn block_over_threads_per_block_is_explained_once() {
    let r = compare("block");
    assert_eq!(
        r.stdout(),
        "block 32x33x1 -> 1\nblock 32x33x1 -> 1\nblock 32x33x1 -> 1\nblock 32x32x1 -> 0\n"
    );
    assert_eq!(
        r.stderr(),
        "seedance: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): block (32,33,1) = 1056 \
         threads, over device 0's limit of 1024 threads per block \
         (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); use at most 1024 threads per block, e.g. \
         block (32,32,1) [driver: [cuLaunchKernel] too many threads per block: 1056 > 1024]\n"
    );
    let f = one_fault(&r);
    assert_eq!(f["function"], "cuLaunchKernel");
    assert_eq!(f["result"], 1);
    assert_eq!(f["result_name"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(f["check"], "threads_per_block");
    assert_eq!(
        (f["limit"].as_u64(), f["requested"].as_u64()),
        (Some(1024), Some(1056))
    );
    assert_eq!(f["device"], 0);
    assert_eq!(f["grid"], serde_json::json!([1, 1, 1]));
    assert_eq!(f["block"], serde_json::json!([32, 33, 1]));
    assert_eq!(f["refused_before_driver"], false);
    assert_eq!(
        f["driver_message"],
        "[cuLaunchKernel] too many threads per block: 1056 > 1024"
    );
    assert_eq!(r.summary_count("cuLaunchKernel"), (4, 3));
    let s = &r.events("exit_summary")[0]["functions"]["cuLaunchKernel"];
    assert_eq!(s["errors_by_result"]["CUDA_ERROR_INVALID_VALUE"], 3);
    // Device limits are read once per device.
    let attr_reads = r
        .driver_calls
        .iter()
        .filter(|l| l.starts_with("cuDeviceGetAttribute attrib=1 dev=0"))
        .count();
    assert!(attr_reads <= 2, "{:#?}", r.driver_calls);
}

#[test]
fn grid_y_over_65535() {
    let r = compare("grid_y");
    assert_eq!(r.stdout(), "grid 1x65536x1 -> 1\ngrid 1x65535x1 -> 0\n");
    let f = one_fault(&r);
    assert_eq!(f["check"], "grid_dim");
    assert_eq!(
        (f["limit"].as_u64(), f["requested"].as_u64()),
        (Some(65535), Some(65536))
    );
    assert_eq!(
        f["explanation"],
        "grid (1,65536,1): gridDim.y = 65536 is over device 0's limit of 65535 \
         (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y); put the long extent in x (limit 2147483647) or \
         loop over it inside the kernel"
    );
}

#[test]
fn dynamic_shared_memory_needs_the_opt_in() {
    let r = compare("smem");
    assert_eq!(
        r.stdout(),
        "64 KiB dynamic shared memory -> 1\n\
         cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536) -> 0\n\
         64 KiB dynamic shared memory -> 0\n"
    );
    let f = one_fault(&r);
    assert_eq!(f["check"], "shared_memory");
    assert_eq!(
        (f["limit"].as_u64(), f["requested"].as_u64()),
        (Some(49152), Some(65536))
    );
    assert_eq!(f["shared_mem_bytes"], 65536);
    assert_eq!(
        f["explanation"],
        "65536 bytes of dynamic shared memory per block, over this kernel's limit of 49152 bytes \
         (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; 48 KiB unless raised); call \
         cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536) before the \
         launch (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536) \
         in the runtime API); device 0 allows up to 232448 bytes"
    );
}

#[test]
fn register_limited_kernel() {
    let r = compare("regs");
    assert_eq!(
        r.stdout(),
        "register-limited kernel, 512 threads -> 701\nregister-limited kernel, 256 threads -> 0\n"
    );
    let f = one_fault(&r);
    assert_eq!(f["result_name"], "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    assert_eq!(f["check"], "func_max_threads");
    assert_eq!(
        (f["limit"].as_u64(), f["requested"].as_u64()),
        (Some(256), Some(512))
    );
    assert_eq!(
        f["explanation"],
        "block (512,1,1) = 512 threads, over this kernel's own limit of 256 threads per block \
         (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: it uses 248 registers per thread); launch it \
         with at most 256 threads per block, or build it with __launch_bounds__(512) or \
         -maxrregcount so that it uses fewer registers"
    );
}

#[test]
fn zero_dims_cooperative_grids_and_clusters() {
    for (scenario, function, result, check, limit, requested) in [
        ("zero", "cuLaunchKernel", 1, "zero_dim", 1, 0),
        (
            "coop",
            "cuLaunchCooperativeKernel",
            720,
            "cooperative_grid",
            264,
            300,
        ),
        ("cluster", "cuLaunchKernelEx", 912, "cluster_dim", 3, 8),
    ] {
        let r = compare(scenario);
        let f = one_fault(&r);
        assert_eq!(f["function"], function, "{scenario}");
        assert_eq!(f["result"], result, "{scenario}");
        assert_eq!(f["check"], check, "{scenario}");
        assert_eq!(f["limit"], limit, "{scenario}");
        assert_eq!(f["requested"], requested, "{scenario}");
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    }
    let r = run("coop", true);
    assert!(r.stderr().contains(
        "cooperative launch of 300 blocks (grid (300,1,1)), but at most 264 can be resident at \
         once on device 0 (2 per SM for this kernel with 1024 threads and 0 bytes of dynamic \
         shared memory, cuOccupancyMaxActiveBlocksPerMultiprocessor, x 132 SMs)"
    ));
}

#[test]
fn context_faults_say_which() {
    for (scenario, result, check, text) in [
        (
            "no_ctx",
            201,
            "no_context",
            "no CUDA context is current on this thread (cuCtxGetCurrent returns none)",
        ),
        (
            "destroyed",
            709,
            "destroyed_context",
            "the context current on this thread (0x5eedc0000100) has been destroyed",
        ),
        (
            "stream",
            400,
            "stream_context",
            "stream 0x5eed50000100 belongs to context 0x5eedc0000100, not to the context current \
             on this thread (0x5eedc0000200)",
        ),
    ] {
        let plain = run(scenario, false);
        let r = run(scenario, true);
        assert_eq!(r.stdout(), plain.stdout(), "{scenario}");
        let f = one_fault(&r);
        assert_eq!(f["result"], result, "{scenario}");
        assert_eq!(f["check"], check, "{scenario}");
        assert!(f["limit"].is_null());
        assert!(
            f["explanation"].as_str().unwrap().starts_with(text),
            "{scenario}: {}",
            f["explanation"]
        );
    }
    // The lifetime tracker saw the reset: the explanation names the call and thread that
    // ended the context.
    let r = run("destroyed", true);
    let text = one_fault(&r)["explanation"].as_str().unwrap().to_string();
    let (made, ended) = text
        .strip_prefix(
            "the context current on this thread (0x5eedc0000100) has been destroyed: context \
             0x5eedc0000100 (device 0, primary, generation 1, made by cuDevicePrimaryCtxRetain on \
             thread ",
        )
        .and_then(|rest| {
            rest.split_once(
                " (lifetime call #1)) was reset by cuDevicePrimaryCtxReset_v2 on thread ",
            )
        })
        .unwrap_or_else(|| panic!("{text}"));
    let (ended, advice) = ended.split_once(" (lifetime call #2); ").unwrap();
    assert_eq!(made, ended, "the program has one thread: {text}");
    assert!(made.parse::<u32>().is_ok(), "{text}");
    assert!(advice.starts_with("make a live context current before launching"));
}

#[test]
fn unknown_fault_carries_the_drivers_own_words() {
    let r = compare("params_and_extra");
    assert_eq!(
        r.stdout(),
        "kernelParams and extra -> 1\nkernelParams only -> 0\n"
    );
    let f = one_fault(&r);
    assert_eq!(f["check"], "unknown");
    assert_eq!(
        f["driver_message"],
        "[cuLaunchKernel] kernelParams and extra are both given; pass only one"
    );
    assert_eq!(
        f["explanation"],
        "the launch is within every limit the shim checks; the driver says: [cuLaunchKernel] \
         kernelParams and extra are both given; pass only one"
    );
}

#[test]
fn validate_pre_refuses_without_reaching_the_driver() {
    let plain = run("block", false);
    let r = Run::new("launch_faults", true)
        .env("SEEDANCE_VALIDATE", "pre")
        .arg("block")
        .finish();
    assert_eq!(r.stdout(), plain.stdout());
    assert!(plain
        .driver_calls
        .iter()
        .any(|l| l.contains("block=32,33,1")));
    let launches: Vec<&String> = r
        .driver_calls
        .iter()
        .filter(|l| l.starts_with("cuLaunchKernel"))
        .collect();
    assert_eq!(
        launches,
        ["cuLaunchKernel f=0x1000 grid=1,1,1 block=32,32,1 shmem=0 stream=0x0 -> 0"]
    );
    let f = one_fault(&r);
    assert_eq!(f["refused_before_driver"], true);
    assert_eq!(f["result"], 1);
    assert!(f["driver_message"].is_null());
    assert!(r
        .stderr()
        .ends_with("[refused before reaching the driver: SEEDANCE_VALIDATE=pre]\n"));
    assert_eq!(r.summary_count("cuLaunchKernel"), (4, 3));
}

#[test]
fn validate_off_keeps_the_plain_report() {
    let r = Run::new("launch_faults", true)
        .env("SEEDANCE_VALIDATE", "off")
        .arg("block")
        .finish();
    assert!(r.events("launch_fault").is_empty());
    assert_eq!(r.events("call_failed").len(), 3);
    assert!(!r
        .driver_calls
        .iter()
        .any(|l| l.starts_with("cuLogsRegisterCallback")));
    assert!(
        r.stderr().contains("cuLaunchKernel(f=0x1000"),
        "{}",
        r.stderr()
    );
}
