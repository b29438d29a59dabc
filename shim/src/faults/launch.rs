//! Launch faults (issue 4): a failed `cuLaunchKernel`, `cuLaunchKernelEx` or
//! `cuLaunchCooperativeKernel` (and their `_ptsz` variants) is explained with the limit it
//! broke, the value asked for and the fix.
//!
//! The wrappers forward first; on success nothing here runs. After a failure with a code a
//! launch check can explain (1, 201, 400, 701, 709, 720, 912), [`fault_kernel`] and its
//! siblings ask the real driver (never our wrappers) for the current context's device
//! (`cuCtxGetDevice`), its limits (`cuDeviceGetAttribute`, read once per device and
//! cached), the kernel's own limits (`cuFuncGetAttribute`) and, for a cooperative launch,
//! its occupancy; or, when no usable context is current, for the context and stream state
//! (`cuCtxGetCurrent`, `cuStreamGetCtx`). `seedance_core::launch` decides. The result is a
//! `launch_fault` event (instead of `call_failed`) and one stderr line per distinct fault.
//!
//! With `SEEDANCE_VALIDATE=pre` the same checks run before the call ([`pre_kernel`], ...),
//! and a launch that breaks a limit is refused with the driver's own code without reaching
//! the driver.

use crate::driver::driverlog;
use crate::hooks::HookId;
use crate::{driver::query, faults::lifetime, rt::config, rt::output, rt::stderr};
use libc::{c_uint, c_void};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use seedance_core::launch::{
    check_context, check_launch, ContextFacts, DeviceLimits, FuncLimits, LaunchCheck,
    LaunchFinding, LaunchRequest, StreamState,
};
use seedance_core::Validate;
use seedance_cuda::{
    attr, func_attr, launch_attr, CUdevice, CUfunction, CUlaunchConfig, CUresult, CUstream,
};
use seedance_trace::{Event, LaunchFault};
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

/// Launch results a check can explain: INVALID_VALUE, INVALID_CONTEXT, INVALID_HANDLE,
/// LAUNCH_OUT_OF_RESOURCES, CONTEXT_IS_DESTROYED, COOPERATIVE_LAUNCH_TOO_LARGE,
/// INVALID_CLUSTER_SIZE. Others (sticky kernel errors, teardown) keep the plain report.
const EXPLAINED: [u32; 7] = [1, 201, 400, 701, 709, 720, 912];

/// Devices whose limits are cached (ordinals `0..MAX_CACHED`); others are read each time.
const MAX_CACHED: usize = 64;

/// Most distinct faults remembered for the once-per-fault stderr line and event.
const MAX_SEEN: usize = 4096;

/// Most launch attributes read from a `CUlaunchConfig`.
const MAX_ATTRS: usize = 64;

static LIMITS: [OnceLock<DeviceLimits>; MAX_CACHED] = [const { OnceLock::new() }; MAX_CACHED];
static SEEN: Lazy<Mutex<HashSet<(usize, LaunchCheck, u64)>>> =
    Lazy::new(|| Mutex::new(HashSet::new()));

/// One launch as the program made it.
struct Launch {
    req: LaunchRequest,
    f: CUfunction,
    stream: CUstream,
}

#[allow(clippy::too_many_arguments)]
fn plain(
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem: c_uint,
    stream: CUstream,
    cooperative: bool,
) -> Launch {
    Launch {
        req: LaunchRequest {
            grid,
            block,
            shared_mem,
            cluster: None,
            cooperative,
        },
        f,
        stream,
    }
}

