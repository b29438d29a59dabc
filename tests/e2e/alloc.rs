//! Allocation faults: a zero size, a negative size that wrapped, a `cuMemCreate`
//! size off the granularity, and out of memory (free and total memory, what the process
//! holds, which other device has room) are explained in an `alloc_fault` event and one
//! stderr line; the program gets the driver's own code. Programs:
//! `tests/programs/alloc_faults.c`.

use seedance_e2e::{assert_forwarded_unchanged, Finished, Run};

/// Device 0 has 1 GiB free of 80 GiB; device 1 is empty.
fn run(scenario: &str, shim: bool) -> Run {
    Run::new("alloc_faults", shim)
        .env("FAKE_CUDA_FREE_MEM", "1073741824,")
        .arg(scenario)
}

fn compare(scenario: &str) -> Finished {
    let plain = run(scenario, false).finish();
    let shimmed = run(scenario, true).finish();
    assert_eq!(plain.output.status.code(), Some(0), "{}", plain.stdout());
    assert_eq!(shimmed.stdout(), plain.stdout());
    assert_forwarded_unchanged(&plain.driver_calls, &shimmed.driver_calls);
    shimmed
}

#[test]
fn zero_sizes() {
    let r = compare("zero");
    assert_eq!(
        r.stdout(),
        "cuMemAlloc 0 bytes -> 1\ncuMemAllocManaged 0 bytes -> 1\ncuMemHostAlloc 0 bytes -> 1\n\
         cuMemAlloc 4096 bytes -> 0\n"
    );
    let faults = r.events("alloc_fault");
    let names: Vec<&str> = faults
        .iter()
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["cuMemAlloc_v2", "cuMemAllocManaged", "cuMemHostAlloc"]
    );
    assert!(faults
        .iter()
        .all(|f| f["check"] == "zero_size" && f["result"] == 1));
    assert!(r.events("call_failed").is_empty());
    assert_eq!(faults[2]["device"], serde_json::Value::Null);
    let err = r.stderr();
    assert!(err.starts_with(
        "seedance: cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE (1): the program asked for 0 bytes; \
         the driver refuses a size of 0: skip the allocation when the size is 0 (it usually comes \
         from an empty tensor or a size computed from an empty input) [driver: [cuMemAlloc_v2] \
         invalid size: 0 bytes requested]\n"
    ));
    assert!(err.contains("cuMemHostAlloc: CUDA_ERROR_INVALID_VALUE (1): the program asked for 0 bytes of pinned host memory"));
}

#[test]
fn negative_size_that_wrapped() {
    let r = compare("negative");
    assert_eq!(
        r.stdout(),
        "cuMemAlloc (size_t)-4096 -> 2\ncuMemAlloc 4096 -> 0\n"
    );
    let f = &r.events("alloc_fault")[0];
    assert_eq!(f["check"], "exceeds_total");
    assert_eq!(f["result_name"], "CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(f["requested_bytes"].as_u64(), Some(u64::MAX - 4095));
    assert_eq!(f["requested_signed"], -4096);
    assert_eq!(f["limit_bytes"].as_u64(), Some(85_899_345_920));
    assert_eq!(f["total_bytes"].as_u64(), Some(85_899_345_920));
    assert_eq!(
        f["explanation"],
        "the program asked for 18446744073709547520 bytes, which is -4096 as a signed number: a \
         negative size converted to size_t; no device has that much memory (device 0 has 80.0 GiB \
         (85899345920 bytes) in all): check the arithmetic that computed the size"
    );
}

#[test]
fn out_of_memory_names_free_memory_own_allocations_and_another_device() {
    let plain = run("oom", false).finish();
    let r = run("oom", true).with_nvml().finish();
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(
        r.stdout(),
        "cuMemAlloc 256 MiB -> 0\ncuMemAlloc 256 MiB -> 0\ncuMemFree -> 0\ncuMemAlloc 2 GiB -> 2\n\
         cuMemAlloc 512 MiB -> 0\n"
    );
    let f = &r.events("alloc_fault")[0];
    assert_eq!(f["check"], "out_of_memory");
    assert_eq!(f["requested_bytes"].as_u64(), Some(2 << 30));
    assert_eq!(f["free_bytes"].as_u64(), Some(768 << 20));
    assert_eq!(f["limit_bytes"].as_u64(), Some(768 << 20));
    assert_eq!(f["total_bytes"].as_u64(), Some(85_899_345_920));
    assert_eq!(f["process_live_bytes"].as_u64(), Some(256 << 20));
    assert_eq!(f["process_live_allocations"], 1);
    assert_eq!(
        f["other_devices_with_room"],
        serde_json::json!([{"ordinal": 1, "free_bytes": 85_899_345_920u64}])
    );
    assert_eq!(
        f["driver_message"],
        "[cuMemAlloc_v2] out of memory: 2147483648 bytes requested"
    );
    assert_eq!(
        f["explanation"],
        "the program asked for 2.0 GiB (2147483648 bytes) on device 0, which has 768.0 MiB free \
         of 80.0 GiB right now (cuMemGetInfo): the request is larger than the free memory (a \
         genuine shortage); this process holds 256.0 MiB in 1 live allocation on device 0: \
         alloc_faults holds 256.0 MiB in 1 allocation; device 1 (80.0 GiB free) has room (NVML); free what is no longer needed or ask for less (a \
         smaller batch), or use device 1"
    );
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());

    // Without NVML, the other devices are unknown.
    let r = run("oom", true).finish();
    let f = &r.events("alloc_fault")[0];
    assert!(f["other_devices_with_room"].is_null());
    assert!(f["explanation"]
        .as_str()
        .unwrap()
        .contains("; whether another device has room is unknown (no NVML); "));
}

