//! Hot-path cost of the shim, isolated: `cuLaunchKernel` and a `cuMemAlloc_v2` +
//! `cuMemFree_v2` pair, against a null driver that returns at once
//! (`tests/programs/null_driver.c`), so what remains is the shim's own cost.
//!
//! The benchmark loads the null driver and `libseedance_fix.so` into this process with
//! `dlopen` and calls the driver's functions directly (`baseline`) and through the shim's
//! exported wrappers (`shim`), on 1, 4 and 16 threads. Time per call is each thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`) over its calls, averaged over threads, so that running
//! 16 threads on fewer cores measures contention (shared cache lines, locks), not waiting
//! for a core. The shim reads `SEEDANCE_MODE` once per process: run the benchmark once per
//! mode (`scripts/bench/hotpath.sh` does, and prints the ratios).
//!
//! Needs `target/release/libseedance_fix.so` (`cargo build --release -p seedance-shim`) and
//! a C compiler for the null driver.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::time::Duration;

type Launch = unsafe extern "C" fn(
    *mut c_void,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    *mut c_void,
    *mut *mut c_void,
    *mut *mut c_void,
) -> i32;
type Alloc = unsafe extern "C" fn(*mut u64, usize) -> i32;
type Free = unsafe extern "C" fn(u64) -> i32;
type Init = unsafe extern "C" fn(u32) -> i32;

#[derive(Clone, Copy)]
struct Api {
    launch: Launch,
    alloc: Alloc,
    free: Free,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn open(path: &Path, flags: i32) -> *mut c_void {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: c is NUL-terminated.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    assert!(!h.is_null(), "dlopen {} failed", path.display());
    h
}

fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let c = CString::new(name).unwrap();
    // SAFETY: h is a dlopen handle, c NUL-terminated.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    assert!(!p.is_null(), "{name} missing");
    // SAFETY: the caller names the symbol's real function type.
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}

fn load() -> (Api, Api) {
    let out = std::env::temp_dir().join(format!("seedance-bench-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let driver = out.join("libcuda.so.1");
    let ok = std::process::Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&driver)
        .arg(root().join("tests/programs/null_driver.c"))
        .status()
        .expect("run cc");
    assert!(ok.success());
    // RTLD_GLOBAL: the shim finds the driver as the loaded "libcuda.so.1".
    let d = open(&driver, libc::RTLD_NOW | libc::RTLD_GLOBAL);
    let shim_path = root().join("target/release/libseedance_fix.so");
    assert!(
        shim_path.exists(),
        "build the shim first: cargo build --release -p seedance-shim"
    );
    let s = open(&shim_path, libc::RTLD_NOW | libc::RTLD_LOCAL);
    let api = |h| Api {
        launch: sym(h, "cuLaunchKernel"),
        alloc: sym(h, "cuMemAlloc_v2"),
        free: sym(h, "cuMemFree_v2"),
    };
    let init: Init = sym(s, "cuInit");
    // SAFETY: cuInit(0) through the shim initialises its session against the null driver.
    assert_eq!(unsafe { init(0) }, 0);
    (api(d), api(s))
}

fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Each of `threads` threads makes `iters` calls of `op`; returns the mean per-thread CPU
/// time, so criterion's time per iteration is the CPU time per call.
fn run(threads: usize, iters: u64, op: impl Fn() + Sync) -> Duration {
    let op = &op;
    let total: Duration = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let t0 = thread_cpu();
                    for _ in 0..iters {
                        op();
                    }
                    thread_cpu() - t0
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total / threads as u32
}

fn bench(c: &mut Criterion) {
    let (base, shim) = load();
    let mode = std::env::var("SEEDANCE_MODE").unwrap_or_else(|_| "fix".into());
    for (what, api) in [("baseline", base), ("shim", shim)] {
        let label = if what == "shim" {
            format!("shim-{mode}")
        } else {
            what.to_string()
        };
        let mut g = c.benchmark_group(format!("launch/{label}"));
        for t in [1usize, 4, 16] {
            g.bench_with_input(BenchmarkId::from_parameter(t), &t, |b, &t| {
                b.iter_custom(|iters| {
                    run(t, iters, || {
                        // SAFETY: null driver; arguments are plain values.
                        let r = unsafe {
                            (api.launch)(
                                0x1000 as *mut c_void,
                                1,
                                1,
                                1,
                                32,
                                1,
                                1,
                                0,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                            )
                        };
                        debug_assert_eq!(r, 0);
                    })
                })
            });
        }
        g.finish();
        let mut g = c.benchmark_group(format!("alloc_free/{label}"));
        for t in [1usize, 4, 16] {
            g.bench_with_input(BenchmarkId::from_parameter(t), &t, |b, &t| {
                b.iter_custom(|iters| {
                    run(t, iters, || {
                        let mut p = 0u64;
                        // SAFETY: null driver; p is a valid out-pointer.
                        unsafe {
                            (api.alloc)(&mut p, 4096);
                            (api.free)(p);
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
