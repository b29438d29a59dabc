use super::Lookup::{Found, NotFound, VersionNotSufficient as Old};
use super::*;
use std::collections::BTreeSet;

const REQUESTS: &str = include_str!("../../../../docs/cudart13-procaddress-requests.txt");

fn all(_: &Variant) -> bool {
    true
}

#[test]
fn every_symbol_is_listed_once_under_its_base_name() {
    let mut seen = BTreeSet::new();
    for e in ENTRIES {
        assert!(!e.variants.is_empty(), "{}", e.base);
        for v in e.variants {
            assert!(seen.insert(v.symbol), "{} is listed twice", v.symbol);
            assert!(v.symbol.starts_with(e.base), "{} / {}", v.symbol, e.base);
            let suffix = &v.symbol[e.base.len()..];
            assert!(
                suffix.is_empty() || suffix.starts_with("_v") || suffix.starts_with("_pt"),
                "{}: not a suffix of an ABI variant",
                v.symbol
            );
            assert_eq!(
                v.form == Form::Ptsz,
                v.symbol.ends_with("_ptsz"),
                "{}",
                v.symbol
            );
            assert_eq!(
                v.form == Form::Ptds,
                v.symbol.ends_with("_ptds"),
                "{}",
                v.symbol
            );
            assert_eq!(find(v.symbol), Some((e, v)));
            assert_eq!(base_of(v.symbol), e.base);
        }
    }
    assert_eq!(find("cuMemAlloc"), None, "the 32-bit v1 ABI is not listed");
    assert_eq!(entry("cuMemAlloc_v2"), None);
}

#[test]
fn a_per_thread_form_has_its_legacy_forms_version_and_arguments() {
    for e in ENTRIES {
        let mut since = 0;
        for v in e.variants {
            assert!(v.since >= since, "{}: oldest first", v.symbol);
            since = v.since;
            if !v.form.per_thread() {
                continue;
            }
            let legacy = &v.symbol[..v.symbol.len() - "_ptsz".len()];
            let (_, l) = find(legacy).unwrap_or_else(|| panic!("{}: no {legacy}", v.symbol));
            assert_eq!(l.form, Form::Legacy);
            assert_eq!((l.since, l.args), (v.since, v.args), "{}", v.symbol);
        }
    }
}

#[test]
fn the_table_counts() {
    let variants: Vec<&Variant> = ENTRIES.iter().flat_map(|e| e.variants).collect();
    assert_eq!(ENTRIES.len(), 111);
    assert_eq!(variants.len(), 195);
    assert_eq!(variants.iter().filter(|v| v.sides.hooked()).count(), 174);
    assert_eq!(variants.iter().filter(|v| v.sides.faked()).count(), 121);
}

/// Every look-up the CUDA 13 runtime makes for an entry point in the table selects a
/// variant of the form it asks for: the table's versions are no newer than the runtime's.
#[test]
fn the_cuda_13_runtimes_requests_select_a_variant() {
    let mut checked = 0;
    for line in REQUESTS.lines().filter(|l| !l.starts_with('#')) {
        let mut it = line.split_whitespace();
        let (Some(base), Some(version), Some(flags)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let (version, flags): (i32, u64) = (version.parse().unwrap(), flags.parse().unwrap());
        let Some(e) = entry(base) else { continue };
        let Found(symbol) = select(base, version, flags, all) else {
            panic!("{line}: nothing selected");
        };
        let (_, v) = find(symbol).unwrap();
        let per_thread = flags & 2 != 0 && e.variants.iter().any(|v| v.form.per_thread());
        assert_eq!(v.form.per_thread(), per_thread, "{line} -> {symbol}");
        checked += 1;
    }
    assert_eq!(checked, 151);
}

#[test]
fn selection_follows_the_versions() {
    let ctx = |v| select("cuCtxCreate", v, 0, all);
    assert_eq!(ctx(13000), Found("cuCtxCreate_v4"));
    assert_eq!(ctx(12049), Found("cuCtxCreate_v3"));
    assert_eq!(ctx(11039), Found("cuCtxCreate_v2"));
    assert_eq!(ctx(3019), Old);
    assert_eq!(
        select("cuCtxSynchronize", 12090, 0, all),
        Found("cuCtxSynchronize")
    );
    assert_eq!(
        select("cuCtxSynchronize", 13000, 2, all),
        Found("cuCtxSynchronize_v2")
    );
    let wait = |v, f| select("cuStreamWaitValue32", v, f, all);
    assert_eq!(wait(8000, 0), Found("cuStreamWaitValue32"));
    assert_eq!(wait(8000, 2), Found("cuStreamWaitValue32_ptsz"));
    assert_eq!(wait(11070, 2), Found("cuStreamWaitValue32_v2_ptsz"));
    assert_eq!(wait(7000, 0), Old);
    assert_eq!(
        select("cuMemcpyHtoD", 7000, 2, all),
        Found("cuMemcpyHtoD_v2_ptds")
    );
    assert_eq!(select("cuNoSuchThing", 13000, 0, all), NotFound);
    assert_eq!(select("cuLaunchKernel_ptsz", 13000, 0, all), NotFound);
}

#[test]
fn a_library_without_some_variants_selects_among_its_own() {
    let faked = |v: &Variant| v.sides.faked();
    // Only `_v2` forms: the one-argument v1 is not sufficient, per-thread flags still work.
    assert_eq!(select("cuStreamBeginCapture", 10000, 0, faked), Old);
    assert_eq!(
        select("cuStreamBeginCapture", 10010, 2, faked),
        Found("cuStreamBeginCapture_v2_ptsz")
    );
    // No `_ptds` form: the flag is ignored.
    assert_eq!(
        select("cuMemcpyHtoD", 7000, 2, faked),
        Found("cuMemcpyHtoD_v2")
    );
    // Only hooked variants: a name the library does not have.
    assert_eq!(select("cuStreamWaitValue64", 13000, 0, faked), NotFound);
    assert_eq!(
        select("cuDeviceGetName", 13000, 0, |v| v.sides.hooked()),
        NotFound
    );
}

#[test]
fn argument_layouts_are_those_of_the_c_abi() {
    let (_, launch) = find("cuLaunchKernel_ptsz").unwrap();
    assert_eq!(launch.args.len(), 11);
    assert_eq!(launch.args[8].name, "hStream");
    assert_eq!(launch.arg_sizes(), [8, 4, 4, 4, 4, 4, 4, 4, 8, 8, 8]);
    let (_, v4) = find("cuCtxCreate_v4").unwrap();
    assert_eq!(v4.arg_names(), ["pctx", "ctxCreateParams", "flags", "dev"]);
    let (_, sync) = find("cuCtxSynchronize").unwrap();
    assert!(sync.args.is_empty());
    let f: unsafe extern "C" fn(*mut u64, usize) -> crate::CUresult = dummy;
    assert_eq!(
        arg_sizes_of(f),
        find("cuMemAlloc_v2").unwrap().1.arg_sizes()
    );
}

extern "C" fn dummy(_: *mut u64, _: usize) -> crate::CUresult {
    crate::CUresult::CUDA_SUCCESS
}
