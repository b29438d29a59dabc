//! End-to-end checks of the built `libcuda.so` through `dlopen`, one scenario per child
//! process (the fake reads its environment once per process).
//!
//! The parent tests re-run this test binary with `FAKE_CUDA_TEST_SCENARIO=<name>` and a clean
//! environment; the `child` test then runs that scenario and panics (non-zero exit) on
//! failure.
#![allow(non_snake_case)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::process::Command;

use seedance_cuda::{CUlaunchAttribute, CUlaunchConfig, CUmemAllocationProp, CUmemLocation};

/// A `CUlaunchConfig` on the legacy stream.
fn launch_config(
    grid: [c_uint; 3],
    block: [c_uint; 3],
    attrs: *mut CUlaunchAttribute,
    num_attrs: c_uint,
) -> CUlaunchConfig {
    CUlaunchConfig {
        grid_dim_x: grid[0],
        grid_dim_y: grid[1],
        grid_dim_z: grid[2],
        block_dim_x: block[0],
        block_dim_y: block[1],
        block_dim_z: block[2],
        shared_mem_bytes: 0,
        h_stream: std::ptr::null_mut(),
        attrs,
        num_attrs,
    }
}

type R = u32;
type Ptr = *mut c_void;

const SCENARIO_ENV: &str = "FAKE_CUDA_TEST_SCENARIO";

/// Builds `libcuda.so` (once per test binary): `cargo test` does not build a cdylib for the
/// integration tests of its own package, so without this the tests would load whatever
/// (possibly stale) library an earlier build left.
fn build_lib() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/driver-<hash> -> target/<profile>
        let release = exe
            .parent()
            .and_then(|d| d.parent())
            .and_then(|d| d.file_name())
            .is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "-p", "fake-cuda"]);
        if release {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("run cargo build");
        assert!(
            out.status.success(),
            "cargo build -p fake-cuda failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    for dir in [deps, deps.parent().expect("target dir")] {
        let p = dir.join("libcuda.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libcuda.so not found next to {}", exe.display());
}

/// The loaded fake driver.
struct Cuda {
    handle: Ptr,
}

impl Cuda {
    fn open() -> Cuda {
        let path = CString::new(lib_path().into_os_string().into_encoded_bytes()).expect("path");
        // SAFETY: `path` is a valid C string; dlopen has no other preconditions.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen failed");
        Cuda { handle }
    }

    fn addr(&self, name: &str) -> Ptr {
        let c = CString::new(name).expect("name");
        // SAFETY: `handle` came from dlopen and `c` is a valid C string.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        assert!(!p.is_null(), "{name} not exported");
        p
    }

    /// The export `name` as a function pointer of type `F`.
    fn f<F: Copy>(&self, name: &str) -> F {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<Ptr>());
        let p = self.addr(name);
        // SAFETY: `F` is a function-pointer type of the same size as a data pointer, and the
        // caller names the export whose C signature `F` spells.
        unsafe { std::mem::transmute_copy::<Ptr, F>(&p) }
    }
}

type FnInit = unsafe extern "C" fn(c_uint) -> R;
type FnIntOut = unsafe extern "C" fn(*mut c_int) -> R;
type FnDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> R;
type FnStrDev = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> R;
type FnAttr = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> R;
type FnTotalMem = unsafe extern "C" fn(*mut usize, c_int) -> R;
type FnUuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> R;
type FnCtxCreate = unsafe extern "C" fn(*mut Ptr, c_uint, c_int) -> R;
type FnCtxCreate3 = unsafe extern "C" fn(*mut Ptr, Ptr, c_int, c_uint, c_int) -> R;
type FnCtxCreate4 = unsafe extern "C" fn(*mut Ptr, Ptr, c_uint, c_int) -> R;
type FnCtx = unsafe extern "C" fn(Ptr) -> R;
type FnCtxOut = unsafe extern "C" fn(*mut Ptr) -> R;
type FnRetain = unsafe extern "C" fn(*mut Ptr, c_int) -> R;
type FnDev = unsafe extern "C" fn(c_int) -> R;
type FnVoid = unsafe extern "C" fn() -> R;
type FnAlloc = unsafe extern "C" fn(*mut u64, usize) -> R;
type FnPitch = unsafe extern "C" fn(*mut u64, *mut usize, usize, usize, c_uint) -> R;
type FnAllocAsync = unsafe extern "C" fn(*mut u64, usize, Ptr) -> R;
type FnFree = unsafe extern "C" fn(u64) -> R;
type FnInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> R;
type FnHostAlloc = unsafe extern "C" fn(*mut Ptr, usize, c_uint) -> R;
type FnLaunch = unsafe extern "C" fn(
    Ptr,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Ptr,
    *mut Ptr,
    *mut Ptr,
) -> R;
type FnLaunchEx = unsafe extern "C" fn(*const CUlaunchConfig, Ptr, *mut Ptr, *mut Ptr) -> R;
type FnProc = unsafe extern "C" fn(*const c_char, *mut Ptr, c_int, u64) -> R;
type FnProc2 = unsafe extern "C" fn(*const c_char, *mut Ptr, c_int, u64, *mut c_int) -> R;
type FnErr = unsafe extern "C" fn(R, *mut *const c_char) -> R;

