//! Which exported variant `cuGetProcAddress` returns for a base name, CUDA version and
//! flags, following the real driver's rules:
//!
//! | base name | rule |
//! |---|---|
//! | cuMemAlloc, cuMemFree, cuMemAllocPitch, cuMemGetInfo, cuDeviceTotalMem | >= 3020: `_v2`; below: version not sufficient (the 32-bit v1 ABI is not implemented) |
//! | cuCtxCreate | >= 12050: `_v4`; >= 11040: `_v3`; >= 3020: `_v2`; below: version not sufficient |
//! | cuCtxDestroy | >= 4000: `_v2`, else plain |
//! | cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset | >= 11000: `_v2`, else plain |
//! | cuCtxSynchronize | >= 13000: `_v2`, else plain |
//! | cuDeviceGetUuid | >= 11040: `_v2`, else plain |
//! | cuGetProcAddress | >= 12000: `_v2`, else plain |
//! | cuLaunchKernel, cuStreamSynchronize | flags & 2: `_ptsz`, else plain |
//! | cuLaunchKernelEx | < 11060: version not sufficient; flags & 2: `_ptsz`, else plain |
//! | cuMemAllocAsync, cuMemFreeAsync, cuLaunchCooperativeKernel | flags & 2: `_ptsz`, else plain |
//! | cuStreamDestroy, cuEventDestroy, cuCtxPushCurrent, cuCtxPopCurrent | >= 4000: `_v2`; below: version not sufficient |
//! | cuMemAllocHost, cuMemcpyHtoD, cuMemcpyDtoH | >= 3020: `_v2`; below: version not sufficient |
//! | cuMemcpyHtoDAsync, cuMemcpyDtoHAsync | >= 3020: flags & 2: `_v2_ptsz`, else `_v2`; below: version not sufficient |
//! | cuMemHostRegister | >= 6050: `_v2`; below: version not sufficient |
//! | cuStreamQuery, cuStreamWaitEvent, cuEventRecord, cuEventRecordWithFlags, cuMemcpyAsync | flags & 2: `_ptsz`, else plain |
//! | cuMemsetD8Async, cuMemsetD16Async, cuMemsetD32Async, cuMemsetD2D8Async, cuMemsetD2D16Async, cuMemsetD2D32Async, cuGraphLaunch, cuLaunchHostFunc | flags & 2: `_ptsz`, else plain |
//! | cuLogsRegisterCallback, cuLogsUnregisterCallback | < 12090: version not sufficient; else plain |
//! | cuStreamBeginCapture | < 10010: version not sufficient (the one-argument v1 is not implemented); flags & 2: `_v2_ptsz`, else `_v2` |
//! | cuStreamEndCapture | flags & 2: `_ptsz`, else plain |
//! | cuMemcpy2DAsync | >= 3020: flags & 2: `_v2_ptsz`, else `_v2`; below: version not sufficient |
//! | cuStreamWaitValue32, cuStreamWriteValue32 | flags & 2: `_v2_ptsz`, else `_v2` |
//! | every other exported base name | plain |
//! | anything else (including suffixed names such as `cuMemAlloc_v2`) | not found |

use seedance_cuda::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM as PTDS;

/// The outcome of a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The exported symbol to return.
    Found(&'static str),
    /// The name is not a driver entry point (`CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`).
    NotFound,
    /// The entry point exists but not for this version
    /// (`CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`).
    VersionNotSufficient,
}

/// Base names whose only variant is the plain name.
const PLAIN: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuStreamCreate",
    "cuStreamGetCtx",
    "cuMemAllocManaged",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemGetAllocationGranularity",
    "cuPointerGetAttribute",
    "cuLogsRegisterCallback",
    "cuLogsUnregisterCallback",
    "cuStreamCreateWithPriority",
    "cuEventCreate",
    "cuEventSynchronize",
    "cuEventQuery",
    "cuMemHostUnregister",
    "cuDevicePrimaryCtxGetState",
];

