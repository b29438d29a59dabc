//! Device fallback: which device a request for an unusable ordinal goes to, and keeping
//! that choice stable for the whole process.
//!
//! Policy (docs/reliability.md, device fallback): the request goes to the next available device, starting at the
//! requested ordinal modulo the device count and wrapping around, skipping devices that are
//! excluded by the user, prohibited, busy in exclusive-process mode, short of the required
//! free memory, or that already refused a context. The first choice for a requested ordinal
//! is remembered: the same request gets the same device from every thread and every entry
//! point (`cudaSetDevice`, `cuDeviceGet`, context creation), unless that device later
//! refuses a context, in which case the request moves on and the new choice is remembered.
//!
//! The shim gathers the facts (the failed call's code, whether it creates a context, each
//! visible device's [`DeviceFacts`]) and performs the retries; this module decides which
//! failures are device faults ([`Fault::classify`]), which devices are usable
//! ([`unusable`], [`candidates`]), which device to try next, when to move on and when to
//! stop ([`OrdinalMap::fall_back`]).

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

/// The facts about one visible device that decide whether it can take work, gathered by
/// the shim from the topology (NVML and `cuDeviceGetAttribute`) and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceFacts {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Matches a selector of `SEEDANCE_EXCLUDE_DEVICES`.
    pub excluded: bool,
    /// Compute mode `CU_COMPUTEMODE_PROHIBITED` (2).
    pub prohibited: bool,
    /// Compute mode `CU_COMPUTEMODE_EXCLUSIVE_PROCESS` (3).
    pub exclusive_process: bool,
    /// Processes with a context on the device (NVML), when known.
    pub busy_processes: Option<u32>,
    /// Free memory in bytes (NVML), when known.
    pub free_mem_bytes: Option<u64>,
}

/// Why the device `d` cannot take work, or `None` if it can; `min_free` is
/// `SEEDANCE_MIN_FREE_MEMORY` in bytes. In order: excluded by the user, prohibited, held by
/// another process in exclusive-process mode, less free memory than required (only when both
/// the free memory and the minimum are known).
pub fn unusable(d: &DeviceFacts, min_free: Option<u64>) -> Option<Unusable> {
    if d.excluded {
        return Some(Unusable::Excluded);
    }
    if d.prohibited {
        return Some(Unusable::Prohibited);
    }
    if d.exclusive_process && d.busy_processes.unwrap_or(0) > 0 {
        return Some(Unusable::Busy);
    }
    match (min_free, d.free_mem_bytes) {
        (Some(min), Some(free)) if free < min => Some(Unusable::LowFreeMemory { free, min }),
        _ => None,
    }
}

/// One [`Candidate`] per visible device, in the order given (which must be by ordinal, as
/// [`choose`] requires), each marked by [`unusable`].
pub fn candidates(devices: &[DeviceFacts], min_free: Option<u64>) -> Vec<Candidate> {
    devices
        .iter()
        .map(|d| Candidate {
            ordinal: d.ordinal,
            unusable: unusable(d, min_free),
        })
        .collect()
}

/// A failed device-taking call that the fallback can explain and repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `CUDA_ERROR_INVALID_DEVICE` (101; `cudaErrorInvalidDevice` in the runtime): the
    /// ordinal or handle is not a visible device.
    InvalidOrdinal,
    /// `CUDA_ERROR_DEVICE_UNAVAILABLE` (46; `cudaErrorDevicesUnavailable`): the device is
    /// prohibited or held by another process.
    Unavailable,
    /// `CUDA_ERROR_OUT_OF_MEMORY` (2) from a call that creates a context
    /// (`cuCtxCreate*`, `cuDevicePrimaryCtxRetain`): no memory left for a context.
    ContextOutOfMemory,
}

impl Fault {
    /// The fault behind a failure with `code` (a `CUresult`, or for `cudaSetDevice` the
    /// `cudaError_t`, which has the same numbers for these: driver_types.h), or `None` when
    /// it is not a device fault. `creates_context`: the call creates a context, so out of
    /// memory means the device has no room for one.
    pub fn classify(code: u32, creates_context: bool) -> Option<Fault> {
        match code {
            101 => Some(Fault::InvalidOrdinal),
            46 => Some(Fault::Unavailable),
            2 if creates_context => Some(Fault::ContextOutOfMemory),
            _ => None,
        }
    }