fn run_scenario(name: &str, env: &[(&str, &str)]) -> std::process::Output {
    build_lib();
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env(SCENARIO_ENV, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn child");
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn temp_path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("fake-cuda-{tag}-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    let cu = Cuda::open();
    match scenario.as_str() {
        "basic" => basic(&cu),
        "visible" => visible(&cu),
        "no_device" => no_device(&cu),
        "stub" => stub(&cu),
        "procaddr" => procaddr(&cu),
        "log" => log(&cu),
        "threads" => threads(&cu),
        "overrides" => overrides(&cu),
        "unavailable" => unavailable(&cu),
        "kernels" => kernels(&cu),
        "memory_extras" => memory_extras(&cu),
        "asynchrony" => asynchrony(&cu),
        "deinit" => deinit(&cu),
        other => panic!("unknown scenario {other}"),
    }
}

fn c_str(buf: &[c_char]) -> String {
    // SAFETY: the fake NUL-terminates within the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn basic(cu: &Cuda) {
    // SAFETY: (whole scenario) every call passes pointers to live locals of the C types the
    // ABI names.
    unsafe {
        let mut n: c_int = -1;
        assert_eq!(cu.f::<FnIntOut>("cuDriverGetVersion")(&mut n), 0);
        assert_eq!(n, 13000);
        assert_eq!(
            cu.f::<FnIntOut>("cuDeviceGetCount")(&mut n),
            3,
            "before cuInit"
        );
        let mut s: *const c_char = std::ptr::null();
        assert_eq!(cu.f::<FnErr>("cuGetErrorName")(101, &mut s), 0);
        assert_eq!(CStr::from_ptr(s).to_str(), Ok("CUDA_ERROR_INVALID_DEVICE"));
        assert_eq!(cu.f::<FnErr>("cuGetErrorString")(777_777, &mut s), 1);
        assert!(s.is_null());

        let init = cu.f::<FnInit>("cuInit");
        assert_eq!(init(1), 1);
        assert_eq!(init(0), 0);
        assert_eq!(init(0), 0);
        assert_eq!(cu.f::<FnIntOut>("cuDeviceGetCount")(&mut n), 0);
        assert_eq!(n, 2);

        let mut dev: c_int = -1;
        let get = cu.f::<FnDeviceGet>("cuDeviceGet");
        assert_eq!(get(&mut dev, 1), 0);
        assert_eq!(dev, 1);
        assert_eq!(get(&mut dev, 2), 101);
        assert_eq!(get(&mut dev, -1), 101);

        let mut buf = [0 as c_char; 64];
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetName")(buf.as_mut_ptr(), 64, 1),
            0
        );
        assert_eq!(c_str(&buf), "Fake H200 #1");
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetName")(buf.as_mut_ptr(), 64, 2),
            101
        );
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetPCIBusId")(buf.as_mut_ptr(), 64, 1),
            0
        );
        assert_eq!(c_str(&buf), "0000:11:00.0");

        let attr = cu.f::<FnAttr>("cuDeviceGetAttribute");
        let expect = [
            (1, 1024),
            (2, 1024),
            (4, 64),
            (5, 2_147_483_647),
            (8, 49152),
            (16, 132),
            (33, 0x10),
            (75, 9),
            (76, 0),
            (97, 232_448),
        ];
        for (a, v) in expect {
            let mut x = -1;
            assert_eq!(attr(&mut x, a, 0), 0, "attr {a}");
            assert_eq!(x, v, "attr {a}");
        }
        let mut x = -1;
        assert_eq!(attr(&mut x, 9999, 0), 1);
        assert_eq!(attr(&mut x, 1, 7), 101);

        let mut total = 0usize;
        assert_eq!(cu.f::<FnTotalMem>("cuDeviceTotalMem_v2")(&mut total, 0), 0);
        assert_eq!(total, 1 << 30);
        let mut uuid = [0u8; 16];
        assert_eq!(cu.f::<FnUuid>("cuDeviceGetUuid_v2")(&mut uuid, 1), 0);
        assert_eq!((uuid[0], uuid[15]), (0xfa, 1));

        // No context yet.
        let mut p: u64 = 0;
        let alloc = cu.f::<FnAlloc>("cuMemAlloc_v2");
        assert_eq!(alloc(&mut p, 100), 201);
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 201);
        assert_eq!(cu.f::<FnVoid>("cuCtxSynchronize")(), 201);

        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 1), 0);
        assert!(!ctx.is_null());
        let mut cur: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxOut>("cuCtxGetCurrent")(&mut cur), 0);
        assert_eq!(cur, ctx);
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 0);
        assert_eq!(dev, 1);
        assert_eq!(cu.f::<FnVoid>("cuCtxSynchronize")(), 0);
        assert_eq!(
            cu.f::<FnCtx>("cuCtxSynchronize_v2")(std::ptr::null_mut()),
            0
        );
        assert_eq!(cu.f::<FnCtx>("cuCtxSynchronize_v2")(ctx), 0);
        assert_eq!(
            cu.f::<FnCtx>("cuStreamSynchronize")(std::ptr::null_mut()),
            0
        );

        // Memory on device 1 (free 1000 of 1 GiB).
        let info = cu.f::<FnInfo>("cuMemGetInfo_v2");
        let (mut free, mut tot) = (0usize, 0usize);
        assert_eq!(info(&mut free, &mut tot), 0);
        assert_eq!((free, tot), (1000, 1 << 30));
        assert_eq!(alloc(&mut p, 0), 1);
        assert_eq!(alloc(&mut p, 1001), 2);
        assert_eq!(alloc(&mut p, 600), 0);
        assert_eq!(p, 0x7000_0000_0000);
        let mut q: u64 = 0;
        assert_eq!(
            cu.f::<FnAllocAsync>("cuMemAllocAsync_ptsz")(&mut q, 400, std::ptr::null_mut()),
            0
        );
        assert_eq!(q, 0x7000_0000_0400);
        assert_eq!(info(&mut free, &mut tot), 0);
        assert_eq!(free, 0);
        let free_fn = cu.f::<FnFree>("cuMemFree_v2");
        assert_eq!(free_fn(p), 0);
        assert_eq!(free_fn(p), 1);
        assert_eq!(free_fn(0), 0);
        assert_eq!(info(&mut free, &mut tot), 0);
        assert_eq!(free, 600);
        let mut pitch = 0usize;
        let pitch_fn = cu.f::<FnPitch>("cuMemAllocPitch_v2");
        assert_eq!(pitch_fn(&mut p, &mut pitch, 100, 1, 3), 1);
        assert_eq!(pitch_fn(&mut p, &mut pitch, 100, 1, 4), 0);
        assert_eq!(pitch, 512);
        assert_eq!(
            pitch_fn(&mut p, &mut pitch, 100, 1, 16),
            2,
            "512 > 88 bytes free"
        );

        let mut h: Ptr = std::ptr::null_mut();
        let host_alloc = cu.f::<FnHostAlloc>("cuMemHostAlloc");
        assert_eq!(host_alloc(&mut h, 0, 0), 1);
        assert_eq!(host_alloc(&mut h, 4096, 0), 0);
        std::ptr::write_bytes(h.cast::<u8>(), 0xab, 4096);
        let free_host = cu.f::<FnCtx>("cuMemFreeHost");
        assert_eq!(free_host(h), 0);
        assert_eq!(free_host(h), 1);

        // Launches.
        let launch = cu.f::<FnLaunch>("cuLaunchKernel");
        let f = 0x1234 as Ptr;
        let s0 = std::ptr::null_mut();
        let np = std::ptr::null_mut();
        assert_eq!(launch(f, 1, 1, 1, 1024, 1, 1, 49152, s0, np, np), 0);
        assert_eq!(
            launch(std::ptr::null_mut(), 1, 1, 1, 1, 1, 1, 0, s0, np, np),
            400
        );
        assert_eq!(launch(f, 0, 1, 1, 1, 1, 1, 0, s0, np, np), 1);
        assert_eq!(launch(f, 1, 1, 1, 1025, 1, 1, 0, s0, np, np), 1);
        assert_eq!(launch(f, 1, 65536, 1, 1, 1, 1, 0, s0, np, np), 1);
        assert_eq!(launch(f, 1, 1, 1, 1, 1, 1, 49153, s0, np, np), 1);
        let ex = cu.f::<FnLaunchEx>("cuLaunchKernelEx_ptsz");
        let mut cfg = launch_config([2, 2, 2], [32, 32, 1], std::ptr::null_mut(), 0);
        assert_eq!(ex(&cfg, f, np, np), 0);
        cfg.block_dim_z = 2;
        assert_eq!(ex(&cfg, f, np, np), 1);
        assert_eq!(ex(std::ptr::null(), f, np, np), 1);

        // Destroying the context frees its memory and clears the current context.
        let destroy = cu.f::<FnCtx>("cuCtxDestroy_v2");
        assert_eq!(destroy(ctx), 0);
        assert_eq!(destroy(ctx), 709);
        assert_eq!(destroy(0x42 as Ptr), 201);
        assert_eq!(cu.f::<FnCtxOut>("cuCtxGetCurrent")(&mut cur), 0);
        assert!(cur.is_null());
        assert_eq!(launch(f, 1, 1, 1, 1, 1, 1, 0, s0, np, np), 201);
        assert_eq!(cu.f::<FnCtx>("cuCtxSetCurrent")(ctx), 709);

        // v3 / v4 creation, then the memory of device 1 is whole again.
        assert_eq!(
            cu.f::<FnCtxCreate3>("cuCtxCreate_v3")(&mut ctx, std::ptr::null_mut(), 0, 0, 1),
            0
        );
        assert_eq!(info(&mut free, &mut tot), 0);
        assert_eq!(free, 1000);
        let mut ctx4: Ptr = std::ptr::null_mut();
        assert_eq!(
            cu.f::<FnCtxCreate4>("cuCtxCreate_v4")(&mut ctx4, std::ptr::null_mut(), 0, 0),
            0
        );
        assert_ne!(ctx4, ctx);
        assert_eq!(
            cu.f::<FnCtxCreate4>("cuCtxCreate_v4")(&mut ctx4, std::ptr::null_mut(), 0, 5),
            101
        );

        // Primary contexts.
        let retain = cu.f::<FnRetain>("cuDevicePrimaryCtxRetain");
        let (mut p1, mut p2): (Ptr, Ptr) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(retain(&mut p1, 0), 0);
        assert_eq!(retain(&mut p2, 0), 0);
        assert_eq!(p1, p2);
        let release = cu.f::<FnDev>("cuDevicePrimaryCtxRelease_v2");
        assert_eq!(release(0), 0);
        assert_eq!(release(0), 0);
        assert_eq!(release(0), 201);
        assert_eq!(retain(&mut p2, 0), 0);
        assert_ne!(p1, p2);
        assert_eq!(cu.f::<FnCtx>("cuCtxSetCurrent")(p2), 0);
        assert_eq!(cu.f::<FnDev>("cuDevicePrimaryCtxReset_v2")(0), 0);
        // The reset primary context, still current, names its device (as driver 580 does).
        let mut dev: i32 = -1;
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 0);
        assert_eq!(dev, 0);
        assert_eq!(cu.f::<FnCtx>("cuCtxSetCurrent")(p2), 709);
        assert_eq!(cu.f::<FnCtx>("cuCtxSetCurrent")(std::ptr::null_mut()), 0);
        assert_eq!(cu.f::<FnVoid>("cuCtxSynchronize")(), 201);
    }
}