/// Every base name `cuGetProcAddress` knows.
pub const BASE_NAMES: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuDeviceTotalMem",
    "cuDeviceGetUuid",
    "cuCtxCreate",
    "cuCtxDestroy",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxReset",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxSynchronize",
    "cuMemAlloc",
    "cuMemAllocPitch",
    "cuMemAllocAsync",
    "cuMemFree",
    "cuMemGetInfo",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuStreamSynchronize",
    "cuGetProcAddress",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuLaunchCooperativeKernel",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "cuStreamCreate",
    "cuStreamDestroy",
    "cuStreamGetCtx",
    "cuMemAllocManaged",
    "cuMemFreeAsync",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemGetAllocationGranularity",
    "cuPointerGetAttribute",
    "cuLogsRegisterCallback",
    "cuLogsUnregisterCallback",
    "cuStreamCreateWithPriority",
    "cuStreamQuery",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventDestroy",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventQuery",
    "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync",
    "cuMemcpyAsync",
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
    "cuMemAllocHost",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuCtxPushCurrent",
    "cuCtxPopCurrent",
    "cuDevicePrimaryCtxGetState",
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuMemsetD2D8Async",
    "cuMemsetD2D16Async",
    "cuMemsetD2D32Async",
    "cuGraphLaunch",
    "cuLaunchHostFunc",
    "cuEventRecordWithFlags",
    "cuStreamBeginCapture",
    "cuStreamEndCapture",
    "cuStreamWaitValue32",
    "cuStreamWriteValue32",
    "cuMemcpy2DAsync",
    "cuCtxRecordEvent",
    "cuCtxWaitEvent",
];

fn at_least(version: i32, min: i32, name: &'static str, older: Lookup) -> Lookup {
    if version >= min {
        Lookup::Found(name)
    } else {
        older
    }
}

