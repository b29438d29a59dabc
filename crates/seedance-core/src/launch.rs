//! Launch checks: why a kernel launch was (or would be) refused, in words that name the
//! limit, the value asked for and the fix.
//!
//! The shim calls [`check_launch`] after `cuLaunchKernel`, `cuLaunchKernelEx` or
//! `cuLaunchCooperativeKernel` failed (or before the call with `SEEDANCE_VALIDATE=pre`), with
//! the device's limits ([`DeviceLimits`], read once per device through
//! `cuDeviceGetAttribute`), the kernel's own limits ([`FuncLimits`], `cuFuncGetAttribute`)
//! and, for cooperative launches, the kernel's occupancy
//! (`cuOccupancyMaxActiveBlocksPerMultiprocessor`). A launch that fails for want of a
//! usable context is explained by [`check_context`] instead. Nothing here calls the driver.
//!
//! The checks run in the driver's order and the first one that fails is reported; each
//! [`LaunchCheck`] knows the code the driver returns for it ([`LaunchCheck::driver_code`]),
//! which is what a launch refused before the call gets.

use std::fmt::Write as _;

/// The default limit on dynamic shared memory per block without opting in (48 KiB, every
/// GPU since Kepler; `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK`).
pub const DEFAULT_SHARED_PER_BLOCK: u32 = 48 * 1024;

/// Most blocks in a thread-block cluster without `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`
/// (CUDA programming guide, "Thread Block Clusters": 8 is portable).
pub const PORTABLE_CLUSTER_BLOCKS: u64 = 8;
/// Most blocks in a cluster with the non-portable attribute set, on compute capability 9.x
/// (H100/H200: 16).
pub const NON_PORTABLE_CLUSTER_BLOCKS: u64 = 16;

/// What one device allows, from `cuDeviceGetAttribute` (`CUdevice_attribute` numbers in
/// parentheses). A value of 0 means "not known" and disables the checks that need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceLimits {
    /// CUDA ordinal of the device (as `cuCtxGetDevice` returns it).
    pub ordinal: i32,
    /// Threads per block (1, `MAX_THREADS_PER_BLOCK`).
    pub max_threads_per_block: u32,
    /// Block dimensions x, y, z in threads (2, 3, 4).
    pub max_block: [u32; 3],
    /// Grid dimensions x, y, z in blocks (5, 6, 7).
    pub max_grid: [u32; 3],
    /// Shared memory per block without opting in, bytes (8; 48 KiB).
    pub shared_per_block: u32,
    /// Shared memory per block with the opt-in attribute, bytes
    /// (97, `MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`; 227 KiB on H100/H200).
    pub shared_per_block_optin: u32,
    /// Streaming multiprocessors (16, `MULTIPROCESSOR_COUNT`).
    pub sm_count: u32,
    /// Compute capability major and minor (75, 76).
    pub compute_capability: (u32, u32),
}

/// What one kernel allows, from `cuFuncGetAttribute` (`CUfunction_attribute` numbers in
/// parentheses); `None` when the query failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FuncLimits {
    /// Threads per block this kernel can run with, lower than the device's for
    /// register-heavy kernels (0, `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    pub max_threads_per_block: Option<u32>,
    /// Static shared memory, bytes (1, `SHARED_SIZE_BYTES`).
    pub static_shared: Option<u32>,
    /// Registers per thread (4, `NUM_REGS`).
    pub num_regs: Option<u32>,
    /// Dynamic shared memory the kernel may be launched with, bytes: 48 KiB minus its static
    /// shared memory unless raised with `cuFuncSetAttribute`
    /// (8, `MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub max_dynamic_shared: Option<u32>,
    /// Whether clusters above 8 blocks are allowed
    /// (14, `NON_PORTABLE_CLUSTER_SIZE_ALLOWED`).
    pub non_portable_cluster: Option<bool>,
}

/// The shape of one launch, as the program passed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchRequest {
    /// Grid dimensions in blocks.
    pub grid: [u32; 3],
    /// Block dimensions in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_mem: u32,
    /// Cluster dimensions in blocks, from `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
    pub cluster: Option<[u32; 3]>,
    /// A cooperative launch (`cuLaunchCooperativeKernel`, or `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`).
    pub cooperative: bool,
}

impl LaunchRequest {
    /// Threads per block (product of the block dimensions).
    pub fn threads(&self) -> u64 {
        self.block.iter().map(|&b| u64::from(b)).product()
    }

    /// Blocks in the grid (product of the grid dimensions).
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| u64::from(g)).product()
    }
}

/// Which limit a launch broke; the names are the `check` field of `launch_fault` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LaunchCheck {
    /// A grid or block dimension is 0.
    ZeroDim,
    /// A block dimension is over `MAX_BLOCK_DIM_X/Y/Z`.
    BlockDim,
    /// The block's thread count is over `MAX_THREADS_PER_BLOCK`.
    ThreadsPerBlock,
    /// The block's thread count is over the kernel's own limit because of its registers.
    FuncMaxThreads,
    /// The block's thread count is over the kernel's own limit set at compile time
    /// (`__launch_bounds__` / `.maxntid`), not by its registers.
    LaunchBounds,
    /// A grid dimension is over `MAX_GRID_DIM_X/Y/Z`.
    GridDim,
    /// Dynamic shared memory over the kernel's limit or the device's opt-in maximum.
    SharedMemory,
    /// The cluster dimensions are invalid for this grid, kernel or device.
    ClusterDim,
    /// A cooperative grid larger than can be resident at once.
    CooperativeGrid,
    /// No context is current on the calling thread.
    NoContext,
    /// The stream belongs to another context, or is not a valid stream.
    StreamContext,
    /// The current context (or the stream's) has been destroyed.
    DestroyedContext,
    /// The failure is not one the shim can name (the driver's own message may say more).
    Unknown,
}

impl LaunchCheck {
    /// The snake_case name used in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchCheck::ZeroDim => "zero_dim",
            LaunchCheck::BlockDim => "block_dim",
            LaunchCheck::ThreadsPerBlock => "threads_per_block",
            LaunchCheck::FuncMaxThreads => "func_max_threads",
            LaunchCheck::LaunchBounds => "launch_bounds",
            LaunchCheck::GridDim => "grid_dim",
            LaunchCheck::SharedMemory => "shared_memory",
            LaunchCheck::ClusterDim => "cluster_dim",
            LaunchCheck::CooperativeGrid => "cooperative_grid",
            LaunchCheck::NoContext => "no_context",
            LaunchCheck::StreamContext => "stream_context",
            LaunchCheck::DestroyedContext => "destroyed_context",
            LaunchCheck::Unknown => "unknown",
        }
    }

    /// The `CUresult` the driver returns for this fault: `CUDA_ERROR_INVALID_VALUE` (1) for
    /// dimensions, shared memory and a `__launch_bounds__` limit,
    /// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` (701) for a register-limited kernel (both
    /// measured on an H200, driver 580.159), `CUDA_ERROR_INVALID_CLUSTER_SIZE` (912),
    /// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` (720), `CUDA_ERROR_INVALID_CONTEXT` (201),
    /// `CUDA_ERROR_INVALID_HANDLE` (400), `CUDA_ERROR_CONTEXT_IS_DESTROYED` (709).
    pub fn driver_code(self) -> u32 {
        match self {
            LaunchCheck::ZeroDim
            | LaunchCheck::BlockDim
            | LaunchCheck::ThreadsPerBlock
            | LaunchCheck::GridDim
            | LaunchCheck::SharedMemory
            | LaunchCheck::LaunchBounds
            | LaunchCheck::Unknown => 1,
            LaunchCheck::FuncMaxThreads => 701,
            LaunchCheck::ClusterDim => 912,
            LaunchCheck::CooperativeGrid => 720,
            LaunchCheck::NoContext => 201,
            LaunchCheck::StreamContext => 400,
            LaunchCheck::DestroyedContext => 709,
        }
    }
}

