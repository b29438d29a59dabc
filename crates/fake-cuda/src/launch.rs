//! Launch-configuration checks, as the driver does them before it queues a kernel, and the
//! fake's model of kernels (function handles) and occupancy.
//!
//! Kernels are never loaded: any non-null `CUfunction` value is a kernel. A kernel's
//! attributes ([`FuncLimits`]) are the device's defaults — 1024 threads per block, 32
//! registers per thread, no static shared memory, 48 KiB of dynamic shared memory — except:
//!
//! * handles `>= 0x2000` ([`REGISTER_LIMITED_BASE`]) are register-limited kernels when
//!   `FAKE_CUDA_FUNC_MAX_THREADS=<threads>` is set: their
//!   `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` is that value and their register count is
//!   `min(255, 65536 / threads)` rounded down to a multiple of 8; a launch with more threads
//!   per block fails with `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` (701), as on a real device;
//! * `cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, n)` raises
//!   (or lowers) a kernel's dynamic shared memory limit, up to the device's opt-in maximum
//!   (attribute 97) minus its static shared memory; without it, more than 48 KiB is
//!   `CUDA_ERROR_INVALID_VALUE`;
//! * `cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)` allows
//!   clusters of up to 16 blocks instead of 8.
//!
//! Occupancy ([`occupancy`]) follows the Hopper per-SM limits: 2048 threads, 65536
//! registers, 233472 bytes (228 KiB) of shared memory with 1 KiB reserved per block, and 32
//! blocks. A cooperative launch larger than occupancy x SM count fails with
//! `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` (720). Cluster launches
//! (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`) need compute capability 9.0, non-zero cluster
//! dims that divide the grid, and at most 8 (16) blocks per cluster, else
//! `CUDA_ERROR_INVALID_CLUSTER_SIZE` (912).

use seedance_cuda::{attr, CUlaunchAttribute, CUlaunchConfig, CUresult};

use crate::device::Device;