/// Picks the variant of `base` for `cuda_version` (e.g. 12040) and `flags`.
pub fn select(base: &str, cuda_version: i32, flags: u64) -> Lookup {
    use Lookup::{Found, NotFound, VersionNotSufficient as Old};
    let v = cuda_version;
    let ptds = flags & PTDS != 0;
    let stream = |ptsz: &'static str, plain: &'static str| Found(if ptds { ptsz } else { plain });
    match base {
        "cuMemAlloc" => at_least(v, 3020, "cuMemAlloc_v2", Old),
        "cuMemFree" => at_least(v, 3020, "cuMemFree_v2", Old),
        "cuMemAllocPitch" => at_least(v, 3020, "cuMemAllocPitch_v2", Old),
        "cuMemGetInfo" => at_least(v, 3020, "cuMemGetInfo_v2", Old),
        "cuDeviceTotalMem" => at_least(v, 3020, "cuDeviceTotalMem_v2", Old),
        "cuCtxCreate" => at_least(
            v,
            12050,
            "cuCtxCreate_v4",
            at_least(
                v,
                11040,
                "cuCtxCreate_v3",
                at_least(v, 3020, "cuCtxCreate_v2", Old),
            ),
        ),
        "cuCtxDestroy" => at_least(v, 4000, "cuCtxDestroy_v2", Found("cuCtxDestroy")),
        "cuDevicePrimaryCtxRelease" => at_least(
            v,
            11000,
            "cuDevicePrimaryCtxRelease_v2",
            Found("cuDevicePrimaryCtxRelease"),
        ),
        "cuDevicePrimaryCtxReset" => at_least(
            v,
            11000,
            "cuDevicePrimaryCtxReset_v2",
            Found("cuDevicePrimaryCtxReset"),
        ),
        "cuCtxSynchronize" => at_least(v, 13000, "cuCtxSynchronize_v2", Found("cuCtxSynchronize")),
        "cuDeviceGetUuid" => at_least(v, 11040, "cuDeviceGetUuid_v2", Found("cuDeviceGetUuid")),
        "cuGetProcAddress" => at_least(v, 12000, "cuGetProcAddress_v2", Found("cuGetProcAddress")),
        "cuLaunchKernel" => stream("cuLaunchKernel_ptsz", "cuLaunchKernel"),
        "cuStreamSynchronize" => stream("cuStreamSynchronize_ptsz", "cuStreamSynchronize"),
        "cuLaunchKernelEx" if v < 11060 => Old,
        "cuLaunchKernelEx" => stream("cuLaunchKernelEx_ptsz", "cuLaunchKernelEx"),
        "cuMemAllocAsync" => stream("cuMemAllocAsync_ptsz", "cuMemAllocAsync"),
        "cuMemFreeAsync" => stream("cuMemFreeAsync_ptsz", "cuMemFreeAsync"),
        "cuLaunchCooperativeKernel" => stream(
            "cuLaunchCooperativeKernel_ptsz",
            "cuLaunchCooperativeKernel",
        ),
        "cuStreamDestroy" => at_least(v, 4000, "cuStreamDestroy_v2", Old),
        "cuEventDestroy" => at_least(v, 4000, "cuEventDestroy_v2", Old),
        "cuCtxPushCurrent" => at_least(v, 4000, "cuCtxPushCurrent_v2", Old),
        "cuCtxPopCurrent" => at_least(v, 4000, "cuCtxPopCurrent_v2", Old),
        "cuMemAllocHost" => at_least(v, 3020, "cuMemAllocHost_v2", Old),
        "cuMemcpyHtoD" => at_least(v, 3020, "cuMemcpyHtoD_v2", Old),
        "cuMemcpyDtoH" => at_least(v, 3020, "cuMemcpyDtoH_v2", Old),
        "cuMemcpyHtoDAsync" if v < 3020 => Old,
        "cuMemcpyHtoDAsync" => stream("cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync_v2"),
        "cuMemcpyDtoHAsync" if v < 3020 => Old,
        "cuMemcpyDtoHAsync" => stream("cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoHAsync_v2"),
        "cuMemHostRegister" => at_least(v, 6050, "cuMemHostRegister_v2", Old),
        "cuStreamQuery" => stream("cuStreamQuery_ptsz", "cuStreamQuery"),
        "cuStreamWaitEvent" => stream("cuStreamWaitEvent_ptsz", "cuStreamWaitEvent"),
        "cuEventRecord" => stream("cuEventRecord_ptsz", "cuEventRecord"),
        "cuEventRecordWithFlags" => stream("cuEventRecordWithFlags_ptsz", "cuEventRecordWithFlags"),
        "cuStreamBeginCapture" if v < 10010 => Old,
        "cuStreamBeginCapture" => stream("cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCapture_v2"),
        "cuStreamEndCapture" => stream("cuStreamEndCapture_ptsz", "cuStreamEndCapture"),
        "cuMemcpy2DAsync" if v < 3020 => Old,
        "cuMemcpy2DAsync" => stream("cuMemcpy2DAsync_v2_ptsz", "cuMemcpy2DAsync_v2"),
        "cuStreamWaitValue32" => stream("cuStreamWaitValue32_v2_ptsz", "cuStreamWaitValue32_v2"),
        "cuStreamWriteValue32" => stream("cuStreamWriteValue32_v2_ptsz", "cuStreamWriteValue32_v2"),
        "cuMemcpyAsync" => stream("cuMemcpyAsync_ptsz", "cuMemcpyAsync"),
        "cuMemsetD8Async" => stream("cuMemsetD8Async_ptsz", "cuMemsetD8Async"),
        "cuMemsetD16Async" => stream("cuMemsetD16Async_ptsz", "cuMemsetD16Async"),
        "cuMemsetD32Async" => stream("cuMemsetD32Async_ptsz", "cuMemsetD32Async"),
        "cuMemsetD2D8Async" => stream("cuMemsetD2D8Async_ptsz", "cuMemsetD2D8Async"),
        "cuMemsetD2D16Async" => stream("cuMemsetD2D16Async_ptsz", "cuMemsetD2D16Async"),
        "cuMemsetD2D32Async" => stream("cuMemsetD2D32Async_ptsz", "cuMemsetD2D32Async"),
        "cuGraphLaunch" => stream("cuGraphLaunch_ptsz", "cuGraphLaunch"),
        "cuLaunchHostFunc" => stream("cuLaunchHostFunc_ptsz", "cuLaunchHostFunc"),
        "cuLogsRegisterCallback" | "cuLogsUnregisterCallback" if v < 12090 => Old,
        "cuCtxRecordEvent" => at_least(v, 12050, "cuCtxRecordEvent", Old),
        "cuCtxWaitEvent" => at_least(v, 12050, "cuCtxWaitEvent", Old),
        _ => PLAIN
            .iter()
            .find(|&&p| p == base)
            .map_or(NotFound, |&p| Found(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::Lookup::{Found, NotFound, VersionNotSufficient as Old};
    use super::*;

    #[test]
    fn v2_memory_functions() {
        for (base, v2) in [
            ("cuMemAlloc", "cuMemAlloc_v2"),
            ("cuMemFree", "cuMemFree_v2"),
            ("cuMemAllocPitch", "cuMemAllocPitch_v2"),
            ("cuMemGetInfo", "cuMemGetInfo_v2"),
            ("cuDeviceTotalMem", "cuDeviceTotalMem_v2"),
        ] {
            assert_eq!(select(base, 3020, 0), Found(v2));
            assert_eq!(select(base, 13000, 2), Found(v2));
            assert_eq!(select(base, 3019, 0), Old);
            assert_eq!(select(base, 2000, 0), Old);
        }
    }

    #[test]
    fn ctx_create() {
        assert_eq!(select("cuCtxCreate", 13000, 0), Found("cuCtxCreate_v4"));
        assert_eq!(select("cuCtxCreate", 12050, 0), Found("cuCtxCreate_v4"));
        assert_eq!(select("cuCtxCreate", 12049, 0), Found("cuCtxCreate_v3"));
        assert_eq!(select("cuCtxCreate", 11040, 0), Found("cuCtxCreate_v3"));
        assert_eq!(select("cuCtxCreate", 11039, 0), Found("cuCtxCreate_v2"));
        assert_eq!(select("cuCtxCreate", 3020, 0), Found("cuCtxCreate_v2"));
        assert_eq!(select("cuCtxCreate", 3019, 0), Old);
    }

    #[test]
    fn versioned_plain_or_v2() {
        let cases = [
            ("cuCtxDestroy", 4000, "cuCtxDestroy_v2"),
            (
                "cuDevicePrimaryCtxRelease",
                11000,
                "cuDevicePrimaryCtxRelease_v2",
            ),
            (
                "cuDevicePrimaryCtxReset",
                11000,
                "cuDevicePrimaryCtxReset_v2",
            ),
            ("cuCtxSynchronize", 13000, "cuCtxSynchronize_v2"),
            ("cuDeviceGetUuid", 11040, "cuDeviceGetUuid_v2"),
            ("cuGetProcAddress", 12000, "cuGetProcAddress_v2"),
        ];
        for (base, min, v2) in cases {
            assert_eq!(select(base, min, 0), Found(v2), "{base}");
            assert_eq!(select(base, min + 1000, 2), Found(v2), "{base}");
            assert_eq!(select(base, min - 1, 0), Found(base), "{base}");
            assert_eq!(select(base, 1000, 0), Found(base), "{base}");
        }
    }

    #[test]
    fn per_thread_stream_variants() {
        for base in ["cuLaunchKernel", "cuStreamSynchronize", "cuLaunchKernelEx"] {
            assert_eq!(select(base, 13000, 0), Found(base));
            assert_eq!(select(base, 13000, 1), Found(base));
            let ptsz = format!("{base}_ptsz");
            assert!(matches!(select(base, 13000, 2), Found(n) if n == ptsz));
            assert!(matches!(select(base, 12000, 3), Found(n) if n == ptsz));
        }
        assert_eq!(select("cuLaunchKernel", 2000, 0), Found("cuLaunchKernel"));
        assert_eq!(
            select("cuMemAllocAsync", 13000, 0),
            Found("cuMemAllocAsync")
        );
        assert_eq!(
            select("cuMemAllocAsync", 13000, 2),
            Found("cuMemAllocAsync_ptsz")
        );
    }

    #[test]
    fn new_entry_points() {
        assert_eq!(
            select("cuLaunchCooperativeKernel", 13000, 2),
            Found("cuLaunchCooperativeKernel_ptsz")
        );
        assert_eq!(select("cuMemFreeAsync", 11020, 0), Found("cuMemFreeAsync"));
        assert_eq!(
            select("cuStreamDestroy", 4000, 0),
            Found("cuStreamDestroy_v2")
        );
        assert_eq!(select("cuLogsRegisterCallback", 12080, 0), Old);
        assert_eq!(
            select("cuLogsRegisterCallback", 12090, 0),
            Found("cuLogsRegisterCallback")
        );
    }

    #[test]
    fn lifetime_entry_points() {
        assert_eq!(
            select("cuMemcpyHtoDAsync", 13000, 2),
            Found("cuMemcpyHtoDAsync_v2_ptsz")
        );
        assert_eq!(
            select("cuMemcpyDtoHAsync", 4000, 0),
            Found("cuMemcpyDtoHAsync_v2")
        );
        assert_eq!(select("cuMemcpyHtoDAsync", 3000, 0), Old);
        assert_eq!(
            select("cuEventRecord", 7000, 2),
            Found("cuEventRecord_ptsz")
        );
        assert_eq!(
            select("cuEventRecordWithFlags", 11010, 2),
            Found("cuEventRecordWithFlags_ptsz")
        );
        assert_eq!(
            select("cuEventRecordWithFlags", 11010, 0),
            Found("cuEventRecordWithFlags")
        );
        assert_eq!(
            select("cuEventDestroy", 4000, 0),
            Found("cuEventDestroy_v2")
        );
        assert_eq!(select("cuCtxPopCurrent", 3999, 0), Old);
        assert_eq!(
            select("cuMemHostRegister", 12000, 0),
            Found("cuMemHostRegister_v2")
        );
        assert_eq!(select("cuMemHostRegister", 6000, 0), Old);
        assert_eq!(
            select("cuEventSynchronize", 1000, 2),
            Found("cuEventSynchronize")
        );
    }

    #[test]
    fn launch_kernel_ex_needs_11060() {
        assert_eq!(
            select("cuLaunchKernelEx", 11060, 0),
            Found("cuLaunchKernelEx")
        );
        assert_eq!(select("cuLaunchKernelEx", 11059, 0), Old);
        assert_eq!(select("cuLaunchKernelEx", 11059, 2), Old);
    }

    #[test]
    fn memsets_graph_launch_and_host_function_have_ptsz_variants() {
        for base in [
            "cuMemsetD8Async",
            "cuMemsetD16Async",
            "cuMemsetD32Async",
            "cuMemsetD2D8Async",
            "cuMemsetD2D16Async",
            "cuMemsetD2D32Async",
            "cuGraphLaunch",
            "cuLaunchHostFunc",
        ] {
            assert_eq!(select(base, 13000, 0), Found(base));
            let Found(ptsz) = select(base, 13000, 2) else {
                panic!("{base}")
            };
            assert_eq!(ptsz, format!("{base}_ptsz"));
        }
    }

    #[test]
    fn plain_names_and_unknown() {
        for &base in PLAIN {
            assert_eq!(select(base, 13000, 0), Found(base));
            if !base.starts_with("cuLogs") {
                assert_eq!(select(base, 1000, 2), Found(base));
            }
        }
        assert_eq!(select("cuMemAlloc_v2", 13000, 0), NotFound);
        assert_eq!(select("cuLaunchKernel_ptsz", 13000, 0), NotFound);
        assert_eq!(select("cuNoSuchThing", 13000, 0), NotFound);
        assert_eq!(select("", 13000, 0), NotFound);
        assert_eq!(select("cumemalloc", 13000, 0), NotFound);
    }

    #[test]
    fn every_base_name_resolves_to_an_export() {
        assert_eq!(BASE_NAMES.len(), 81);
        for &base in BASE_NAMES {
            for v in [1000, 3020, 4000, 11000, 11040, 11060, 12000, 12050, 13000] {
                for flags in [0, 1, 2] {
                    match select(base, v, flags) {
                        Found(sym) => assert!(
                            crate::exports::address_of(sym).is_some(),
                            "{base} {v} {flags} -> {sym} is not exported"
                        ),
                        Old => assert!(
                            v < 11060
                                || (base.starts_with("cuLogs") && v < 12090)
                                || (base == "cuStreamBeginCapture" && v < 10010)
                                || (base == "cuMemcpy2DAsync" && v < 3020)
                                || (base.starts_with("cuCtx")
                                    && base.ends_with("Event")
                                    && v < 12050),
                            "{base} {v}"
                        ),
                        NotFound => panic!("{base} not found"),
                    }
                }
            }
        }
    }
}