/// Why a launch fails: the check, the limit and the value (in the check's unit: threads,
/// blocks or bytes), and a one-line explanation with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchFinding {
    /// The check that failed.
    pub check: LaunchCheck,
    /// The limit in force (threads, blocks or bytes), when the check has one.
    pub limit: Option<u64>,
    /// The value the launch asked for, in the same unit.
    pub requested: Option<u64>,
    /// The explanation, one line, naming the limit, the value and the fix.
    pub explanation: String,
}

fn finding(check: LaunchCheck, limit: u64, requested: u64, explanation: String) -> LaunchFinding {
    LaunchFinding {
        check,
        limit: Some(limit),
        requested: Some(requested),
        explanation,
    }
}

fn dims(d: [u32; 3]) -> String {
    format!("({},{},{})", d[0], d[1], d[2])
}

const AXES: [char; 3] = ['x', 'y', 'z'];

/// The first limit `req` breaks on the device `dev` for a kernel with limits `func`, or
/// `None` when the launch is within every limit checked. `coop_blocks_per_sm` is the
/// kernel's occupancy at this block size and shared memory
/// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`), needed only for cooperative launches.
pub fn check_launch(
    req: &LaunchRequest,
    dev: &DeviceLimits,
    func: &FuncLimits,
    coop_blocks_per_sm: Option<u32>,
) -> Option<LaunchFinding> {
    let d = dev.ordinal;
    for (what, v) in [("grid", req.grid), ("block", req.block)] {
        if let Some(axis) = v.iter().position(|&x| x == 0) {
            return Some(finding(
                LaunchCheck::ZeroDim,
                1,
                0,
                format!(
                    "grid {} block {}: {what}Dim.{} is 0; every grid and block dimension must be \
                     at least 1 (a 0 usually comes from an empty input: skip the launch when there \
                     is no work)",
                    dims(req.grid),
                    dims(req.block),
                    AXES[axis]
                ),
            ));
        }
    }
    for (axis, name) in AXES.iter().enumerate() {
        let (want, max) = (req.block[axis], dev.max_block[axis]);
        if max > 0 && want > max {
            return Some(finding(
                LaunchCheck::BlockDim,
                max.into(),
                want.into(),
                format!(
                    "block {}: blockDim.{name} = {want} is over device {d}'s limit of {max} \
                     (CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{A}); use at most {max} threads in {name}",
                    dims(req.block),
                    A = name.to_ascii_uppercase(),
                ),
            ));
        }
    }
    let threads = req.threads();
    let max_threads = u64::from(dev.max_threads_per_block);
    if max_threads > 0 && threads > max_threads {
        let mut text = format!(
            "block {} = {threads} threads, over device {d}'s limit of {max_threads} threads per \
             block (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); use at most {max_threads} threads \
             per block",
            dims(req.block)
        );
        if let Some(s) = smaller_block(req.block, max_threads) {
            let _ = write!(text, ", e.g. block {}", dims(s));
        }
        return Some(finding(
            LaunchCheck::ThreadsPerBlock,
            max_threads,
            threads,
            text,
        ));
    }
    for (axis, name) in AXES.iter().enumerate() {
        let (want, max) = (req.grid[axis], dev.max_grid[axis]);
        if max > 0 && want > max {
            let fix = if axis > 0 && dev.max_grid[0] > max {
                format!(
                    "put the long extent in x (limit {}) or loop over it inside the kernel",
                    dev.max_grid[0]
                )
            } else {
                "loop over the extra work inside the kernel (a grid-stride loop)".to_string()
            };
            return Some(finding(
                LaunchCheck::GridDim,
                max.into(),
                want.into(),
                format!(
                    "grid {}: gridDim.{name} = {want} is over device {d}'s limit of {max} \
                     (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{A}); {fix}",
                    dims(req.grid),
                    A = name.to_ascii_uppercase(),
                ),
            ));
        }
    }
    if let Some(max) = func.max_threads_per_block.map(u64::from) {
        if max > 0 && threads > max && (max_threads == 0 || max < max_threads) {
            // Register-limited when a full-size block would not fit the 64 Ki registers a
            // block may use (every GPU since compute capability 3.0); otherwise the limit was
            // compiled in with __launch_bounds__, and the driver answers
            // CUDA_ERROR_INVALID_VALUE instead of LAUNCH_OUT_OF_RESOURCES (measured on an
            // H200: 192 registers and a limit of 256 -> 701; 10 registers and
            // __launch_bounds__(256) -> 1).
            const REGISTERS_PER_BLOCK: u64 = 65_536;
            let full_block = if max_threads == 0 { 1024 } else { max_threads };
            let register_limited = func
                .num_regs
                .is_none_or(|r| u64::from(r) * full_block > REGISTERS_PER_BLOCK);
            if !register_limited {
                return Some(finding(
                    LaunchCheck::LaunchBounds,
                    max,
                    threads,
                    format!(
                        "block {} = {threads} threads, over this kernel's own limit of {max} \
                         threads per block, compiled in with __launch_bounds__({max}) \
                         (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); launch it with at most \
                         {max} threads per block, or raise the bound in the kernel's source",
                        dims(req.block)
                    ),
                ));
            }
            let regs = func
                .num_regs
                .map(|r| format!(": it uses {r} registers per thread"))
                .unwrap_or_default();
            return Some(finding(
                LaunchCheck::FuncMaxThreads,
                max,
                threads,
                format!(
                    "block {} = {threads} threads, over this kernel's own limit of {max} threads \
                     per block (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK{regs}); launch it with at \
                     most {max} threads per block, or build it with __launch_bounds__({threads}) \
                     or -maxrregcount so that it uses fewer registers",
                    dims(req.block)
                ),
            ));
        }
    }
    if let Some(f) = check_shared(req, dev, func) {
        return Some(f);
    }
    if let Some(cluster) = req.cluster {
        if let Some(f) = check_cluster(req.grid, cluster, dev, func) {
            return Some(f);
        }
    }
    if req.cooperative {
        if let Some(per_sm) = coop_blocks_per_sm {
            let sms = u64::from(dev.sm_count);
            let max = u64::from(per_sm) * sms;
            let blocks = req.blocks();
            if sms > 0 && blocks > max {
                let text = if per_sm == 0 {
                    format!(
                        "cooperative launch of {blocks} blocks (grid {}), but this kernel cannot \
                         be resident at all on device {d} with {threads} threads and {} bytes of \
                         dynamic shared memory per block \
                         (cuOccupancyMaxActiveBlocksPerMultiprocessor = 0); use smaller blocks or \
                         less shared memory",
                        dims(req.grid),
                        req.shared_mem
                    )
                } else {
                    format!(
                        "cooperative launch of {blocks} blocks (grid {}), but at most {max} can be \
                         resident at once on device {d} ({per_sm} per SM for this kernel with \
                         {threads} threads and {} bytes of dynamic shared memory, \
                         cuOccupancyMaxActiveBlocksPerMultiprocessor, x {sms} SMs); launch at most \
                         {max} blocks and loop over the rest of the work inside the kernel",
                        dims(req.grid),
                        req.shared_mem
                    )
                };
                return Some(finding(LaunchCheck::CooperativeGrid, max, blocks, text));
            }
        }
    }
    None
}

