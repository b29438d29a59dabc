//! End-to-end checks of the built `libnvidia_ml.so` through `dlopen`, one scenario per
//! child process, including one that loads the fake CUDA driver beside it and checks that
//! both describe the same host.
#![allow(non_snake_case)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::Path;

use common::{cuda_path, nvml_path, run_scenario, temp_path, Lib, SCENARIO_ENV};

type R = u32;
type Dev = *mut c_void;

type FnVoid = unsafe extern "C" fn() -> R;
type FnFlags = unsafe extern "C" fn(c_uint) -> R;
type FnErrStr = unsafe extern "C" fn(R) -> *const c_char;
type FnStr = unsafe extern "C" fn(*mut c_char, c_uint) -> R;
type FnIntOut = unsafe extern "C" fn(*mut c_int) -> R;
type FnUintOut = unsafe extern "C" fn(*mut c_uint) -> R;
type FnByIndex = unsafe extern "C" fn(c_uint, *mut Dev) -> R;
type FnByStr = unsafe extern "C" fn(*const c_char, *mut Dev) -> R;
type FnDevUint = unsafe extern "C" fn(Dev, *mut c_uint) -> R;
type FnDevInt = unsafe extern "C" fn(Dev, *mut c_int) -> R;
type FnDevStr = unsafe extern "C" fn(Dev, *mut c_char, c_uint) -> R;
type FnPci = unsafe extern "C" fn(Dev, *mut PciInfo) -> R;
type FnMem = unsafe extern "C" fn(Dev, *mut Memory) -> R;
type FnMem2 = unsafe extern "C" fn(Dev, *mut Memory2) -> R;
type FnProcs = unsafe extern "C" fn(Dev, *mut c_uint, *mut ProcessInfo) -> R;
type FnCc = unsafe extern "C" fn(Dev, *mut c_int, *mut c_int) -> R;

// The CUDA side, for the same-host scenario.
type FnCuInit = unsafe extern "C" fn(c_uint) -> R;
type FnCuStrDev = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> R;
type FnCuUuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> R;
type FnCuAttr = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> R;
type FnCuTotal = unsafe extern "C" fn(*mut usize, c_int) -> R;

/// `nvmlPciInfo_t` as `nvml.h` lays it out.
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

#[repr(C)]
#[derive(Debug, Default, PartialEq)]
struct Memory {
    total: u64,
    free: u64,
    used: u64,
}

#[repr(C)]
#[derive(Debug, Default, PartialEq)]
struct Memory2 {
    version: c_uint,
    total: u64,
    reserved: u64,
    free: u64,
    used: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

const MEMORY_V2: c_uint = 40 | (2 << 24);

#[test]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    match scenario.as_str() {
        "topology" => topology(&Lib::open(&nvml_path())),
        "absent" => absent(&Lib::open(&nvml_path())),
        "no_gpus" => no_gpus(&Lib::open(&nvml_path())),
        "same_host" => same_host(&Lib::open(&nvml_path()), &Lib::open(&cuda_path())),
        "soname" => soname(),
        "delays" => delays(&Lib::open(&nvml_path())),
        "bad_delay" => bad_delay(&Lib::open(&nvml_path())),
        other => panic!("unknown scenario {other}"),
    }
}

fn c_str(buf: &[c_char]) -> String {
    // SAFETY: the fake NUL-terminates within the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn handle(nv: &Lib, i: c_uint) -> Dev {
    let mut d: Dev = std::ptr::null_mut();
    // SAFETY: a pointer to a live local handle.
    let r = unsafe { nv.f::<FnByIndex>("nvmlDeviceGetHandleByIndex_v2")(i, &mut d) };
    assert_eq!(r, 0, "handle {i}");
    d
}

fn dev_str(nv: &Lib, name: &str, d: Dev) -> String {
    let mut buf = [0 as c_char; 96];
    // SAFETY: `buf` has 96 writable bytes.
    let r = unsafe { nv.f::<FnDevStr>(name)(d, buf.as_mut_ptr(), 96) };
    assert_eq!(r, 0);
    c_str(&buf)
}

