//! `seedance-tracegen`: writes synthetic seedance-fix traces for benchmarks.
//!
//! Each file is one process: a `session_start`, then mostly `call_failed` records over a
//! mix of functions and CUresults, now and then a record of a kind the analyzer does not
//! know (as later schema versions add), and an `exit_summary` whose counts agree with the
//! failures written, except for every fifth process, which is "killed" (no summary).
//! Records are built as JSON in the wire format of `docs/trace-schema.md` (schema 1).
//!
//! `seedance-tracegen --out DIR --mb 1024 --files 16` writes about 1 GiB in 16 files.
#![forbid(unsafe_code)]

use clap::Parser;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "seedance-tracegen",
    about = "Writes synthetic seedance-fix traces for benchmarks."
)]
struct Args {
    /// Directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Total size to write, MiB.
    #[arg(long, default_value_t = 64)]
    mb: u64,
    /// Number of files (processes).
    #[arg(long, default_value_t = 8)]
    files: u64,
    /// Seed of the pseudo-random generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const FAILURES: &[(&str, u32, &str, &str)] = &[
    ("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "bytesize"),
    ("cuDeviceGet", 101, "CUDA_ERROR_INVALID_DEVICE", "ordinal"),
    ("cuLaunchKernel", 1, "CUDA_ERROR_INVALID_VALUE", "blockDimX"),
    (
        "cuLaunchKernel_ptsz",
        701,
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        "sharedMemBytes",
    ),
    ("cuStreamQuery", 600, "CUDA_ERROR_NOT_READY", "hStream"),
    ("cuCtxSetCurrent", 201, "CUDA_ERROR_INVALID_CONTEXT", "ctx"),
    ("cuModuleGetFunction", 500, "CUDA_ERROR_NOT_FOUND", "hmod"),
];

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let per_file = args.mb * (1 << 20) / args.files.max(1);
    let base_ts: u64 = 1_764_470_520_000_000_000;
    let mut rng = Rng(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut total = 0u64;
    for f in 0..args.files.max(1) {
        let host = format!("gpu-node-{:02}", f % 4);
        let pid = 10_000 + f as u32;
        let start = base_ts + f * 7_000_000_000;
        let path = args
            .out
            .join(format!("seedance-{host}-{pid}-{start}.jsonl"));
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        let mut seq = 0u64;
        let mut ts = start;
        let mut written = 0u64;
        // The envelope first and `event` next, as the shim writes them.
        let emit = |w: &mut BufWriter<std::fs::File>,
                    seq: &mut u64,
                    ts: u64,
                    event: Value|
         -> std::io::Result<u64> {
            let Value::Object(mut fields) = event else {
                return Ok(0);
            };
            let kind = fields.remove("event").unwrap_or(Value::Null);
            let rest = serde_json::to_string(&fields).map_err(std::io::Error::other)?;
            let line = format!(
                "{{\"v\":1,\"seq\":{},\"ts_ns\":{ts},\"pid\":{pid},\"tid\":{},\"event\":{kind},{}\n",
                *seq,
                pid as u64 + (*seq % 4),
                &rest[1..]
            );
            *seq += 1;
            w.write_all(line.as_bytes())?;
            Ok(line.len() as u64)
        };
        let devices: Vec<Value> = (0..2)
            .map(|i| {
                json!({
                    "ordinal": i,
                    "name": "NVIDIA H200",
                    "pci_bus_id": format!("0000:{:02x}:00.0", 0x1a + i * 0x20),
                    "total_mem_bytes": 150_754_820_096u64,
                })
            })
            .collect();
        written += emit(
            &mut w,
            &mut seq,
            ts,
            json!({
                "event": "session_start",
                "shim_version": "0.1.0",
                "mode": if f % 2 == 0 { "fix" } else { "observe" },
                "executable": "/usr/bin/python3",
                "argv": ["python3", "train.py", format!("--rank={f}")],
                "hostname": host,
                "driver_version": 13000,
                "libcuda_path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                "cuda_visible_devices": "0,1",
                "cuda_device_order": null,
                "devices": devices,
            }),
        )?;
        let mut stats: BTreeMap<String, (u64, u64, &str)> = BTreeMap::new();
        while written < per_file {
            ts += 1_000 + rng.below(2_000_000);
            if rng.below(1000) == 0 {
                // A repair of schema 2.
                let rec = format!(
                    "{{\"v\":2,\"seq\":{seq},\"ts_ns\":{ts},\"pid\":{pid},\"tid\":{pid},\"event\":\"device_fallback\",\"function\":\"cuDeviceGet\",\"requested_ordinal\":2,\"chosen_ordinal\":0,\"chosen_pci_bus_id\":null,\"reason\":\"ordinal 2 is not visible\",\"result\":0,\"explanation\":\"fix: ordinal 2 -> ordinal 0\"}}\n"
                );
                seq += 1;
                w.write_all(rec.as_bytes())?;
                written += rec.len() as u64;
                continue;
            }
            let (function, code, name, arg) = FAILURES[rng.below(FAILURES.len() as u64) as usize];
            let value = match arg {
                "bytesize" => json!(1u64 << (20 + rng.below(18))),
                "ordinal" => json!(2 + rng.below(2)),
                "blockDimX" => json!(2048),
                "sharedMemBytes" => json!(rng.below(4) * 65536),
                _ => json!(format!(
                    "0x{:x}",
                    0x7f00_0000_0000u64 + rng.below(1 << 20) * 64
                )),
            };
            written += emit(
                &mut w,
                &mut seq,
                ts,
                json!({
                    "event": "call_failed",
                    "function": function,
                    "result": code,
                    "result_name": name,
                    "args": { arg: value },
                }),
            )?;
            let s = stats.entry(function.to_string()).or_insert((0, 0, name));
            s.0 += 1 + rng.below(50);
            s.1 += 1;
        }
        if f % 5 != 4 {
            let mut functions: Map<String, Value> = stats
                .into_iter()
                .map(|(f, (calls, errors, name))| {
                    (f, json!({"calls": calls, "errors": errors, "errors_by_result": {name: errors}}))
                })
                .collect();
            functions.insert(
                "cuInit".into(),
                json!({"calls": 1, "errors": 0, "errors_by_result": {}}),
            );
            written += emit(
                &mut w,
                &mut seq,
                ts + 1_000_000,
                json!({
                    "event": "exit_summary",
                    "duration_ns": ts + 1_000_000 - start,
                    "functions": functions,
                    "dropped_records": 0,
                    "procaddr_unmatched": [],
                }),
            )?;
        }
        w.flush()?;
        total += written;
    }
    eprintln!(
        "wrote {} bytes in {} files to {}",
        total,
        args.files.max(1),
        args.out.display()
    );
    Ok(())
}