/// The launch a `CUlaunchConfig` describes, attributes included (`None` for a null config).
///
/// # Safety
/// `config` must be null or point to a valid `CUlaunchConfig` whose `attrs` holds
/// `num_attrs` attributes (the driver's contract for `cuLaunchKernelEx`).
unsafe fn from_config(config: *const CUlaunchConfig, f: CUfunction) -> Option<Launch> {
    // SAFETY: null or valid, per the caller's contract.
    let c = unsafe { config.as_ref() }?;
    let mut l = plain(
        f,
        [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
        [c.block_dim_x, c.block_dim_y, c.block_dim_z],
        c.shared_mem_bytes,
        c.h_stream,
        false,
    );
    if !c.attrs.is_null() {
        for i in 0..(c.num_attrs as usize).min(MAX_ATTRS) {
            // SAFETY: `attrs` holds `num_attrs` entries (caller's contract); read unaligned
            // so that a misaligned array cannot fault here.
            let a = unsafe { c.attrs.add(i).read_unaligned() };
            // Little-endian: 32-bit word i of the value union.
            let word = |i: usize| (a.value[i / 2] >> (32 * (i % 2))) as u32;
            match a.id {
                launch_attr::COOPERATIVE => l.req.cooperative = word(0) != 0,
                launch_attr::CLUSTER_DIMENSION => {
                    let dims = [word(0), word(1), word(2)];
                    // All zero means "no cluster" to the driver.
                    l.req.cluster = (dims != [0, 0, 0]).then_some(dims);
                }
                _ => {}
            }
        }
    }
    Some(l)
}

fn is_default_stream(s: CUstream) -> bool {
    (s as usize) <= seedance_cuda::CU_STREAM_PER_THREAD
}

/// The device's limits, read once per device through the real driver.
fn device_limits(dev: CUdevice) -> DeviceLimits {
    let read = || {
        let a = |k| query::device_attribute(k, dev).map_or(0, |v| v.max(0) as u32);
        DeviceLimits {
            ordinal: dev,
            max_threads_per_block: a(attr::MAX_THREADS_PER_BLOCK),
            max_block: [
                a(attr::MAX_BLOCK_DIM_X),
                a(attr::MAX_BLOCK_DIM_Y),
                a(attr::MAX_BLOCK_DIM_Z),
            ],
            max_grid: [
                a(attr::MAX_GRID_DIM_X),
                a(attr::MAX_GRID_DIM_Y),
                a(attr::MAX_GRID_DIM_Z),
            ],
            shared_per_block: a(attr::MAX_SHARED_MEMORY_PER_BLOCK),
            shared_per_block_optin: a(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            sm_count: a(attr::MULTIPROCESSOR_COUNT),
            compute_capability: (
                a(attr::COMPUTE_CAPABILITY_MAJOR),
                a(attr::COMPUTE_CAPABILITY_MINOR),
            ),
        }
    };
    let Some(cell) = usize::try_from(dev).ok().and_then(|i| LIMITS.get(i)) else {
        return read();
    };
    if let Some(l) = cell.get() {
        return *l;
    }
    let l = read();
    // Keep only a complete read: a transient failure must not disable the checks for good.
    if l.max_threads_per_block > 0 {
        let _ = cell.set(l);
    }
    l
}

/// The kernel's own limits (`cuFuncGetAttribute`, asked each time: `cuFuncSetAttribute`
/// can change them).
fn func_limits(f: CUfunction) -> FuncLimits {
    let a = |k| query::func_attribute(k, f);
    let u = |k| a(k).and_then(|v| u32::try_from(v).ok());
    FuncLimits {
        max_threads_per_block: u(func_attr::MAX_THREADS_PER_BLOCK),
        static_shared: u(func_attr::SHARED_SIZE_BYTES),
        num_regs: u(func_attr::NUM_REGS),
        max_dynamic_shared: u(func_attr::MAX_DYNAMIC_SHARED_SIZE_BYTES),
        non_portable_cluster: a(func_attr::NON_PORTABLE_CLUSTER_SIZE_ALLOWED).map(|v| v != 0),
    }
}

fn check_config(l: &Launch, dev: CUdevice) -> Option<LaunchFinding> {
    let limits = device_limits(dev);
    let func = func_limits(l.f);
    let coop = if l.req.cooperative {
        query::occupancy(l.f, l.req.threads(), l.req.shared_mem)
    } else {
        None
    };
    check_launch(&l.req, &limits, &func, coop)
}

fn stream_state(s: CUstream) -> StreamState {
    if is_default_stream(s) {
        return StreamState::Default;
    }
    match query::stream_get_ctx(s) {
        Ok(ctx) => StreamState::Owned(ctx),
        Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED) => StreamState::Destroyed,
        Err(code) => StreamState::Invalid(code.0),
    }
}

/// Why the launch failed, and the device of the current context when there is one.
fn explain(r: CUresult, l: &Launch) -> (Option<LaunchFinding>, Option<i32>) {
    let current = || query::ctx_get_current().ok().filter(|&c| c != 0);
    match query::ctx_get_device() {
        Ok(dev) => {
            // After a primary context reset the driver still answers cuCtxGetDevice for the
            // handle (measured: H200, driver 580.159) and only the launch says 709; the
            // tracker knows whether and where that context ended.
            if r == CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED {
                let cur = current();
                let ended = cur.and_then(|c| lifetime::context_end(c as u64));
                if ended.is_some() {
                    let facts = ContextFacts {
                        current: cur,
                        current_destroyed: true,
                        stream: l.stream as usize,
                        stream_state: StreamState::Default,
                        ended: ended.as_deref(),
                    };
                    return (check_context(&facts), Some(dev));
                }
            }
            if !is_default_stream(l.stream) && matches!(r.0, 201 | 400 | 709) {
                let stream_state = stream_state(l.stream);
                let ended = (stream_state == StreamState::Destroyed)
                    .then(|| lifetime::stream_context_end(l.stream as u64))
                    .flatten();
                let facts = ContextFacts {
                    current: current(),
                    current_destroyed: false,
                    stream: l.stream as usize,
                    stream_state,
                    ended: ended.as_deref(),
                };
                if let Some(f) = check_context(&facts) {
                    return (Some(f), Some(dev));
                }
            }
            (check_config(l, dev), Some(dev))
        }
        Err(code) => {
            let current = current();
            let current_destroyed = code == CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED;
            let stream_state = stream_state(l.stream);
            let ended = if current_destroyed {
                current.and_then(|c| lifetime::context_end(c as u64))
            } else if stream_state == StreamState::Destroyed {
                lifetime::stream_context_end(l.stream as u64)
            } else {
                None
            };
            let facts = ContextFacts {
                current,
                current_destroyed,
                stream: l.stream as usize,
                stream_state,
                ended: ended.as_deref(),
            };
            (check_context(&facts), None)
        }
    }
}

/// The once-per-fault report: tally, stderr line and `launch_fault` event.
fn report(
    id: HookId,
    r: CUresult,
    finding: &LaunchFinding,
    device: Option<i32>,
    l: &Launch,
    refused: bool,
    driver_message: Option<String>,
) {
    output::tally_error(id, r);
    let key = (id as usize, finding.check, finding.requested.unwrap_or(0));
    let first = {
        let mut seen = SEEN.lock();
        seen.len() < MAX_SEEN && seen.insert(key)
    };
    if !first {
        return;
    }
    let name = r.name();
    let mut line = output::fault_line(id, name, r, &finding.explanation);
    if refused {
        line.push_str(" [refused before reaching the driver: SEEDANCE_VALIDATE=pre]");
    }
    if let Some(m) = &driver_message {
        line.push_str(&format!(" [driver: {m}]"));
    }
    stderr::say(&line);
    output::emit(Event::LaunchFault(LaunchFault {
        function: id.name().to_string(),
        result: r.0,
        result_name: name.map(str::to_string),
        check: finding.check.as_str().to_string(),
        limit: finding.limit,
        requested: finding.requested,
        device,
        grid: l.req.grid,
        block: l.req.block,
        shared_mem_bytes: l.req.shared_mem,
        refused_before_driver: refused,
        explanation: finding.explanation.clone(),
        driver_message,
    }));
}

#[cold]
#[inline(never)]
fn fault(id: HookId, r: CUresult, l: Option<Launch>) -> bool {
    if config::get().validate == Validate::Off || !EXPLAINED.contains(&r.0) {
        return false;
    }
    let Some(l) = l else { return false };
    let Some(_inside) = crate::rt::guard::enter() else {
        return false;
    };
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("launch_fault");
        let message = driverlog::take_recent();
        let (finding, device) = explain(r, &l);
        driverlog::discard();
        let finding = match (finding, &message) {
            (Some(f), _) => f,
            (None, Some(m)) => LaunchFinding {
                check: LaunchCheck::Unknown,
                limit: None,
                requested: None,
                explanation: format!(
                    "the launch is within every limit the shim checks; the driver says: {m}"
                ),
            },
            (None, None) => return false,
        };
        report(id, r, &finding, device, &l, false, message);
        true
    }))
    .unwrap_or(false)
}

