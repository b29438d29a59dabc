//! Allocation checks: why an allocation was (or would be) refused, in words that name the
//! size, the limit and the fix.
//!
//! [`check_request`] judges the size alone against the device (a zero size, a size larger
//! than the device's total memory — often a negative size that wrapped to a huge `size_t` —
//! or a `cuMemCreate` size that is not a multiple of the allocation granularity).
//! [`explain_oom`] explains `CUDA_ERROR_OUT_OF_MEMORY` from the memory state the shim
//! gathered after the failure: free and total memory of the device at that moment
//! (`cuMemGetInfo_v2`), the process's own live allocations there, and which other devices
//! have room (NVML). Sizes are bytes; texts show binary units (KiB = 2^10, GiB = 2^30).

use std::fmt::Write as _;

/// Which allocation entry point was called; decides which checks apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocKind {
    /// `cuMemAlloc_v2`.
    Device,
    /// `cuMemAllocPitch_v2` (the size is `WidthInBytes x Height`).
    Pitch,
    /// `cuMemAllocAsync(_ptsz)`: from the device's memory pool.
    Async,
    /// `cuMemAllocManaged`: may oversubscribe device memory, so only a wrapped (negative)
    /// size is judged against the total.
    Managed,
    /// `cuMemHostAlloc`: pinned host memory.
    Host,
    /// `cuMemCreate`: physical memory for the virtual memory API, in multiples of the
    /// allocation granularity.
    Physical,
}

/// Which check an allocation failed; the names are the `check` field of `alloc_fault`
/// events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocCheck {
    /// A size of 0.
    ZeroSize,
    /// Larger than the device's total memory.
    ExceedsTotal,
    /// A `cuMemCreate` size that is not a multiple of the granularity.
    Granularity,
    /// The driver ran out of memory.
    OutOfMemory,
    /// Not a fault the shim can name (the driver's own message may say more).
    Unknown,
}

impl AllocCheck {
    /// The snake_case name used in the trace.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocCheck::ZeroSize => "zero_size",
            AllocCheck::ExceedsTotal => "exceeds_total",
            AllocCheck::Granularity => "granularity",
            AllocCheck::OutOfMemory => "out_of_memory",
            AllocCheck::Unknown => "unknown",
        }
    }

    /// The `CUresult` the driver returns for this fault: `CUDA_ERROR_INVALID_VALUE` (1) for a
    /// zero size and a granularity mismatch, `CUDA_ERROR_OUT_OF_MEMORY` (2) otherwise.
    pub fn driver_code(self) -> u32 {
        match self {
            AllocCheck::ZeroSize | AllocCheck::Granularity | AllocCheck::Unknown => 1,
            AllocCheck::ExceedsTotal | AllocCheck::OutOfMemory => 2,
        }
    }
}

/// Why an allocation fails: the check, the limit in bytes (total memory, granularity, free
/// memory) and a one-line explanation with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocFinding {
    /// The check that failed.
    pub check: AllocCheck,
    /// The limit in bytes, when the check has one.
    pub limit: Option<u64>,
    /// The explanation, naming the size, the limit and the fix.
    pub explanation: String,
}

/// `bytes` read as the signed `ssize_t` a C program may have computed it as: a negative
/// size converted to `size_t` shows as a huge number, `(size_t)-4096` as -4096.
pub fn signed(bytes: u64) -> i64 {
    bytes as i64
}

/// A size in the largest binary unit that keeps it at 1 or more, one decimal
/// (`80.0 GiB`), or in bytes below 1 KiB (`512 bytes`).
pub fn short(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut unit = 0;
    let mut scale: u64 = 1024;
    while unit + 1 < UNITS.len() && bytes / scale >= 1024 {
        scale <<= 10;
        unit += 1;
    }
    format!("{:.1} {}", bytes as f64 / scale as f64, UNITS[unit])
}

/// [`short`] followed by the exact count: `2.0 GiB (2147483648 bytes)`; plain bytes below
/// 1 KiB.
pub fn show(bytes: u64) -> String {
    if bytes < 1024 {
        short(bytes)
    } else {
        format!("{} ({bytes} bytes)", short(bytes))
    }
}

fn on(device: Option<i32>) -> String {
    device.map_or_else(|| "the device".to_string(), |d| format!("device {d}"))
}

