//! Prints what this crate reads from NVML, as JSON: `cargo run -p seedance-topology
//! --example nvml_snapshot [LIBRARY_PATH]`. A manual check on a GPU host; prints the reason
//! and exits 1 where NVML cannot be loaded.
#![forbid(unsafe_code)]

use std::path::Path;

use seedance_topology::{Nvml, NvmlStatus};

fn main() {
    let path = std::env::args().nth(1);
    match Nvml::open(path.as_deref().map(Path::new)) {
        Ok(nvml) => {
            let snap = nvml.snapshot();
            println!(
                "{}",
                serde_json::to_string_pretty(&snap).unwrap_or_default()
            );
            for d in &snap.devices {
                println!(
                    "free_memory({}) = {:?} bytes",
                    d.index,
                    nvml.free_memory(d.index)
                );
            }
            println!(
                "{}",
                serde_json::to_string(&NvmlStatus::Present).unwrap_or_default()
            );
        }
        Err(reason) => {
            println!(
                "{}",
                serde_json::to_string(&NvmlStatus::Absent { reason }).unwrap_or_default()
            );
            std::process::exit(1);
        }
    }
}
