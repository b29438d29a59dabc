//! Throughput of `summarize` on a generated trace (ignored by default; run with
//! `cargo test -p seedance-analyze --release -- --ignored --nocapture bench`).
//! `scripts/bench/analyze.sh` compares the binary with jq on a larger input.

use super::{call_failed, exit_summary, session_start};
use seedance_analyze::{summarize, Options};
use std::io::{BufWriter, Write};
use std::time::Instant;

#[test]
#[ignore]
fn bench_summarize_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    let target: u64 = 256 << 20;
    let files = 8u32;
    for f in 0..files {
        let pid = 100 + f;
        let mut w =
            BufWriter::new(std::fs::File::create(dir.path().join(format!("t{f}.jsonl"))).unwrap());
        let mut n = 0u64;
        let mut seq = 0u64;
        writeln!(w, "{}", session_start(pid, seq, 1)).unwrap();
        while n < target / files as u64 {
            seq += 1;
            let l = call_failed(
                pid,
                seq,
                1_000_000 * seq,
                "cuMemAlloc_v2",
                2,
                "CUDA_ERROR_OUT_OF_MEMORY",
            );
            n += l.len() as u64 + 1;
            writeln!(w, "{l}").unwrap();
        }
        writeln!(
            w,
            "{}",
            exit_summary(
                pid,
                seq + 1,
                1_000_000 * seq + 1,
                "cuMemAlloc_v2",
                seq,
                seq - 1,
                "CUDA_ERROR_OUT_OF_MEMORY"
            )
        )
        .unwrap();
    }
    let t = Instant::now();
    let r = summarize(&[dir.path().to_path_buf()], &Options::default()).unwrap();
    let s = t.elapsed().as_secs_f64();
    let mb = r.input.bytes as f64 / 1e6;
    println!(
        "summarize: {mb:.0} MB in {s:.2} s = {:.0} MB/s ({} records)",
        mb / s,
        r.input.records
    );
    assert_eq!(r.input.malformed_lines, 0);
}
