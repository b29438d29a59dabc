//! Launches and stream synchronisation: `cuLaunchKernel(_ptsz)`, `cuLaunchKernelEx(_ptsz)`,
//! `cuLaunchCooperativeKernel(_ptsz)`, `cuStreamSynchronize(_ptsz)`. A launch validates and
//! is queued on its stream (nothing runs on a device); a synchronize runs the stream's
//! queue ([`crate::queue`]). A refused launch leaves a message for the log callbacks
//! ([`crate::logs`]).

use std::ffi::{c_uint, c_void};

use seedance_cuda::{CUfunction, CUlaunchConfig, CUresult, CUstream};

use crate::global::{call_driver, crash_if_dead, current};
use crate::launch::{check_detailed, LaunchDims, LaunchLimits};
use crate::logs;
use crate::state::Driver;

/// Most launch attributes read from a `CUlaunchConfig`.
const MAX_ATTRS: usize = 64;

/// Checks one launch against the current context's device and the kernel's limits.
fn validate(
    name: &str,
    d: &mut Driver,
    f: CUfunction,
    stream: CUstream,
    dims: Option<&LaunchDims>,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> Result<(), CUresult> {
    let device = d.launch_stream(stream as usize, current())?;
    let queue = d.submit_queue(stream as usize, current())?;
    let dims = dims.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if f.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    if !kernel_params.is_null() && !extra.is_null() {
        logs::set_pending(name, "kernelParams and extra are both given; pass only one");
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let limits = LaunchLimits::of(d.device_at(device));
    let func = d.func_limits(f as usize, device);
    check_detailed(&limits, &func, dims).map_err(|(code, message)| {
        logs::set_pending(name, &message);
        code
    })?;
    d.enqueue(queue, crate::queue::Op::Launches(1));
    Ok(())
}

fn dims_text(dims: &LaunchDims) -> String {
    let [gx, gy, gz] = dims.grid;
    let [bx, by, bz] = dims.block;
    format!(
        "grid={gx},{gy},{gz} block={bx},{by},{bz} shmem={}",
        dims.shared_mem
    )
}

#[allow(clippy::too_many_arguments)]
fn launch_kernel(
    name: &str,
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem: c_uint,
    stream: CUstream,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
    cooperative: bool,
) -> CUresult {
    let dims = LaunchDims {
        grid,
        block,
        shared_mem,
        cluster: None,
        cooperative,
    };
    let r = call_driver(
        name,
        || {
            format!(
                "f={:#x} {} stream={:#x}",
                f as usize,
                dims_text(&dims),
                stream as usize
            )
        },
        |d| validate(name, d, f, stream, Some(&dims), kernel_params, extra),
    );
    logs::deliver_pending();
    r
}

/// `cuLaunchKernel(CUfunction f, unsigned gridDimX, gridDimY, gridDimZ, blockDimX,
/// blockDimY, blockDimZ, unsigned sharedMemBytes, CUstream hStream, void **kernelParams,
/// void **extra)`: 201/709 without a live current context, `INVALID_HANDLE` for a null
/// function or a stream of another context, `INVALID_VALUE` for a configuration over the
/// device or kernel limits (see [`crate::launch`]) or both `kernelParams` and `extra` given,
/// `LAUNCH_OUT_OF_RESOURCES` for a block larger than a register-limited kernel allows.
///
/// # Safety
///
/// None: no pointer argument is dereferenced.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchKernel(
    f: CUfunction,
    grid_dim_x: c_uint,
    grid_dim_y: c_uint,
    grid_dim_z: c_uint,
    block_dim_x: c_uint,
    block_dim_y: c_uint,
    block_dim_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    launch_kernel(
        "cuLaunchKernel",
        f,
        [grid_dim_x, grid_dim_y, grid_dim_z],
        [block_dim_x, block_dim_y, block_dim_z],
        shared_mem_bytes,
        h_stream,
        kernel_params,
        extra,
        false,
    )
}

/// `cuLaunchKernel_ptsz`: the per-thread-default-stream variant of [`cuLaunchKernel`].
///
/// # Safety
///
/// None: no pointer argument is dereferenced.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchKernel_ptsz(
    f: CUfunction,
    grid_dim_x: c_uint,
    grid_dim_y: c_uint,
    grid_dim_z: c_uint,
    block_dim_x: c_uint,
    block_dim_y: c_uint,
    block_dim_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    launch_kernel(
        "cuLaunchKernel_ptsz",
        f,
        [grid_dim_x, grid_dim_y, grid_dim_z],
        [block_dim_x, block_dim_y, block_dim_z],
        shared_mem_bytes,
        h_stream,
        kernel_params,
        extra,
        false,
    )
}

/// `cuLaunchCooperativeKernel(CUfunction f, unsigned gridDimX, gridDimY, gridDimZ,
/// blockDimX, blockDimY, blockDimZ, unsigned sharedMemBytes, CUstream hStream,
/// void **kernelParams)`: the checks of [`cuLaunchKernel`], and
/// `COOPERATIVE_LAUNCH_TOO_LARGE` when the grid has more blocks than can be resident at once
/// (occupancy x SM count).
///
/// # Safety
///
/// None: no pointer argument is dereferenced.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchCooperativeKernel(
    f: CUfunction,
    grid_dim_x: c_uint,
    grid_dim_y: c_uint,
    grid_dim_z: c_uint,
    block_dim_x: c_uint,
    block_dim_y: c_uint,
    block_dim_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
) -> CUresult {
    launch_kernel(
        "cuLaunchCooperativeKernel",
        f,
        [grid_dim_x, grid_dim_y, grid_dim_z],
        [block_dim_x, block_dim_y, block_dim_z],
        shared_mem_bytes,
        h_stream,
        kernel_params,
        std::ptr::null_mut(),
        true,
    )
}

