//! Launch-configuration checks, as the driver does them before it queues a kernel.

use seedance_cuda::{attr, CUlaunchConfig, CUresult};

use crate::device::Device;

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
    /// MAX_SHARED_MEMORY_PER_BLOCK: dynamic shared memory, bytes.
    pub max_shared_mem: u64,
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
        }
    }
}

/// One launch's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    /// Grid dims in blocks.
    pub grid: [u32; 3],
    /// Block dims in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_mem: u32,
}

impl LaunchDims {
    /// The shape a `CUlaunchConfig` describes.
    pub fn from_config(c: &CUlaunchConfig) -> LaunchDims {
        LaunchDims {
            grid: [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
            block: [c.block_dim_x, c.block_dim_y, c.block_dim_z],
            shared_mem: c.shared_mem_bytes,
        }
    }
}

/// `Err(CUDA_ERROR_INVALID_VALUE)` when any dim is 0, a block dim or the block's thread
/// count is over its limit, a grid dim is over its limit, or the dynamic shared memory is
/// over MAX_SHARED_MEMORY_PER_BLOCK.
pub fn check(limits: &LaunchLimits, dims: &LaunchDims) -> Result<(), CUresult> {
    let invalid = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    if dims.grid.contains(&0) || dims.block.contains(&0) {
        return invalid;
    }
    for i in 0..3 {
        if u64::from(dims.block[i]) > limits.max_block[i]
            || u64::from(dims.grid[i]) > limits.max_grid[i]
        {
            return invalid;
        }
    }
    let threads: u64 = dims.block.iter().map(|&b| u64::from(b)).product();
    if threads > limits.max_threads_per_block || u64::from(dims.shared_mem) > limits.max_shared_mem
    {
        return invalid;
    }
    Ok(())
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
        }
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
            }
        );
    }

    #[test]
    fn accepts_limits_exactly() {
        let l = limits(&[]);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 1], 0)), OK);
        assert_eq!(
            check(
                &l,
                &dims([2_147_483_647, 65535, 65535], [1024, 1, 1], 49152)
            ),
            OK
        );
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1024, 1], 0)), OK);
        assert_eq!(check(&l, &dims([1, 1, 1], [16, 1, 64], 0)), OK);
        assert_eq!(check(&l, &dims([1, 1, 1], [32, 32, 1], 0)), OK);
    }

    #[test]
    fn rejects_zero_dims() {
        let l = limits(&[]);
        for i in 0..3 {
            let mut g = [1, 1, 1];
            g[i] = 0;
            assert_eq!(check(&l, &dims(g, [1, 1, 1], 0)), BAD);
            assert_eq!(check(&l, &dims([1, 1, 1], g, 0)), BAD);
        }
    }

    #[test]
    fn rejects_over_limits() {
        let l = limits(&[]);
        assert_eq!(check(&l, &dims([1, 1, 1], [1025, 1, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1025, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 65], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [32, 33, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1024, 1024, 64], 0)), BAD);
        assert_eq!(check(&l, &dims([2_147_483_648, 1, 1], [1, 1, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 65536, 1], [1, 1, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 65536], [1, 1, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 1], 49153)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 1], u32::MAX)), BAD);
    }

    #[test]
    fn overridden_limits_apply() {
        let l = limits(&[
            (attr::MAX_THREADS_PER_BLOCK, 512),
            (attr::MAX_SHARED_MEMORY_PER_BLOCK, 1000),
        ]);
        assert_eq!(check(&l, &dims([1, 1, 1], [512, 1, 1], 1000)), OK);
        assert_eq!(check(&l, &dims([1, 1, 1], [513, 1, 1], 0)), BAD);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 1], 1001)), BAD);
        let l = limits(&[(attr::MAX_GRID_DIM_Y, -5)]);
        assert_eq!(l.max_grid[1], 0);
        assert_eq!(check(&l, &dims([1, 1, 1], [1, 1, 1], 0)), BAD);
    }
}