/// Judges the size of a request on its own: 0 bytes, more than `total` (the device's total
/// memory, `cuDeviceTotalMem_v2`), or for [`AllocKind::Physical`] not a multiple of
/// `granularity` (`cuMemGetAllocationGranularity`). `None` when the size is plausible.
pub fn check_request(
    kind: AllocKind,
    bytes: u64,
    device: Option<i32>,
    total: Option<u64>,
    granularity: Option<u64>,
) -> Option<AllocFinding> {
    if bytes == 0 {
        let what = match kind {
            AllocKind::Pitch => "a pitched allocation of WidthInBytes x Height = 0 bytes",
            AllocKind::Host => "0 bytes of pinned host memory",
            _ => "0 bytes",
        };
        return Some(AllocFinding {
            check: AllocCheck::ZeroSize,
            limit: None,
            explanation: format!(
                "the program asked for {what}; the driver refuses a size of 0: skip the \
                 allocation when the size is 0 (it usually comes from an empty tensor or a size \
                 computed from an empty input)"
            ),
        });
    }
    let wrapped = signed(bytes) < 0;
    if kind != AllocKind::Host {
        if let Some(total) = total {
            let judged = match kind {
                AllocKind::Managed => wrapped,
                _ => bytes > total,
            };
            if judged {
                let explanation = if wrapped {
                    format!(
                        "the program asked for {bytes} bytes, which is {} as a signed number: a \
                         negative size converted to size_t; no device has that much memory ({} \
                         has {} in all): check the arithmetic that computed the size",
                        signed(bytes),
                        on(device),
                        show(total)
                    )
                } else {
                    format!(
                        "the program asked for {}, more than the total memory of {} ({}): no \
                         allocation of that size can succeed there; split the data into smaller \
                         pieces or use a device with more memory",
                        show(bytes),
                        on(device),
                        show(total)
                    )
                };
                return Some(AllocFinding {
                    check: AllocCheck::ExceedsTotal,
                    limit: Some(total),
                    explanation,
                });
            }
        }
    }
    if kind == AllocKind::Physical {
        if let Some(g) = granularity.filter(|&g| g > 0) {
            if !bytes.is_multiple_of(g) {
                let up = bytes
                    .div_ceil(g)
                    .checked_mul(g)
                    .map_or_else(|| "a multiple of it".to_string(), show);
                return Some(AllocFinding {
                    check: AllocCheck::Granularity,
                    limit: Some(g),
                    explanation: format!(
                        "cuMemCreate size {} is not a multiple of the allocation granularity of \
                         {}, {} (cuMemGetAllocationGranularity); round the size up to {up}",
                        show(bytes),
                        on(device),
                        show(g)
                    ),
                });
            }
        }
    }
    None
}

/// What the process itself holds on the failing device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveOnDevice {
    /// Bytes in live allocations made through the hooked entry points.
    pub bytes: u64,
    /// Number of those allocations.
    pub count: u64,
    /// Allocations the shim could not record (its table was full), so the totals are a
    /// lower bound when this is not 0.
    pub untracked: u64,
}

/// Another visible device and its free memory (NVML, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherDevice {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// Free memory now, bytes.
    pub free: u64,
}

/// The memory state gathered right after a `CUDA_ERROR_OUT_OF_MEMORY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomFacts {
    /// Which entry point failed.
    pub kind: AllocKind,
    /// Bytes requested.
    pub requested: u64,
    /// The device (None for pinned host memory).
    pub device: Option<i32>,
    /// Free bytes at that moment (`cuMemGetInfo_v2`; `MemAvailable` for host memory).
    pub free: Option<u64>,
    /// Total bytes (`cuMemGetInfo_v2`; `MemTotal` for host memory).
    pub total: Option<u64>,
    /// The process's own live allocations on the device, if tracked.
    pub live: Option<LiveOnDevice>,
    /// Those allocations by the library that asked for them (the tracked ones whose
    /// library the shim found; [`crate::holders`]).
    pub holders: Vec<crate::holders::Holding>,
    /// The other visible devices with their free memory (NVML); `None` when unknown.
    pub others: Option<Vec<OtherDevice>>,
}