/// A block shape close to `block` with at most `max` threads: one dimension (z, then y,
/// then x) shrunk so that the product fits.
fn smaller_block(block: [u32; 3], max: u64) -> Option<[u32; 3]> {
    for axis in [2, 1, 0] {
        let others: u64 = (0..3)
            .filter(|&i| i != axis)
            .map(|i| u64::from(block[i]))
            .product();
        if others == 0 {
            return None;
        }
        let fit = max / others;
        if fit >= 1 && fit < u64::from(block[axis]) {
            let mut s = block;
            s[axis] = fit as u32;
            return Some(s);
        }
    }
    None
}

fn check_shared(
    req: &LaunchRequest,
    dev: &DeviceLimits,
    func: &FuncLimits,
) -> Option<LaunchFinding> {
    let d = dev.ordinal;
    let want = u64::from(req.shared_mem);
    let static_shared = u64::from(func.static_shared.unwrap_or(0));
    let optin = u64::from(dev.shared_per_block_optin);
    if optin > 0 && want + static_shared > optin {
        let limit = optin.saturating_sub(static_shared);
        return Some(finding(
            LaunchCheck::SharedMemory,
            limit,
            want,
            format!(
                "{want} bytes of dynamic shared memory per block plus the kernel's {static_shared} \
                 bytes of static shared memory exceed device {d}'s maximum of {optin} bytes per \
                 block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN); use at most {limit} \
                 bytes of dynamic shared memory (split the work into smaller tiles)"
            ),
        ));
    }
    let default = if dev.shared_per_block > 0 {
        dev.shared_per_block
    } else {
        DEFAULT_SHARED_PER_BLOCK
    };
    let func_max = func
        .max_dynamic_shared
        .map(u64::from)
        .unwrap_or_else(|| u64::from(default).saturating_sub(static_shared));
    if want > func_max {
        let allowed = if optin > 0 {
            format!(
                "; device {d} allows up to {} bytes",
                optin.saturating_sub(static_shared)
            )
        } else {
            String::new()
        };
        return Some(finding(
            LaunchCheck::SharedMemory,
            func_max,
            want,
            format!(
                "{want} bytes of dynamic shared memory per block, over this kernel's limit of \
                 {func_max} bytes (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; {} KiB unless \
                 raised); call cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, \
                 {want}) before the launch (cudaFuncSetAttribute(kernel, \
                 cudaFuncAttributeMaxDynamicSharedMemorySize, {want}) in the runtime API){allowed}",
                default / 1024
            ),
        ));
    }
    None
}

fn check_cluster(
    grid: [u32; 3],
    cluster: [u32; 3],
    dev: &DeviceLimits,
    func: &FuncLimits,
) -> Option<LaunchFinding> {
    let d = dev.ordinal;
    let (major, minor) = dev.compute_capability;
    if major > 0 && major < 9 {
        return Some(finding(
            LaunchCheck::ClusterDim,
            0,
            cluster.iter().map(|&c| u64::from(c)).product(),
            format!(
                "cluster {}: thread-block clusters need compute capability 9.0 or newer and device \
                 {d} is {major}.{minor}; launch without CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION on \
                 this device",
                dims(cluster)
            ),
        ));
    }
    if let Some(axis) = cluster.iter().position(|&c| c == 0) {
        return Some(finding(
            LaunchCheck::ClusterDim,
            1,
            0,
            format!(
                "cluster {}: clusterDim.{} is 0; every cluster dimension must be at least 1",
                dims(cluster),
                AXES[axis]
            ),
        ));
    }
    for axis in 0..3 {
        let (g, c) = (grid[axis], cluster[axis]);
        if !g.is_multiple_of(c) {
            let up = u64::from(g).div_ceil(u64::from(c)) * u64::from(c);
            return Some(finding(
                LaunchCheck::ClusterDim,
                c.into(),
                g.into(),
                format!(
                    "grid {} is not a whole number of clusters {}: gridDim.{a} = {g} is not a \
                     multiple of clusterDim.{a} = {c}; make each grid dimension a multiple of the \
                     cluster's (e.g. gridDim.{a} = {up})",
                    dims(grid),
                    dims(cluster),
                    a = AXES[axis],
                ),
            ));
        }
    }
    let size: u64 = cluster.iter().map(|&c| u64::from(c)).product();
    let non_portable = func.non_portable_cluster == Some(true);
    let max = if non_portable {
        NON_PORTABLE_CLUSTER_BLOCKS
    } else {
        PORTABLE_CLUSTER_BLOCKS
    };
    if size > max {
        let fix = if non_portable {
            format!("use at most {max} blocks per cluster")
        } else {
            format!(
                "use at most {max} blocks per cluster, or set \
                 CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 1 on the kernel to allow up \
                 to {NON_PORTABLE_CLUSTER_BLOCKS} on compute capability 9.0"
            )
        };
        return Some(finding(
            LaunchCheck::ClusterDim,
            max,
            size,
            format!(
                "cluster {} = {size} blocks, over the {} maximum of {max} blocks per cluster; {fix}",
                dims(cluster),
                if non_portable { "non-portable" } else { "portable" }
            ),
        ));
    }
    None
}

/// What the driver says about the stream of a failed launch (`cuStreamGetCtx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// The legacy or per-thread default stream (handle 0, 0x1 or 0x2): it follows the
    /// current context.
    Default,
    /// A stream of the context with this handle.
    Owned(usize),
    /// A stream whose context has been destroyed (`CUDA_ERROR_CONTEXT_IS_DESTROYED`).
    Destroyed,
    /// Not a valid stream: `cuStreamGetCtx` failed with this code.
    Invalid(u32),
}

/// The context state of a failed launch, as the driver reports it after the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextFacts<'a> {
    /// The calling thread's current context (`cuCtxGetCurrent`), `None` for none.
    pub current: Option<usize>,
    /// `cuCtxGetDevice` reported the current context destroyed
    /// (`CUDA_ERROR_CONTEXT_IS_DESTROYED`).
    pub current_destroyed: bool,
    /// The stream handle the launch was given.
    pub stream: usize,
    /// What the stream is.
    pub stream_state: StreamState,
    /// For a destroyed context (the current one, or the stream's): how and where it ended,
    /// from the lifetime tracker ([`crate::lifetime::describe_end`]), when it saw the end.
    pub ended: Option<&'a str>,
}

