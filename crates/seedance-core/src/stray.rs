//! Stray contexts: a context a process made on a device it does no work on, while it works
//! on another device.
//!
//! A process *works on* a device when, in any of its contexts there, it launched a kernel,
//! queued an asynchronous copy or another stream operation, or holds more than
//! [`IDLE_MAX_BYTES`] of device memory. A context on device `j` is *stray* when `j` is not
//! worked on and some other device is. This is the multi-GPU host's most common cause of a
//! full device 0: every rank of a job that works on its own device also leaves a context
//! (and the memory a context costs) on device 0.
//!
//! When it is decided. At the moment a context is created the answer is not known: a
//! process that legitimately uses two devices creates its second context exactly as a stray
//! one is created, and only what it does next tells them apart; and a stray context is often
//! made *before* the real work starts elsewhere (a context on device 0 first, then
//! `cudaSetDevice(1)`). So the rule is evaluated when the context ends (destroy, reset, last
//! primary release: reported then if another device is already worked on) and otherwise at
//! exit (the shim's `.fini_array` entry, while the driver is still up), which catches both
//! orders. The shim reports each device once per process ([`explain_stray`]) and lists every
//! stray context again in the exit summary with what the process finally put there.
//!
//! The opt-in repair ([`crate::config::StrayRepair`], `SEEDANCE_STRAY_CONTEXT`) acts before
//! a primary-context retain of device 0 when [`repair_target`] names the single device the
//! process works on.

use crate::alloc::short;
use std::fmt::Write as _;

/// Most device memory a process may hold on a device and still count as doing nothing
/// there: 2 MiB, one segment of PyTorch's caching allocator's small-block pool
/// (`kSmallBuffer` in `c10/cuda/CUDACachingAllocator.cpp`), which is what one small tensor
/// on the default device costs. A workload that puts data on a device goes past it (or
/// launches there, which counts on its own).
pub const IDLE_MAX_BYTES: u64 = 2 << 20;

/// What a process did on one device, summed over all its contexts there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceUse {
    /// CUDA ordinal.
    pub device: i32,
    /// Contexts the process made there (created or primary incarnations), alive or ended.
    pub contexts: u32,
    /// Of those, the ones alive now. Only a device with one is judged at exit
    /// ([`judged_at_exit`]): a context that ended was judged when it ended.
    pub live: u32,
    /// Kernel launches counted in those contexts.
    pub launches: u64,
    /// Asynchronous copies and other stream operations counted there.
    pub other_work: u64,
    /// Bytes of the process's live device allocations there (the largest figure seen at
    /// any evaluation, so memory freed with an ended context still counts).
    pub bytes: u64,
    /// Number of live allocations behind `bytes` at that moment.
    pub allocations: u64,
}

impl DeviceUse {
    /// Whether the process works on this device ([`IDLE_MAX_BYTES`], module docs).
    pub fn worked(&self) -> bool {
        self.launches > 0 || self.other_work > 0 || self.bytes > IDLE_MAX_BYTES
    }

    /// `3 launches, 1 allocation (256.0 MiB)`, or `no launch, no allocation`.
    pub fn describe(&self) -> String {
        let mut s = match self.launches {
            0 => "no launch".to_string(),
            1 => "1 launch".to_string(),
            n => format!("{n} launches"),
        };
        if self.other_work > 0 {
            let _ = write!(s, ", {} copies or other stream operations", self.other_work);
        }
        match self.allocations {
            0 if self.bytes == 0 => s.push_str(", no allocation"),
            0 => {
                let _ = write!(s, ", {} allocated", short(self.bytes));
            }
            1 => {
                let _ = write!(s, ", 1 allocation ({})", short(self.bytes));
            }
            n => {
                let _ = write!(s, ", {n} allocations ({})", short(self.bytes));
            }
        }
        s
    }
}

/// The devices, other than `device`, that the process works on; empty when `device` is
/// worked on too or no other device is (then a context on `device` is not stray).
pub fn working_elsewhere(uses: &[DeviceUse], device: i32) -> Vec<DeviceUse> {
    if uses.iter().any(|u| u.device == device && u.worked()) {
        return Vec::new();
    }
    uses.iter()
        .filter(|u| u.device != device && u.worked())
        .copied()
        .collect()
}

/// Whether the device is judged at exit: a context of the process is alive there. A
/// context that ended was judged at its end, against the work elsewhere by then: one that
/// ended before any work (a launcher that asks every device for its free memory, then works
/// on one) is not stray.
pub fn judged_at_exit(u: &DeviceUse) -> bool {
    u.live > 0
}

/// For the opt-in repair, before a primary-context retain of `device`: the one device the
/// process works on, when the retain is for device 0, the process never had a context on
/// device 0, and it works on exactly one device (not 0). `None` otherwise: then the retain
/// goes to the driver unchanged.
pub fn repair_target(uses: &[DeviceUse], device: i32) -> Option<i32> {
    if device != 0 || uses.iter().any(|u| u.device == 0 && u.contexts > 0) {
        return None;
    }
    let mut worked = uses.iter().filter(|u| u.worked());
    let only = worked.next()?;
    (worked.next().is_none() && only.device != 0).then_some(only.device)
}