    /// The `fault` field of `device_fault` events.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::InvalidOrdinal => "invalid_ordinal",
            Fault::Unavailable => "device_unavailable",
            Fault::ContextOutOfMemory => "context_out_of_memory",
        }
    }

    /// Why `requested` was replaced, for the `reason` of `device_fallback` events.
    pub fn reason(self, requested: i32) -> String {
        match self {
            Fault::InvalidOrdinal => format!("ordinal {requested} is not visible"),
            Fault::Unavailable => format!("ordinal {requested} is unavailable"),
            Fault::ContextOutOfMemory => {
                format!("ordinal {requested} has no memory for a context")
            }
        }
    }

    /// Whether the requested device itself is to be marked as refusing contexts: it exists
    /// but would not take one (unavailable, or out of memory), unlike an invalid ordinal.
    pub fn marks_device(self) -> bool {
        self != Fault::InvalidOrdinal
    }
}

/// Whether a retry that failed with `code` moves on to the next device: only a context
/// creation refused for want of the device (46 unavailable, 2 out of memory), which marks
/// that device as refusing contexts. Any other failure is the program's answer.
pub fn moves_on(creates_context: bool, code: u32) -> bool {
    creates_context && matches!(code, 46 | 2)
}

/// A failed device-taking call to repair: the facts [`OrdinalMap::fall_back`] needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The ordinal the program asked for (for a `CUdevice` handle, its ordinal).
    pub requested: i32,
    /// The code the call failed with.
    pub code: u32,
    /// The fault, from [`Fault::classify`].
    pub fault: Fault,
    /// The call creates a context (a retry refused for want of the device moves on).
    pub creates_context: bool,
}

/// One retry as the shim made it: the result to hand the caller and its code (0 for
/// success), or `None` when the chosen device could not even be addressed (no `CUdevice`
/// handle for it).
pub type Attempt<R> = Option<(R, u32)>;

