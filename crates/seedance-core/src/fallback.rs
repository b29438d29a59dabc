//! Device fallback: which device a request for an unusable ordinal goes to, and keeping
//! that choice stable for the whole process.
//!
//! Policy (issue 3): the request goes to the next available device, starting at the
//! requested ordinal modulo the device count and wrapping around, skipping devices that are
//! excluded by the user, prohibited, busy in exclusive-process mode, short of the required
//! free memory, or that already refused a context. The first choice for a requested ordinal
//! is remembered: the same request gets the same device from every thread and every entry
//! point (`cudaSetDevice`, `cuDeviceGet`, context creation), unless that device later
//! refuses a context, in which case the request moves on and the new choice is remembered.

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Why a device cannot take work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    /// Listed in `SEEDANCE_EXCLUDE_DEVICES`.
    Excluded,
    /// Compute mode prohibited (`CU_COMPUTEMODE_PROHIBITED`, 2).
    Prohibited,
    /// Exclusive-process compute mode and held by another process.
    Busy,
    /// Less free memory than `SEEDANCE_MIN_FREE_MEMORY`, in bytes.
    LowFreeMemory {
        /// Free bytes when last measured.
        free: u64,
        /// Required free bytes.
        min: u64,
    },
    /// A context creation on it failed with this CUresult (46 unavailable, 2 out of memory).
    RefusedContext(u32),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Excluded => write!(f, "excluded by SEEDANCE_EXCLUDE_DEVICES"),
            Unusable::Prohibited => write!(f, "compute mode is prohibited"),
            Unusable::Busy => write!(f, "in exclusive-process mode and held by another process"),
            Unusable::LowFreeMemory { free, min } => write!(
                f,
                "{free} bytes free, below SEEDANCE_MIN_FREE_MEMORY={min} bytes"
            ),
            Unusable::RefusedContext(code) => write!(f, "refused a context (CUresult {code})"),
        }
    }
}

/// What the policy knows about one visible device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// `None` if the device can take work.
    pub unusable: Option<Unusable>,
}

/// The next usable device for `requested`: scans ordinals `requested mod n`, `+1`, ...
/// wrapping once around `candidates` (which must be indexed by ordinal). `None` when no
/// device is usable or there are no devices.
pub fn choose(requested: i32, candidates: &[Candidate]) -> Option<i32> {
    let n = candidates.len();
    if n == 0 {
        return None;
    }
    let start = (requested as i64).rem_euclid(n as i64) as usize;
    (0..n)
        .map(|k| &candidates[(start + k) % n])
        .find(|c| c.unusable.is_none())
        .map(|c| c.ordinal)
}

/// The process-wide record of fallback choices and of devices found unusable at run time.
#[derive(Default)]
pub struct OrdinalMap {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    chosen: BTreeMap<i32, i32>,
    refused: BTreeMap<i32, u32>,
}

impl OrdinalMap {
    /// An empty map.
    pub fn new() -> OrdinalMap {
        OrdinalMap::default()
    }

    /// The device already chosen for `requested`, if any.
    pub fn get(&self, requested: i32) -> Option<i32> {
        self.inner.lock().chosen.get(&requested).copied()
    }

    /// The remembered choice for `requested`, or a new one from [`choose`] over
    /// `candidates` (with devices that refused a context marked unusable), remembered.
    /// A remembered choice that has since refused a context is replaced.
    pub fn resolve(&self, requested: i32, candidates: &[Candidate]) -> Option<i32> {
        let mut inner = self.inner.lock();
        if let Some(&c) = inner.chosen.get(&requested) {
            if !inner.refused.contains_key(&c) {
                return Some(c);
            }
        }
        let marked: Vec<Candidate> = candidates
            .iter()
            .map(|c| match (c.unusable, inner.refused.get(&c.ordinal)) {
                (None, Some(&code)) => Candidate {
                    ordinal: c.ordinal,
                    unusable: Some(Unusable::RefusedContext(code)),
                },
                _ => *c,
            })
            .collect();
        let c = choose(requested, &marked)?;
        inner.chosen.insert(requested, c);
        Some(c)
    }