/// What a stray context costs, for the explanation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextMemory {
    /// NVML's used memory of this process on the device (`nvmlDeviceGetComputeRunningProcesses`),
    /// bytes: the context and anything the process allocated there.
    Nvml(u64),
    /// NVML is present but does not list this process there (another PID namespace, as in
    /// most containers, or a driver that hides per-process memory).
    NotListed,
    /// NVML is absent or did not answer.
    Unknown,
}

/// Everything one stray-context explanation names.
#[derive(Debug, Clone)]
pub struct StrayFacts<'a> {
    /// The device of the stray context.
    pub device: i32,
    /// The call that made the context (`cuDevicePrimaryCtxRetain`).
    pub function: &'a str,
    /// Kernel thread id of the caller.
    pub tid: u64,
    /// What the process did on `device`.
    pub there: DeviceUse,
    /// The devices it works on ([`working_elsewhere`]).
    pub elsewhere: &'a [DeviceUse],
    /// The context's memory.
    pub memory: ContextMemory,
}

/// The stray-context explanation (without the `seedance: ` prefix).
pub fn explain_stray(f: &StrayFacts<'_>) -> String {
    let j = f.device;
    let work: Vec<String> = f
        .elsewhere
        .iter()
        .map(|u| format!("device {} ({})", u.device, u.describe()))
        .collect();
    let mut s = format!(
        "stray context on device {j}: {} on thread {} made a context on device {j}, but this \
         process works on {} and did nothing on device {j} ({}); ",
        f.function,
        f.tid,
        work.join(" and "),
        f.there.describe()
    );
    match f.memory {
        ContextMemory::Nvml(b) => {
            let _ = write!(
                s,
                "it holds {} of device {j}'s memory (NVML, this process's used memory there); ",
                short(b)
            );
        }
        ContextMemory::NotListed => {
            let _ = write!(
                s,
                "its memory is unknown: NVML does not list this process on device {j} (another \
                 PID namespace); "
            );
        }
        ContextMemory::Unknown => s.push_str("its memory is unknown without NVML; "),
    }
    let k = f.elsewhere.first().map_or(0, |u| u.device);
    let _ = write!(
        s,
        "usual causes: a torch.distributed call (barrier, destroy_process_group) made before \
         torch.cuda.set_device({k}), a tensor created on the default device cuda:0, a library \
         that initialises device 0, CUDA_VISIBLE_DEVICES not narrowed to one device per rank; \
         fix: call torch.cuda.set_device({k}) (cudaSetDevice({k})) before any other CUDA call, \
         or give each rank CUDA_VISIBLE_DEVICES=<its device>"
    );
    s
}

/// A process NVML lists on a device (`nvmlDeviceGetComputeRunningProcesses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Process id, in the PID namespace of the host's driver.
    pub pid: u32,
    /// Used device memory, bytes, where NVML reports it.
    pub used: Option<u64>,
}