#[test]
fn basic_topology_and_calls() {
    run_scenario(
        "basic",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_TOTAL_MEM", "1073741824"),
            ("FAKE_CUDA_FREE_MEM", ",1000"),
        ],
    );
}

fn visible(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut n = 0;
        assert_eq!(cu.f::<FnIntOut>("cuDeviceGetCount")(&mut n), 0);
        assert_eq!(n, 2);
        let mut buf = [0 as c_char; 32];
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetName")(buf.as_mut_ptr(), 32, 0),
            0
        );
        assert_eq!(c_str(&buf), "Fake H200 #3");
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetPCIBusId")(buf.as_mut_ptr(), 32, 0),
            0
        );
        assert_eq!(c_str(&buf), "0000:13:00.0");
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetName")(buf.as_mut_ptr(), 32, 1),
            0
        );
        assert_eq!(c_str(&buf), "Fake H200 #1");
        let mut d = 0;
        assert_eq!(cu.f::<FnDeviceGet>("cuDeviceGet")(&mut d, 2), 101);
    }
}

#[test]
fn visible_devices_stop_at_first_invalid() {
    run_scenario(
        "visible",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("CUDA_VISIBLE_DEVICES", "3,1,x,0"),
        ],
    );
}

fn no_device(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 100);
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 100);
        let mut n = 0;
        assert_eq!(cu.f::<FnIntOut>("cuDeviceGetCount")(&mut n), 3);
    }
}

#[test]
fn empty_visible_devices_is_no_device() {
    run_scenario("no_device", &[("CUDA_VISIBLE_DEVICES", "")]);
}

fn stub(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 34);
        let mut n = 0;
        assert_eq!(cu.f::<FnIntOut>("cuDriverGetVersion")(&mut n), 34);
        assert_eq!(cu.f::<FnIntOut>("cuDeviceGetCount")(&mut n), 34);
        let mut p: Ptr = std::ptr::null_mut();
        let sym = CString::new("cuInit").expect("c");
        assert_eq!(
            cu.f::<FnProc>("cuGetProcAddress")(sym.as_ptr(), &mut p, 13000, 0),
            34
        );
    }
}

#[test]
fn stub_mode() {
    run_scenario("stub", &[("FAKE_CUDA_STUB", "1")]);
}

