//! Launch faults: a failed `cuLaunchKernel`, `cuLaunchKernelEx` or
//! `cuLaunchCooperativeKernel` (and their `_ptsz` variants) is explained with the limit it
//! broke, the value asked for and the fix.
//!
//! The wrappers forward first; on success nothing here runs. After a failure with a code a
//! launch check can explain (1, 201, 400, 701, 709, 720, 912), [`fault_kernel`] and its
//! siblings ask the real driver (never our wrappers) for the current context's device
//! (`cuCtxGetDevice`), its limits (`cuDeviceGetAttribute`, read once per device and
//! cached), the kernel's own limits (`cuFuncGetAttribute`) and, for a cooperative launch,
//! its occupancy; or, when no usable context is current, for the context and stream state
//! (`cuCtxGetCurrent`, `cuStreamGetCtx`). `seedance_core::launch::diagnose` decides which
//! of these facts it needs (`Facts` answers them) and what they mean. The result is a
//! `launch_fault` event (instead of `call_failed`) and one stderr line per distinct fault.
//!
//! With `SEEDANCE_VALIDATE=pre` the same checks run before the call ([`pre_kernel`], ...),
//! and a launch that breaks a limit is refused with the driver's own code without reaching
//! the driver.

use crate::driver::driverlog;
use crate::hooks::ids::HookId;
use crate::{driver::query, faults::lifetime, rt::config, rt::output};
use libc::c_uint;
use seedance_core::launch::{
    self as decide, Before, DeviceLimits, FuncLimits, LaunchCheck, LaunchFacts, LaunchFinding,
    LaunchRequest, StreamState,
};
use seedance_core::once::ExplainOnce;
use seedance_core::Validate;
use seedance_cuda::{
    attr, func_attr, launch_attr, CUdevice, CUfunction, CUlaunchConfig, CUresult, CUstream,
};
use seedance_trace::{Event, LaunchFault};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

/// Devices whose limits are cached (ordinals `0..MAX_CACHED`); others are read each time.
const MAX_CACHED: usize = 64;

/// Most distinct faults remembered for the once-per-fault stderr line and event.
const MAX_SEEN: usize = 4096;

/// Most launch attributes read from a `CUlaunchConfig`.
const MAX_ATTRS: usize = 64;

static LIMITS: [OnceLock<DeviceLimits>; MAX_CACHED] = [const { OnceLock::new() }; MAX_CACHED];
static SEEN: ExplainOnce<(usize, LaunchCheck, u64)> = ExplainOnce::bounded(MAX_SEEN);

/// One launch as the program made it.
struct Launch {
    req: LaunchRequest,
    f: CUfunction,
    stream: CUstream,
}

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

/// The facts about one failed (or checked) launch, asked of the real driver and the
/// lifetime tracker when `seedance_core::launch` needs them.
struct Facts<'a>(&'a Launch);

