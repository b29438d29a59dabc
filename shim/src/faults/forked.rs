//! A driver call that failed in a child `fork()`ed after CUDA was initialised.
//!
//! On driver 580.159 every call in such a child returns `CUDA_ERROR_NOT_INITIALIZED` (3),
//! `cuInit` included (docs/design.md, fact 15); only PyTorch says why. The child's first
//! call that fails with 3 is explained once: one stderr line naming the call, the pids, the
//! cause and the fix, and, when traces are written, a trace of the child's own with a
//! `session_start` and a `lifetime_fault` of kind `forked_after_init`.
//!
//! A forked child has only the forking thread: the trace writer's thread is gone, and a
//! lock another thread held at the fork stays held. So nothing here takes a lock of the
//! parent's state: the configuration is read only if it was read before the fork
//! ([`config::read_already`]), the line goes to stderr with `write(2)` through
//! [`crate::rt::fd2`] (lock-free once the configuration has been read: descriptor 2's
//! identity was noted then), and the trace is a new file written at once on this thread
//! ([`seedance_trace::direct`]). Nothing else changes: the child still forwards only.

use crate::hooks::ids::HookId;
use crate::platform;
use crate::rt::{config, fd2, lineage, output};
use seedance_core::fork::Lineage;
use seedance_cuda::CUresult;
use seedance_trace::{Event, LifetimeFault, SessionStart};

/// After a call of `id` returned `r` in a forked child (the wrappers' inactive path, only
/// for `r` = 3): the explanation, the first time only, and only in a child forked after a
/// `cuInit` the shim saw succeed.
#[cold]
#[inline(never)]
pub fn failed(id: HookId, r: CUresult) {
    let Some(lineage) = lineage::take() else {
        return;
    };
    let _cancel = crate::rt::guard::NoCancel::new();
    let _ = std::panic::catch_unwind(|| explain(id, r, lineage));
}

fn explain(id: HookId, r: CUresult, lineage: Lineage) {
    // Unread before the fork (a thread was reading it then): unknown, so silent.
    let Some(cfg) = config::read_already() else {
        return;
    };
    let explanation = seedance_core::fork::explanation(lineage);
    if !cfg.quiet {
        let line = output::fault_line(id, r.name(), r, &explanation);
        fd2::write_line(&line);
    }
    let Some(dir) = cfg.trace_dir.as_ref() else {
        return;
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let now = seedance_trace::writer::now_ns();
    let written = seedance_trace::TraceFile::create(dir, &host, lineage.child, now)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            let events = vec![
                Event::SessionStart(Box::new(session_start(cfg.mode.as_str(), host))),
                Event::LifetimeFault(fault(id, r, explanation)),
            ];
            seedance_trace::direct::write_now(file, lineage.child, platform::thread_id(), events)
                .map_err(|e| e.to_string())
        });
    if let (Err(e), false) = (written, cfg.quiet) {
        fd2::write_line(&format!("no trace will be written: {e}"));
    }
}

/// The child's `session_start`: who it is; no driver, no devices (the driver answers every
/// question with 3 here).
fn session_start(mode: &str, host: String) -> SessionStart {
    SessionStart {
        shim_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: mode.to_string(),
        executable: std::env::current_exe()
            .ok()
            .map(|p| p.to_string_lossy().into_owned()),
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        hostname: Some(host),
        driver_version: None,
        libcuda_path: None,
        cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        cuda_device_order: std::env::var("CUDA_DEVICE_ORDER")
            .ok()
            .map(|v| seedance_core::text::clip(&v)),
        devices: Vec::new(),
        topology: None,
    }
}

/// The `lifetime_fault` record of kind `forked_after_init`: CUDA's initialised state does
/// not outlive a fork into the child.
fn fault(id: HookId, r: CUresult, explanation: String) -> LifetimeFault {
    LifetimeFault {
        function: id.name().to_string(),
        kind: "forked_after_init".into(),
        result: Some(r.0),
        result_name: r.name().map(str::to_string),
        context: None,
        device: None,
        generation: None,
        handle: None,
        handle_kind: None,
        created: None,
        ended: None,
        streams: Vec::new(),
        range: None,
        repaired: false,
        explanation,
    }
}