/// Whether launches and allocations are checked before the call (`SEEDANCE_VALIDATE=pre`
/// with the shim active, not in a forked child): one relaxed load of the configuration word
/// once the configuration has been read.
#[inline(always)]
pub fn pre_enabled() -> bool {
    config::switches() & config::sw::PRE != 0
}

#[cold]
#[inline(never)]
fn pre(id: HookId, l: Option<Launch>) -> Option<CUresult> {
    let l = l?;
    let _inside = crate::rt::guard::enter()?;
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        if l.f.is_null() {
            return None;
        }
        // Without a usable context the driver's own answer is the right one.
        let dev = query::ctx_get_device().ok()?;
        let finding = check_config(&l, dev);
        driverlog::discard();
        let finding = finding?;
        let code = CUresult(finding.check.driver_code());
        report(id, code, &finding, Some(dev), &l, true, None);
        Some(code)
    }))
    .ok()
    .flatten()
}

/// The `pre` and `fault` adapters of an entry point whose arguments are `f`, the grid and
/// block dims (x, y, z each), the dynamic shared memory (bytes), the stream, then pointers
/// the checks do not read (`kernelParams`, and `extra` where the entry point has it).
macro_rules! plain_launch_adapters {
    ($name:literal, $pre:ident, $fault:ident, cooperative: $coop:expr, unread: ($($unread:ident),*)) => {
        #[doc = concat!("Before `", $name, "(_ptsz)` with `SEEDANCE_VALIDATE=pre`: the driver's code")]
        /// for a launch over a limit (which is then not forwarded), `None` to forward it.
        ///
        /// # Safety
        /// The wrapper's arguments, as the program passed them.
        #[allow(clippy::too_many_arguments)]
        #[inline(always)]
        pub unsafe fn $pre(
            id: HookId,
            f: CUfunction,
            grid_dim_x: c_uint,
            grid_dim_y: c_uint,
            grid_dim_z: c_uint,
            block_dim_x: c_uint,
            block_dim_y: c_uint,
            block_dim_z: c_uint,
            shared_mem_bytes: c_uint,
            h_stream: CUstream,
            $($unread: *mut *mut c_void,)*
        ) -> Option<CUresult> {
            if !pre_enabled() {
                return None;
            }
            let grid = [grid_dim_x, grid_dim_y, grid_dim_z];
            let block = [block_dim_x, block_dim_y, block_dim_z];
            pre(id, Some(plain(f, grid, block, shared_mem_bytes, h_stream, $coop)))
        }

        #[doc = concat!("After a failed `", $name, "(_ptsz)`: `true` when the failure was")]
        /// explained (a `launch_fault` replaces the plain `call_failed`).
        ///
        /// # Safety
        /// The wrapper's arguments, as the program passed them.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $fault(
            id: HookId,
            r: CUresult,
            f: CUfunction,
            grid_dim_x: c_uint,
            grid_dim_y: c_uint,
            grid_dim_z: c_uint,
            block_dim_x: c_uint,
            block_dim_y: c_uint,
            block_dim_z: c_uint,
            shared_mem_bytes: c_uint,
            h_stream: CUstream,
            $($unread: *mut *mut c_void,)*
        ) -> bool {
            let grid = [grid_dim_x, grid_dim_y, grid_dim_z];
            let block = [block_dim_x, block_dim_y, block_dim_z];
            fault(id, r, Some(plain(f, grid, block, shared_mem_bytes, h_stream, $coop)))
        }
    };
}

