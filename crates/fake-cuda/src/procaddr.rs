//! Which exported variant `cuGetProcAddress` returns for a base name, CUDA version and
//! flags: the driver-ABI table's choice (`seedance_cuda::abi::select`) among the variants
//! this library exports. Per entry point the table lists each ABI variant and the
//! `cudaVersion` from which the driver hands it out; of the variants exported here, the
//! per-thread form when the flags ask for `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` and
//! one is exported, else the legacy ones, the newest the version allows. So `cuMemAlloc`
//! below 3020 is not sufficient (the 32-bit v1 ABI is not implemented), `cuCtxCreate` is
//! `_v4` from 12050, `_v3` from 11040, `_v2` from 3020, and `cuStreamBeginCapture` below
//! 10010 is not sufficient (its one-argument v1 is not implemented). Names the table does
//! not have, names of variants only the shim hooks, and suffixed names such as
//! `cuMemAlloc_v2` are not found.

pub use seedance_cuda::abi::Lookup;

/// Every base name `cuGetProcAddress` knows: the table's rows with a variant exported here.
pub fn base_names() -> Vec<&'static str> {
    seedance_cuda::abi::ENTRIES
        .iter()
        .filter(|e| e.variants.iter().any(|v| v.sides.faked()))
        .map(|e| e.base)
        .collect()
}

/// Picks the variant of `base` for `cuda_version` (e.g. 12040) and `flags`.
pub fn select(base: &str, cuda_version: i32, flags: u64) -> Lookup {
    seedance_cuda::abi::select(base, cuda_version, flags, |v| v.sides.faked())
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

    /// Base names whose only exported variant is the plain name.
    fn plain() -> Vec<&'static str> {
        seedance_cuda::abi::ENTRIES
            .iter()
            .filter(|e| {
                let mut faked = e.variants.iter().filter(|v| v.sides.faked());
                faked.clone().count() == 1 && faked.all(|v| v.symbol == e.base)
            })
            .map(|e| e.base)
            .collect()
    }

    #[test]
    fn plain_names_and_unknown() {
        let plain = plain();
        assert_eq!(plain.len(), 36);
        for base in plain {
            assert_eq!(select(base, 13000, 0), Found(base));
            if base.starts_with("cuLogs") {
                assert_eq!(select(base, 12080, 0), Old, "{base}");
            } else if base.starts_with("cuCtx") && base.ends_with("Event") {
                assert_eq!(select(base, 12040, 2), Old, "{base}");
            } else {
                assert_eq!(select(base, 1000, 2), Found(base), "{base}");
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
        assert_eq!(base_names().len(), 83);
        for base in base_names() {
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
