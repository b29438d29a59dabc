//! The error histogram of an aggregate: errors over time in buckets whose width doubles
//! whenever it would exceed [`MAX_BUCKETS`] buckets.

use crate::SatAdd;
use std::collections::BTreeMap;

/// Most buckets in the errors-over-time histogram.
pub const MAX_BUCKETS: usize = 512;

/// The finest width of the errors-over-time buckets, nanoseconds (1 ms); the width is
/// always this times a power of two.
pub const TIMELINE_BASE_NS: u64 = 1_000_000;

/// Errors over time, by CUresult name, from `call_failed` records.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Bucket width, nanoseconds: one second times a power of two.
    pub width_ns: u64,
    /// Bucket start (a multiple of the width) -> CUresult name -> errors.
    pub buckets: BTreeMap<u64, BTreeMap<String, u64>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            // 1 ms: a run of milliseconds gets bars of milliseconds; longer runs coarsen
            // (doubling) to at most MAX_BUCKETS buckets.
            width_ns: TIMELINE_BASE_NS,
            buckets: BTreeMap::new(),
        }
    }
}

impl Timeline {
    /// Counts `n` errors named `name` at `ts_ns`.
    pub fn add(&mut self, ts_ns: u64, name: &str, n: u64) {
        let start = ts_ns - ts_ns % self.width_ns;
        let b = self.buckets.entry(start).or_default();
        if let Some(v) = b.get_mut(name) {
            v.sat_add(n);
        } else {
            b.insert(name.to_string(), n);
        }
        if self.buckets.len() > MAX_BUCKETS {
            self.coarsen(self.width_ns.saturating_mul(2));
        }
    }

    fn coarsen(&mut self, mut width: u64) {
        loop {
            if width != self.width_ns {
                let old = std::mem::take(&mut self.buckets);
                self.width_ns = width;
                for (start, names) in old {
                    let b = self.buckets.entry(start - start % width).or_default();
                    for (name, n) in names {
                        b.entry(name).or_default().sat_add(n);
                    }
                }
            }
            if self.buckets.len() <= MAX_BUCKETS || width >= 1 << 62 {
                return;
            }
            width *= 2;
        }
    }

    /// Adds every bucket of `other`, at the coarser of the two widths.
    pub fn merge(&mut self, other: Timeline) {
        let width = self.width_ns.max(other.width_ns);
        self.coarsen(width);
        for (start, names) in other.buckets {
            for (name, n) in names {
                self.add(start, &name, n);
            }
        }
    }
}
