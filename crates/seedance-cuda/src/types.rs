//! Handles, scalar types and the few structs the hooked entry points take.
//!
//! Layouts follow `cuda.h` of CUDA 13.0 (x86-64 and aarch64 Linux).

use std::ffi::c_void;

macro_rules! opaque_handle {
    ($(#[$doc:meta])* $st:ident => $alias:ident) => {
        $(#[$doc])*
        #[repr(C)]
        pub struct $st {
            _unused: [u8; 0],
        }
        $(#[$doc])*
        pub type $alias = *mut $st;
    };
}

opaque_handle!(
    /// A CUDA context (`CUcontext` in `cuda.h`).
    CUctx_st => CUcontext
);
opaque_handle!(
    /// A stream (`CUstream`). The null stream is the legacy default stream; the
    /// per-thread default stream is `CU_STREAM_PER_THREAD` (0x2).
    CUstream_st => CUstream
);
opaque_handle!(
    /// A kernel function handle (`CUfunction`).
    CUfunc_st => CUfunction
);
opaque_handle!(
    /// An event (`CUevent`).
    CUevent_st => CUevent
);
opaque_handle!(
    /// A memory pool (`CUmemoryPool`).
    CUmemPoolHandle_st => CUmemoryPool
);

/// A device handle as returned by `cuDeviceGet` (`typedef int CUdevice`). On every driver
/// we have seen it equals the ordinal, but programs must not rely on that.
pub type CUdevice = i32;

/// A device address (`CUdeviceptr_v2`, 64-bit since CUDA 3.2).
pub type CUdeviceptr = u64;

/// `CU_STREAM_LEGACY` (`cuda.h`): the legacy default stream handle, value 0x1.
pub const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD` (`cuda.h`): the per-thread default stream handle, value 0x2.
pub const CU_STREAM_PER_THREAD: usize = 0x2;

/// `CU_GET_PROC_ADDRESS_DEFAULT` (`cuda.h`, CUDA 11.3+): flags value for cuGetProcAddress.
pub const CU_GET_PROC_ADDRESS_DEFAULT: u64 = 0;
/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`: ask for the legacy-default-stream variant.
pub const CU_GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1 << 0;
/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`: ask for the `_ptsz`/`_ptds` variant.
pub const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 1 << 1;

/// `CUdriverProcAddressQueryResult` (`cuda.h`, CUDA 12.0+), written by
/// `cuGetProcAddress_v2` through its `symbolStatus` argument.
pub type CUdriverProcAddressQueryResult = i32;
/// `CU_GET_PROC_ADDRESS_SUCCESS`.
pub const CU_GET_PROC_ADDRESS_SUCCESS: CUdriverProcAddressQueryResult = 0;
/// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
pub const CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: CUdriverProcAddressQueryResult = 1;
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
pub const CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: CUdriverProcAddressQueryResult = 2;

/// `CUlaunchAttribute` (`cuda.h`): an id followed by a 64-byte value union, 72 bytes in all.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUlaunchAttribute {
    /// `CUlaunchAttributeID`.
    pub id: u32,
    /// Padding to the union's 8-byte alignment (`pad` in `cuda.h`).
    pub pad: [u8; 4],
    /// `CUlaunchAttributeValue`, 64 bytes; its meaning depends on `id`.
    pub value: [u64; 8],
}

/// `CUlaunchConfig` (`cuda.h`, CUDA 12.0+): the configuration `cuLaunchKernelEx` takes.
/// Grid dims are in blocks, block dims in threads, shared memory in bytes.
#[repr(C)]
pub struct CUlaunchConfig {
    /// Grid width in blocks.
    pub grid_dim_x: u32,
    /// Grid height in blocks.
    pub grid_dim_y: u32,
    /// Grid depth in blocks.
    pub grid_dim_z: u32,
    /// Block width in threads.
    pub block_dim_x: u32,
    /// Block height in threads.
    pub block_dim_y: u32,
    /// Block depth in threads.
    pub block_dim_z: u32,
    /// Dynamic shared memory per block, bytes.
    pub shared_mem_bytes: u32,
    /// The stream the launch goes to.
    pub h_stream: CUstream,
    /// Array of `num_attrs` launch attributes (may be null when `num_attrs` is 0).
    pub attrs: *mut CUlaunchAttribute,
    /// Number of entries in `attrs`.
    pub num_attrs: u32,
}

/// Opaque parameter pointers the shim forwards untouched (`CUexecAffinityParam*`,
/// `CUctxCreateParams*`, kernel parameter arrays).
pub type Opaque = *mut c_void;

/// `CUdevice_attribute` values the shim and the fake driver use (`cuda.h`, CUDA 13.0).
pub mod attr {
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X`.
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y`.
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z`.
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X`.
    pub const MAX_GRID_DIM_X: i32 = 5;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y`.
    pub const MAX_GRID_DIM_Y: i32 = 6;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z`.
    pub const MAX_GRID_DIM_Z: i32 = 7;
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK` (bytes, 48 KiB on every GPU since
    /// Kepler).
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    /// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE` (0 default, 2 prohibited, 3 exclusive process).
    pub const COMPUTE_MODE: i32 = 20;
    /// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
    pub const PCI_BUS_ID: i32 = 33;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`.
    pub const PCI_DEVICE_ID: i32 = 34;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`.
    pub const PCI_DOMAIN_ID: i32 = 50;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` (bytes; 227 KiB on H100/H200).
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: i32 = 97;
}

/// `CUuuid` (`cuda.h`): 16 opaque bytes, what `cuDeviceGetUuid(_v2)` writes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CUuuid {
    /// The UUID bytes (`char bytes[16]`).
    pub bytes: [std::ffi::c_char; 16],
}

/// `CUmemGenericAllocationHandle` (`cuda.h`, CUDA 10.2+): a physical allocation made by
/// `cuMemCreate`, an opaque 64-bit value.
pub type CUmemGenericAllocationHandle = u64;

/// `CUmemLocation` (`cuda.h`): where memory lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CUmemLocation {
    /// `CUmemLocationType`: 1 = `CU_MEM_LOCATION_TYPE_DEVICE` (then `id` is a device
    /// ordinal), 2 = host.
    pub type_: i32,
    /// Device ordinal (or host NUMA node, by type).
    pub id: i32,
}

/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const CU_MEM_LOCATION_TYPE_DEVICE: i32 = 1;
/// `CU_MEM_ALLOCATION_TYPE_PINNED`: the only `CUmemAllocationType` `cuMemCreate` takes.
pub const CU_MEM_ALLOCATION_TYPE_PINNED: i32 = 1;

/// `CUmemAllocationProp` (`cuda.h`, CUDA 13.0): what `cuMemCreate` and
/// `cuMemGetAllocationGranularity` take, 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemAllocationProp {
    /// `CUmemAllocationType` (1 = pinned).
    pub type_: i32,
    /// `CUmemAllocationHandleType` bit mask.
    pub requested_handle_types: i32,
    /// Where the memory is (a device for `cuMemCreate`).
    pub location: CUmemLocation,
    /// `win32HandleMetaData` (unused on Linux).
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags`: compression type, GPUDirect RDMA capable, usage, 4 reserved bytes.
    pub alloc_flags: [u8; 8],
}

/// `CUfunction_attribute` values (`cuda.h`, CUDA 13.0) the shim and the fake driver use.
pub mod func_attr {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: threads per block the kernel can run with
    /// (lower than the device's for register-heavy kernels).
    pub const MAX_THREADS_PER_BLOCK: i32 = 0;
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: static shared memory, bytes.
    pub const SHARED_SIZE_BYTES: i32 = 1;
    /// `CU_FUNC_ATTRIBUTE_NUM_REGS`: registers per thread.
    pub const NUM_REGS: i32 = 4;
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: dynamic shared memory limit, bytes.
    pub const MAX_DYNAMIC_SHARED_SIZE_BYTES: i32 = 8;
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`: clusters above 8 blocks allowed.
    pub const NON_PORTABLE_CLUSTER_SIZE_ALLOWED: i32 = 14;
}

/// `CUlaunchAttributeID` values (`cuda.h`) the shim and the fake driver read.
pub mod launch_attr {
    /// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`: value `int cooperative`.
    pub const COOPERATIVE: u32 = 2;
    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`: value `struct { unsigned x, y, z; }`.
    pub const CLUSTER_DIMENSION: u32 = 4;
}

/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (`CUpointer_attribute`): the device ordinal of an
/// allocation, an `int`.
pub const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: i32 = 9;
/// `CU_POINTER_ATTRIBUTE_CONTEXT`: the context of an allocation, a `CUcontext`.
pub const CU_POINTER_ATTRIBUTE_CONTEXT: i32 = 1;

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn c_layouts() {
        assert_eq!(std::mem::size_of::<CUmemAllocationProp>(), 32);
        assert_eq!(std::mem::offset_of!(CUmemAllocationProp, location), 8);
        assert_eq!(
            std::mem::offset_of!(CUmemAllocationProp, win32_handle_meta_data),
            16
        );
        assert_eq!(std::mem::size_of::<CUlaunchAttribute>(), 72);
        assert_eq!(std::mem::offset_of!(CUlaunchConfig, h_stream), 32);
        assert_eq!(std::mem::size_of::<CUlaunchConfig>(), 56);
    }

    /// Sizes and offsets of the structs declared here, as CUDA 13.0's `cuda.h` lays them out
    /// on 64-bit Linux (no `cuda.h` is installed where these tests run, so the values are
    /// pinned from the header's declarations):
    ///
    /// * `CUuuid_st { char bytes[16]; }`: 16 bytes.
    /// * `CUmemLocation_st { CUmemLocationType type; int id; }`: 8 bytes, `id` at 4.
    /// * `CUmemAllocationProp_st { CUmemAllocationType type; CUmemAllocationHandleType
    ///   requestedHandleTypes; CUmemLocation location; void *win32HandleMetaData; struct {
    ///   unsigned char compressionType; unsigned char gpuDirectRDMACapable; unsigned short
    ///   usage; unsigned char reserved[4]; } allocFlags; }`: 32 bytes; `location` at 8,
    ///   `win32HandleMetaData` at 16, `allocFlags` at 24.
    /// * `CUlaunchAttribute_st { CUlaunchAttributeID id; char pad[8 - sizeof(CUlaunchAttributeID)];
    ///   CUlaunchAttributeValue value; }` with a 64-byte value union: 72 bytes, `value` at 8.
    /// * `CUlaunchConfig_st { unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
    ///   blockDimZ, sharedMemBytes; CUstream hStream; CUlaunchAttribute *attrs; unsigned int
    ///   numAttrs; }`: 56 bytes; `sharedMemBytes` at 24, `hStream` at 32, `attrs` at 40,
    ///   `numAttrs` at 48.
    /// * `CUDA_MEMCPY2D_st` (`_v2`): 128 bytes; `srcMemoryType` at 16, `srcHost` at 24,
    ///   `srcDevice` at 32, `srcPitch` at 48, `dstMemoryType` at 72, `dstDevice` at 88,
    ///   `WidthInBytes` at 112, `Height` at 120.
    #[test]
    fn cuda_13_header_layouts() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!((size_of::<CUuuid>(), align_of::<CUuuid>()), (16, 1));
        assert_eq!(size_of::<CUmemLocation>(), 8);
        assert_eq!(offset_of!(CUmemLocation, id), 4);
        assert_eq!(size_of::<CUmemAllocationProp>(), 32);
        assert_eq!(offset_of!(CUmemAllocationProp, location), 8);
        assert_eq!(offset_of!(CUmemAllocationProp, win32_handle_meta_data), 16);
        assert_eq!(offset_of!(CUmemAllocationProp, alloc_flags), 24);
        assert_eq!(size_of::<CUlaunchAttribute>(), 72);
        assert_eq!(offset_of!(CUlaunchAttribute, value), 8);
        assert_eq!(size_of::<CUlaunchConfig>(), 56);
        assert_eq!(offset_of!(CUlaunchConfig, shared_mem_bytes), 24);
        assert_eq!(offset_of!(CUlaunchConfig, h_stream), 32);
        assert_eq!(offset_of!(CUlaunchConfig, attrs), 40);
        assert_eq!(offset_of!(CUlaunchConfig, num_attrs), 48);
        assert_eq!(size_of::<CUDA_MEMCPY2D>(), 128);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, srcMemoryType), 16);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, srcHost), 24);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, srcDevice), 32);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, srcPitch), 48);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, dstMemoryType), 72);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, dstDevice), 88);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, WidthInBytes), 112);
        assert_eq!(offset_of!(CUDA_MEMCPY2D, Height), 120);
    }
}