/// The clause an out-of-memory explanation on `device` gains from NVML's process list
/// (`holders`, `None` without NVML), leaving out this process (`me`): which other processes
/// hold memory there and how much would be free without them. Empty when NVML lists no
/// other process. Whether those processes work on another device is in their own traces,
/// which the shim does not read (`seedance-analyze summary` joins them: stray contexts).
pub fn explain_holders(device: i32, holders: Option<&[Holder]>, me: u32) -> String {
    let Some(holders) = holders else {
        return format!(
            "; which other processes hold memory on device {device} is unknown (no NVML)"
        );
    };
    let others: Vec<&Holder> = holders.iter().filter(|h| h.pid != me).collect();
    if others.is_empty() {
        return String::new();
    }
    let list: Vec<String> = others
        .iter()
        .map(|h| match h.used {
            Some(b) => format!("pid {} ({})", h.pid, short(b)),
            None => format!("pid {} (memory not reported)", h.pid),
        })
        .collect();
    let known: u64 = others.iter().filter_map(|h| h.used).sum();
    let n = others.len();
    let mut s = format!(
        "; NVML lists {n} other process{} holding memory on device {device}: {}",
        if n == 1 { "" } else { "es" },
        list.join(", ")
    );
    if known > 0 {
        let _ = write!(
            s,
            "; without {} {} more would be free",
            if n == 1 { "it" } else { "them" },
            short(known)
        );
    }
    let _ = write!(
        s,
        " (whether {} on another device is in {} own traces: seedance-analyze summary lists \
         stray contexts per device)",
        if n == 1 { "it works" } else { "they work" },
        if n == 1 { "its" } else { "their" }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(device: i32, launches: u64, bytes: u64) -> DeviceUse {
        DeviceUse {
            device,
            contexts: 1,
            launches,
            bytes,
            allocations: u64::from(bytes > 0),
            ..DeviceUse::default()
        }
    }

    #[test]
    fn only_devices_with_a_live_context_are_judged_at_exit() {
        let ended = used(0, 0, 0);
        assert!(!judged_at_exit(&ended));
        let live = DeviceUse { live: 1, ..ended };
        assert!(judged_at_exit(&live));
    }

    #[test]
    fn a_context_with_work_elsewhere_and_none_here_is_stray() {
        let uses = [used(0, 0, 0), used(1, 3, 256 << 20)];
        assert_eq!(working_elsewhere(&uses, 0), vec![uses[1]]);
        assert!(working_elsewhere(&uses, 1).is_empty());
    }

    #[test]
    fn two_worked_devices_are_not_stray() {
        let uses = [used(0, 1, 0), used(1, 3, 0)];
        assert!(working_elsewhere(&uses, 0).is_empty());
        assert!(working_elsewhere(&uses, 1).is_empty());
        // Memory above the threshold counts as work, at or below it does not.
        let uses = [used(0, 0, IDLE_MAX_BYTES + 1), used(1, 3, 0)];
        assert!(working_elsewhere(&uses, 0).is_empty());
        let uses = [used(0, 0, IDLE_MAX_BYTES), used(1, 3, 0)];
        assert_eq!(working_elsewhere(&uses, 0).len(), 1);
    }

    #[test]
    fn nothing_is_stray_without_work_anywhere() {
        let uses = [used(0, 0, 0), used(1, 0, 4096)];
        assert!(working_elsewhere(&uses, 0).is_empty());
        assert!(working_elsewhere(&uses, 1).is_empty());
    }

    #[test]
    fn holders_clause_lists_the_others_and_what_they_hold() {
        assert_eq!(
            explain_holders(0, None, 1),
            "; which other processes hold memory on device 0 is unknown (no NVML)"
        );
        let me_only = [Holder {
            pid: 1,
            used: Some(5),
        }];
        assert_eq!(explain_holders(0, Some(&me_only), 1), "");
        assert_eq!(explain_holders(0, Some(&[]), 1), "");
        let list = [
            Holder {
                pid: 1,
                used: Some(5),
            },
            Holder {
                pid: 5001,
                used: Some(600 << 20),
            },
            Holder {
                pid: 5002,
                used: Some(1 << 30),
            },
            Holder {
                pid: 5003,
                used: None,
            },
        ];
        assert_eq!(
            explain_holders(0, Some(&list), 1),
            "; NVML lists 3 other processes holding memory on device 0: pid 5001 (600.0 MiB), \
             pid 5002 (1.0 GiB), pid 5003 (memory not reported); without them 1.6 GiB more would \
             be free (whether they work on another device is in their own traces: \
             seedance-analyze summary lists stray contexts per device)"
        );
    }

    #[test]
    fn the_repair_needs_device_0_unused_and_one_working_device() {
        let one = [used(3, 5, 0)];
        assert_eq!(repair_target(&one, 0), Some(3));
        assert_eq!(repair_target(&one, 1), None, "only device 0");
        let with0 = [used(0, 0, 0), used(3, 5, 0)];
        assert_eq!(repair_target(&with0, 0), None, "device 0 used before");
        let two = [used(2, 1, 0), used(3, 5, 0)];
        assert_eq!(repair_target(&two, 0), None, "two working devices");
        assert_eq!(repair_target(&[], 0), None, "no working device yet");
        let idle = [used(3, 0, 4096)];
        assert_eq!(repair_target(&idle, 0), None);
    }

    #[test]
    fn explanation_names_device_call_thread_work_memory_and_causes() {
        let there = DeviceUse {
            device: 0,
            contexts: 1,
            ..DeviceUse::default()
        };
        let elsewhere = [used(1, 4, 256 << 20)];
        let text = explain_stray(&StrayFacts {
            device: 0,
            function: "cuDevicePrimaryCtxRetain",
            tid: 77,
            there,
            elsewhere: &elsewhere,
            memory: ContextMemory::Nvml(500 << 20),
        });
        assert_eq!(
            text,
            "stray context on device 0: cuDevicePrimaryCtxRetain on thread 77 made a context on \
             device 0, but this process works on device 1 (4 launches, 1 allocation (256.0 MiB)) \
             and did nothing on device 0 (no launch, no allocation); it holds 500.0 MiB of device \
             0's memory (NVML, this process's used memory there); usual causes: a \
             torch.distributed call (barrier, destroy_process_group) made before \
             torch.cuda.set_device(1), a tensor created on the default device cuda:0, a library \
             that initialises device 0, CUDA_VISIBLE_DEVICES not narrowed to one device per \
             rank; fix: call torch.cuda.set_device(1) (cudaSetDevice(1)) before any other CUDA \
             call, or give each rank CUDA_VISIBLE_DEVICES=<its device>"
        );
        let text = explain_stray(&StrayFacts {
            memory: ContextMemory::Unknown,
            ..StrayFacts {
                device: 0,
                function: "cuCtxCreate_v2",
                tid: 1,
                there,
                elsewhere: &elsewhere,
                memory: ContextMemory::NotListed,
            }
        });
        assert!(text.contains("; its memory is unknown without NVML; usual causes"));
    }
}