impl OomFacts {
    /// The other devices with at least `requested` bytes free; `None` when unknown.
    pub fn with_room(&self) -> Option<Vec<OtherDevice>> {
        self.others.as_ref().map(|o| {
            o.iter()
                .copied()
                .filter(|d| d.free >= self.requested)
                .collect()
        })
    }
}

/// Explains `CUDA_ERROR_OUT_OF_MEMORY`: free and total memory at that moment, whether the
/// request was larger than the free memory (a genuine shortage) or smaller (fragmentation,
/// or memory held by another allocator or process), what this process holds, and which
/// other devices have room.
pub fn explain_oom(f: &OomFacts) -> AllocFinding {
    let mut t = String::new();
    if f.kind == AllocKind::Host {
        let _ = write!(
            t,
            "the program asked for {} of pinned host memory",
            show(f.requested)
        );
        if let (Some(free), Some(total)) = (f.free, f.total) {
            let _ = write!(
                t,
                "; the host has {} available of {} (MemAvailable, /proc/meminfo)",
                short(free),
                short(total)
            );
        }
        t.push_str(
            "; pinned memory cannot be swapped and may be capped by RLIMIT_MEMLOCK or a \
             container's memory limit: pin less, or keep the rest in pageable memory",
        );
        return AllocFinding {
            check: AllocCheck::OutOfMemory,
            limit: f.free,
            explanation: t,
        };
    }
    let dev = on(f.device);
    let _ = write!(t, "the program asked for {} on {dev}", show(f.requested));
    let shortage = match (f.free, f.total) {
        (Some(free), Some(total)) => {
            let _ = write!(
                t,
                ", which has {} free of {} right now (cuMemGetInfo)",
                short(free),
                short(total)
            );
            if f.requested > free {
                t.push_str(": the request is larger than the free memory (a genuine shortage)");
                Some(true)
            } else {
                t.push_str(
                    ": the request is smaller than the free memory, so the free memory is \
                     fragmented or held back by another allocator (a caching allocator, a memory \
                     pool) or another process",
                );
                Some(false)
            }
        }
        _ => None,
    };
    if let Some(live) = f.live {
        if live.count == 0 && live.untracked == 0 {
            let _ = write!(t, "; this process holds no allocations on {dev}");
        } else {
            let _ = write!(
                t,
                "; this process holds {} in {} live allocation{} on {dev}",
                short(live.bytes),
                live.count,
                if live.count == 1 { "" } else { "s" }
            );
            if live.untracked > 0 {
                let _ = write!(t, " (and {} more not tracked)", live.untracked);
            }
            let by = crate::holders::describe(&f.holders, short);
            if !by.is_empty() {
                let _ = write!(t, ": {by}");
            }
        }
    }
    let room = f.with_room();
    match (&f.others, &room) {
        (None, _) => t.push_str("; whether another device has room is unknown (no NVML)"),
        (Some(o), _) if o.is_empty() => {}
        (Some(_), Some(r)) if r.is_empty() => {
            t.push_str("; no other visible device has that much free (NVML)")
        }
        (Some(_), Some(r)) => {
            let list: Vec<String> = r
                .iter()
                .map(|d| format!("device {} ({} free)", d.ordinal, short(d.free)))
                .collect();
            let _ = write!(
                t,
                "; {} {} room (NVML)",
                list.join(", "),
                if r.len() == 1 { "has" } else { "have" }
            );
        }
        (Some(_), None) => {}
    }
    let mut fix = match shortage {
        Some(false) => "allocate fewer, larger blocks early, or release cached memory so the \
                        allocator can return it (torch.cuda.empty_cache(), a smaller pool release \
                        threshold)"
            .to_string(),
        _ => "free what is no longer needed or ask for less (a smaller batch)".to_string(),
    };
    if let Some(first) = room.as_ref().and_then(|r| r.first()) {
        let _ = write!(fix, ", or use device {}", first.ordinal);
    }
    let _ = write!(t, "; {fix}");
    AllocFinding {
        check: AllocCheck::OutOfMemory,
        limit: f.free,
        explanation: t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const TOTAL: u64 = 80 * GIB;

    #[test]
    fn sizes_in_words() {
        assert_eq!(short(0), "0 bytes");
        assert_eq!(short(1023), "1023 bytes");
        assert_eq!(short(1024), "1.0 KiB");
        assert_eq!(short(3 << 20), "3.0 MiB");
        assert_eq!(short(TOTAL), "80.0 GiB");
        assert_eq!(short(1536 * GIB), "1.5 TiB");
        assert_eq!(short(u64::MAX), "16.0 EiB");
        assert_eq!(show(2 * GIB), "2.0 GiB (2147483648 bytes)");
        assert_eq!(show(5), "5 bytes");
        assert_eq!(signed(u64::MAX - 4095), -4096);
        assert_eq!(signed(4096), 4096);
    }

    #[test]
    fn zero_size() {
        let f = check_request(AllocKind::Device, 0, Some(0), Some(TOTAL), None).unwrap();
        assert_eq!(f.check, AllocCheck::ZeroSize);
        assert_eq!(f.check.driver_code(), 1);
        assert_eq!(
            f.explanation,
            "the program asked for 0 bytes; the driver refuses a size of 0: skip the allocation \
             when the size is 0 (it usually comes from an empty tensor or a size computed from an \
             empty input)"
        );
        let f = check_request(AllocKind::Pitch, 0, None, None, None).unwrap();
        assert!(f.explanation.contains("WidthInBytes x Height = 0 bytes"));
    }

    #[test]
    fn wrapped_negative_size() {
        let bytes = (-4096i64) as u64;
        let f = check_request(AllocKind::Device, bytes, Some(0), Some(TOTAL), None).unwrap();
        assert_eq!(f.check, AllocCheck::ExceedsTotal);
        assert_eq!(f.check.driver_code(), 2);
        assert_eq!(f.limit, Some(TOTAL));
        assert_eq!(
            f.explanation,
            "the program asked for 18446744073709547520 bytes, which is -4096 as a signed number: \
             a negative size converted to size_t; no device has that much memory (device 0 has \
             80.0 GiB (85899345920 bytes) in all): check the arithmetic that computed the size"
        );
        // Managed memory may oversubscribe, but not by a wrapped size.
        assert!(check_request(AllocKind::Managed, 100 * GIB, Some(0), Some(TOTAL), None).is_none());
        assert_eq!(
            check_request(AllocKind::Managed, bytes, Some(0), Some(TOTAL), None).map(|f| f.check),
            Some(AllocCheck::ExceedsTotal)
        );
        // Host memory is not judged against a device.
        assert!(check_request(AllocKind::Host, bytes, None, Some(TOTAL), None).is_none());
    }

    #[test]
    fn larger_than_total() {
        let f = check_request(AllocKind::Async, 100 * GIB, Some(1), Some(TOTAL), None).unwrap();
        assert_eq!(
            f.explanation,
            "the program asked for 100.0 GiB (107374182400 bytes), more than the total memory of \
             device 1 (80.0 GiB (85899345920 bytes)): no allocation of that size can succeed \
             there; split the data into smaller pieces or use a device with more memory"
        );
        assert!(check_request(AllocKind::Device, TOTAL, Some(1), Some(TOTAL), None).is_none());
        assert!(check_request(AllocKind::Device, 100 * GIB, Some(1), None, None).is_none());
    }

    #[test]
    fn granularity() {
        let g = 2 << 20;
        let f = check_request(AllocKind::Physical, 3 << 20, Some(0), Some(TOTAL), Some(g)).unwrap();
        assert_eq!(f.check, AllocCheck::Granularity);
        assert_eq!(f.limit, Some(g));
        assert_eq!(
            f.explanation,
            "cuMemCreate size 3.0 MiB (3145728 bytes) is not a multiple of the allocation \
             granularity of device 0, 2.0 MiB (2097152 bytes) (cuMemGetAllocationGranularity); \
             round the size up to 4.0 MiB (4194304 bytes)"
        );
        assert!(
            check_request(AllocKind::Physical, 4 << 20, Some(0), Some(TOTAL), Some(g)).is_none()
        );
        assert!(check_request(AllocKind::Device, 3 << 20, Some(0), Some(TOTAL), Some(g)).is_none());
    }

    fn oom(requested: u64, free: u64) -> OomFacts {
        OomFacts {
            kind: AllocKind::Device,
            requested,
            device: Some(0),
            free: Some(free),
            total: Some(TOTAL),
            live: Some(LiveOnDevice {
                bytes: 60 * GIB,
                count: 3,
                untracked: 0,
            }),
            holders: Vec::new(),
            others: Some(vec![
                OtherDevice {
                    ordinal: 1,
                    free: 80 * GIB,
                },
                OtherDevice {
                    ordinal: 2,
                    free: GIB,
                },
            ]),
        }
    }

    #[test]
    fn names_the_libraries_that_hold_the_memory() {
        let mut facts = oom(20 * GIB, 8 * GIB);
        facts.holders = vec![crate::holders::Holding {
            file: "libxla_extension.so".into(),
            known: Some(crate::holders::Known::Jax),
            count: 3,
            bytes: 60 * GIB,
        }];
        let f = explain_oom(&facts);
        assert!(
            f.explanation.contains(
                "; this process holds 60.0 GiB in 3 live allocations on device 0: JAX \
                 (libxla_extension.so) holds 60.0 GiB in 3 allocations (JAX preallocates 75% of \
                 the device's memory when it starts: set XLA_PYTHON_CLIENT_PREALLOCATE=false, or \
                 a smaller XLA_PYTHON_CLIENT_MEM_FRACTION); device 1"
            ),
            "{}",
            f.explanation
        );
    }

    #[test]
    fn genuine_shortage() {
        let f = explain_oom(&oom(20 * GIB, 8 * GIB));
        assert_eq!(f.check, AllocCheck::OutOfMemory);
        assert_eq!(f.limit, Some(8 * GIB));
        assert_eq!(
            f.explanation,
            "the program asked for 20.0 GiB (21474836480 bytes) on device 0, which has 8.0 GiB \
             free of 80.0 GiB right now (cuMemGetInfo): the request is larger than the free memory \
             (a genuine shortage); this process holds 60.0 GiB in 3 live allocations on device 0; \
             device 1 (80.0 GiB free) has room (NVML); free what is no longer needed or ask for \
             less (a smaller batch), or use device 1"
        );
    }

    #[test]
    fn fragmentation_and_unknown_others() {
        let mut facts = oom(GIB, 8 * GIB);
        facts.others = None;
        facts.live = Some(LiveOnDevice {
            bytes: 4096,
            count: 1,
            untracked: 2,
        });
        let f = explain_oom(&facts);
        assert!(f.explanation.contains(
            "the request is smaller than the free memory, so the free memory is fragmented or held \
             back by another allocator (a caching allocator, a memory pool) or another process"
        ));
        assert!(f
            .explanation
            .contains("holds 4.0 KiB in 1 live allocation on device 0 (and 2 more not tracked)"));
        assert!(f
            .explanation
            .contains("whether another device has room is unknown (no NVML)"));
        assert!(f.explanation.ends_with("a smaller pool release threshold)"));
    }

    #[test]
    fn no_room_elsewhere_and_single_device() {
        let mut facts = oom(100 * GIB, GIB);
        facts.live = Some(LiveOnDevice::default());
        let f = explain_oom(&facts);
        assert!(f
            .explanation
            .contains("this process holds no allocations on device 0"));
        assert!(f
            .explanation
            .contains("no other visible device has that much free (NVML)"));
        facts.others = Some(vec![]);
        let f = explain_oom(&facts);
        assert!(!f.explanation.contains("NVML"), "{}", f.explanation);
        assert_eq!(facts.with_room(), Some(vec![]));
    }

    #[test]
    fn pinned_host_memory() {
        let f = explain_oom(&OomFacts {
            kind: AllocKind::Host,
            requested: 64 * GIB,
            device: None,
            free: Some(10 * GIB),
            total: Some(16 * GIB),
            live: None,
            holders: Vec::new(),
            others: None,
        });
        assert!(f.explanation.starts_with(
            "the program asked for 64.0 GiB (68719476736 bytes) of pinned host memory; the host \
             has 10.0 GiB available of 16.0 GiB"
        ));
    }

    #[test]
    fn names_and_codes() {
        for (c, n, code) in [
            (AllocCheck::ZeroSize, "zero_size", 1),
            (AllocCheck::ExceedsTotal, "exceeds_total", 2),
            (AllocCheck::Granularity, "granularity", 1),
            (AllocCheck::OutOfMemory, "out_of_memory", 2),
            (AllocCheck::Unknown, "unknown", 1),
        ] {
            assert_eq!((c.as_str(), c.driver_code()), (n, code));
        }
    }
}