/// First function handle value that `FAKE_CUDA_FUNC_MAX_THREADS` applies to.
pub const REGISTER_LIMITED_BASE: usize = 0x2000;
/// Registers per thread of an ordinary fake kernel.
pub const DEFAULT_REGS: u64 = 32;
/// Threads resident per SM (Hopper, `MAX_THREADS_PER_MULTIPROCESSOR`).
pub const THREADS_PER_SM: u64 = 2048;
/// Registers per SM (Hopper, `MAX_REGISTERS_PER_MULTIPROCESSOR`).
pub const REGS_PER_SM: u64 = 65536;
/// Shared memory per SM, bytes (Hopper, `MAX_SHARED_MEMORY_PER_MULTIPROCESSOR`).
pub const SHARED_PER_SM: u64 = 233_472;
/// Shared memory the driver reserves per block, bytes (`RESERVED_SHARED_MEMORY_PER_BLOCK`).
pub const RESERVED_SHARED_PER_BLOCK: u64 = 1024;
/// Blocks resident per SM (Hopper, `MAX_BLOCKS_PER_MULTIPROCESSOR`).
pub const BLOCKS_PER_SM: u64 = 32;
/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`.
pub const LAUNCH_ATTRIBUTE_COOPERATIVE: u32 = 2;
/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
pub const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: u32 = 4;

/// The limits a launch is checked against, from the device's (possibly overridden)
/// attributes. A missing or negative attribute counts as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchLimits {
    /// MAX_THREADS_PER_BLOCK: the product of the block dims.
    pub max_threads_per_block: u64,
    /// MAX_BLOCK_DIM_X/Y/Z.
    pub max_block: [u64; 3],
    /// MAX_GRID_DIM_X/Y/Z.
    pub max_grid: [u64; 3],
    /// MAX_SHARED_MEMORY_PER_BLOCK: dynamic shared memory without opting in, bytes.
    pub max_shared_mem: u64,
    /// MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: the most a kernel may opt in to, bytes.
    pub max_shared_mem_optin: u64,
    /// MULTIPROCESSOR_COUNT.
    pub sm_count: u64,
    /// COMPUTE_CAPABILITY_MAJOR.
    pub cc_major: i32,
}

impl LaunchLimits {
    /// The limits of `dev`.
    pub fn of(dev: &Device) -> LaunchLimits {
        let a = |k| dev.attribute(k).unwrap_or(0).max(0) as u64;
        LaunchLimits {
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
            max_shared_mem: a(attr::MAX_SHARED_MEMORY_PER_BLOCK),
            max_shared_mem_optin: a(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            sm_count: a(attr::MULTIPROCESSOR_COUNT),
            cc_major: dev.attribute(attr::COMPUTE_CAPABILITY_MAJOR).unwrap_or(0),
        }
    }
}

/// What one kernel allows (its `cuFuncGetAttribute` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuncLimits {
    /// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK.
    pub max_threads: u64,
    /// CU_FUNC_ATTRIBUTE_NUM_REGS.
    pub num_regs: u64,
    /// CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static shared memory).
    pub static_shared: u64,
    /// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
    pub max_dynamic_shared: u64,
    /// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
    pub non_portable_cluster: bool,
}

/// What `cuFuncSetAttribute` changed on one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FuncSettings {
    /// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, when set.
    pub max_dynamic_shared: Option<u64>,
    /// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
    pub non_portable_cluster: bool,
}

impl FuncLimits {
    /// The limits of the kernel with handle `f` on a device with `limits`, given the
    /// configured register-limited thread count and the kernel's settings.
    pub fn of(
        f: usize,
        limits: &LaunchLimits,
        register_limited: Option<u32>,
        settings: FuncSettings,
    ) -> FuncLimits {
        let (max_threads, num_regs) = match register_limited {
            Some(t) if f >= REGISTER_LIMITED_BASE => {
                let t = u64::from(t).min(limits.max_threads_per_block.max(1));
                (t, (REGS_PER_SM / t).min(255) & !7)
            }
            _ => (limits.max_threads_per_block, DEFAULT_REGS),
        };
        FuncLimits {
            max_threads,
            num_regs,
            static_shared: 0,
            max_dynamic_shared: settings.max_dynamic_shared.unwrap_or(limits.max_shared_mem),
            non_portable_cluster: settings.non_portable_cluster,
        }
    }

    /// An ordinary kernel on a device with `limits`.
    pub fn default_for(limits: &LaunchLimits) -> FuncLimits {
        FuncLimits::of(0x1000, limits, None, FuncSettings::default())
    }
}

/// One launch's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchDims {
    /// Grid dims in blocks.
    pub grid: [u32; 3],
    /// Block dims in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_mem: u32,
    /// Cluster dims (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`), if given.
    pub cluster: Option<[u32; 3]>,
    /// A cooperative launch.
    pub cooperative: bool,
}