#[test]
fn mem_create_off_the_granularity() {
    let r = compare("create");
    assert_eq!(
        r.stdout(),
        "cuMemCreate 3 MiB -> 1\ncuMemCreate 4 MiB -> 0\ncuMemRelease -> 0\n"
    );
    let f = &r.events("alloc_fault")[0];
    assert_eq!(f["function"], "cuMemCreate");
    assert_eq!(f["check"], "granularity");
    assert_eq!(f["limit_bytes"], 2 << 20);
    assert_eq!(
        f["explanation"],
        "cuMemCreate size 3.0 MiB (3145728 bytes) is not a multiple of the allocation \
         granularity of device 0, 2.0 MiB (2097152 bytes) (cuMemGetAllocationGranularity); round \
         the size up to 4.0 MiB (4194304 bytes)"
    );
    assert_eq!(r.summary_count("cuMemCreate"), (2, 1));
    assert_eq!(r.summary_count("cuMemRelease"), (1, 0));
}

#[test]
fn validate_pre_refuses_without_reaching_the_driver() {
    let plain = run("negative", false).finish();
    let r = run("negative", true)
        .env("SEEDANCE_VALIDATE", "pre")
        .finish();
    assert_eq!(r.stdout(), plain.stdout());
    let allocs: Vec<&String> = r
        .driver_calls
        .iter()
        .filter(|l| l.starts_with("cuMemAlloc"))
        .collect();
    assert_eq!(allocs, ["cuMemAlloc_v2 bytes=4096 -> 0"]);
    let f = &r.events("alloc_fault")[0];
    assert_eq!(f["refused_before_driver"], true);
    assert_eq!(f["check"], "exceeds_total");
    assert_eq!(f["result"], 2);
}

/// Out of memory with most of the device held by a library of the program
/// (`libholder_a.so`, as JAX's preallocation): the explanation and the exit summary name each
/// library that holds memory by its file name, with its allocations and bytes.
#[test]
fn out_of_memory_names_the_libraries_that_hold_the_memory() {
    let r = Run::new("holder_main", true)
        .env("FAKE_CUDA_FREE_MEM", "1073741824,")
        .finish();
    assert_eq!(r.stdout(), "library 0, own 0, big 2\n");
    let f = &r.events("alloc_fault")[0];
    assert_eq!(f["process_live_allocations"], 4);
    assert_eq!(f["process_live_bytes"].as_u64(), Some(832 << 20));
    assert_eq!(
        f["explanation"],
        "the program asked for 512.0 MiB (536870912 bytes) on device 0, which has 192.0 MiB \
         free of 80.0 GiB right now (cuMemGetInfo): the request is larger than the free memory \
         (a genuine shortage); this process holds 832.0 MiB in 4 live allocations on device 0: \
         libholder_a.so holds 768.0 MiB in 3 allocations; holder_main holds 64.0 MiB in 1 \
         allocation; whether another device has room is unknown (no NVML); free what is no \
         longer needed or ask for less (a smaller batch); which other processes hold memory on \
         device 0 is unknown (no NVML)"
    );
    let err = r.stderr();
    assert!(
        err.contains(
            "on device 0: libholder_a.so holds 768.0 MiB in 3 allocations; holder_main holds \
             64.0 MiB in 1 allocation;"
        ),
        "{err}"
    );
    let summary = &r.events("exit_summary")[0];
    assert_eq!(
        summary["memory_holders"],
        serde_json::json!([
            {"library": "libholder_a.so", "device": 0, "allocations": 3, "bytes": 805306368u64},
            {"library": "holder_main", "device": 0, "allocations": 1, "bytes": 67108864u64},
        ])
    );
}
