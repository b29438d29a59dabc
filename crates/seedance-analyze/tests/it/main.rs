//! Integration tests of `seedance-analyze`, one binary, one module per subject:
//!
//! - `golden`: `summary` and `diff` output on the hand-written fixtures, compared exactly
//!   with `tests/golden/` (`UPDATE_GOLDEN=1 cargo test -p seedance-analyze` rewrites them).
//! - `contract`: the JSON reports read back with independent types that deny unknown fields.
//! - `escapes`: control characters of trace strings escaped in the text report.
//! - `robust`: truncated, garbage, empty, gzip, oversized and non-trace input.
//! - `runtime`: what the CUDA runtime leaves at every healthy exit is not a problem.
//! - `explain`: the `explain` subcommand's output and exit codes.
//! - `props`: property tests (a short fuzzing run): arbitrary bytes and near-valid records
//!   with mutated fields fed to the line parser, the reader and the whole pipeline.
//! - `browser`: the HTML report rendered in headless Chromium (required: the test fails
//!   without it).
//! - `gates`: `summary --fail-on`, `diff --fail-on new` and the no-trace warning, with
//!   their exit codes.
//! - `otlp`: `export --format otlp-json` decoded with `opentelemetry-proto`'s types.
//! - `s3`: `summary`, `export` and `diff` of an `s3://` prefix on a moto server the test
//!   starts (skipped without `moto_server`, unless `SEEDANCE_REQUIRE_MOTO=1`).
//! - `s3rver`: `summary` of an `s3://` prefix on an s3rver the test starts with TLS and a CA
//!   of its own, with signed requests (skipped without `s3rver`, unless
//!   `SEEDANCE_REQUIRE_S3RVER=1`).
//! - `s3_off`: an analyzer built with `--no-default-features` refuses an object-storage URL.
//! - `push`: `export --otlp-endpoint` against a receiver the test starts on 127.0.0.1.
//! - `agree`: `export` and `summary` read the same records of hostile input (deep nesting,
//!   out-of-range envelopes, files that are not traces, corrupt sequence numbers).
//! - `bench`: an ignored throughput measurement (`cargo test --release -- --ignored bench`).
//! - `sources`: the crate's own sources: no function over 150 lines, at most 12 entries at
//!   the top of `src/`, every problem kind documented in `docs/analyzer.md`.

mod agree;
mod bench;
mod browser;
mod contract;
mod escapes;
mod explain;
mod gates;
mod golden;
mod otlp;
mod props;
mod push;
mod robust;
mod runtime;
#[cfg(feature = "remote")]
mod s3;
mod s3_off;
#[cfg(feature = "remote")]
mod s3rver;
mod sources;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate directory; fixtures are given relative to it so that outputs are stable.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary in the crate directory; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_seedance-analyze"))
        .args(args)
        .current_dir(crate_dir())
        .output()
        .expect("run seedance-analyze");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Compares `actual` with the golden file `name`, or rewrites it under `UPDATE_GOLDEN=1`.
/// On a mismatch, the message shows the first differing line.
pub fn golden(name: &str, actual: &str) {
    let path: PathBuf = crate_dir().join("tests/golden").join(name);
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let (i, (e, a)) = expected
            .lines()
            .chain(std::iter::repeat("<end>"))
            .zip(actual.lines().chain(std::iter::repeat("<end>")))
            .enumerate()
            .find(|(_, (e, a))| e != a)
            .unwrap_or((0, ("", "")));
        panic!(
            "{} differs at line {}:\n  expected: {e}\n  actual:   {a}\n(UPDATE_GOLDEN=1 rewrites the golden files)",
            path.display(),
            i + 1
        );
    }
}

/// Writes `lines` (joined by newlines, plus `tail` verbatim) to `dir/name`.
pub fn write_trace(dir: &Path, name: &str, lines: &[&str], tail: &str) -> PathBuf {
    let p = dir.join(name);
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    text.push_str(tail);
    std::fs::write(&p, text).unwrap();
    p
}

/// A session start line for `pid`.
pub fn session_start(pid: u32, seq: u64, ts: u64) -> String {
    format!(
        r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"tid":{pid},"event":"session_start","shim_version":"0.1.0","mode":"observe","executable":"/bin/app","argv":["app"],"hostname":"h1","driver_version":13000,"libcuda_path":null,"cuda_visible_devices":null,"cuda_device_order":null,"devices":[{{"ordinal":0,"name":"NVIDIA H200","pci_bus_id":"0000:1a:00.0","total_mem_bytes":150754820096}}]}}"#
    )
}

/// A call_failed line.
pub fn call_failed(pid: u32, seq: u64, ts: u64, function: &str, result: u32, name: &str) -> String {
    format!(
        r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"tid":{pid},"event":"call_failed","function":"{function}","result":{result},"result_name":"{name}","args":{{"ordinal":3}}}}"#
    )
}

/// An exit summary line with one function.
pub fn exit_summary(
    pid: u32,
    seq: u64,
    ts: u64,
    function: &str,
    calls: u64,
    errors: u64,
    name: &str,
) -> String {
    format!(
        r#"{{"v":1,"seq":{seq},"ts_ns":{ts},"pid":{pid},"tid":{pid},"event":"exit_summary","duration_ns":5000000000,"functions":{{"{function}":{{"calls":{calls},"errors":{errors},"errors_by_result":{{"{name}":{errors}}}}}}},"dropped_records":0}}"#
    )
}