fn procaddr(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types; names are valid C strings.
    unsafe {
        let get = cu.f::<FnProc>("cuGetProcAddress");
        let get2 = cu.f::<FnProc2>("cuGetProcAddress_v2");
        // The `_v2` answer (result, pfn, symbolStatus); the CUDA 11.3 ABI's must be the same
        // for a name found, and CUDA_ERROR_NOT_FOUND (500) with pfn NULL where `_v2`
        // answers a name it lacks with success and SYMBOL_NOT_FOUND (driver 580.159).
        let lookup = |base: &str, version: c_int, flags: u64| -> (R, Ptr, c_int) {
            let c = CString::new(base).expect("c");
            let mut p: Ptr = 0x1 as Ptr;
            let mut status: c_int = -1;
            let r = get2(c.as_ptr(), &mut p, version, flags, &mut status);
            let mut p1: Ptr = 0x1 as Ptr;
            let r1 = get(c.as_ptr(), &mut p1, version, flags);
            if r == 0 && status == 1 {
                assert_eq!((r1, p1), (500, std::ptr::null_mut()), "{base}");
            } else {
                assert_eq!(r1, r, "{base}");
                assert_eq!(p1, p, "{base}");
            }
            (r, p, status)
        };
        // Works before cuInit.
        for (base, version, flags, exported) in [
            ("cuMemAlloc", 13000, 0, "cuMemAlloc_v2"),
            ("cuCtxCreate", 12050, 0, "cuCtxCreate_v4"),
            ("cuCtxCreate", 11040, 0, "cuCtxCreate_v3"),
            ("cuCtxCreate", 11000, 0, "cuCtxCreate_v2"),
            ("cuCtxDestroy", 3020, 0, "cuCtxDestroy"),
            ("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize"),
            ("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"),
            ("cuLaunchKernel", 13000, 2, "cuLaunchKernel_ptsz"),
            ("cuLaunchKernel", 13000, 0, "cuLaunchKernel"),
            ("cuMemAllocAsync", 12000, 2, "cuMemAllocAsync_ptsz"),
            ("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"),
            ("cuInit", 2000, 0, "cuInit"),
        ] {
            assert_eq!(
                lookup(base, version, flags),
                (0, cu.addr(exported), 0),
                "{base} {version} {flags}"
            );
        }
        assert_eq!(
            lookup("cuMemAlloc_v2", 13000, 0),
            (0, std::ptr::null_mut(), 1)
        );
        assert_eq!(lookup("cuNoSuch", 13000, 0), (0, std::ptr::null_mut(), 1));
        // Above the driver's own version (13000): CUDA_ERROR_INVALID_VALUE from `_v2`, pfn
        // and symbolStatus untouched, even for a name the driver has.
        for base in ["cuMemAlloc", "cuNoSuch"] {
            let c = CString::new(base).expect("c");
            let mut p: Ptr = 0x1 as Ptr;
            let mut status: c_int = -1;
            assert_eq!(get2(c.as_ptr(), &mut p, 13010, 0, &mut status), 1, "{base}");
            assert_eq!((p, status), (0x1 as Ptr, -1), "{base}");
        }
        assert_eq!(
            lookup("cuMemAlloc", 3000, 0),
            (500, std::ptr::null_mut(), 2)
        );
        assert_eq!(
            lookup("cuLaunchKernelEx", 11050, 0),
            (500, std::ptr::null_mut(), 2)
        );
        let c = CString::new("cuInit").expect("c");
        assert_eq!(
            get2(
                c.as_ptr(),
                std::ptr::null_mut(),
                13000,
                0,
                std::ptr::null_mut()
            ),
            1
        );
        let mut p: Ptr = std::ptr::null_mut();
        assert_eq!(
            get2(c.as_ptr(), &mut p, 13000, 0, std::ptr::null_mut()),
            0,
            "null status is fine"
        );
    }
}

#[test]
fn get_proc_address_returns_own_exports() {
    run_scenario("procaddr", &[]);
}

fn log(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 4, 0), 0);
        let mut p = 0u64;
        assert_eq!(cu.f::<FnAlloc>("cuMemAlloc_v2")(&mut p, 1 << 20), 0);
        assert_eq!(cu.f::<FnFree>("cuMemFree_v2")(p), 0);
        let launch = cu.f::<FnLaunch>("cuLaunchKernel_ptsz");
        let np = std::ptr::null_mut();
        assert_eq!(
            launch(0x1234 as Ptr, 1, 2, 3, 1025, 1, 1, 0, 0x2 as Ptr, np, np),
            1
        );
        assert_eq!(cu.f::<FnCtx>("cuCtxDestroy_v2")(ctx), 0);
        let sym = CString::new("cuMemFree").expect("c");
        let mut f: Ptr = std::ptr::null_mut();
        assert_eq!(
            cu.f::<FnProc>("cuGetProcAddress")(sym.as_ptr(), &mut f, 12000, 0),
            0
        );
        // Many threads at once: lines must stay whole.
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let sync = cu.f::<FnCtx>("cuStreamSynchronize");
                let addr = sync as usize;
                std::thread::spawn(move || {
                    // SAFETY: `addr` is cuStreamSynchronize, which takes an opaque handle.
                    let sync: FnCtx = std::mem::transmute::<usize, FnCtx>(addr);
                    for _ in 0..100 {
                        sync(0x5 as Ptr);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
    }
}

#[test]
fn call_log_format() {
    let path = temp_path("log");
    run_scenario(
        "log",
        &[("FAKE_CUDA_LOG", path.to_str().expect("utf-8 temp path"))],
    );
    let text = std::fs::read_to_string(&path).expect("log written");
    let _ = std::fs::remove_file(&path);
    let lines: Vec<&str> = text.lines().collect();
    let ctx = "0x5eedc0000100";
    let expected = [
        "cuInit flags=0 -> 0".to_string(),
        "cuCtxCreate_v2 flags=4 dev=0 -> 0".to_string(),
        "cuMemAlloc_v2 bytes=1048576 -> 0".to_string(),
        "cuMemFree_v2 ptr=0x700000000000 -> 0".to_string(),
        "cuLaunchKernel_ptsz f=0x1234 grid=1,2,3 block=1025,1,1 shmem=0 stream=0x2 -> 1"
            .to_string(),
        format!("cuCtxDestroy_v2 ctx={ctx} -> 0"),
        "cuGetProcAddress symbol=cuMemFree version=12000 flags=0 -> 0".to_string(),
    ];
    assert_eq!(lines[..expected.len()], expected[..]);
    let rest = &lines[expected.len()..];
    assert_eq!(rest.len(), 800);
    assert!(
        rest.iter()
            .all(|l| *l == "cuStreamSynchronize stream=0x5 -> 201"),
        "{rest:?}"
    );
}

fn threads(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 0), 0);
        let get_addr = cu.f::<FnCtxOut>("cuCtxGetCurrent") as usize;
        let other = std::thread::spawn(move || {
            // SAFETY: `get_addr` is cuCtxGetCurrent.
            let get = std::mem::transmute::<usize, FnCtxOut>(get_addr);
            let mut cur: Ptr = 0x1 as Ptr;
            assert_eq!(get(&mut cur), 0);
            cur as usize
        })
        .join()
        .expect("thread");
        assert_eq!(other, 0, "the current context is per thread");
    }
}

#[test]
fn current_context_is_per_thread() {
    run_scenario("threads", &[]);
}