fn topology(nv: &Lib) {
    // SAFETY: (whole scenario) every call passes pointers to live locals of the C types the
    // ABI names, and C strings that outlive the call.
    unsafe {
        let mut n: c_uint = 99;
        let count = nv.f::<FnUintOut>("nvmlDeviceGetCount_v2");
        assert_eq!(count(&mut n), 1, "before init");
        assert_eq!(nv.f::<FnVoid>("nvmlShutdown")(), 1);
        let err = nv.f::<FnErrStr>("nvmlErrorString");
        assert_eq!(CStr::from_ptr(err(1)).to_str(), Ok("Uninitialized"));
        assert_eq!(CStr::from_ptr(err(7)).to_str(), Ok("Insufficient Size"));

        assert_eq!(nv.f::<FnVoid>("nvmlInit_v2")(), 0);
        assert_eq!(nv.f::<FnFlags>("nvmlInitWithFlags")(0), 0, "refcount 2");

        let mut buf = [0 as c_char; 80];
        let version = nv.f::<FnStr>("nvmlSystemGetDriverVersion");
        assert_eq!(version(buf.as_mut_ptr(), 80), 0);
        assert_eq!(c_str(&buf), "580.159.04");
        assert_eq!(version(buf.as_mut_ptr(), 10), 7);
        assert_eq!(version(std::ptr::null_mut(), 80), 2);
        let mut v: c_int = 0;
        assert_eq!(
            nv.f::<FnIntOut>("nvmlSystemGetCudaDriverVersion_v2")(&mut v),
            0
        );
        assert_eq!(v, 13000);

        // CUDA_VISIBLE_DEVICES is ignored: all four physical devices.
        assert_eq!(count(&mut n), 0);
        assert_eq!(n, 4);
        let devs: Vec<Dev> = (0..4).map(|i| handle(nv, i)).collect();
        assert_eq!(handle(nv, 2), devs[2], "stable handles");
        let mut d: Dev = std::ptr::null_mut();
        let by_index = nv.f::<FnByIndex>("nvmlDeviceGetHandleByIndex_v2");
        assert_eq!(by_index(4, &mut d), 2);
        assert_eq!(by_index(0, std::ptr::null_mut()), 2);

        let names: Vec<String> = devs
            .iter()
            .map(|&d| dev_str(nv, "nvmlDeviceGetName", d))
            .collect();
        assert_eq!(
            names,
            ["NVIDIA H200", "Fake H200 #1", "Other GPU", "Fake H200 #3"]
        );
        let name = nv.f::<FnDevStr>("nvmlDeviceGetName");
        assert_eq!(name(devs[0], buf.as_mut_ptr(), 11), 7, "needs 12 bytes");
        assert_eq!(name(devs[0], buf.as_mut_ptr(), 12), 0);
        assert_eq!(name(0x10 as Dev, buf.as_mut_ptr(), 80), 2);
        assert_eq!(name(std::ptr::null_mut(), buf.as_mut_ptr(), 80), 2);
        assert_eq!(
            dev_str(nv, "nvmlDeviceGetUUID", devs[3]),
            "GPU-face5eed-0000-4000-8000-000000000003"
        );
        let mut idx: c_uint = 9;
        assert_eq!(
            nv.f::<FnDevUint>("nvmlDeviceGetIndex")(devs[3], &mut idx),
            0
        );
        assert_eq!(idx, 3);

        let pci = nv.f::<FnPci>("nvmlDeviceGetPciInfo_v3");
        let mut info: PciInfo = std::mem::zeroed();
        assert_eq!(pci(devs[1], &mut info), 0);
        assert_eq!(c_str(&info.bus_id), "00000000:11:00.0");
        assert_eq!(c_str(&info.bus_id_legacy), "0000:11:00.0");
        assert_eq!((info.domain, info.bus, info.device), (0, 0x11, 0));
        assert_eq!(info.pci_device_id, 0x2335_10de);
        assert_ne!(info.pci_sub_system_id, 0);
        assert_eq!(pci(devs[3], &mut info), 0);
        assert_eq!(c_str(&info.bus_id), "00000000:1A:00.0", "FAKE_CUDA_ATTR_33");

        let by_uuid = nv.f::<FnByStr>("nvmlDeviceGetHandleByUUID");
        assert_eq!(
            by_uuid(c"GPU-FACE5EED-0000-4000-8000-000000000002".as_ptr(), &mut d),
            0
        );
        assert_eq!(d, devs[2]);
        assert_eq!(
            by_uuid(c"GPU-face5eed-0000-4000-8000-000000000009".as_ptr(), &mut d),
            6
        );
        assert_eq!(by_uuid(std::ptr::null(), &mut d), 2);
        let by_bus = nv.f::<FnByStr>("nvmlDeviceGetHandleByPciBusId_v2");
        for text in [c"00000000:11:00.0", c"0000:11:00.0", c"11:00.0"] {
            d = std::ptr::null_mut();
            assert_eq!(by_bus(text.as_ptr(), &mut d), 0, "{text:?}");
            assert_eq!(d, devs[1]);
        }
        assert_eq!(by_bus(c"0000:1a:00.0".as_ptr(), &mut d), 0);
        assert_eq!(d, devs[3]);
        assert_eq!(by_bus(c"0000:13:00.0".as_ptr(), &mut d), 6);
        assert_eq!(by_bus(c"junk".as_ptr(), &mut d), 6);

        let mem = nv.f::<FnMem>("nvmlDeviceGetMemoryInfo");
        let mut m = Memory::default();
        assert_eq!(mem(devs[0], &mut m), 0);
        assert_eq!(
            m,
            Memory {
                total: 1 << 30,
                free: 1000,
                used: (1 << 30) - 1000
            }
        );
        assert_eq!(mem(devs[1], &mut m), 0);
        assert_eq!((m.free, m.used), (1 << 30, 0));
        assert_eq!(mem(devs[1], std::ptr::null_mut()), 2);
        let mem2 = nv.f::<FnMem2>("nvmlDeviceGetMemoryInfo_v2");
        let mut m2 = Memory2 {
            version: MEMORY_V2,
            ..Memory2::default()
        };
        assert_eq!(mem2(devs[0], &mut m2), 0);
        assert_eq!(
            m2,
            Memory2 {
                version: MEMORY_V2,
                total: 1 << 30,
                reserved: 0,
                free: 1000,
                used: (1 << 30) - 1000
            }
        );
        m2.version = 1;
        assert_eq!(mem2(devs[0], &mut m2), 25);

        let mode = nv.f::<FnDevInt>("nvmlDeviceGetComputeMode");
        let modes: Vec<c_int> = devs
            .iter()
            .map(|&d| {
                let mut x = -1;
                assert_eq!(mode(d, &mut x), 0);
                x
            })
            .collect();
        assert_eq!(modes, [0, 3, 2, 0]);

        let procs = nv.f::<FnProcs>("nvmlDeviceGetComputeRunningProcesses_v3");
        let mut k: c_uint = 0;
        assert_eq!(procs(devs[0], &mut k, std::ptr::null_mut()), 0);
        assert_eq!(k, 0);
        assert_eq!(procs(devs[1], &mut k, std::ptr::null_mut()), 7);
        assert_eq!(k, 1);
        let mut out = [ProcessInfo::default(); 4];
        k = 4;
        assert_eq!(procs(devs[1], &mut k, out.as_mut_ptr()), 0);
        assert_eq!(k, 1);
        assert_eq!(
            out[0],
            ProcessInfo {
                pid: 4242,
                used_gpu_memory: 1 << 30,
                gpu_instance_id: u32::MAX,
                compute_instance_id: u32::MAX
            }
        );
        assert_eq!(out[1], ProcessInfo::default(), "only one entry written");
        k = 4;
        assert_eq!(procs(devs[2], &mut k, out.as_mut_ptr()), 0);
        assert_eq!(k, 0);
        assert_eq!(
            procs(devs[1], std::ptr::null_mut(), std::ptr::null_mut()),
            2
        );
        k = 0;
        assert_eq!(
            nv.f::<FnProcs>("nvmlDeviceGetComputeRunningProcesses_v2")(
                devs[1],
                &mut k,
                std::ptr::null_mut()
            ),
            7
        );

        let cc = nv.f::<FnCc>("nvmlDeviceGetCudaComputeCapability");
        let (mut major, mut minor) = (0, 0);
        assert_eq!(cc(devs[0], &mut major, &mut minor), 0);
        assert_eq!((major, minor), (9, 0));

        // Two inits, two shutdowns.
        let shutdown = nv.f::<FnVoid>("nvmlShutdown");
        assert_eq!(shutdown(), 0);
        assert_eq!(count(&mut n), 0);
        assert_eq!(shutdown(), 0);
        assert_eq!(count(&mut n), 1);
        assert_eq!(shutdown(), 1);
    }
}