impl LaunchFacts for Facts<'_> {
    fn device(&mut self) -> Result<i32, u32> {
        query::ctx_get_device().map_err(|code| code.0)
    }

    fn current(&mut self) -> Option<usize> {
        query::ctx_get_current().ok().filter(|&c| c != 0)
    }

    fn context_end(&mut self, ctx: usize) -> Option<String> {
        lifetime::context_end(ctx as u64)
    }

    fn stream_state(&mut self) -> StreamState {
        match query::stream_get_ctx(self.0.stream) {
            Ok(ctx) => StreamState::Owned(ctx),
            Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED) => StreamState::Destroyed,
            Err(code) => StreamState::Invalid(code.0),
        }
    }

    fn stream_context_end(&mut self) -> Option<String> {
        lifetime::stream_context_end(self.0.stream as u64)
    }

    fn device_limits(&mut self, dev: i32) -> DeviceLimits {
        device_limits(dev)
    }

    fn func_limits(&mut self) -> FuncLimits {
        func_limits(self.0.f)
    }

    fn occupancy(&mut self, threads: u64, shared_mem: u32) -> Option<u32> {
        query::occupancy(self.0.f, threads, shared_mem)
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
    if !SEEN.first(key) {
        return;
    }
    let name = r.name();
    output::say_checked_fault(
        id,
        r,
        &finding.explanation,
        refused,
        driver_message.as_deref(),
    );
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
    if config::get().validate == Validate::Off || !decide::explains(r.0) {
        return false;
    }
    let Some(l) = l else { return false };
    let Some(_inside) = crate::rt::guard::enter() else {
        return false;
    };
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::rt::guard::test_panic("launch_fault");
        let message = driverlog::take_recent();
        let d = decide::diagnose(
            r.0,
            &l.req,
            l.stream as usize,
            message.as_deref(),
            &mut Facts(&l),
        );
        driverlog::discard();
        let Some(finding) = d.finding else {
            return false;
        };
        report(id, r, &finding, d.device, &l, false, message);
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
        let checked = decide::check_before(&l.req, &mut Facts(&l));
        if checked == Before::NoContext {
            return None;
        }
        driverlog::discard();
        let Before::Refuse(dev, finding) = checked else {
            return None;
        };
        let code = CUresult(finding.check.driver_code());
        report(id, code, &finding, Some(dev), &l, true, None);
        Some(code)
    }))
    .ok()
    .flatten()
}

/// The `pre` and `fault` adapters of an entry point whose checks read `f`, the grid and
/// block dims (`[x, y, z]` each), the dynamic shared memory (bytes) and the stream (the
/// table does not pass `kernelParams` or `extra`, which they do not read).
macro_rules! plain_launch_adapters {
    ($name:literal, $pre:ident, $fault:ident, cooperative: $coop:expr) => {
        #[doc = concat!("Before `", $name, "(_ptsz)` with `SEEDANCE_VALIDATE=pre`: the driver's code")]
        /// for a launch over a limit (which is then not forwarded), `None` to forward it.
        ///
        /// # Safety
        /// The wrapper's arguments, as the program passed them.
        #[inline(always)]
        pub unsafe fn $pre(
            id: HookId,
            f: CUfunction,
            grid: [c_uint; 3],
            block: [c_uint; 3],
            shared_mem_bytes: c_uint,
            h_stream: CUstream,
        ) -> Option<CUresult> {
            if !pre_enabled() {
                return None;
            }
            pre(
                id,
                Some(plain(f, grid, block, shared_mem_bytes, h_stream, $coop)),
            )
        }

        #[doc = concat!("After a failed `", $name, "(_ptsz)`: `true` when the failure was")]
        /// explained (a `launch_fault` replaces the plain `call_failed`).
        ///
        /// # Safety
        /// The wrapper's arguments, as the program passed them.
        pub unsafe fn $fault(
            id: HookId,
            r: CUresult,
            f: CUfunction,
            grid: [c_uint; 3],
            block: [c_uint; 3],
            shared_mem_bytes: c_uint,
            h_stream: CUstream,
        ) -> bool {
            fault(
                id,
                r,
                Some(plain(f, grid, block, shared_mem_bytes, h_stream, $coop)),
            )
        }
    };
}

// The table's `launch::pre_kernel`, `launch::fault_kernel`, `launch::pre_cooperative` and
// `launch::fault_cooperative`:
plain_launch_adapters!("cuLaunchKernel", pre_kernel, fault_kernel, cooperative: false);
plain_launch_adapters!("cuLaunchCooperativeKernel", pre_cooperative, fault_cooperative,
    cooperative: true);

/// Before `cuLaunchKernelEx(_ptsz)` with `SEEDANCE_VALIDATE=pre`.
///
/// # Safety
/// The wrapper's arguments, as the program passed them: `config` null or valid.
#[inline(always)]
pub unsafe fn pre_kernel_ex(
    id: HookId,
    config: *const CUlaunchConfig,
    f: CUfunction,
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
) -> bool {
    if config::get().validate == Validate::Off || !decide::explains(r.0) {
        return false;
    }
    // SAFETY: the caller's config, under cuLaunchKernelEx's contract.
    fault(id, r, unsafe { from_config(config, f) })
}