/// `CU_MEMORYTYPE_HOST`: a host pointer (`cuda.h`, `CUmemorytype`).
pub const CU_MEMORYTYPE_HOST: u32 = 1;
/// `CU_MEMORYTYPE_DEVICE`: a device pointer.
pub const CU_MEMORYTYPE_DEVICE: u32 = 2;
/// `CU_MEMORYTYPE_UNIFIED`: a unified-address pointer, host or device (in the `Device`
/// field).
pub const CU_MEMORYTYPE_UNIFIED: u32 = 4;

/// `CUDA_MEMCPY2D` (`cuda.h`, the `_v2` layout of `cuMemcpy2DAsync_v2`), read only: the
/// pointer fields are kept as integers (a `CUarray` is never followed).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(non_snake_case)]
pub struct CUDA_MEMCPY2D {
    /// Source X in bytes.
    pub srcXInBytes: usize,
    /// Source row.
    pub srcY: usize,
    /// Source `CUmemorytype`.
    pub srcMemoryType: u32,
    /// Source host pointer (`CU_MEMORYTYPE_HOST`).
    pub srcHost: usize,
    /// Source device or unified pointer.
    pub srcDevice: u64,
    /// Source array (`CUarray`).
    pub srcArray: usize,
    /// Source pitch, bytes per row.
    pub srcPitch: usize,
    /// Destination X in bytes.
    pub dstXInBytes: usize,
    /// Destination row.
    pub dstY: usize,
    /// Destination `CUmemorytype`.
    pub dstMemoryType: u32,
    /// Destination host pointer.
    pub dstHost: usize,
    /// Destination device or unified pointer.
    pub dstDevice: u64,
    /// Destination array.
    pub dstArray: usize,
    /// Destination pitch.
    pub dstPitch: usize,
    /// Bytes per row.
    pub WidthInBytes: usize,
    /// Rows.
    pub Height: usize,
}

