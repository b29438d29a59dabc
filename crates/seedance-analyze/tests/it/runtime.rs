//! What the CUDA runtime leaves at every healthy exit is not reported as a problem, by the
//! same rules as the shim's own exit paragraph (measured on an H200, driver 580.159: the
//! runtime's final `cuDevicePrimaryCtxRelease` gets `CUDA_ERROR_DEINITIALIZED`, and memory
//! of its primary context may no longer be attributable when the shim asks at exit).

use super::{session_start, write_trace};
use seedance_analyze::{summarize, Options, Report};
use std::path::PathBuf;

/// A schema 4 exit summary: `functions` and the lifetime fields as JSON texts.
fn exit_v4(pid: u32, functions: &str, live: &str, leaks: &str, after_deinit: &str) -> String {
    format!(
        r#"{{"v":4,"seq":9,"ts_ns":9000,"pid":{pid},"tid":{pid},"event":"exit_summary","duration_ns":1000,"functions":{functions},"dropped_records":0,"procaddr_unmatched":[],"repairs":{{}},"fallbacks":{{}},"live_contexts":{live},"leaked_allocations":{leaks},"unsynchronized_streams":[],"calls_after_deinit":{after_deinit}}}"#
    )
}

const PRIMARY: &str = r#"[{"context":"0x10","device":0,"primary":true,"generation":1,"retained":3,"created":{"function":"cuDevicePrimaryCtxRetain","tid":1,"ts_ns":1,"seq":1}}]"#;
const OWN: &str = r#"[{"context":"0x20","device":0,"primary":false,"generation":1,"retained":1,"created":{"function":"cuCtxCreate_v2","tid":1,"ts_ns":1,"seq":1}}]"#;
const UNATTRIBUTED: &str = r#"[{"device":null,"context":null,"primary_retained":false,"host":false,"allocations":10,"bytes":180357120}]"#;
const RELEASE_DEINIT: &str = r#"{"cuDevicePrimaryCtxRelease":{"calls":2,"errors":2,"errors_by_result":{"CUDA_ERROR_DEINITIALIZED":2}}}"#;

fn report(lines: &[(u32, String)]) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = lines
        .iter()
        .map(|(pid, exit)| {
            write_trace(
                dir.path(),
                &format!("{pid}.jsonl"),
                &[&session_start(*pid, 0, 1000), exit],
                "",
            )
        })
        .collect();
    summarize(&paths, &Options::default()).unwrap()
}

#[test]
fn unattributed_memory_is_the_runtimes_when_only_primary_contexts_live() {
    let r = report(&[
        (31, exit_v4(31, "{}", PRIMARY, UNATTRIBUTED, "{}")),
        (32, exit_v4(32, "{}", OWN, UNATTRIBUTED, "{}")),
    ]);
    // pid 31 (a PyTorch-like exit) is healthy; pid 32 has a context of its own alive, so the
    // same unattributed memory is its leak (and the live context is reported too).
    assert_eq!(r.process_health.len(), 1, "{:?}", r.process_health);
    let h = &r.process_health[0];
    assert_eq!(h.pid, 32);
    assert_eq!(h.live_contexts, 1);
    assert_eq!(h.leaked_allocations, 10);
    assert_eq!(h.leaked_bytes, 180_357_120);
}

#[test]
fn the_runtimes_final_release_after_deinit_is_not_a_problem() {
    let healthy = report(&[(41, exit_v4(41, RELEASE_DEINIT, PRIMARY, "[]", "{}"))]);
    assert!(
        healthy
            .problems
            .iter()
            .all(|p| !p.title.contains("CUDA_ERROR_DEINITIALIZED")),
        "{:?}",
        healthy
            .problems
            .iter()
            .map(|p| &p.title)
            .collect::<Vec<_>>()
    );
    // The function table still shows the errors.
    let f = healthy
        .functions
        .iter()
        .find(|f| f.function == "cuDevicePrimaryCtxRelease")
        .unwrap();
    assert_eq!((f.calls, f.errors), (2, 2));
    // Listed by the shim among the calls after deinitialisation: a problem again.
    let late = report(&[(
        42,
        exit_v4(
            42,
            RELEASE_DEINIT,
            PRIMARY,
            "[]",
            r#"{"cuDevicePrimaryCtxRelease":2}"#,
        ),
    )]);
    let p: Vec<_> = late
        .problems
        .iter()
        .filter(|p| p.title.contains("CUDA_ERROR_DEINITIALIZED"))
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].count, 2);
}

#[test]
fn other_stream_operations_are_unsynchronized_work() {
    // A created context's stream left with 1 launch and 2 other stream operations (the
    // trace's `ops`: memsets, graph launches, host functions), and one from an older shim
    // without the field.
    let streams = r#"[{"context":"0x20","primary_retained":false,"stream":"0x5000","default_stream":null,"launches":1,"copies":0,"ops":2,"created":null},{"context":"0x20","primary_retained":false,"stream":"0x6000","default_stream":null,"launches":0,"copies":1,"created":null}]"#;
    let exit = exit_v4(31, "{}", OWN, "[]", "{}").replace(
        r#""unsynchronized_streams":[]"#,
        &format!(r#""unsynchronized_streams":{streams}"#),
    );
    let r = report(&[(31, exit)]);
    let h = &r.process_health[0];
    assert_eq!(h.unsynchronized_streams, 2);
    assert_eq!(h.unsynchronized_work, 4);
    assert_eq!(h.unsynchronized_ops, 2);
    let text = seedance_analyze::render::text::render(&r);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "2 streams never synchronised (4 unfinished launches, copies and other stream \
             operations)"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["process_health"][0]["unsynchronized_ops"], 2);
}