impl LaunchDims {
    /// The shape a `CUlaunchConfig` describes, without its attributes.
    pub fn from_config(c: &CUlaunchConfig) -> LaunchDims {
        LaunchDims {
            grid: [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
            block: [c.block_dim_x, c.block_dim_y, c.block_dim_z],
            shared_mem: c.shared_mem_bytes,
            cluster: None,
            cooperative: false,
        }
    }

    /// Applies one launch attribute: `COOPERATIVE` (an `int` at the start of the value) and
    /// `CLUSTER_DIMENSION` (three `unsigned int`s); others are ignored.
    pub fn apply(&mut self, a: &CUlaunchAttribute) {
        // Little-endian: 32-bit word i of the value union.
        let word = |i: usize| (a.value[i / 2] >> (32 * (i % 2))) as u32;
        match a.id {
            LAUNCH_ATTRIBUTE_COOPERATIVE => self.cooperative = word(0) != 0,
            LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => self.cluster = Some([word(0), word(1), word(2)]),
            _ => {}
        }
    }

    fn threads(&self) -> u64 {
        self.block.iter().map(|&b| u64::from(b)).product()
    }
}

/// A refused launch: the code and the message the driver logs for it.
pub type Refusal = (CUresult, String);

fn refuse(code: CUresult, message: String) -> Result<(), Refusal> {
    Err((code, message))
}

/// `Err(CUDA_ERROR_INVALID_VALUE)` when any dim is 0, a block dim or the block's thread
/// count is over its limit, a grid dim is over its limit, or the dynamic shared memory is
/// over the kernel's limit; `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` when the block has more
/// threads than the kernel can run; `CUDA_ERROR_INVALID_CLUSTER_SIZE` for bad cluster dims;
/// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` for a cooperative grid that cannot be resident.
pub fn check(limits: &LaunchLimits, func: &FuncLimits, dims: &LaunchDims) -> Result<(), CUresult> {
    check_detailed(limits, func, dims).map_err(|(code, _)| code)
}

/// [`check`] with the message the fake logs through `cuLogsRegisterCallback`.
pub fn check_detailed(
    limits: &LaunchLimits,
    func: &FuncLimits,
    dims: &LaunchDims,
) -> Result<(), Refusal> {
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    if dims.grid.contains(&0) || dims.block.contains(&0) {
        return refuse(invalid, "launch with a zero grid or block dimension".into());
    }
    for i in 0..3 {
        if u64::from(dims.block[i]) > limits.max_block[i] {
            return refuse(invalid, format!("block dimension {i} is too large"));
        }
        if u64::from(dims.grid[i]) > limits.max_grid[i] {
            return refuse(invalid, format!("grid dimension {i} is too large"));
        }
    }
    let threads = dims.threads();
    if threads > limits.max_threads_per_block {
        return refuse(
            invalid,
            format!(
                "too many threads per block: {threads} > {}",
                limits.max_threads_per_block
            ),
        );
    }
    if threads > func.max_threads {
        return refuse(
            CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            format!(
                "too many resources requested for launch: {threads} threads x {} registers",
                func.num_regs
            ),
        );
    }
    if u64::from(dims.shared_mem) > func.max_dynamic_shared {
        return refuse(
            invalid,
            format!(
                "dynamic shared memory {} exceeds the function limit {}",
                dims.shared_mem, func.max_dynamic_shared
            ),
        );
    }
    if let Some(c) = dims.cluster {
        let bad = CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE;
        if limits.cc_major < 9 {
            return refuse(bad, "clusters are not supported on this device".into());
        }
        if c.contains(&0) || (0..3).any(|i| !dims.grid[i].is_multiple_of(c[i])) {
            return refuse(
                bad,
                "grid is not a multiple of the cluster dimensions".into(),
            );
        }
        let size: u64 = c.iter().map(|&x| u64::from(x)).product();
        let max = if func.non_portable_cluster { 16 } else { 8 };
        if size > max {
            return refuse(bad, format!("cluster size {size} exceeds {max}"));
        }
    }
    if dims.cooperative {
        let per_sm = occupancy(func, threads, u64::from(dims.shared_mem));
        let blocks: u64 = dims.grid.iter().map(|&g| u64::from(g)).product();
        if blocks > per_sm * limits.sm_count {
            return refuse(
                CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                format!(
                    "cooperative launch of {blocks} blocks exceeds {} co-resident blocks",
                    per_sm * limits.sm_count
                ),
            );
        }
    }
    Ok(())
}

/// Blocks of `func` resident per SM at `threads` threads and `dyn_shared` bytes of dynamic
/// shared memory per block (`cuOccupancyMaxActiveBlocksPerMultiprocessor`); 0 when the
/// block cannot run at all.
pub fn occupancy(func: &FuncLimits, threads: u64, dyn_shared: u64) -> u64 {
    if threads == 0 || threads > func.max_threads {
        return 0;
    }
    let by_threads = THREADS_PER_SM / threads;
    let by_regs = REGS_PER_SM / (func.num_regs.max(1) * threads.div_ceil(32) * 32);
    let smem = dyn_shared + func.static_shared;
    let by_smem = if smem == 0 {
        BLOCKS_PER_SM
    } else {
        SHARED_PER_SM / (smem + RESERVED_SHARED_PER_BLOCK)
    };
    BLOCKS_PER_SM.min(by_threads).min(by_regs).min(by_smem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PhysicalDevice;

    const OK: Result<(), CUresult> = Ok(());
    const BAD: Result<(), CUresult> = Err(CUresult::CUDA_ERROR_INVALID_VALUE);

    fn limits(overrides: &[(i32, i32)]) -> LaunchLimits {
        LaunchLimits::of(&Device::new(&PhysicalDevice {
            index: 0,
            total_mem: 1,
            free_mem: 1,
            attr_overrides: overrides.iter().copied().collect(),
            name: None,
            busy: false,
            ctx_oom: false,
        }))
    }

    fn dims(grid: [u32; 3], block: [u32; 3], shared_mem: u32) -> LaunchDims {
        LaunchDims {
            grid,
            block,
            shared_mem,
            ..LaunchDims::default()
        }
    }

    fn check_plain(l: &LaunchLimits, d: &LaunchDims) -> Result<(), CUresult> {
        check(l, &FuncLimits::default_for(l), d)
    }

    #[test]
    fn default_limits() {
        assert_eq!(
            limits(&[]),
            LaunchLimits {
                max_threads_per_block: 1024,
                max_block: [1024, 1024, 64],
                max_grid: [2_147_483_647, 65535, 65535],
                max_shared_mem: 49152,
                max_shared_mem_optin: 232_448,
                sm_count: 132,
                cc_major: 9,
            }
        );
    }

    #[test]
    fn accepts_limits_exactly() {
        let l = limits(&[]);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 1], 0)), OK);
        assert_eq!(
            check_plain(
                &l,
                &dims([2_147_483_647, 65535, 65535], [1024, 1, 1], 49152)
            ),
            OK
        );
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1024, 1], 0)), OK);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [16, 1, 64], 0)), OK);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [32, 32, 1], 0)), OK);
    }

    #[test]
    fn rejects_zero_dims() {
        let l = limits(&[]);
        for i in 0..3 {
            let mut g = [1, 1, 1];
            g[i] = 0;
            assert_eq!(check_plain(&l, &dims(g, [1, 1, 1], 0)), BAD);
            assert_eq!(check_plain(&l, &dims([1, 1, 1], g, 0)), BAD);
        }
    }

    #[test]
    fn rejects_over_limits() {
        let l = limits(&[]);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1025, 1, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1025, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 65], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [32, 33, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1024, 1024, 64], 0)), BAD);
        assert_eq!(
            check_plain(&l, &dims([2_147_483_648, 1, 1], [1, 1, 1], 0)),
            BAD
        );
        assert_eq!(check_plain(&l, &dims([1, 65536, 1], [1, 1, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 65536], [1, 1, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 1], 49153)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 1], u32::MAX)), BAD);
    }

    #[test]
    fn overridden_limits_apply() {
        let l = limits(&[
            (attr::MAX_THREADS_PER_BLOCK, 512),
            (attr::MAX_SHARED_MEMORY_PER_BLOCK, 1000),
        ]);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [512, 1, 1], 1000)), OK);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [513, 1, 1], 0)), BAD);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 1], 1001)), BAD);
        let l = limits(&[(attr::MAX_GRID_DIM_Y, -5)]);
        assert_eq!(l.max_grid[1], 0);
        assert_eq!(check_plain(&l, &dims([1, 1, 1], [1, 1, 1], 0)), BAD);
    }

    #[test]
    fn register_limited_kernels() {
        let l = limits(&[]);
        let f = FuncLimits::of(0x2000, &l, Some(256), FuncSettings::default());
        assert_eq!((f.max_threads, f.num_regs), (256, 248));
        let oor = Err(CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
        assert_eq!(check(&l, &f, &dims([1, 1, 1], [512, 1, 1], 0)), oor);
        assert_eq!(check(&l, &f, &dims([1, 1, 1], [256, 1, 1], 0)), OK);
        // Below the base, or without the variable, kernels are ordinary.
        let g = FuncLimits::of(0x1fff, &l, Some(256), FuncSettings::default());
        assert_eq!(g.max_threads, 1024);
        let g = FuncLimits::of(0x2000, &l, None, FuncSettings::default());
        assert_eq!((g.max_threads, g.num_regs), (1024, 32));
        // The device limit is checked first.
        assert_eq!(check(&l, &f, &dims([1, 1, 1], [2048, 1, 1], 0)), BAD);
    }

    #[test]
    fn raised_shared_memory() {
        let l = limits(&[]);
        let raised = FuncLimits::of(
            0x1000,
            &l,
            None,
            FuncSettings {
                max_dynamic_shared: Some(65536),
                non_portable_cluster: false,
            },
        );
        assert_eq!(check(&l, &raised, &dims([1, 1, 1], [32, 1, 1], 65536)), OK);
        assert_eq!(check(&l, &raised, &dims([1, 1, 1], [32, 1, 1], 65537)), BAD);
    }

    #[test]
    fn clusters_and_cooperative() {
        let l = limits(&[]);
        let f = FuncLimits::default_for(&l);
        let bad = Err(CUresult::CUDA_ERROR_INVALID_CLUSTER_SIZE);
        let mut d = dims([8, 1, 1], [128, 1, 1], 0);
        d.cluster = Some([2, 1, 1]);
        assert_eq!(check(&l, &f, &d), OK);
        d.cluster = Some([3, 1, 1]);
        assert_eq!(check(&l, &f, &d), bad);
        d.cluster = Some([0, 1, 1]);
        assert_eq!(check(&l, &f, &d), bad);
        d.grid = [16, 4, 1];
        d.cluster = Some([4, 4, 1]);
        assert_eq!(check(&l, &f, &d), bad);
        let np = FuncLimits {
            non_portable_cluster: true,
            ..f
        };
        assert_eq!(check(&l, &np, &d), OK);
        let ampere = limits(&[(attr::COMPUTE_CAPABILITY_MAJOR, 8)]);
        d.cluster = Some([2, 2, 1]);
        assert_eq!(check(&ampere, &f, &d), bad);

        assert_eq!(occupancy(&f, 1024, 0), 2);
        assert_eq!(occupancy(&f, 128, 0), 16);
        assert_eq!(occupancy(&f, 128, 100_000), 2);
        assert_eq!(occupancy(&f, 2048, 0), 0);
        let mut c = dims([264, 1, 1], [1024, 1, 1], 0);
        c.cooperative = true;
        assert_eq!(check(&l, &f, &c), OK);
        c.grid = [265, 1, 1];
        assert_eq!(
            check(&l, &f, &c),
            Err(CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
        );
    }

    #[test]
    fn launch_attributes() {
        let mut d = LaunchDims::default();
        let mut a = CUlaunchAttribute {
            id: LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            pad: [0; 4],
            value: [0; 8],
        };
        a.value[0] = 2 | (3 << 32);
        a.value[1] = 4;
        d.apply(&a);
        assert_eq!(d.cluster, Some([2, 3, 4]));
        a.id = LAUNCH_ATTRIBUTE_COOPERATIVE;
        a.value[0] = 1;
        d.apply(&a);
        assert!(d.cooperative);
        a.id = 99;
        d.apply(&a);
        assert!(d.cooperative);
    }
}