#[test]
fn topology_names_uuids_bus_ids_memory_modes_processes() {
    let log = temp_path("topology.log");
    run_scenario(
        "topology",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_TOTAL_MEM", "1073741824"),
            ("FAKE_CUDA_FREE_MEM", "1000,,,"),
            ("FAKE_CUDA_NAMES", "NVIDIA H200,,Other GPU"),
            ("FAKE_CUDA_BUSY", "1"),
            ("FAKE_CUDA_ATTR_20", ",,2"),
            ("FAKE_CUDA_ATTR_33", ",,,26"),
            ("CUDA_VISIBLE_DEVICES", "3"),
            ("FAKE_NVML_LOG", log.to_str().expect("utf-8 temp path")),
        ],
    );
    let text = std::fs::read_to_string(&log).expect("log written");
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "nvmlDeviceGetCount_v2 -> 1",
            "nvmlShutdown -> 1",
            "nvmlInit_v2 -> 0",
            "nvmlInitWithFlags flags=0 -> 0",
        ]
    );
    for expected in [
        "nvmlSystemGetDriverVersion len=10 -> 7",
        "nvmlDeviceGetHandleByIndex_v2 index=4 -> 2",
        "nvmlDeviceGetName dev=0 len=11 -> 7",
        "nvmlDeviceGetName dev=0x10 len=80 -> 2",
        "nvmlDeviceGetHandleByUUID uuid=GPU-face5eed-0000-4000-8000-000000000009 -> 6",
        "nvmlDeviceGetHandleByUUID uuid=(null) -> 2",
        "nvmlDeviceGetHandleByPciBusId_v2 busid=0000:11:00.0 -> 0",
        "nvmlDeviceGetMemoryInfo_v2 dev=0 -> 25",
        "nvmlDeviceGetComputeMode dev=2 -> 0",
        "nvmlDeviceGetComputeRunningProcesses_v3 dev=1 count=0 -> 7",
        "nvmlDeviceGetComputeRunningProcesses_v3 dev=1 count=(null) -> 2",
        "nvmlDeviceGetCudaComputeCapability dev=0 -> 0",
    ] {
        assert!(lines.contains(&expected), "{expected:?} not in\n{text}");
    }
    assert_eq!(lines.last(), Some(&"nvmlShutdown -> 1"));
}