    /// Records that a context creation on `ordinal` failed with `code`.
    pub fn mark_refused(&self, ordinal: i32, code: u32) {
        self.inner.lock().refused.insert(ordinal, code);
    }

    /// Ordinals that refused a context, with the CUresult they returned.
    pub fn refused(&self) -> BTreeMap<i32, u32> {
        self.inner.lock().refused.clone()
    }

    /// Every remembered choice, requested -> chosen.
    pub fn choices(&self) -> BTreeMap<i32, i32> {
        self.inner.lock().chosen.clone()
    }

    /// Ordinals that were the target of at least one fallback.
    pub fn targets(&self) -> BTreeSet<i32> {
        self.inner.lock().chosen.values().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(ordinal: i32) -> Candidate {
        Candidate {
            ordinal,
            unusable: None,
        }
    }

    fn bad(ordinal: i32, why: Unusable) -> Candidate {
        Candidate {
            ordinal,
            unusable: Some(why),
        }
    }

    #[test]
    fn starts_at_requested_modulo_count() {
        let c = [ok(0), ok(1)];
        assert_eq!(choose(1, &c), Some(1));
        assert_eq!(choose(6, &[ok(0)]), Some(0));
        assert_eq!(choose(7, &[ok(0)]), Some(0));
        assert_eq!(choose(3, &c), Some(1));
        assert_eq!(choose(-1, &c), Some(1));
    }

    #[test]
    fn skips_unusable_and_wraps() {
        let c = [
            ok(0),
            bad(1, Unusable::Busy),
            bad(2, Unusable::Excluded),
            ok(3),
        ];
        assert_eq!(choose(1, &c), Some(3));
        assert_eq!(choose(5, &c), Some(3));
        let c = [ok(0), bad(1, Unusable::Prohibited)];
        assert_eq!(choose(1, &c), Some(0));
        let none = [
            bad(0, Unusable::Busy),
            bad(1, Unusable::LowFreeMemory { free: 1, min: 2 }),
        ];
        assert_eq!(choose(0, &none), None);
        assert_eq!(choose(0, &[]), None);
    }

    #[test]
    fn choices_are_stable_until_refused() {
        let m = OrdinalMap::new();
        let c = [ok(0), ok(1)];
        assert_eq!(m.resolve(3, &c), Some(1));
        // Even if the candidates change, the remembered choice stands.
        assert_eq!(m.resolve(3, &[ok(0), bad(1, Unusable::Excluded)]), Some(1));
        m.mark_refused(1, 46);
        assert_eq!(m.resolve(3, &c), Some(0));
        assert_eq!(m.resolve(3, &c), Some(0));
        assert_eq!(m.choices(), BTreeMap::from([(3, 0)]));
        assert_eq!(m.refused(), BTreeMap::from([(1, 46)]));
        assert_eq!(
            format!("{}", Unusable::RefusedContext(46)),
            "refused a context (CUresult 46)"
        );
    }

    proptest! {
        #[test]
        fn choice_is_usable_and_first_in_scan_order(
            requested in any::<i32>(),
            usable in proptest::collection::vec(any::<bool>(), 0..12),
        ) {
            let c: Vec<Candidate> = usable.iter().enumerate().map(|(i, &u)| {
                if u { ok(i as i32) } else { bad(i as i32, Unusable::Busy) }
            }).collect();
            match choose(requested, &c) {
                None => prop_assert!(usable.iter().all(|u| !u)),
                Some(o) => {
                    prop_assert!(usable[o as usize]);
                    let n = c.len() as i64;
                    let start = (requested as i64).rem_euclid(n);
                    let dist = (o as i64 - start).rem_euclid(n);
                    for k in 0..dist {
                        prop_assert!(!usable[((start + k) % n) as usize]);
                    }
                }
            }
        }
    }
}