/// The context fault behind a launch, if any: no current context, a destroyed context, or
/// a stream of another context.
pub fn check_context(c: &ContextFacts<'_>) -> Option<LaunchFinding> {
    let plain = |check, explanation| {
        Some(LaunchFinding {
            check,
            limit: None,
            requested: None,
            explanation,
        })
    };
    let Some(current) = c.current else {
        return plain(
            LaunchCheck::NoContext,
            "no CUDA context is current on this thread (cuCtxGetCurrent returns none); make one \
             current on every thread that launches: cuCtxSetCurrent or cuCtxPushCurrent with a \
             context from cuCtxCreate or cuDevicePrimaryCtxRetain (cudaSetDevice in the runtime \
             API)"
                .to_string(),
        );
    };
    if c.current_destroyed {
        let how = match c.ended {
            Some(e) => format!(": {e}"),
            None => " (cuCtxDestroy, or cuDevicePrimaryCtxRelease/Reset elsewhere in the process)"
                .to_string(),
        };
        return plain(
            LaunchCheck::DestroyedContext,
            format!(
                "the context current on this thread ({current:#x}) has been destroyed{how}; make a \
                 live context current before launching, and destroy a context only after every \
                 thread is done with it"
            ),
        );
    }
    let s = c.stream;
    match c.stream_state {
        StreamState::Default => None,
        StreamState::Owned(owner) if owner == current => None,
        StreamState::Owned(owner) => plain(
            LaunchCheck::StreamContext,
            format!(
                "stream {s:#x} belongs to context {owner:#x}, not to the context current on this \
                 thread ({current:#x}); a stream can only be used in its own context (and device): \
                 make {owner:#x} current before the launch (cuCtxSetCurrent, or cudaSetDevice to \
                 its device), or use a stream created in the current context"
            ),
        ),
        StreamState::Destroyed => {
            let which = match c.ended {
                Some(e) => format!("its context ended ({e}), and its streams with it"),
                None => "it belongs to a context that has been destroyed, and its streams with it"
                    .to_string(),
            };
            plain(
                LaunchCheck::DestroyedContext,
                format!(
                    "stream {s:#x} is gone: {which}; create the stream again in a live context"
                ),
            )
        }
        StreamState::Invalid(code) => plain(
            LaunchCheck::StreamContext,
            format!(
                "stream {s:#x} is not a valid stream (cuStreamGetCtx returns {code}): it was \
                 destroyed or never created; pass a stream from cuStreamCreate that is still alive"
            ),
        ),
    }
}

/// Launch results a diagnosis can explain: `CUDA_ERROR_INVALID_VALUE` (1),
/// `CUDA_ERROR_INVALID_CONTEXT` (201), `CUDA_ERROR_INVALID_HANDLE` (400),
/// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` (701), `CUDA_ERROR_CONTEXT_IS_DESTROYED` (709),
/// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` (720), `CUDA_ERROR_INVALID_CLUSTER_SIZE` (912)
/// (cuda.h). Others (sticky kernel errors, teardown) keep the plain failure report.
pub const EXPLAINED: [u32; 7] = [1, 201, 400, 701, 709, 720, 912];

/// Whether a launch that failed with `code` is one [`diagnose`] can explain.
pub fn explains(code: u32) -> bool {
    EXPLAINED.contains(&code)
}

/// Whether `stream` is a default stream: the legacy default stream (0, or
/// `CU_STREAM_LEGACY` 0x1) or the per-thread one (`CU_STREAM_PER_THREAD` 0x2, cuda.h). A
/// default stream follows the current context, so it cannot belong to another one.
pub fn is_default_stream(stream: usize) -> bool {
    stream <= 0x2
}