fn overrides(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut x = 0;
        assert_eq!(cu.f::<FnAttr>("cuDeviceGetAttribute")(&mut x, 1, 0), 0);
        assert_eq!(x, 512);
        let mut total = 0usize;
        assert_eq!(cu.f::<FnTotalMem>("cuDeviceTotalMem_v2")(&mut total, 0), 0);
        assert_eq!(total, 85_899_345_920);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 0), 0);
        let launch = cu.f::<FnLaunch>("cuLaunchKernel");
        let np = std::ptr::null_mut();
        assert_eq!(
            launch(
                0x1 as Ptr,
                1,
                1,
                1,
                512,
                1,
                1,
                0,
                std::ptr::null_mut(),
                np,
                np
            ),
            0
        );
        assert_eq!(
            launch(
                0x1 as Ptr,
                1,
                1,
                1,
                513,
                1,
                1,
                0,
                std::ptr::null_mut(),
                np,
                np
            ),
            1
        );
    }
}

#[test]
fn env_overrides_and_warnings() {
    let out = run_scenario(
        "overrides",
        &[("FAKE_CUDA_ATTR_1", "512"), ("FAKE_CUDA_TOTAL_MEM", "lots")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("fake-cuda:"))
        .collect();
    assert_eq!(
        warnings,
        ["fake-cuda: ignoring bad FAKE_CUDA_TOTAL_MEM=\"lots\" (using the default)"]
    );
}

fn unavailable(cu: &Cuda) {
    // SAFETY: pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        // Ordinals 0..4 are physical 3 (full), 2 (prohibited), 1 (busy), 0 (free).
        let attr = cu.f::<FnAttr>("cuDeviceGetAttribute");
        let modes: Vec<c_int> = (0..4)
            .map(|dev| {
                let mut x = -1;
                assert_eq!(attr(&mut x, 20, dev), 0);
                x
            })
            .collect();
        assert_eq!(modes, [0, 2, 3, 0]);
        let mut buf = [0 as c_char; 64];
        let name = cu.f::<FnStrDev>("cuDeviceGetName");
        let names: Vec<String> = (0..4)
            .map(|dev| {
                assert_eq!(name(buf.as_mut_ptr(), 64, dev), 0);
                c_str(&buf)
            })
            .collect();
        assert_eq!(
            names,
            ["Fake H200 #3", "Other GPU", "Fake H200 #1", "NVIDIA H200"]
        );
        assert_eq!(
            cu.f::<FnStrDev>("cuDeviceGetPCIBusId")(buf.as_mut_ptr(), 64, 1),
            0
        );
        assert_eq!(c_str(&buf), "0000:12:00.0");
        let mut uuid = [0u8; 16];
        assert_eq!(cu.f::<FnUuid>("cuDeviceGetUuid")(&mut uuid, 0), 0);
        assert_eq!(
            uuid,
            [0xfa, 0xce, 0x5e, 0xed, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 3]
        );

        let mut ctx: Ptr = std::ptr::null_mut();
        let create = cu.f::<FnCtxCreate>("cuCtxCreate_v2");
        let retain = cu.f::<FnRetain>("cuDevicePrimaryCtxRetain");
        assert_eq!(create(&mut ctx, 0, 0), 2);
        assert_eq!(
            cu.f::<FnCtxCreate3>("cuCtxCreate_v3")(&mut ctx, std::ptr::null_mut(), 0, 0, 1),
            46
        );
        assert_eq!(
            cu.f::<FnCtxCreate4>("cuCtxCreate_v4")(&mut ctx, std::ptr::null_mut(), 0, 2),
            46
        );
        assert_eq!(retain(&mut ctx, 2), 46);
        assert_eq!(retain(&mut ctx, 0), 2);
        assert!(ctx.is_null(), "nothing written on failure");
        let mut dev: c_int = -1;
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 201);
        // The fallback device works.
        assert_eq!(create(&mut ctx, 0, 3), 0);
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 0);
        assert_eq!(dev, 3);
        let mut primary: Ptr = std::ptr::null_mut();
        assert_eq!(retain(&mut primary, 3), 0);
        assert_eq!(cu.f::<FnCtx>("cuCtxSetCurrent")(primary), 0);
        assert_eq!(cu.f::<FnIntOut>("cuCtxGetDevice")(&mut dev), 0);
        assert_eq!(dev, 3);
        // Memory of a refused device can still be queried.
        let mut total = 0usize;
        assert_eq!(cu.f::<FnTotalMem>("cuDeviceTotalMem_v2")(&mut total, 2), 0);
        assert_eq!(total, 85_899_345_920);
    }
}

#[test]
fn busy_prohibited_and_full_devices_refuse_contexts() {
    let path = temp_path("unavailable");
    run_scenario(
        "unavailable",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "4"),
            ("FAKE_CUDA_BUSY", "1"),
            ("FAKE_CUDA_ATTR_20", ",,2"),
            ("FAKE_CUDA_CTX_OOM", "3"),
            ("FAKE_CUDA_NAMES", "NVIDIA H200,,Other GPU"),
            ("CUDA_VISIBLE_DEVICES", "3,2,1,0"),
            ("FAKE_CUDA_LOG", path.to_str().expect("utf-8 temp path")),
        ],
    );
    let text = std::fs::read_to_string(&path).expect("log written");
    let _ = std::fs::remove_file(&path);
    let failures: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("cuCtxCreate") || l.starts_with("cuDevicePrimaryCtxRetain"))
        .collect();
    assert_eq!(
        failures,
        [
            "cuCtxCreate_v2 flags=0 dev=0 -> 2",
            "cuCtxCreate_v3 nparams=0 flags=0 dev=1 -> 46",
            "cuCtxCreate_v4 params=0x0 flags=0 dev=2 -> 46",
            "cuDevicePrimaryCtxRetain dev=2 -> 46",
            "cuDevicePrimaryCtxRetain dev=0 -> 2",
            "cuCtxCreate_v2 flags=0 dev=3 -> 0",
            "cuDevicePrimaryCtxRetain dev=3 -> 0",
        ]
    );
}

type FnFuncAttr = unsafe extern "C" fn(*mut c_int, c_int, Ptr) -> R;
type FnFuncSet = unsafe extern "C" fn(Ptr, c_int, c_int) -> R;
type FnOccupancy = unsafe extern "C" fn(*mut c_int, Ptr, c_int, usize) -> R;
type FnCoop = unsafe extern "C" fn(
    Ptr,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Ptr,
    *mut Ptr,
) -> R;
type FnStreamCreate = unsafe extern "C" fn(*mut Ptr, c_uint) -> R;
type FnStreamCtx = unsafe extern "C" fn(Ptr, *mut Ptr) -> R;
type FnLogCb = unsafe extern "C" fn(Ptr, c_int, *mut c_char, usize);
type FnLogsRegister = unsafe extern "C" fn(Option<FnLogCb>, Ptr, *mut Ptr) -> R;
type FnManaged = unsafe extern "C" fn(*mut u64, usize, c_uint) -> R;
type FnMemCreate = unsafe extern "C" fn(*mut u64, usize, *const CUmemAllocationProp, u64) -> R;
type FnRelease = unsafe extern "C" fn(u64) -> R;
type FnGranularity = unsafe extern "C" fn(*mut usize, *const CUmemAllocationProp, c_int) -> R;
type FnPtrAttr = unsafe extern "C" fn(Ptr, c_int, u64) -> R;
type FnFreeAsync = unsafe extern "C" fn(u64, Ptr) -> R;