/// How [`OrdinalMap::fall_back`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback<R> {
    /// The retry on `chosen` succeeded: announce the repair and return `result`.
    Repaired {
        /// The device that took the work.
        chosen: i32,
        /// The successful retry's result.
        result: R,
    },
    /// No device can take the work: the original error stands (said once per ordinal).
    NoDevice,
    /// The retry on `chosen` failed in a way that does not move on: return its result.
    Failed {
        /// The device tried last.
        chosen: i32,
        /// The failed retry's result.
        result: R,
    },
    /// The chosen device could not be addressed, or every attempt was used: the original
    /// error stands.
    GaveUp,
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

    /// The retry loop: marks the requested device refused when the fault says it exists
    /// but would not take work, then tries the device [`OrdinalMap::resolve`] gives through
    /// `attempt` until one succeeds, one fails in a way that does not move on
    /// ([`moves_on`]), no device is left, or as many attempts as there are candidates (at
    /// least one) were made. A device that refuses a context is marked refused, so no device
    /// is tried twice in one call, and the next call for the same ordinal starts from the
    /// choice that worked.
    pub fn fall_back<R>(
        &self,
        req: &Request,
        candidates: &[Candidate],
        mut attempt: impl FnMut(i32) -> Attempt<R>,
    ) -> Fallback<R> {
        if req.fault.marks_device() {
            self.mark_refused(req.requested, req.code);
        }
        for _ in 0..candidates.len().max(1) {
            let Some(chosen) = self.resolve(req.requested, candidates) else {
                return Fallback::NoDevice;
            };
            let Some((result, code)) = attempt(chosen) else {
                return Fallback::GaveUp;
            };
            if code == 0 {
                return Fallback::Repaired { chosen, result };
            }
            if !moves_on(req.creates_context, code) {
                return Fallback::Failed { chosen, result };
            }
            self.mark_refused(chosen, code);
        }
        Fallback::GaveUp
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

    fn facts(ordinal: i32) -> DeviceFacts {
        DeviceFacts {
            ordinal,
            ..DeviceFacts::default()
        }
    }

    #[test]
    fn usability_in_order_of_the_rules() {
        assert_eq!(unusable(&facts(0), Some(1 << 30)), None);
        let all = DeviceFacts {
            ordinal: 0,
            excluded: true,
            prohibited: true,
            exclusive_process: true,
            busy_processes: Some(1),
            free_mem_bytes: Some(1),
        };
        assert_eq!(unusable(&all, Some(2)), Some(Unusable::Excluded));
        let d = DeviceFacts {
            excluded: false,
            ..all
        };
        assert_eq!(unusable(&d, Some(2)), Some(Unusable::Prohibited));
        let d = DeviceFacts {
            prohibited: false,
            ..d
        };
        assert_eq!(unusable(&d, Some(2)), Some(Unusable::Busy));
        // Exclusive-process with nobody else on it, or not known to be held: usable.
        for busy in [Some(0), None] {
            let free = DeviceFacts {
                busy_processes: busy,
                ..d
            };
            assert_eq!(
                unusable(&free, Some(2)),
                Some(Unusable::LowFreeMemory { free: 1, min: 2 })
            );
            assert_eq!(unusable(&free, None), None);
        }
        // Busy matters only in exclusive-process mode.
        let shared = DeviceFacts {
            exclusive_process: false,
            busy_processes: Some(3),
            free_mem_bytes: None,
            ..d
        };
        assert_eq!(unusable(&shared, Some(2)), None);
    }

    #[test]
    fn candidates_keep_the_order_and_mark_each() {
        let devs = [
            facts(0),
            DeviceFacts {
                excluded: true,
                ..facts(1)
            },
            DeviceFacts {
                free_mem_bytes: Some(10),
                ..facts(2)
            },
        ];
        assert_eq!(
            candidates(&devs, Some(20)),
            vec![
                ok(0),
                bad(1, Unusable::Excluded),
                bad(2, Unusable::LowFreeMemory { free: 10, min: 20 })
            ]
        );
        assert_eq!(candidates(&[], None), vec![]);
    }

    #[test]
    fn classify_names_and_reasons() {
        assert_eq!(Fault::classify(101, false), Some(Fault::InvalidOrdinal));
        assert_eq!(Fault::classify(46, false), Some(Fault::Unavailable));
        assert_eq!(Fault::classify(2, true), Some(Fault::ContextOutOfMemory));
        // Out of memory outside context creation is not a device fault, nor is any other code.
        assert_eq!(Fault::classify(2, false), None);
        assert_eq!(Fault::classify(1, true), None);
        assert_eq!(Fault::classify(0, true), None);
        assert_eq!(Fault::InvalidOrdinal.as_str(), "invalid_ordinal");
        assert_eq!(Fault::Unavailable.as_str(), "device_unavailable");
        assert_eq!(Fault::ContextOutOfMemory.as_str(), "context_out_of_memory");
        assert_eq!(Fault::InvalidOrdinal.reason(3), "ordinal 3 is not visible");
        assert_eq!(Fault::Unavailable.reason(1), "ordinal 1 is unavailable");
        assert_eq!(
            Fault::ContextOutOfMemory.reason(0),
            "ordinal 0 has no memory for a context"
        );
        assert!(!Fault::InvalidOrdinal.marks_device());
        assert!(Fault::Unavailable.marks_device());
        assert!(moves_on(true, 46) && moves_on(true, 2));
        assert!(!moves_on(false, 46) && !moves_on(true, 1) && !moves_on(true, 101));
    }

    fn request(requested: i32, fault: Fault, creates_context: bool) -> Request {
        let code = match fault {
            Fault::InvalidOrdinal => 101,
            Fault::Unavailable => 46,
            Fault::ContextOutOfMemory => 2,
        };
        Request {
            requested,
            code,
            fault,
            creates_context,
        }
    }

    #[test]
    fn invalid_ordinal_goes_to_the_next_device_and_stays() {
        let m = OrdinalMap::new();
        let c = [ok(0), ok(1)];
        let req = request(3, Fault::InvalidOrdinal, false);
        let mut tried = vec![];
        let out = m.fall_back(&req, &c, |o| {
            tried.push(o);
            Some((o * 10, 0))
        });
        assert_eq!(
            out,
            Fallback::Repaired {
                chosen: 1,
                result: 10
            }
        );
        assert_eq!(tried, vec![1]);
        // An invalid ordinal is not a device that refused.
        assert!(m.refused().is_empty());
        assert_eq!(m.choices(), BTreeMap::from([(3, 1)]));
    }

    #[test]
    fn refused_contexts_move_on_and_other_failures_stop() {
        let m = OrdinalMap::new();
        let c = [ok(0), ok(1), ok(2), ok(3)];
        let req = request(1, Fault::Unavailable, true);
        let mut tried = vec![];
        let out = m.fall_back(&req, &c, |o| {
            tried.push(o);
            Some(((), if o == 2 { 2 } else { 0 }))
        });
        assert_eq!(
            out,
            Fallback::Repaired {
                chosen: 3,
                result: ()
            }
        );
        // The requested device is never tried: it refused first.
        assert_eq!(tried, vec![2, 3]);
        assert_eq!(m.refused(), BTreeMap::from([(1, 46), (2, 2)]));
        // A failure that is the program's own answer ends the loop with that answer.
        let m = OrdinalMap::new();
        let out = m.fall_back(&req, &c, |o| Some((o, 1)));
        assert_eq!(
            out,
            Fallback::Failed {
                chosen: 2,
                result: 2
            }
        );
        // Outside context creation, 46 on the retry does not move on either.
        let m = OrdinalMap::new();
        let req = request(1, Fault::Unavailable, false);
        let out = m.fall_back(&req, &c, |o| Some((o, 46)));
        assert_eq!(
            out,
            Fallback::Failed {
                chosen: 2,
                result: 2
            }
        );
    }

    #[test]
    fn stops_when_no_device_is_left_or_it_cannot_be_addressed() {
        let m = OrdinalMap::new();
        let req = request(0, Fault::Unavailable, true);
        let c = [ok(0), ok(1)];
        let mut tried = vec![];
        let out: Fallback<()> = m.fall_back(&req, &c, |o| {
            tried.push(o);
            Some(((), 46))
        });
        assert_eq!(out, Fallback::NoDevice);
        assert_eq!(tried, vec![1]);
        let out: Fallback<()> = OrdinalMap::new().fall_back(&req, &[], |_| unreachable!());
        assert_eq!(out, Fallback::NoDevice);
        let out: Fallback<()> = OrdinalMap::new().fall_back(&req, &c, |_| None);
        assert_eq!(out, Fallback::GaveUp);
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

        #[test]
        fn retry_loop_tries_each_device_once_and_stops_at_the_first_success(
            requested in -3i32..20,
            usable in proptest::collection::vec(any::<bool>(), 0..10),
            // Per ordinal: 0 success, 46 or 2 refused, 1 another failure, 255 unaddressable.
            answers in proptest::collection::vec(
                prop_oneof![Just(0u32), Just(46), Just(2), Just(1), Just(255)], 10),
            fault in prop_oneof![
                Just(Fault::InvalidOrdinal),
                Just(Fault::Unavailable),
                Just(Fault::ContextOutOfMemory)
            ],
            creates_context in any::<bool>(),
        ) {
            let c: Vec<Candidate> = usable.iter().enumerate().map(|(i, &u)| {
                if u { ok(i as i32) } else { bad(i as i32, Unusable::Busy) }
            }).collect();
            let m = OrdinalMap::new();
            let req = request(requested, fault, creates_context);
            let mut tried: Vec<i32> = vec![];
            let out = m.fall_back(&req, &c, |o| {
                tried.push(o);
                let code = answers[o as usize];
                (code != 255).then_some((o, code))
            });
            // Never the same device twice, never more attempts than candidates (one at least).
            let distinct: BTreeSet<i32> = tried.iter().copied().collect();
            prop_assert_eq!(distinct.len(), tried.len());
            prop_assert!(tried.len() <= c.len().max(1));
            // Only usable devices, and not the requested one once it refused.
            for &o in &tried {
                prop_assert!(usable[o as usize]);
                if fault.marks_device() {
                    prop_assert_ne!(o, requested);
                }
            }
            // Every attempt before the last one moved on.
            if let Some((_, before)) = tried.split_last() {
                for &o in before {
                    prop_assert!(moves_on(creates_context, answers[o as usize]));
                }
            }
            match out {
                Fallback::Repaired { chosen, result } => {
                    prop_assert_eq!(Some(&chosen), tried.last());
                    prop_assert_eq!(result, chosen);
                    prop_assert_eq!(answers[chosen as usize], 0);
                    prop_assert_eq!(m.get(requested), Some(chosen));
                }
                Fallback::Failed { chosen, result } => {
                    prop_assert_eq!(Some(&chosen), tried.last());
                    prop_assert_eq!(result, chosen);
                    let code = answers[chosen as usize];
                    prop_assert!(code != 0 && code != 255 && !moves_on(creates_context, code));
                }
                Fallback::NoDevice => {
                    // Every usable device was tried and refused, or is the refused request.
                    for (o, &u) in usable.iter().enumerate() {
                        let o = o as i32;
                        prop_assert!(
                            !u || tried.contains(&o) || (fault.marks_device() && o == requested)
                        );
                    }
                }
                Fallback::GaveUp => {
                    prop_assert!(
                        tried.last().is_some_and(|&o| answers[o as usize] == 255)
                            || tried.len() == c.len().max(1)
                    );
                }
            }
        }
    }
}