fn absent(nv: &Lib) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(nv.f::<FnVoid>("nvmlInit_v2")(), 9);
        assert_eq!(nv.f::<FnFlags>("nvmlInitWithFlags")(1), 9);
        let mut n: c_uint = 0;
        assert_eq!(nv.f::<FnUintOut>("nvmlDeviceGetCount_v2")(&mut n), 1);
        let text = CStr::from_ptr(nv.f::<FnErrStr>("nvmlErrorString")(9));
        assert_eq!(text.to_str(), Ok("Driver Not Loaded"));
    }
}

#[test]
fn absent_mode_fails_init_with_driver_not_loaded() {
    run_scenario("absent", &[("FAKE_NVML_ABSENT", "1")]);
}

fn no_gpus(nv: &Lib) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(nv.f::<FnVoid>("nvmlInit_v2")(), 9);
        assert_eq!(nv.f::<FnFlags>("nvmlInitWithFlags")(1), 0);
        let mut n: c_uint = 7;
        assert_eq!(nv.f::<FnUintOut>("nvmlDeviceGetCount_v2")(&mut n), 0);
        assert_eq!(n, 0);
        let mut d: Dev = std::ptr::null_mut();
        assert_eq!(
            nv.f::<FnByIndex>("nvmlDeviceGetHandleByIndex_v2")(0, &mut d),
            2
        );
    }
}