std::thread_local! {
    static LOGGED: std::cell::RefCell<Vec<(c_int, String, usize)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

unsafe extern "C" fn log_cb(data: Ptr, level: c_int, message: *mut c_char, length: usize) {
    assert_eq!(data as usize, 0xda7a);
    // SAFETY: the fake passes a NUL-terminated message.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    LOGGED.with(|l| l.borrow_mut().push((level, text, length)));
}

fn kernels(cu: &Cuda) {
    // SAFETY: (whole scenario) pointers to live locals of the ABI's types.
    unsafe {
        let mut handle: Ptr = std::ptr::null_mut();
        let register = cu.f::<FnLogsRegister>("cuLogsRegisterCallback");
        assert_eq!(register(None, std::ptr::null_mut(), &mut handle), 1);
        assert_eq!(register(Some(log_cb), 0xda7a as Ptr, &mut handle), 0);
        assert_eq!(handle as usize, 0x10c5_0001);
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 0), 0);
        let get = cu.f::<FnFuncAttr>("cuFuncGetAttribute");
        let set = cu.f::<FnFuncSet>("cuFuncSetAttribute");
        let plain = 0x1000 as Ptr;
        let heavy = 0x2000 as Ptr;
        let attr = |f: Ptr, a: c_int| {
            let mut v = -7;
            assert_eq!(get(&mut v, a, f), 0, "attr {a}");
            v
        };
        assert_eq!(
            (attr(plain, 0), attr(plain, 4), attr(plain, 8)),
            (1024, 32, 49152)
        );
        assert_eq!((attr(heavy, 0), attr(heavy, 4)), (256, 248));
        let mut v = 0;
        assert_eq!(get(&mut v, 99, plain), 1);
        assert_eq!(get(&mut v, 0, std::ptr::null_mut()), 400);

        let launch = cu.f::<FnLaunch>("cuLaunchKernel");
        let (s0, np) = (std::ptr::null_mut(), std::ptr::null_mut());
        // Register-limited kernel: 701 above 256 threads.
        assert_eq!(launch(heavy, 1, 1, 1, 512, 1, 1, 0, s0, np, np), 701);
        assert_eq!(launch(heavy, 1, 1, 1, 256, 1, 1, 0, s0, np, np), 0);
        // 64 KiB of dynamic shared memory only after opting in.
        assert_eq!(launch(plain, 1, 1, 1, 32, 1, 1, 65536, s0, np, np), 1);
        LOGGED.with(|l| {
            let l = l.borrow();
            assert_eq!(l.len(), 2, "{l:?}");
            assert_eq!(l[0].0, 0);
            assert_eq!(
                l[1].1,
                "[cuLaunchKernel] dynamic shared memory 65536 exceeds the function limit 49152"
            );
            assert_eq!(l[1].2, l[1].1.len());
        });
        assert_eq!(set(plain, 8, 232_449), 1);
        assert_eq!(set(plain, 8, 65536), 0);
        assert_eq!(attr(plain, 8), 65536);
        assert_eq!(launch(plain, 1, 1, 1, 32, 1, 1, 65536, s0, np, np), 0);
        assert_eq!(set(plain, 3, 1), 1);

        // Occupancy and cooperative launches: 2 blocks of 1024 threads per SM, 132 SMs.
        let occ = cu.f::<FnOccupancy>("cuOccupancyMaxActiveBlocksPerMultiprocessor");
        let mut n = -1;
        assert_eq!(occ(&mut n, plain, 1024, 0), 0);
        assert_eq!(n, 2);
        assert_eq!(occ(&mut n, heavy, 512, 0), 0);
        assert_eq!(n, 0);
        let coop = cu.f::<FnCoop>("cuLaunchCooperativeKernel");
        assert_eq!(coop(plain, 264, 1, 1, 1024, 1, 1, 0, s0, np), 0);
        assert_eq!(coop(plain, 265, 1, 1, 1024, 1, 1, 0, s0, np), 720);

        // Clusters through cuLaunchKernelEx.
        let ex = cu.f::<FnLaunchEx>("cuLaunchKernelEx");
        let mut attrs = [CUlaunchAttribute {
            id: 4,
            pad: [0; 4],
            value: [0; 8],
        }];
        attrs[0].value[..2].copy_from_slice(&[3 | (1 << 32), 1]);
        let mut cfg = launch_config([8, 1, 1], [128, 1, 1], attrs.as_mut_ptr(), 1);
        assert_eq!(ex(&cfg, plain, np, np), 912);
        attrs[0].value[..2].copy_from_slice(&[2 | (1 << 32), 1]);
        cfg.attrs = attrs.as_mut_ptr();
        assert_eq!(ex(&cfg, plain, np, np), 0);
        attrs[0].id = 2;
        attrs[0].value[0] = 1;
        cfg.attrs = attrs.as_mut_ptr();
        (cfg.grid_dim_x, cfg.block_dim_x) = (300, 1024);
        assert_eq!(ex(&cfg, plain, np, np), 720);

        // Streams belong to their context.
        let mut s: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnStreamCreate>("cuStreamCreate")(&mut s, 4), 1);
        assert_eq!(cu.f::<FnStreamCreate>("cuStreamCreate")(&mut s, 1), 0);
        let get_ctx = cu.f::<FnStreamCtx>("cuStreamGetCtx");
        let mut owner: Ptr = std::ptr::null_mut();
        assert_eq!(get_ctx(s, &mut owner), 0);
        assert_eq!(owner, ctx);
        let mut other: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut other, 0, 1), 0);
        assert_eq!(launch(plain, 1, 1, 1, 32, 1, 1, 0, s, np, np), 400);
        assert_eq!(get_ctx(s, &mut owner), 0);
        assert_eq!(owner, ctx);
        assert_eq!(get_ctx(std::ptr::null_mut(), &mut owner), 0);
        assert_eq!(owner, other);
        assert_eq!(cu.f::<FnCtx>("cuCtxDestroy_v2")(ctx), 0);
        assert_eq!(get_ctx(s, &mut owner), 709);
        assert_eq!(launch(plain, 1, 1, 1, 32, 1, 1, 0, s, np, np), 709);
        assert_eq!(cu.f::<FnCtx>("cuStreamDestroy_v2")(s), 709);
        assert_eq!(get_ctx(s, &mut owner), 400);
        assert_eq!(cu.f::<FnCtx>("cuLogsUnregisterCallback")(handle), 0);
        assert_eq!(cu.f::<FnCtx>("cuLogsUnregisterCallback")(handle), 1);
    }
}

