//! The session record: what the trace's first record (`session_start`) says about the
//! process, its driver and its devices, started by the first `cuInit`.

use crate::driver::{driverlog, query, real, topo};
use crate::rt::{config, output};
use seedance_cuda::CUresult;
use seedance_trace::{DeviceInfo, SessionStart};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Runs after every `cuInit` (the `after` hook of its wrapper, also when no driver could be
/// loaded: `crate::driver::missing`): the session record, then, after the first success,
/// the driver-message callback ([`driverlog::register`]). A success is noted for the
/// children this process may fork ([`crate::rt::lineage`]). The first also starts the exit's
/// thread ([`super::worker`]).
pub fn after_init(r: CUresult) {
    super::worker::start(super::settle_here, super::shutdown_here);
    if r.0 == 0 {
        crate::rt::lineage::note_initialised();
    }
    on_init(r);
    driverlog::register(r);
}

/// Called after every `cuInit`. The first call, success or not, starts the trace: its
/// session_start lists the devices when the driver initialised, and the events held back
/// until then follow it.
///
/// The session record needs device queries and NVML, which took about 21 ms on an H200
/// (driver 580.159), mostly `nvmlInit`; so it is built on a short-lived thread and `cuInit`
/// returns at once. Events meanwhile wait in the pending queue; a device fault that needs
/// the topology, or the exit summary, waits for the thread. NVML's part waits at most
/// `SEEDANCE_NVML_TIMEOUT` ([`crate::driver::nvml`]), so a hung NVML delays neither for longer.
fn on_init(_r: CUresult) {
    super::metrics::start();
    if output::trace_begun() || config::get().trace_dir.is_none() {
        return;
    }
    if INIT_STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let start = || {
        let _ = std::panic::catch_unwind(|| {
            if let Some(w) = output::start_trace(session_start) {
                output::flush_pending(w);
            }
        });
    };
    if crate::platform::spawn_quiet("seedance-init", start).is_err() {
        start();
    }
}

/// Set once the session record's thread has been started by the first `cuInit`.
static INIT_STARTED: AtomicBool = AtomicBool::new(false);

/// Set when the exit gave up waiting for the session record ([`settle`]).
static ABANDONED: AtomicBool = AtomicBool::new(false);

/// Whether the exit gave up waiting for the session record: its thread is stuck (most
/// likely on a lock of the driver's that the exiting thread itself holds, interrupted
/// inside a driver call by a signal handler that called `exit`). The exit then neither
/// touches the trace (its start waits for that thread) nor calls the driver.
pub fn abandoned() -> bool {
    ABANDONED.load(Ordering::Acquire)
}

/// Longest the exit waits for the session record's thread beyond NVML's own bound
/// (`SEEDANCE_NVML_TIMEOUT`, which the record already respects): its device queries take
/// microseconds natively (about 21 ms with NVML on an H200, driver 580.159).
const RECORD_MARGIN: Duration = Duration::from_millis(1000);

/// Waits for the session record, if the first `cuInit` started one. Called from the
/// library's `.fini_array` entry, while libcuda and libnvidia-ml are still initialised.
///
/// The wait is bounded: the exit may come from a signal handler that interrupted the
/// program inside the driver, holding a lock the record's thread waits for. Past
/// `SEEDANCE_NVML_TIMEOUT` plus [`RECORD_MARGIN`] the record is given up ([`abandoned`]).
pub fn settle() {
    if INIT_STARTED.load(Ordering::Acquire) && !config::forked() {
        let limit = Duration::from_millis(config::get().nvml_timeout_ms) + RECORD_MARGIN;
        let deadline = Instant::now() + limit;
        while !output::trace_begun() {
            if Instant::now() >= deadline {
                ABANDONED.store(true, Ordering::Release);
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = std::panic::catch_unwind(|| {
            if let Some(w) = output::start_trace(session_start) {
                output::flush_pending(w);
            }
        });
    }
}

/// The trace's first record: the shim, the program, the host `host`, the driver and the
/// visible devices (with the topology when there are any).
///
/// The driver library is held for the queries ([`real::hold_driver`]), which call into that
/// copy only, by names looked up in it: the program may close it, or open and close
/// another, meanwhile. If it already closed it, and has not looked the driver up again, the
/// record names no driver and no devices rather than calling into an unmapped copy.
pub(super) fn session_start(host: String) -> SessionStart {
    let held = real::hold_driver();
    let gone = matches!(held.found, real::Found::Gone);
    let devices = if gone { Vec::new() } else { query::devices() };
    SessionStart {
        shim_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: config::get().mode.as_str().to_string(),
        executable: std::env::current_exe()
            .ok()
            .map(|p| p.to_string_lossy().into_owned()),
        argv: program_arguments(),
        hostname: Some(host),
        driver_version: if gone { None } else { query::driver_version() },
        libcuda_path: match &held.found {
            real::Found::Held(d) => d.path(),
            _ => None,
        },
        // At most MAX_SHOWN bytes of each, as in the messages: a hostile value must not
        // make every trace line of a fleet 128 KiB long.
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        cuda_device_order: std::env::var("CUDA_DEVICE_ORDER")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        topology: (!devices.is_empty()).then(|| topo::get().clone()),
        devices: devices
            .into_iter()
            .map(|d| DeviceInfo {
                ordinal: d.ordinal,
                name: d.name,
                pci_bus_id: d.pci_bus_id,
                total_mem_bytes: d.total_mem_bytes,
            })
            .collect(),
    }
}

/// The program's arguments. `std::env::args` is filled by an initialiser of this library,
/// which has not run yet when the first driver call comes from the program's
/// `.preinit_array` or a constructor that runs before ours, and the session record is built
/// on its own thread at once: then it is empty, and the kernel's copy is read instead.
fn program_arguments() -> Vec<String> {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !args.is_empty() {
        return args;
    }
    let Ok(raw) = std::fs::read("/proc/self/cmdline") else {
        return args;
    };
    let raw = raw.strip_suffix(&[0]).unwrap_or(&raw);
    if raw.is_empty() {
        return args;
    }
    raw.split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}