impl CUDA_MEMCPY2D {
    /// The first byte of the source (`Some(address, is host)`, `None` for an array),
    /// with the unified address for `CU_MEMORYTYPE_UNIFIED`.
    pub fn src_start(&self) -> Option<(u64, u32)> {
        let base = match self.srcMemoryType {
            CU_MEMORYTYPE_HOST => self.srcHost as u64,
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => self.srcDevice,
            _ => return None,
        };
        let off = self
            .srcY
            .checked_mul(self.srcPitch)?
            .checked_add(self.srcXInBytes)?;
        Some((base.checked_add(off as u64)?, self.srcMemoryType))
    }

    /// The first byte of the destination, as [`CUDA_MEMCPY2D::src_start`].
    pub fn dst_start(&self) -> Option<(u64, u32)> {
        let base = match self.dstMemoryType {
            CU_MEMORYTYPE_HOST => self.dstHost as u64,
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => self.dstDevice,
            _ => return None,
        };
        let off = self
            .dstY
            .checked_mul(self.dstPitch)?
            .checked_add(self.dstXInBytes)?;
        Some((base.checked_add(off as u64)?, self.dstMemoryType))
    }

    /// The bytes the copy touches when both sides are one contiguous run (one row, or rows
    /// whose pitch is the width); `None` for a strided copy.
    pub fn contiguous_bytes(&self) -> Option<u64> {
        let flat = |pitch: usize| self.Height <= 1 || pitch == self.WidthInBytes;
        (flat(self.srcPitch) && flat(self.dstPitch))
            .then(|| self.WidthInBytes.checked_mul(self.Height))
            .flatten()
            .map(|b| b as u64)
    }
}