#[test]
fn kernels_streams_and_driver_log() {
    run_scenario(
        "kernels",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_FUNC_MAX_THREADS", "256"),
        ],
    );
}

fn memory_extras(cu: &Cuda) {
    // SAFETY: (whole scenario) pointers to live locals of the ABI's types.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 1), 0);
        let managed = cu.f::<FnManaged>("cuMemAllocManaged");
        let mut p = 0u64;
        assert_eq!(managed(&mut p, 4096, 3), 1);
        assert_eq!(managed(&mut p, 0, 1), 1);
        assert_eq!(managed(&mut p, 4096, 1), 0);
        let ptr_attr = cu.f::<FnPtrAttr>("cuPointerGetAttribute");
        let mut dev: c_int = -1;
        assert_eq!(ptr_attr((&mut dev as *mut c_int).cast(), 9, p + 10), 0);
        assert_eq!(dev, 1);
        let mut owner: Ptr = std::ptr::null_mut();
        assert_eq!(ptr_attr((&mut owner as *mut Ptr).cast(), 1, p), 0);
        assert_eq!(owner, ctx);
        assert_eq!(ptr_attr((&mut dev as *mut c_int).cast(), 9, p + 4096), 1);
        assert_eq!(
            cu.f::<FnFreeAsync>("cuMemFreeAsync_ptsz")(p, std::ptr::null_mut()),
            0
        );
        assert_eq!(ptr_attr((&mut dev as *mut c_int).cast(), 9, p), 1);

        let prop = CUmemAllocationProp {
            type_: 1,
            requested_handle_types: 0,
            location: CUmemLocation { type_: 1, id: 0 },
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: [0; 8],
        };
        let mut g = 0usize;
        let gran = cu.f::<FnGranularity>("cuMemGetAllocationGranularity");
        assert_eq!(gran(&mut g, &prop, 0), 0);
        assert_eq!(g, 2 << 20);
        assert_eq!(gran(&mut g, &prop, 7), 1);
        let create = cu.f::<FnMemCreate>("cuMemCreate");
        let mut h = 0u64;
        assert_eq!(create(&mut h, 3 << 20, &prop, 0), 1);
        assert_eq!(create(&mut h, 4 << 20, &prop, 0), 0);
        assert_eq!(h, 0x6000_0001);
        assert_eq!(create(&mut h, 64 << 20, &prop, 0), 2);
        let bad = CUmemAllocationProp {
            location: CUmemLocation { type_: 1, id: 9 },
            ..prop
        };
        assert_eq!(create(&mut h, 2 << 20, &bad, 0), 101);
        let release = cu.f::<FnRelease>("cuMemRelease");
        assert_eq!(release(0x6000_0001), 0);
        assert_eq!(release(0x6000_0001), 1);
    }
}

#[test]
fn managed_physical_memory_and_pointer_attributes() {
    run_scenario(
        "memory_extras",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_TOTAL_MEM", "41943040"),
        ],
    );
}

type FnEventCreate = unsafe extern "C" fn(*mut Ptr, c_uint) -> R;
type FnAlloc2 = unsafe extern "C" fn(*mut Ptr, usize) -> R;
type FnTwo = unsafe extern "C" fn(Ptr, Ptr) -> R;
type FnWait = unsafe extern "C" fn(Ptr, Ptr, c_uint) -> R;
type FnHtoDAsync = unsafe extern "C" fn(u64, *const c_void, usize, Ptr) -> R;
type FnDtoHAsync = unsafe extern "C" fn(*mut c_void, u64, usize, Ptr) -> R;
type FnDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> R;
type FnRegister = unsafe extern "C" fn(Ptr, usize, c_uint) -> R;
type FnPrimaryState = unsafe extern "C" fn(c_int, *mut c_uint, *mut c_int) -> R;

