//! The coverage table `docs/model-coverage.md` checked against the hook table and the copy
//! of the CUDA 13 runtime's `cuGetProcAddress` requests beside it; the hook table checked
//! against the driver-ABI table (`seedance_cuda::abi`).

use crate::hooks::ids::TABLE;
use std::collections::{BTreeMap, BTreeSet};

const COVERAGE: &str = include_str!("../../../docs/model-coverage.md");
const REQUESTS: &str = include_str!("../../../docs/cudart13-procaddress-requests.txt");

/// The model-relevant entry points the shim does not hook yet (docs/model-coverage.md,
/// `gap`; docs/reliability.md, "Known limits"). Hooking one, or finding a new one, changes
/// this list.
const KNOWN_GAPS: &[&str] = &[
    "cuCtxDetach",
    "cuEGLStreamConsumerAcquireFrame",
    "cuEGLStreamConsumerReleaseFrame",
    "cuEGLStreamProducerPresentFrame",
    "cuEGLStreamProducerReturnFrame",
    "cuGLMapBufferObjectAsync",
    "cuGLUnmapBufferObjectAsync",
    "cuGraphicsMapResources",
    "cuGraphicsUnmapResources",
    "cuGreenCtxCreate",
    "cuGreenCtxDestroy",
    "cuMemAllocFromPoolAsync",
    "cuMemDiscardAndPrefetchBatchAsync",
    "cuMemDiscardBatchAsync",
    "cuMemPrefetchAsync",
    "cuMemPrefetchBatchAsync",
    "cuStreamAttachMemAsync",
];

/// Entry points a framework asks for through its own `cuGetProcAddress` calls beyond the
/// runtime's (docs/model-coverage.md, "Asked for beyond the runtime": seen in the H200 runs'
/// exit summaries, docs/records/2026-12-01-validation.md).
const FRAMEWORK_REQUESTS: &[&str] = &[
    "cuCtxFromGreenCtx",
    "cuCtxGetDevResource",
    "cuCtxGetId",
    "cuCtxRecordEvent",
    "cuCtxWaitEvent",
    "cuDevResourceGenerateDesc",
    "cuDevSmResourceSplitByCount",
    "cuDeviceGetDevResource",
    "cuGreenCtxCreate",
    "cuGreenCtxDestroy",
    "cuGreenCtxGetDevResource",
    "cuGreenCtxGetId",
    "cuGreenCtxRecordEvent",
    "cuGreenCtxStreamCreate",
    "cuGreenCtxWaitEvent",
];

/// The table's rows: entry point -> `hooked`, `gap` or `no`.
fn rows() -> BTreeMap<&'static str, &'static str> {
    let mut out = BTreeMap::new();
    for line in COVERAGE.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        assert!(
            out.insert(name, cells[2]).is_none(),
            "{name}: two rows in docs/model-coverage.md"
        );
    }
    out
}

#[test]
fn coverage_table_matches_the_hooks_and_the_runtimes_requests() {
    let mut requested: BTreeSet<&str> = REQUESTS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(requested.len() > 300, "{}", requested.len());
    for name in FRAMEWORK_REQUESTS {
        assert!(
            requested.insert(name),
            "{name} is in the runtime's list already"
        );
    }
    let rows = rows();
    let named: BTreeSet<&str> = rows.keys().copied().collect();
    assert_eq!(named, requested, "one row per requested entry point");
    let hooked: BTreeSet<&str> = TABLE.iter().map(|h| h.base).collect();
    let mut gaps = Vec::new();
    for (name, model) in &rows {
        match *model {
            "hooked" => assert!(
                hooked.contains(name),
                "{name} is marked hooked but shim/src/hooks.rs has no hook for it"
            ),
            "gap" => {
                assert!(
                    !hooked.contains(name),
                    "{name} is hooked now: mark it hooked"
                );
                gaps.push(*name);
            }
            "no" => assert!(!hooked.contains(name), "{name} is hooked: mark it hooked"),
            other => panic!("{name}: unknown mark {other}"),
        }
    }
    assert_eq!(
        gaps, KNOWN_GAPS,
        "a model-relevant entry point without a hook: hook it, or name it a known gap"
    );
}

/// `_`, for one argument type.
macro_rules! placeholder {
    ($t:ty) => {
        _
    };
}

/// The argument sizes of a hand-written wrapper (`crate::interpose::procaddr`).
macro_rules! custom_sizes {
    (cuGetProcAddress) => {
        arg_sizes_of(
            crate::interpose::procaddr::cuGetProcAddress as unsafe extern "C" fn(_, _, _, _) -> _,
        )
    };
    (cuGetProcAddress_v2) => {
        arg_sizes_of(
            crate::interpose::procaddr::cuGetProcAddress_v2
                as unsafe extern "C" fn(_, _, _, _, _) -> _,
        )
    };
}

/// Expands the hook table into [`definitions`]: each hooked symbol with its wrapper's
/// argument names (`None` for a hand-written wrapper) and sizes.
macro_rules! definitions {
    (
        wrapped { $( $sym:ident ( $($arg:ident : $ty:ty),* ) $( $clause:ident $body:tt )* ; )* }
        custom { $( $csym:ident ; )* }
        unlisted { $( $usym:ident ; )* }
    ) => {
        fn definitions() -> Vec<(&'static str, Option<Vec<&'static str>>, Vec<usize>)> {
            use seedance_cuda::abi::arg_sizes_of;
            vec![
                $( (
                    stringify!($sym),
                    Some(vec![$(stringify!($arg)),*]),
                    arg_sizes_of(super::wrappers::$sym as unsafe extern "C" fn($(placeholder!($ty)),*) -> _),
                ), )*
                $( (
                    stringify!($csym),
                    None,
                    custom_sizes!($csym),
                ), )*
            ]
        }
    };
}

hook_table!(definitions);

/// Every variant the driver-ABI table marks hooked has its line in the hook table, and each
/// line's wrapper takes the table's arguments (names and sizes): the one table of ABIs feeds
/// the exported symbols, `dlsym` and `cuGetProcAddress`.
#[test]
fn hook_table_matches_the_driver_abi_table() {
    let hooked: BTreeSet<&str> = seedance_cuda::abi::ENTRIES
        .iter()
        .flat_map(|e| e.variants)
        .filter(|v| v.sides.hooked())
        .map(|v| v.symbol)
        .collect();
    let defs = definitions();
    let lines: BTreeSet<&str> = defs.iter().map(|d| d.0).collect();
    assert_eq!(lines, hooked);
    assert_eq!(lines.len(), TABLE.len());
    for (name, names, sizes) in defs {
        let (entry, v) = seedance_cuda::abi::find(name).unwrap();
        assert_eq!(sizes, v.arg_sizes(), "{name}");
        if let Some(names) = names {
            assert_eq!(names, v.arg_names(), "{name}");
        }
        let hook = TABLE.iter().find(|h| h.id.name() == name).unwrap();
        assert_eq!(hook.base, entry.base);
    }
}