#[test]
fn zero_devices_need_the_no_gpus_flag() {
    run_scenario("no_gpus", &[("FAKE_CUDA_DEVICE_COUNT", "0")]);
}

fn uuid_text(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn same_host(nv: &Lib, cu: &Lib) {
    // SAFETY: pointers to live locals of the ABI's types; C strings outlive the calls.
    unsafe {
        assert_eq!(cu.f::<FnCuInit>("cuInit")(0), 0);
        assert_eq!(nv.f::<FnVoid>("nvmlInit_v2")(), 0);
        // CUDA sees physical 2 and 0 as ordinals 0 and 1; NVML sees all three.
        let mut n: c_uint = 0;
        assert_eq!(nv.f::<FnUintOut>("nvmlDeviceGetCount_v2")(&mut n), 0);
        assert_eq!(n, 3);
        let mut physical = Vec::new();
        for ordinal in 0..2 {
            let mut uuid = [0u8; 16];
            assert_eq!(
                cu.f::<FnCuUuid>("cuDeviceGetUuid_v2")(&mut uuid, ordinal),
                0
            );
            let text = std::ffi::CString::new(uuid_text(&uuid)).expect("c");
            let mut by_uuid: Dev = std::ptr::null_mut();
            assert_eq!(
                nv.f::<FnByStr>("nvmlDeviceGetHandleByUUID")(text.as_ptr(), &mut by_uuid),
                0,
                "{text:?}"
            );
            let mut buf = [0 as c_char; 32];
            assert_eq!(
                cu.f::<FnCuStrDev>("cuDeviceGetPCIBusId")(buf.as_mut_ptr(), 32, ordinal),
                0
            );
            let mut by_bus: Dev = std::ptr::null_mut();
            assert_eq!(
                nv.f::<FnByStr>("nvmlDeviceGetHandleByPciBusId_v2")(buf.as_ptr(), &mut by_bus),
                0,
                "{}",
                c_str(&buf)
            );
            assert_eq!(by_uuid, by_bus);
            assert_eq!(dev_str(nv, "nvmlDeviceGetUUID", by_uuid), uuid_text(&uuid));
            let mut index: c_uint = 99;
            assert_eq!(
                nv.f::<FnDevUint>("nvmlDeviceGetIndex")(by_uuid, &mut index),
                0
            );
            physical.push(index);

            let mut name = [0 as c_char; 96];
            assert_eq!(
                cu.f::<FnCuStrDev>("cuDeviceGetName")(name.as_mut_ptr(), 96, ordinal),
                0
            );
            assert_eq!(dev_str(nv, "nvmlDeviceGetName", by_uuid), c_str(&name));
            let mut cu_mode = -1;
            assert_eq!(
                cu.f::<FnCuAttr>("cuDeviceGetAttribute")(&mut cu_mode, 20, ordinal),
                0
            );
            let mut nv_mode = -1;
            assert_eq!(
                nv.f::<FnDevInt>("nvmlDeviceGetComputeMode")(by_uuid, &mut nv_mode),
                0
            );
            assert_eq!(cu_mode, nv_mode);
            let mut total = 0usize;
            assert_eq!(
                cu.f::<FnCuTotal>("cuDeviceTotalMem_v2")(&mut total, ordinal),
                0
            );
            let mut m = Memory::default();
            assert_eq!(nv.f::<FnMem>("nvmlDeviceGetMemoryInfo")(by_uuid, &mut m), 0);
            assert_eq!(m.total, total as u64);
        }
        assert_eq!(physical, [2, 0]);
    }
}

#[test]
fn cuda_and_nvml_describe_the_same_host() {
    run_scenario(
        "same_host",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "3"),
            ("FAKE_CUDA_TOTAL_MEM", "1000,2000,3000"),
            ("FAKE_CUDA_NAMES", "A,B,C"),
            ("FAKE_CUDA_BUSY", "2"),
            ("CUDA_VISIBLE_DEVICES", "2,0"),
        ],
    );
}