fn asynchrony(cu: &Cuda) {
    // SAFETY: (whole scenario) pointers to live locals and buffers of the sizes passed.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 0), 0);
        let mut s: Ptr = std::ptr::null_mut();
        let create = cu.f::<FnStreamCreate>("cuStreamCreate");
        assert_eq!(create(&mut s, 0), 0);
        let mut dev = 0u64;
        assert_eq!(cu.f::<FnAlloc>("cuMemAlloc_v2")(&mut dev, 64), 0);
        let mut pinned: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnAlloc2>("cuMemAllocHost_v2")(&mut pinned, 64), 0);
        std::ptr::write_bytes(pinned.cast::<u8>(), 0x5a, 64);
        let htod = cu.f::<FnHtoDAsync>("cuMemcpyHtoDAsync_v2");
        let dtoh = cu.f::<FnDtoHAsync>("cuMemcpyDtoHAsync_v2");
        let query = cu.f::<FnCtx>("cuStreamQuery");
        let sync = cu.f::<FnCtx>("cuStreamSynchronize");
        assert_eq!(query(s), 0);
        assert_eq!(htod(dev, pinned, 64, s), 0);
        assert_eq!(htod(dev + 32, pinned, 64, s), 1, "past the allocation");
        assert_eq!(query(s), 600);
        // Freed before the copy ran: as driver 580, the free waits for the copy (the
        // stream is idle when it returns, the device has the bytes); a driver that
        // released at once (FAKE_CUDA_RELEASE_NO_WAIT=1) leaves the copy queued, and it
        // reads the poison.
        let waits = std::env::var("FAKE_CUDA_RELEASE_NO_WAIT").is_err();
        assert_eq!(cu.f::<FnCtx>("cuMemFreeHost")(pinned), 0);
        assert_eq!(query(s), if waits { 0 } else { 600 });
        assert_eq!(sync(s), 0);
        assert_eq!(query(s), 0);
        let mut back = [0u8; 64];
        assert_eq!(
            cu.f::<FnDtoH>("cuMemcpyDtoH_v2")(back.as_mut_ptr().cast(), dev, 64),
            0
        );
        assert_eq!(back, if waits { [0x5a; 64] } else { [0xdb; 64] });
        // A good copy, read back asynchronously; an event marks it.
        let src = [3u8; 16];
        let mut ev: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnEventCreate>("cuEventCreate")(&mut ev, 0), 0);
        assert_eq!(cu.f::<FnEventCreate>("cuEventCreate")(&mut ev, 8), 1);
        assert_eq!(cu.f::<FnEventCreate>("cuEventCreate")(&mut ev, 2), 0);
        assert_eq!(htod(dev, src.as_ptr().cast(), 16, s), 0);
        let mut out = [0u8; 16];
        assert_eq!(dtoh(out.as_mut_ptr().cast(), dev, 16, s), 0);
        assert_eq!(cu.f::<FnTwo>("cuEventRecord")(ev, s), 0);
        assert_eq!(cu.f::<FnCtx>("cuEventQuery")(ev), 600);
        assert_eq!(out, [0; 16]);
        let mut s2: Ptr = std::ptr::null_mut();
        assert_eq!(create(&mut s2, 1), 0);
        assert_eq!(cu.f::<FnWait>("cuStreamWaitEvent")(s2, ev, 0), 0);
        assert_eq!(cu.f::<FnWait>("cuStreamWaitEvent")(s2, ev, 7), 1);
        assert_eq!(sync(s2), 0);
        assert_eq!(out, [3; 16]);
        assert_eq!(cu.f::<FnCtx>("cuEventQuery")(ev), 0);
        assert_eq!(cu.f::<FnCtx>("cuEventSynchronize")(ev), 0);
        // Registered memory, unregistered and overwritten before the copy ran.
        let mut buf = vec![9u8; 32];
        let reg = cu.f::<FnRegister>("cuMemHostRegister_v2");
        assert_eq!(reg(buf.as_mut_ptr().cast(), 32, 0), 0);
        assert_eq!(reg(buf.as_mut_ptr().add(8).cast(), 4, 0), 712);
        assert_eq!(htod(dev, buf.as_ptr().add(8).cast(), 8, s), 0);
        assert_eq!(
            cu.f::<FnCtx>("cuMemHostUnregister")(buf.as_mut_ptr().cast()),
            0
        );
        assert_eq!(
            cu.f::<FnCtx>("cuMemHostUnregister")(buf.as_mut_ptr().cast()),
            713
        );
        // The unregister waited for the copy (driver 580), so reusing the buffer now does
        // not reach the device; without the wait the copy reads the new bytes.
        buf.fill(1);
        assert_eq!(cu.f::<FnVoid>("cuCtxSynchronize")(), 0);
        assert_eq!(
            cu.f::<FnDtoH>("cuMemcpyDtoH_v2")(back.as_mut_ptr().cast(), dev, 8),
            0
        );
        assert_eq!(back[..8], if waits { [9; 8] } else { [1; 8] });
        // Push and pop.
        let mut other: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut other, 0, 1), 0);
        let push = cu.f::<FnCtx>("cuCtxPushCurrent_v2");
        let pop = cu.f::<FnCtxOut>("cuCtxPopCurrent_v2");
        let mut cur: Ptr = std::ptr::null_mut();
        assert_eq!(push(ctx), 0);
        assert_eq!(cu.f::<FnCtxOut>("cuCtxGetCurrent")(&mut cur), 0);
        assert_eq!(cur, ctx);
        assert_eq!(pop(&mut cur), 0);
        assert_eq!(cur, ctx);
        assert_eq!(cu.f::<FnCtxOut>("cuCtxGetCurrent")(&mut cur), 0);
        assert_eq!(cur, other);
        assert_eq!(pop(std::ptr::null_mut()), 0);
        assert_eq!(pop(&mut cur), 201);
        assert_eq!(push(std::ptr::null_mut()), 1);
        assert_eq!(push(ctx), 0);
        // Destroying the context with work queued loses it; its handles report 709.
        let src2 = [4u8; 16];
        assert_eq!(htod(dev, src2.as_ptr().cast(), 16, s), 0);
        assert_eq!(cu.f::<FnCtx>("cuCtxDestroy_v2")(ctx), 0);
        assert_eq!(sync(s), 709);
        assert_eq!(query(s), 709);
        assert_eq!(cu.f::<FnCtx>("cuEventDestroy_v2")(ev), 709);
        assert_eq!(cu.f::<FnCtx>("cuEventDestroy_v2")(ev), 400);
        assert_eq!(cu.f::<FnTwo>("cuEventRecord")(0x1234 as Ptr, s), 400);
        // Primary context state.
        let state = cu.f::<FnPrimaryState>("cuDevicePrimaryCtxGetState");
        let (mut flags, mut active) = (9u32, 9i32);
        assert_eq!(state(0, &mut flags, &mut active), 0);
        assert_eq!((flags, active), (0, 0));
        let mut p: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnRetain>("cuDevicePrimaryCtxRetain")(&mut p, 0), 0);
        assert_eq!(state(0, &mut flags, &mut active), 0);
        assert_eq!(active, 1);
        assert_eq!(state(7, &mut flags, &mut active), 101);
    }
}

#[test]
fn queued_work_copies_events_and_context_stack() {
    run_scenario("asynchrony", &[("FAKE_CUDA_DEVICE_COUNT", "2")]);
}

#[test]
fn a_driver_that_releases_pinned_memory_at_once_leaves_the_copy_queued() {
    run_scenario(
        "asynchrony",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "2"),
            ("FAKE_CUDA_RELEASE_NO_WAIT", "1"),
        ],
    );
}

extern "C" fn late_free() {
    // Runs after the fake driver's own exit handler (registered later, so run earlier).
    let cu = Cuda::open();
    // SAFETY: cuMemFree_v2 takes a plain address.
    let r = unsafe { cu.f::<FnFree>("cuMemFree_v2")(0x7000_0000_0000) };
    println!("late cuMemFree_v2 -> {r}");
}

fn deinit(cu: &Cuda) {
    // SAFETY: late_free is a valid handler for the rest of the process.
    unsafe { libc::atexit(late_free) };
    // SAFETY: pointers to live locals.
    unsafe {
        assert_eq!(cu.f::<FnInit>("cuInit")(0), 0);
        let mut ctx: Ptr = std::ptr::null_mut();
        assert_eq!(cu.f::<FnCtxCreate>("cuCtxCreate_v2")(&mut ctx, 0, 0), 0);
        let mut p = 0u64;
        assert_eq!(cu.f::<FnAlloc>("cuMemAlloc_v2")(&mut p, 64), 0);
    }
}

#[test]
fn deinitialised_at_exit_when_asked() {
    let out = run_scenario("deinit", &[("FAKE_CUDA_DEINIT_AT_EXIT", "1")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("late cuMemFree_v2 -> 4"), "{text}");
    // Without it the driver stays up (the free may still fail for want of a current
    // context on the exiting thread, but not with 4).
    let out = run_scenario("deinit", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("late cuMemFree_v2 -> "), "{text}");
    assert!(!text.contains("late cuMemFree_v2 -> 4"), "{text}");
}