plain_launch_adapters!("cuLaunchKernel", pre_kernel, fault_kernel, cooperative: false,
    unread: (_kernel_params, _extra));
plain_launch_adapters!("cuLaunchCooperativeKernel", pre_cooperative, fault_cooperative,
    cooperative: true, unread: (_kernel_params));

/// Before `cuLaunchKernelEx(_ptsz)` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them: `config` null or valid.
#[inline(always)]
pub unsafe fn pre_kernel_ex(
    id: HookId,
    config: *const CUlaunchConfig,
    f: CUfunction,
    _kernel_params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> Option<CUresult> {
    if !pre_enabled() {
        return None;
    }
    // SAFETY: the caller's config, under cuLaunchKernelEx's contract.
    pre(id, unsafe { from_config(config, f) })
}

/// After a failed `cuLaunchKernelEx(_ptsz)`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them: `config` null or valid.
pub unsafe fn fault_kernel_ex(
    id: HookId,
    r: CUresult,
    config: *const CUlaunchConfig,
    f: CUfunction,
    _kernel_params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> bool {
    if config::get().validate == Validate::Off || !EXPLAINED.contains(&r.0) {
        return false;
    }
    // SAFETY: the caller's config, under cuLaunchKernelEx's contract.
    fault(id, r, unsafe { from_config(config, f) })
}