/// With `FAKE_NVML_INIT_DELAY_MS=500` and `FAKE_NVML_QUERY_DELAY_MS=200`.
fn delays(nv: &Lib) {
    use std::time::{Duration, Instant};
    let init = nv.f::<FnVoid>("nvmlInit_v2");
    let count = nv.f::<FnUintOut>("nvmlDeviceGetCount_v2");
    let start = Instant::now();
    // SAFETY: no arguments.
    let first = std::thread::spawn(move || (unsafe { init() }, start.elapsed()));
    std::thread::sleep(Duration::from_millis(200));
    // Another thread's call waits for the init holding the library's lock, then sees it done.
    let mut n: c_uint = 0;
    // SAFETY: a pointer to a live local.
    assert_eq!(unsafe { count(&mut n) }, 0);
    let waited = start.elapsed();
    assert_eq!(n, 1);
    let (r, took) = first.join().expect("init thread");
    assert_eq!(r, 0);
    assert!(took >= Duration::from_millis(500), "init took {took:?}");
    // The count could only answer once the init, which began after `start` and holds the
    // lock for 500 ms, had let go (comparing with `took` itself races with the init
    // thread's own clock reading after it let go).
    assert!(
        waited >= Duration::from_millis(500),
        "count answered after {waited:?}, init took {took:?}"
    );
    // Every init sleeps, not only the first.
    let again = Instant::now();
    // SAFETY: no arguments.
    assert_eq!(unsafe { init() }, 0);
    assert!(again.elapsed() >= Duration::from_millis(500));
    // A per-device query sleeps the query delay; getting the handle does not.
    let d = handle(nv, 0);
    let q = Instant::now();
    assert_eq!(dev_str(nv, "nvmlDeviceGetName", d), "Fake H200 #0");
    assert!(
        q.elapsed() >= Duration::from_millis(200),
        "{:?}",
        q.elapsed()
    );
}

#[test]
fn init_and_query_delays_hold_the_library() {
    run_scenario(
        "delays",
        &[
            ("FAKE_NVML_INIT_DELAY_MS", "500"),
            ("FAKE_NVML_QUERY_DELAY_MS", "200"),
        ],
    );
}

fn bad_delay(nv: &Lib) {
    // SAFETY: no arguments.
    assert_eq!(unsafe { nv.f::<FnVoid>("nvmlInit_v2")() }, 0);
}

#[test]
fn a_bad_delay_warns_and_is_zero() {
    let out = run_scenario("bad_delay", &[("FAKE_NVML_INIT_DELAY_MS", "soon")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches(
            "fake-nvml: ignoring bad FAKE_NVML_INIT_DELAY_MS=\"soon\" (using the default)\n"
        )
        .count(),
        1,
        "{err}"
    );
}

fn soname() {
    let lib = Lib::open(Path::new("libnvidia-ml.so.1"));
    // SAFETY: no arguments.
    assert_eq!(unsafe { lib.f::<FnVoid>("nvmlInit_v2")() }, 0);
}

#[test]
fn loads_by_soname_from_the_library_path() {
    let dir = temp_path("libdir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    common::build_libs();
    for name in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
        std::fs::copy(nvml_path(), dir.join(name)).expect("copy");
    }
    run_scenario(
        "soname",
        &[("LD_LIBRARY_PATH", dir.to_str().expect("utf-8 temp path"))],
    );
    let _ = std::fs::remove_dir_all(&dir);
}