/// `cuLaunchCooperativeKernel_ptsz`: the per-thread-default-stream variant of
/// [`cuLaunchCooperativeKernel`].
///
/// # Safety
///
/// None: no pointer argument is dereferenced.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuLaunchCooperativeKernel_ptsz(
    f: CUfunction,
    grid_dim_x: c_uint,
    grid_dim_y: c_uint,
    grid_dim_z: c_uint,
    block_dim_x: c_uint,
    block_dim_y: c_uint,
    block_dim_z: c_uint,
    shared_mem_bytes: c_uint,
    h_stream: CUstream,
    kernel_params: *mut *mut c_void,
) -> CUresult {
    launch_kernel(
        "cuLaunchCooperativeKernel_ptsz",
        f,
        [grid_dim_x, grid_dim_y, grid_dim_z],
        [block_dim_x, block_dim_y, block_dim_z],
        shared_mem_bytes,
        h_stream,
        kernel_params,
        std::ptr::null_mut(),
        true,
    )
}

/// Shared body of the two `cuLaunchKernelEx` variants.
///
/// # Safety
///
/// `config` must be null or point to a valid `CUlaunchConfig` whose `attrs` holds
/// `num_attrs` attributes.
unsafe fn launch_kernel_ex(
    name: &str,
    config: *const CUlaunchConfig,
    f: CUfunction,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    // SAFETY: null or a valid CUlaunchConfig, per the caller's contract.
    let cfg = unsafe { config.as_ref() };
    let dims = cfg.map(|c| {
        let mut dims = LaunchDims::from_config(c);
        if !c.attrs.is_null() {
            for i in 0..(c.num_attrs as usize).min(MAX_ATTRS) {
                // SAFETY: `attrs` holds `num_attrs` attributes, per the caller's contract;
                // read unaligned so that a misaligned array cannot make us fault.
                dims.apply(&unsafe { c.attrs.add(i).read_unaligned() });
            }
        }
        dims
    });
    let r = call_driver(
        name,
        || match cfg {
            Some(c) => format!(
                "f={:#x} {} stream={:#x} attrs={}",
                f as usize,
                dims.as_ref().map(dims_text).unwrap_or_default(),
                c.h_stream as usize,
                c.num_attrs
            ),
            None => format!("f={:#x} config=0x0", f as usize),
        },
        |d| {
            if cfg.is_some_and(|c| c.num_attrs > 0 && c.attrs.is_null()) {
                d.ctx_device(current())?;
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let stream = cfg.map_or(std::ptr::null_mut(), |c| c.h_stream);
            validate(name, d, f, stream, dims.as_ref(), kernel_params, extra)
        },
    );
    logs::deliver_pending();
    r
}

/// `cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
/// void **extra)`: the checks of [`cuLaunchKernel`] on the config's values, with the launch
/// attributes `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` and `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`
/// applied (see [`crate::launch`]); a null config, or `numAttrs > 0` with null `attrs`, is
/// `INVALID_VALUE`.
///
/// # Safety
///
/// `config` must be null or point to a valid `CUlaunchConfig`.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernelEx(
    config: *const CUlaunchConfig,
    f: CUfunction,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { launch_kernel_ex("cuLaunchKernelEx", config, f, kernel_params, extra) }
}

/// `cuLaunchKernelEx_ptsz`: the per-thread-default-stream variant of [`cuLaunchKernelEx`].
///
/// # Safety
///
/// `config` must be null or point to a valid `CUlaunchConfig`.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernelEx_ptsz(
    config: *const CUlaunchConfig,
    f: CUfunction,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { launch_kernel_ex("cuLaunchKernelEx_ptsz", config, f, kernel_params, extra) }
}

fn stream_synchronize(name: &str, stream: CUstream) -> CUresult {
    crash_if_dead(|d| d.stream_of_dead_context(stream as usize));
    call_driver(
        name,
        || format!("stream={:#x}", stream as usize),
        |d| {
            let (queue, _) = d.target_queue(stream as usize, current())?;
            d.refuse_in_capture(queue)?;
            d.sync_queue(queue);
            Ok(())
        },
    )
}

/// `cuStreamSynchronize(CUstream hStream)`: runs the stream's queued work; a capturing
/// stream answers `STREAM_CAPTURE_UNSUPPORTED` (900) and its capture is invalidated. A created
/// stream needs no current context (709 when its own was destroyed); the default streams
/// and unknown handles need a live current context (201/709), then an unknown handle is
/// `INVALID_HANDLE`.
///
/// # Safety
///
/// None: the stream handle is not dereferenced.
#[no_mangle]
pub unsafe extern "C-unwind" fn cuStreamSynchronize(h_stream: CUstream) -> CUresult {
    crate::global::cancellation_point("cuStreamSynchronize");
    stream_synchronize("cuStreamSynchronize", h_stream)
}

/// `cuStreamSynchronize_ptsz`: the per-thread-default-stream variant.
///
/// # Safety
///
/// None: the stream handle is not dereferenced.
#[no_mangle]
pub unsafe extern "C-unwind" fn cuStreamSynchronize_ptsz(h_stream: CUstream) -> CUresult {
    crate::global::cancellation_point("cuStreamSynchronize_ptsz");
    stream_synchronize("cuStreamSynchronize_ptsz", h_stream)
}