#[cfg(test)]
mod memcpy2d_tests {
    use super::*;

    #[test]
    fn layout_and_ranges() {
        assert_eq!(std::mem::size_of::<CUDA_MEMCPY2D>(), 128);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY2D, srcHost), 24);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY2D, dstMemoryType), 72);
        assert_eq!(std::mem::offset_of!(CUDA_MEMCPY2D, Height), 120);
        let c = CUDA_MEMCPY2D {
            srcMemoryType: CU_MEMORYTYPE_HOST,
            srcHost: 0x1000,
            srcPitch: 256,
            srcY: 2,
            dstMemoryType: CU_MEMORYTYPE_DEVICE,
            dstDevice: 0x9000,
            dstPitch: 256,
            WidthInBytes: 256,
            Height: 4,
            ..CUDA_MEMCPY2D::default()
        };
        assert_eq!(c.src_start(), Some((0x1200, CU_MEMORYTYPE_HOST)));
        assert_eq!(c.dst_start(), Some((0x9000, CU_MEMORYTYPE_DEVICE)));
        assert_eq!(c.contiguous_bytes(), Some(1024));
        assert_eq!(
            CUDA_MEMCPY2D { dstPitch: 512, ..c }.contiguous_bytes(),
            None
        );
        assert_eq!(
            CUDA_MEMCPY2D {
                srcMemoryType: 3,
                ..c
            }
            .src_start(),
            None
        );
    }
}
