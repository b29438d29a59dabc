//! CPU cost of the host-write guard's work per copy (`SEEDANCE_HOST_GUARD`,
//! `shim/src/faults/hostguard/digest.rs`, compiled in here as it is in the shim): the
//! digest at submission (`take`), the comparison at completion (`first_difference`), and
//! `fix` mode's snapshot of the whole source into a staging buffer (`read`, through
//! `process_vm_readv`), with a plain `memcpy` of the same bytes for reference. Prints, per
//! copy size, nanoseconds per copy and per KiB of the copy (the median of 7 rounds).
//! Pageable memory stands in for pinned memory: the CPU reads it the same way.
//!
//! `cargo bench -p seedance-shim --bench host_guard` (figures in docs/performance.md).

#[allow(dead_code)]
#[path = "../src/faults/hostguard/digest.rs"]
mod digest;

use std::hint::black_box;
use std::time::Instant;

/// Nanoseconds per call of `f`, the median of 7 rounds of `iters` calls.
fn time(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    rounds.sort_by(|a, b| a.total_cmp(b));
    rounds[3]
}

fn main() {
    println!(
        "{:>10} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "copy", "digest ns", "compare ns", "snapshot ns", "memcpy ns", "ns/KiB d/c/s"
    );
    for kib in [4usize, 64, 1024, 16 * 1024, 256 * 1024] {
        let bytes = kib * 1024;
        let src: Vec<u8> = (0..bytes).map(|i| (i * 31) as u8).collect();
        let mut dst = vec![0u8; bytes];
        let addr = src.as_ptr() as u64;
        let iters = (64 * 1024 * 1024 / bytes).clamp(4, 20_000) as u32;
        let d = digest::take(addr, bytes as u64).expect("digest");
        let t_digest = time(iters, || {
            black_box(digest::take(black_box(addr), bytes as u64));
        });
        let t_compare = time(iters, || {
            black_box(digest::first_difference(black_box(addr), &d));
        });
        let t_snap = time(iters, || {
            assert!(digest::read(addr, dst.as_mut_ptr(), bytes));
            black_box(&dst);
        });
        let t_memcpy = time(iters, || {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        });
        let k = kib as f64;
        println!(
            "{:>7}KiB {:>14.0} {:>14.0} {:>14.0} {:>14.0} {:>6.1}/{:.1}/{:.1}",
            kib,
            t_digest,
            t_compare,
            t_snap,
            t_memcpy,
            t_digest / k,
            t_compare / k,
            t_snap / k
        );
    }
}
