//! The host-write guard's decisions (`SEEDANCE_HOST_GUARD`; the shim's side is
//! `shim/src/faults/hostguard.rs`): which bytes of a copy's source the digest reads.
//!
//! A copy of up to [`WHOLE_UP_TO`] bytes is read whole, in chunks of [`CHUNK`] bytes (each
//! hashed on its own, so a difference names the chunk that changed). A larger one is read
//! at its first and last chunk and [`SAMPLED`] chunks spread evenly between them: the work
//! per copy is bounded (at most `(SAMPLED + 2) * CHUNK` bytes, 72 KiB), and a write into
//! an unsampled part of a large copy is not seen (docs/performance.md has the cost).

/// Bytes per hashed chunk: one page on the common 4 KiB-page hosts.
pub const CHUNK: u64 = 4096;
/// Copies up to this size are digested whole.
pub const WHOLE_UP_TO: u64 = 64 << 10;
/// Chunks sampled between the first and the last of a larger copy.
pub const SAMPLED: u64 = 16;

/// The chunks (offset in the copy, length) the digest of a `bytes`-byte copy reads, in
/// increasing order, without overlap.
pub fn sample_plan(bytes: u64) -> Vec<(u64, u64)> {
    if bytes == 0 {
        return Vec::new();
    }
    if bytes <= WHOLE_UP_TO {
        return (0..bytes.div_ceil(CHUNK))
            .map(|i| {
                let off = i * CHUNK;
                (off, CHUNK.min(bytes - off))
            })
            .collect();
    }
    let last = bytes - CHUNK;
    let mut plan = vec![(0, CHUNK)];
    for i in 1..=SAMPLED {
        // Evenly spread, on chunk boundaries, strictly between the first and last chunk.
        let off = (last * i / (SAMPLED + 1)) / CHUNK * CHUNK;
        let prev_end = plan.last().map_or(0, |&(o, l)| o + l);
        if off >= prev_end && off + CHUNK <= last {
            plan.push((off, CHUNK));
        }
    }
    plan.push((last, CHUNK));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_copies_are_read_whole_in_chunks() {
        assert!(sample_plan(0).is_empty());
        assert_eq!(sample_plan(1), vec![(0, 1)]);
        assert_eq!(sample_plan(5000), vec![(0, 4096), (4096, 904)]);
        let p = sample_plan(64 << 10);
        assert_eq!(p.len(), 16);
        assert_eq!(p.iter().map(|c| c.1).sum::<u64>(), 64 << 10);
    }

    #[test]
    fn large_copies_are_sampled_with_their_ends() {
        for bytes in [(64 << 10) + 1, 1 << 20, (256 << 20) + 17, 1 << 34] {
            let p = sample_plan(bytes);
            assert_eq!(p[0], (0, CHUNK), "{bytes}");
            assert_eq!(*p.last().unwrap(), (bytes - CHUNK, CHUNK), "{bytes}");
            assert!(p.len() as u64 <= SAMPLED + 2, "{bytes}");
            for w in p.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{bytes}: {p:?}");
            }
            assert!(p.iter().all(|&(o, l)| o + l <= bytes));
        }
        assert_eq!(sample_plan(256 << 20).len() as u64, SAMPLED + 2);
    }
}