/// What the diagnosis of a failed launch asks the driver and the lifetime tracker, gathered
/// by the shim after the failure. [`diagnose`] asks each fact at most once, and only those
/// its decision needs: no kernel limits when the launch failed for want of a live context,
/// no stream look-up for a default stream, so the shim never queries a handle it has no
/// reason to.
pub trait LaunchFacts {
    /// The current context's device (`cuCtxGetDevice`): its ordinal, or the `CUresult` the
    /// query failed with.
    fn device(&mut self) -> Result<i32, u32>;
    /// The calling thread's current context (`cuCtxGetCurrent`), `None` for none.
    fn current(&mut self) -> Option<usize>;
    /// How and where the context `ctx` ended, when the lifetime tracker saw it end
    /// ([`crate::lifetime::describe_end`]).
    fn context_end(&mut self, ctx: usize) -> Option<String>;
    /// What the launch's stream is (`cuStreamGetCtx`); asked only for a stream that is not
    /// a default stream.
    fn stream_state(&mut self) -> StreamState;
    /// How and where the context of the launch's (destroyed) stream ended, from the
    /// lifetime tracker.
    fn stream_context_end(&mut self) -> Option<String>;
    /// The limits of the device with ordinal `dev` (`cuDeviceGetAttribute`).
    fn device_limits(&mut self, dev: i32) -> DeviceLimits;
    /// The kernel's own limits (`cuFuncGetAttribute`).
    fn func_limits(&mut self) -> FuncLimits;
    /// The kernel's resident blocks per multiprocessor at `threads` per block and
    /// `shared_mem` bytes of dynamic shared memory
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`); asked only for cooperative launches.
    fn occupancy(&mut self, threads: u64, shared_mem: u32) -> Option<u32>;
}

/// Why a launch failed, as [`diagnose`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The finding to report, `None` when nothing names the failure (the plain failure
    /// report then stands).
    pub finding: Option<LaunchFinding>,
    /// The device of the current context, when the driver gave one.
    pub device: Option<i32>,
}

/// Facts asked once: the current context is needed by two branches of the decision.
struct Asked<'f, F> {
    facts: &'f mut F,
    current: Option<Option<usize>>,
}

impl<F: LaunchFacts> Asked<'_, F> {
    fn current(&mut self) -> Option<usize> {
        match self.current {
            Some(c) => c,
            None => *self.current.insert(self.facts.current()),
        }
    }
}

/// The first limit `req` breaks on device `dev`, asking `facts` for the device's and the
/// kernel's limits (and the occupancy for a cooperative launch). Used after a failure and,
/// with `SEEDANCE_VALIDATE=pre`, before the call.
pub fn check_limits(
    req: &LaunchRequest,
    dev: i32,
    facts: &mut impl LaunchFacts,
) -> Option<LaunchFinding> {
    let limits = facts.device_limits(dev);
    let func = facts.func_limits();
    let coop = if req.cooperative {
        facts.occupancy(req.threads(), req.shared_mem)
    } else {
        None
    };
    check_launch(req, &limits, &func, coop)
}

/// What the check made before a launch with `SEEDANCE_VALIDATE=pre` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// No usable current context (`cuCtxGetDevice` failed): forward the launch, the
    /// driver's own answer is the right one. No limit was read.
    NoContext,
    /// Within every limit checked on this device: forward the launch.
    Within,
    /// The launch breaks a limit on device `dev`: refuse it with
    /// [`LaunchCheck::driver_code`] of the finding.
    Refuse(i32, LaunchFinding),
}

/// The check made before a launch of `req` with `SEEDANCE_VALIDATE=pre`.
pub fn check_before(req: &LaunchRequest, facts: &mut impl LaunchFacts) -> Before {
    let Ok(dev) = facts.device() else {
        return Before::NoContext;
    };
    match check_limits(req, dev, facts) {
        Some(finding) => Before::Refuse(dev, finding),
        None => Before::Within,
    }
}

/// Why a launch of `req` on `stream` failed with `code` (one of [`EXPLAINED`]), from the
/// facts the shim gathers after the failure, and `driver_message`, what the driver logged
/// about it (if anything).
///
/// The decision, in order:
/// 1. No usable current context (`cuCtxGetDevice` fails): [`check_context`] on the current
///    context (destroyed when the query said `CUDA_ERROR_CONTEXT_IS_DESTROYED`, with how it
///    ended), the stream and, for a destroyed stream, how its context ended.
/// 2. `CUDA_ERROR_CONTEXT_IS_DESTROYED` with a context the tracker saw end: the destroyed
///    context. After a primary context reset the driver still answers `cuCtxGetDevice` for
///    the handle and only the launch says 709 (measured: H200, driver 580.159).
/// 3. 201, 400 or 709 on a stream that is not a default stream: the stream's context, if it
///    is not the current one or is gone.
/// 4. Otherwise the launch's shape against the device's and the kernel's limits
///    ([`check_limits`]).
///
/// When none of these names the failure and the driver logged a message, the finding is
/// [`LaunchCheck::Unknown`] quoting it.
pub fn diagnose(
    code: u32,
    req: &LaunchRequest,
    stream: usize,
    driver_message: Option<&str>,
    facts: &mut impl LaunchFacts,
) -> Diagnosis {
    let (finding, device) = decide(code, req, stream, facts);
    let finding = finding.or_else(|| {
        driver_message.map(|m| LaunchFinding {
            check: LaunchCheck::Unknown,
            limit: None,
            requested: None,
            explanation: format!(
                "the launch is within every limit the shim checks; the driver says: {m}"
            ),
        })
    });
    Diagnosis { finding, device }
}

fn decide<F: LaunchFacts>(
    code: u32,
    req: &LaunchRequest,
    stream: usize,
    facts: &mut F,
) -> (Option<LaunchFinding>, Option<i32>) {
    const DESTROYED: u32 = 709;
    let device = facts.device();
    let mut f = Asked {
        facts,
        current: None,
    };
    let dev = match device {
        Ok(dev) => dev,
        Err(err) => {
            let current = f.current();
            let current_destroyed = err == DESTROYED;
            let stream_state = if is_default_stream(stream) {
                StreamState::Default
            } else {
                f.facts.stream_state()
            };
            let ended = if current_destroyed {
                current.and_then(|c| f.facts.context_end(c))
            } else if stream_state == StreamState::Destroyed {
                f.facts.stream_context_end()
            } else {
                None
            };
            let facts = ContextFacts {
                current,
                current_destroyed,
                stream,
                stream_state,
                ended: ended.as_deref(),
            };
            return (check_context(&facts), None);
        }
    };
    if code == DESTROYED {
        let current = f.current();
        let ended = current.and_then(|c| f.facts.context_end(c));
        if ended.is_some() {
            let facts = ContextFacts {
                current,
                current_destroyed: true,
                stream,
                stream_state: StreamState::Default,
                ended: ended.as_deref(),
            };
            return (check_context(&facts), Some(dev));
        }
    }
    if !is_default_stream(stream) && matches!(code, 201 | 400 | DESTROYED) {
        let stream_state = f.facts.stream_state();
        let ended = (stream_state == StreamState::Destroyed)
            .then(|| f.facts.stream_context_end())
            .flatten();
        let facts = ContextFacts {
            current: f.current(),
            current_destroyed: false,
            stream,
            stream_state,
            ended: ended.as_deref(),
        };
        if let Some(finding) = check_context(&facts) {
            return (Some(finding), Some(dev));
        }
    }
    (check_limits(req, dev, f.facts), Some(dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> DeviceLimits {
        DeviceLimits {
            ordinal: 0,
            max_threads_per_block: 1024,
            max_block: [1024, 1024, 64],
            max_grid: [2_147_483_647, 65535, 65535],
            shared_per_block: 49152,
            shared_per_block_optin: 232_448,
            sm_count: 132,
            compute_capability: (9, 0),
        }
    }

    fn plain_func() -> FuncLimits {
        FuncLimits {
            max_threads_per_block: Some(1024),
            static_shared: Some(0),
            num_regs: Some(32),
            max_dynamic_shared: Some(49152),
            non_portable_cluster: Some(false),
        }
    }

    fn req(grid: [u32; 3], block: [u32; 3], shared_mem: u32) -> LaunchRequest {
        LaunchRequest {
            grid,
            block,
            shared_mem,
            cluster: None,
            cooperative: false,
        }
    }

    fn check(r: &LaunchRequest) -> Option<LaunchFinding> {
        check_launch(r, &h200(), &plain_func(), None)
    }

    #[test]
    fn within_limits_is_none() {
        assert_eq!(check(&req([1, 1, 1], [1024, 1, 1], 49152)), None);
        assert_eq!(
            check(&req([2_147_483_647, 65535, 65535], [32, 32, 1], 0)),
            None
        );
        assert_eq!(check(&req([1, 1, 1], [1, 1, 64], 0)), None);
    }

    #[test]
    fn threads_per_block_names_limit_and_a_smaller_block() {
        let f = check(&req([1, 1, 1], [32, 33, 1], 0)).unwrap();
        assert_eq!(f.check, LaunchCheck::ThreadsPerBlock);
        assert_eq!((f.limit, f.requested), (Some(1024), Some(1056)));
        assert_eq!(
            f.explanation,
            "block (32,33,1) = 1056 threads, over device 0's limit of 1024 threads per block \
             (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK); use at most 1024 threads per block, e.g. \
             block (32,32,1)"
        );
        assert_eq!(f.check.driver_code(), 1);
        let f = check(&req([1, 1, 1], [1024, 2, 1], 0)).unwrap();
        assert!(
            f.explanation.ends_with("e.g. block (1024,1,1)"),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn block_and_grid_dims() {
        let f = check(&req([1, 1, 1], [2048, 1, 1], 0)).unwrap();
        assert_eq!(f.check, LaunchCheck::BlockDim);
        assert_eq!(
            f.explanation,
            "block (2048,1,1): blockDim.x = 2048 is over device 0's limit of 1024 \
             (CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X); use at most 1024 threads in x"
        );
        let f = check(&req([1, 1, 1], [1, 1, 65], 0)).unwrap();
        assert_eq!(
            (f.check, f.limit, f.requested),
            (LaunchCheck::BlockDim, Some(64), Some(65))
        );
        let f = check(&req([1, 65536, 1], [32, 1, 1], 0)).unwrap();
        assert_eq!(f.check, LaunchCheck::GridDim);
        assert_eq!((f.limit, f.requested), (Some(65535), Some(65536)));
        assert_eq!(
            f.explanation,
            "grid (1,65536,1): gridDim.y = 65536 is over device 0's limit of 65535 \
             (CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y); put the long extent in x (limit 2147483647) or \
             loop over it inside the kernel"
        );
        let f = check(&req([2_147_483_648, 1, 1], [32, 1, 1], 0)).unwrap();
        assert!(
            f.explanation.ends_with("(a grid-stride loop)"),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn zero_dims() {
        let f = check(&req([0, 1, 1], [32, 1, 1], 0)).unwrap();
        assert_eq!(f.check, LaunchCheck::ZeroDim);
        assert_eq!(
            f.explanation,
            "grid (0,1,1) block (32,1,1): gridDim.x is 0; every grid and block dimension must be \
             at least 1 (a 0 usually comes from an empty input: skip the launch when there is no \
             work)"
        );
        let f = check(&req([1, 1, 1], [32, 1, 0], 0)).unwrap();
        assert!(f.explanation.contains("blockDim.z is 0"));
    }

    #[test]
    fn launch_bounds_limited_kernel_is_invalid_value() {
        // Measured on an H200: __launch_bounds__(256) with 10 registers, block 512 -> 1.
        let func = FuncLimits {
            max_threads_per_block: Some(256),
            num_regs: Some(10),
            ..plain_func()
        };
        let f = check_launch(&req([1, 1, 1], [512, 1, 1], 0), &h200(), &func, None).unwrap();
        assert_eq!(f.check, LaunchCheck::LaunchBounds);
        assert_eq!(f.check.driver_code(), 1);
        assert_eq!(
            f.explanation,
            "block (512,1,1) = 512 threads, over this kernel's own limit of 256 threads per \
             block, compiled in with __launch_bounds__(256) (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); \
             launch it with at most 256 threads per block, or raise the bound in the kernel's source"
        );
        // 192 registers x 1024 threads do not fit 64 Ki registers: register-limited -> 701.
        let heavy = FuncLimits {
            num_regs: Some(192),
            ..func
        };
        let f = check_launch(&req([1, 1, 1], [288, 1, 1], 0), &h200(), &heavy, None).unwrap();
        assert_eq!(f.check.driver_code(), 701);
    }

    #[test]
    fn register_limited_kernel() {
        let func = FuncLimits {
            max_threads_per_block: Some(256),
            num_regs: Some(248),
            ..plain_func()
        };
        let f = check_launch(&req([1, 1, 1], [512, 1, 1], 0), &h200(), &func, None).unwrap();
        assert_eq!(f.check, LaunchCheck::FuncMaxThreads);
        assert_eq!(f.check.driver_code(), 701);
        assert_eq!((f.limit, f.requested), (Some(256), Some(512)));
        assert_eq!(
            f.explanation,
            "block (512,1,1) = 512 threads, over this kernel's own limit of 256 threads per block \
             (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: it uses 248 registers per thread); launch \
             it with at most 256 threads per block, or build it with __launch_bounds__(512) or \
             -maxrregcount so that it uses fewer registers"
        );
        assert_eq!(
            check_launch(&req([1, 1, 1], [256, 1, 1], 0), &h200(), &func, None),
            None
        );
    }

    #[test]
    fn shared_memory_default_func_and_optin() {
        let f = check(&req([1, 1, 1], [32, 1, 1], 65536)).unwrap();
        assert_eq!(f.check, LaunchCheck::SharedMemory);
        assert_eq!((f.limit, f.requested), (Some(49152), Some(65536)));
        assert_eq!(
            f.explanation,
            "65536 bytes of dynamic shared memory per block, over this kernel's limit of 49152 \
             bytes (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; 48 KiB unless raised); call \
             cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536) before \
             the launch (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, \
             65536) in the runtime API); device 0 allows up to 232448 bytes"
        );
        // Raised: fine up to the raised value.
        let raised = FuncLimits {
            max_dynamic_shared: Some(65536),
            ..plain_func()
        };
        assert_eq!(
            check_launch(&req([1, 1, 1], [32, 1, 1], 65536), &h200(), &raised, None),
            None
        );
        // Over the opt-in maximum, counting static shared memory.
        let stat = FuncLimits {
            static_shared: Some(1024),
            max_dynamic_shared: Some(231_424),
            ..plain_func()
        };
        let f = check_launch(&req([1, 1, 1], [32, 1, 1], 232_000), &h200(), &stat, None).unwrap();
        assert_eq!((f.limit, f.requested), (Some(231_424), Some(232_000)));
        assert!(f
            .explanation
            .contains("exceed device 0's maximum of 232448 bytes per block"));
        // Unknown function limits: the 48 KiB default applies.
        let f = check_launch(
            &req([1, 1, 1], [32, 1, 1], 50_000),
            &h200(),
            &FuncLimits::default(),
            None,
        )
        .unwrap();
        assert_eq!(f.limit, Some(49152));
    }

    #[test]
    fn clusters() {
        let mut r = req([8, 1, 1], [128, 1, 1], 0);
        r.cluster = Some([3, 1, 1]);
        let f = check(&r).unwrap();
        assert_eq!(f.check, LaunchCheck::ClusterDim);
        assert_eq!(f.check.driver_code(), 912);
        assert_eq!(
            f.explanation,
            "grid (8,1,1) is not a whole number of clusters (3,1,1): gridDim.x = 8 is not a \
             multiple of clusterDim.x = 3; make each grid dimension a multiple of the cluster's \
             (e.g. gridDim.x = 9)"
        );
        r.grid = [16, 4, 1];
        r.cluster = Some([4, 4, 1]);
        let f = check(&r).unwrap();
        assert_eq!((f.limit, f.requested), (Some(8), Some(16)));
        assert!(f.explanation.contains("portable maximum of 8"));
        let np = FuncLimits {
            non_portable_cluster: Some(true),
            ..plain_func()
        };
        assert_eq!(check_launch(&r, &h200(), &np, None), None);
        r.cluster = Some([2, 2, 1]);
        assert_eq!(check(&r), None);
        r.cluster = Some([0, 1, 1]);
        assert!(check(&r).unwrap().explanation.contains("clusterDim.x is 0"));
        let ampere = DeviceLimits {
            compute_capability: (8, 0),
            ..h200()
        };
        r.cluster = Some([2, 1, 1]);
        let f = check_launch(&r, &ampere, &plain_func(), None).unwrap();
        assert!(
            f.explanation.contains("device 0 is 8.0"),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn cooperative_grids() {
        let mut r = req([300, 1, 1], [1024, 1, 1], 0);
        r.cooperative = true;
        let f = check_launch(&r, &h200(), &plain_func(), Some(2)).unwrap();
        assert_eq!(f.check, LaunchCheck::CooperativeGrid);
        assert_eq!(f.check.driver_code(), 720);
        assert_eq!((f.limit, f.requested), (Some(264), Some(300)));
        assert_eq!(
            f.explanation,
            "cooperative launch of 300 blocks (grid (300,1,1)), but at most 264 can be resident at \
             once on device 0 (2 per SM for this kernel with 1024 threads and 0 bytes of dynamic \
             shared memory, cuOccupancyMaxActiveBlocksPerMultiprocessor, x 132 SMs); launch at \
             most 264 blocks and loop over the rest of the work inside the kernel"
        );
        r.grid = [264, 1, 1];
        assert_eq!(check_launch(&r, &h200(), &plain_func(), Some(2)), None);
        let f = check_launch(&r, &h200(), &plain_func(), Some(0)).unwrap();
        assert!(f.explanation.contains("cannot be resident at all"));
        // Unknown occupancy: not judged.
        assert_eq!(check_launch(&r, &h200(), &plain_func(), None), None);
        r.cooperative = false;
        assert_eq!(check_launch(&r, &h200(), &plain_func(), Some(0)), None);
    }

    #[test]
    fn unknown_limits_are_not_checked() {
        let unknown = DeviceLimits::default();
        assert_eq!(
            check_launch(
                &req([1, 1_000_000, 1], [4096, 1, 1], 0),
                &unknown,
                &FuncLimits::default(),
                None
            ),
            None
        );
    }

    #[test]
    fn contexts() {
        let base = ContextFacts {
            current: Some(0x10),
            current_destroyed: false,
            stream: 0,
            stream_state: StreamState::Default,
            ended: None,
        };
        assert_eq!(check_context(&base), None);
        let f = check_context(&ContextFacts {
            current: None,
            ..base
        })
        .unwrap();
        assert_eq!(f.check, LaunchCheck::NoContext);
        assert_eq!(f.limit, None);
        let f = check_context(&ContextFacts {
            current_destroyed: true,
            ..base
        })
        .unwrap();
        assert_eq!(f.check, LaunchCheck::DestroyedContext);
        assert!(f.explanation.starts_with(
            "the context current on this thread (0x10) has been destroyed (cuCtxDestroy, or"
        ));
        let site = "context 0x10 (device 0, generation 1, made by cuCtxCreate_v2 on thread 7 \
                    (lifetime call #1)) was destroyed by cuCtxDestroy_v2 on thread 8 (lifetime \
                    call #4)";
        let f = check_context(&ContextFacts {
            current_destroyed: true,
            ended: Some(site),
            ..base
        })
        .unwrap();
        assert_eq!(
            f.explanation,
            format!(
                "the context current on this thread (0x10) has been destroyed: {site}; make a live \
                 context current before launching, and destroy a context only after every thread \
                 is done with it"
            )
        );
        let other = ContextFacts {
            stream: 0x99,
            stream_state: StreamState::Owned(0x20),
            ..base
        };
        let f = check_context(&other).unwrap();
        assert_eq!(f.check, LaunchCheck::StreamContext);
        assert!(f.explanation.starts_with(
            "stream 0x99 belongs to context 0x20, not to the context current on this thread (0x10)"
        ));
        assert_eq!(
            check_context(&ContextFacts {
                stream_state: StreamState::Owned(0x10),
                ..other
            }),
            None
        );
        let f = check_context(&ContextFacts {
            stream_state: StreamState::Destroyed,
            ..other
        })
        .unwrap();
        assert_eq!(f.check, LaunchCheck::DestroyedContext);
        assert_eq!(
            f.explanation,
            "stream 0x99 is gone: it belongs to a context that has been destroyed, and its streams \
             with it; create the stream again in a live context"
        );
        let f = check_context(&ContextFacts {
            stream_state: StreamState::Destroyed,
            ended: Some(site),
            ..other
        })
        .unwrap();
        assert_eq!(
            f.explanation,
            format!(
                "stream 0x99 is gone: its context ended ({site}), and its streams with it; create \
                 the stream again in a live context"
            )
        );
        let f = check_context(&ContextFacts {
            stream_state: StreamState::Invalid(400),
            ..other
        })
        .unwrap();
        assert!(f.explanation.contains("cuStreamGetCtx returns 400"));
    }

    #[test]
    fn names_and_codes() {
        let all = [
            (LaunchCheck::ZeroDim, "zero_dim", 1),
            (LaunchCheck::BlockDim, "block_dim", 1),
            (LaunchCheck::ThreadsPerBlock, "threads_per_block", 1),
            (LaunchCheck::FuncMaxThreads, "func_max_threads", 701),
            (LaunchCheck::LaunchBounds, "launch_bounds", 1),
            (LaunchCheck::GridDim, "grid_dim", 1),
            (LaunchCheck::SharedMemory, "shared_memory", 1),
            (LaunchCheck::ClusterDim, "cluster_dim", 912),
            (LaunchCheck::CooperativeGrid, "cooperative_grid", 720),
            (LaunchCheck::NoContext, "no_context", 201),
            (LaunchCheck::StreamContext, "stream_context", 400),
            (LaunchCheck::DestroyedContext, "destroyed_context", 709),
            (LaunchCheck::Unknown, "unknown", 1),
        ];
        for (c, name, code) in all {
            assert_eq!((c.as_str(), c.driver_code()), (name, code));
        }
    }

    /// Facts for [`diagnose`], recording which were asked.
    #[derive(Default)]
    struct Fake {
        device: Option<Result<i32, u32>>,
        current: Option<usize>,
        ended: Option<(usize, &'static str)>,
        stream_state: Option<StreamState>,
        stream_ended: Option<&'static str>,
        func: FuncLimits,
        occupancy: Option<u32>,
        asked: Vec<&'static str>,
    }

    impl LaunchFacts for Fake {
        fn device(&mut self) -> Result<i32, u32> {
            self.asked.push("device");
            self.device.expect("device asked")
        }
        fn current(&mut self) -> Option<usize> {
            self.asked.push("current");
            self.current
        }
        fn context_end(&mut self, ctx: usize) -> Option<String> {
            self.asked.push("context_end");
            self.ended
                .filter(|&(c, _)| c == ctx)
                .map(|(_, e)| e.to_string())
        }
        fn stream_state(&mut self) -> StreamState {
            self.asked.push("stream_state");
            self.stream_state.expect("stream state asked")
        }
        fn stream_context_end(&mut self) -> Option<String> {
            self.asked.push("stream_context_end");
            self.stream_ended.map(str::to_string)
        }
        fn device_limits(&mut self, dev: i32) -> DeviceLimits {
            self.asked.push("device_limits");
            DeviceLimits {
                ordinal: dev,
                ..h200()
            }
        }
        fn func_limits(&mut self) -> FuncLimits {
            self.asked.push("func_limits");
            self.func
        }
        fn occupancy(&mut self, _threads: u64, _shared_mem: u32) -> Option<u32> {
            self.asked.push("occupancy");
            self.occupancy
        }
    }

    fn live(dev: i32) -> Fake {
        Fake {
            device: Some(Ok(dev)),
            current: Some(0xc0),
            func: plain_func(),
            ..Fake::default()
        }
    }

    const STREAM: usize = 0x5000;

    #[test]
    fn explained_codes_and_default_streams() {
        for c in [1, 201, 400, 701, 709, 720, 912] {
            assert!(explains(c), "{c}");
        }
        for c in [0, 2, 4, 700, 719, 999] {
            assert!(!explains(c), "{c}");
        }
        assert!(is_default_stream(0) && is_default_stream(1) && is_default_stream(2));
        assert!(!is_default_stream(3) && !is_default_stream(STREAM));
    }

    #[test]
    fn diagnose_without_a_current_context() {
        let mut f = Fake {
            device: Some(Err(201)),
            ..Fake::default()
        };
        let d = diagnose(201, &req([1, 1, 1], [32, 1, 1], 0), 0, None, &mut f);
        assert_eq!(d.device, None);
        assert_eq!(d.finding.unwrap().check, LaunchCheck::NoContext);
        // A default stream is not looked up, and no limits are read without a context.
        assert_eq!(f.asked, ["device", "current"]);
    }

    #[test]
    fn diagnose_a_destroyed_current_context_says_how_it_ended() {
        let mut f = Fake {
            device: Some(Err(709)),
            current: Some(0xc0),
            ended: Some((0xc0, "cuCtxDestroy_v2 on thread 7")),
            stream_state: Some(StreamState::Destroyed),
            ..Fake::default()
        };
        let d = diagnose(709, &req([1, 1, 1], [32, 1, 1], 0), STREAM, None, &mut f);
        let finding = d.finding.unwrap();
        assert_eq!(finding.check, LaunchCheck::DestroyedContext);
        assert!(finding
            .explanation
            .contains("(0xc0) has been destroyed: cuCtxDestroy_v2"));
        // The current context's end is asked; the stream's is not needed.
        assert_eq!(
            f.asked,
            ["device", "current", "stream_state", "context_end"]
        );
    }

    #[test]
    fn diagnose_a_destroyed_stream_without_a_usable_context() {
        let mut f = Fake {
            device: Some(Err(201)),
            current: Some(0xc0),
            stream_state: Some(StreamState::Destroyed),
            stream_ended: Some("cuCtxDestroy_v2 of 0xd0"),
            ..Fake::default()
        };
        let d = diagnose(709, &req([1, 1, 1], [32, 1, 1], 0), STREAM, None, &mut f);
        let finding = d.finding.unwrap();
        assert_eq!(finding.check, LaunchCheck::DestroyedContext);
        assert!(finding
            .explanation
            .contains("its context ended (cuCtxDestroy_v2 of 0xd0)"));
        assert_eq!(
            f.asked,
            ["device", "current", "stream_state", "stream_context_end"]
        );
    }

    #[test]
    fn diagnose_709_after_a_reset_the_driver_still_answers_for() {
        let mut f = Fake {
            ended: Some((0xc0, "cuDevicePrimaryCtxReset_v2 of device 0")),
            ..live(0)
        };
        let d = diagnose(709, &req([1, 1, 1], [32, 1, 1], 0), 0, None, &mut f);
        assert_eq!(d.device, Some(0));
        let finding = d.finding.unwrap();
        assert_eq!(finding.check, LaunchCheck::DestroyedContext);
        assert!(finding.explanation.contains("cuDevicePrimaryCtxReset_v2"));
        assert_eq!(f.asked, ["device", "current", "context_end"]);
    }

    #[test]
    fn diagnose_a_709_the_tracker_did_not_see_goes_on_to_the_stream_then_the_limits() {
        // The current context is asked once although two branches need it.
        let mut f = Fake {
            stream_state: Some(StreamState::Owned(0xc0)),
            ..live(1)
        };
        let d = diagnose(709, &req([1, 1, 1], [32, 1, 1], 0), STREAM, None, &mut f);
        assert_eq!(
            d,
            Diagnosis {
                finding: None,
                device: Some(1)
            }
        );
        assert_eq!(
            f.asked,
            [
                "device",
                "current",
                "context_end",
                "stream_state",
                "device_limits",
                "func_limits"
            ]
        );
    }

    #[test]
    fn diagnose_a_stream_of_another_context() {
        let mut f = Fake {
            stream_state: Some(StreamState::Owned(0xd0)),
            ..live(0)
        };
        let d = diagnose(400, &req([1, 1, 1], [32, 1, 1], 0), STREAM, None, &mut f);
        let finding = d.finding.unwrap();
        assert_eq!(finding.check, LaunchCheck::StreamContext);
        assert!(finding.explanation.contains("belongs to context 0xd0"));
        assert_eq!(f.asked, ["device", "stream_state", "current"]);
        // An invalid stream handle.
        let mut f = Fake {
            stream_state: Some(StreamState::Invalid(400)),
            ..live(0)
        };
        let d = diagnose(400, &req([1, 1, 1], [32, 1, 1], 0), STREAM, None, &mut f);
        assert!(d
            .finding
            .unwrap()
            .explanation
            .contains("is not a valid stream"));
    }

    #[test]
    fn diagnose_a_limit_without_looking_at_the_stream() {
        let mut f = live(0);
        let d = diagnose(1, &req([1, 1, 1], [32, 33, 1], 0), STREAM, None, &mut f);
        assert_eq!(d.device, Some(0));
        assert_eq!(d.finding.unwrap().check, LaunchCheck::ThreadsPerBlock);
        // Code 1 is about the shape: no context or stream queries.
        assert_eq!(f.asked, ["device", "device_limits", "func_limits"]);
        // A default stream with 201 goes straight to the limits too.
        let mut f = live(0);
        diagnose(201, &req([1, 1, 1], [32, 1, 1], 0), 0, None, &mut f);
        assert_eq!(f.asked, ["device", "device_limits", "func_limits"]);
    }

    #[test]
    fn diagnose_asks_occupancy_only_for_a_cooperative_launch() {
        let mut r = req([1000, 1, 1], [1024, 1, 1], 0);
        r.cooperative = true;
        let mut f = Fake {
            occupancy: Some(2),
            ..live(0)
        };
        let d = diagnose(720, &r, 0, None, &mut f);
        assert_eq!(d.finding.unwrap().check, LaunchCheck::CooperativeGrid);
        assert_eq!(
            f.asked,
            ["device", "device_limits", "func_limits", "occupancy"]
        );
    }

    #[test]
    fn diagnose_falls_back_to_the_drivers_message() {
        let r = req([1, 1, 1], [32, 1, 1], 0);
        let d = diagnose(1, &r, 0, Some("bad parameter"), &mut live(0));
        let finding = d.finding.unwrap();
        assert_eq!(finding.check, LaunchCheck::Unknown);
        assert_eq!((finding.limit, finding.requested), (None, None));
        assert_eq!(
            finding.explanation,
            "the launch is within every limit the shim checks; the driver says: bad parameter"
        );
        // A finding of the shim's own wins over the message; without either, nothing.
        let d = diagnose(
            1,
            &req([0, 1, 1], [32, 1, 1], 0),
            0,
            Some("x"),
            &mut live(0),
        );
        assert_eq!(d.finding.unwrap().check, LaunchCheck::ZeroDim);
        assert_eq!(diagnose(1, &r, 0, None, &mut live(0)).finding, None);
    }

    #[test]
    fn check_before_forwards_without_a_context() {
        let r = req([1, 1, 1], [32, 33, 1], 0);
        let mut f = Fake {
            device: Some(Err(201)),
            ..Fake::default()
        };
        assert_eq!(check_before(&r, &mut f), Before::NoContext);
        assert_eq!(f.asked, ["device"]);
        let Before::Refuse(dev, finding) = check_before(&r, &mut live(3)) else {
            panic!("not refused");
        };
        assert_eq!(dev, 3);
        assert_eq!(finding.check, LaunchCheck::ThreadsPerBlock);
        assert!(finding.explanation.contains("device 3's limit"));
        assert_eq!(
            check_before(&req([1, 1, 1], [32, 1, 1], 0), &mut live(0)),
            Before::Within
        );
    }
}
