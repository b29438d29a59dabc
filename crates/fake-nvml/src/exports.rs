//! The `extern "C"` entry points with the exact `nvml.h` ABIs, and the structs they fill.
//!
//! Every entry point but `nvmlErrorString` runs through [`crate::global::call`] or
//! [`crate::global::call_init`] (panic guard, init check, call recorder). Null output
//! pointers are `NVML_ERROR_INVALID_ARGUMENT`; so is a handle that is not one of this
//! library's, or one past the device count. String outputs that do not fit the caller's
//! `length` (terminating NUL included) are `NVML_ERROR_INSUFFICIENT_SIZE`.
#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, CStr};

use crate::config::Gpu;
use crate::global::{self, call, call_init, dev_arg, handle, nvmlDevice_t, resolve, ret};
use crate::log::token;

/// `nvmlReturn_t`.
pub type nvmlReturn_t = c_uint;

/// What `nvmlSystemGetDriverVersion` reports.
pub const DRIVER_VERSION: &str = "580.159.04";
/// What `nvmlSystemGetCudaDriverVersion(_v2)` reports: CUDA 13.0, as `fake-cuda`.
pub const CUDA_DRIVER_VERSION: c_int = 13000;
/// `pciDeviceId` of every device: device 0x2335 (H200), vendor 0x10de (NVIDIA).
pub const PCI_DEVICE_ID: c_uint = 0x2335_10de;
/// `pciSubSystemId` of every device (an arbitrary NVIDIA subsystem).
pub const PCI_SUBSYSTEM_ID: c_uint = 0x18be_10de;
/// The pid of the other process reported on a busy device.
pub const BUSY_PID: c_uint = 4242;
/// The memory that process uses: 1 GiB.
pub const BUSY_USED_MEM: u64 = 1 << 30;
/// `nvmlProcessInfo_t` instance ids for a device without MIG (`0xFFFFFFFF`).
pub const NO_INSTANCE: c_uint = 0xFFFF_FFFF;
/// `nvmlMemory_v2` (`NVML_STRUCT_VERSION(Memory, 2)`): the size of `nvmlMemory_v2_t` | 2 << 24.
pub const MEMORY_V2_VERSION: c_uint = std::mem::size_of::<nvmlMemory_v2_t>() as c_uint | (2 << 24);

/// `nvmlPciInfo_t` (the layout `nvmlDeviceGetPciInfo_v3` fills).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nvmlPciInfo_t {
    /// `domain:bus:device.function`, 4-digit domain (`NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE`).
    pub busIdLegacy: [c_char; 16],
    /// PCI domain.
    pub domain: c_uint,
    /// PCI bus.
    pub bus: c_uint,
    /// Device (slot) on the bus.
    pub device: c_uint,
    /// Device id << 16 | vendor id.
    pub pciDeviceId: c_uint,
    /// Subsystem id.
    pub pciSubSystemId: c_uint,
    /// `domain:bus:device.function`, 8-digit domain (`NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE`).
    pub busId: [c_char; 32],
}

/// `nvmlMemory_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct nvmlMemory_t {
    /// Total bytes.
    pub total: u64,
    /// Free bytes.
    pub free: u64,
    /// Used bytes (`total - free`).
    pub used: u64,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct nvmlMemory_v2_t {
    /// Must be [`MEMORY_V2_VERSION`] on entry.
    pub version: c_uint,
    /// Total bytes.
    pub total: u64,
    /// Bytes reserved by the driver (0 here).
    pub reserved: u64,
    /// Free bytes.
    pub free: u64,
    /// Used bytes (`total - reserved - free`).
    pub used: u64,
}

/// `nvmlProcessInfo_t` (also `nvmlProcessInfo_v2_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct nvmlProcessInfo_t {
    /// Process id.
    pub pid: c_uint,
    /// Bytes of device memory the process uses.
    pub usedGpuMemory: u64,
    /// MIG GPU instance, [`NO_INSTANCE`] here.
    pub gpuInstanceId: c_uint,
    /// MIG compute instance, [`NO_INSTANCE`] here.
    pub computeInstanceId: c_uint,
}

/// Copies `s` and a NUL into `dst` (`len` bytes): `INVALID_ARGUMENT` for null,
/// `INSUFFICIENT_SIZE` (nothing written) when it does not fit.
///
/// # Safety
///
/// `dst` must be null or valid for writes of `len` bytes.
unsafe fn put_str(dst: *mut c_char, len: c_uint, s: &str) -> Result<(), u32> {
    if dst.is_null() {
        return Err(ret::INVALID_ARGUMENT);
    }
    if (len as usize) <= s.len() {
        return Err(ret::INSUFFICIENT_SIZE);
    }
    // SAFETY: `dst` is non-null and valid for `len >= s.len() + 1` bytes (caller contract);
    // the source is our own string, so the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), s.len());
        dst.add(s.len()).write(0);
    }
    Ok(())
}

/// Writes `v` through `p`: `INVALID_ARGUMENT` for null.
///
/// # Safety
///
/// `p` must be null or valid for writing one `T`.
unsafe fn put<T>(p: *mut T, v: T) -> Result<(), u32> {
    if p.is_null() {
        return Err(ret::INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller guarantees it is valid for one write of `T`.
    unsafe { p.write(v) };
    Ok(())
}

/// A fixed C string field filled with `s` (truncated to leave a NUL).
fn c_field<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

/// The text of a C string argument, `None` for null.
///
/// # Safety
///
/// `p` must be null or a valid NUL-terminated string.
unsafe fn arg_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (caller contract).
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn shown(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "(null)".into(), token)
}

/// `nvmlReturn_t nvmlInit_v2(void)`: see [`global::init`].
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    call("nvmlInit_v2", String::new, || global::init(0))
}

/// `nvmlReturn_t nvmlInitWithFlags(unsigned int flags)`: see [`global::init`].
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(flags: c_uint) -> nvmlReturn_t {
    call(
        "nvmlInitWithFlags",
        || format!("flags={flags}"),
        || global::init(flags),
    )
}

/// `nvmlReturn_t nvmlShutdown(void)`: see [`global::shutdown`].
#[no_mangle]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    call("nvmlShutdown", String::new, global::shutdown)
}

/// `const char *nvmlErrorString(nvmlReturn_t result)`: a static description, as the real
/// library spells it; `"Unknown Error"` for codes not listed. Works before init.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        15 => c"GPU is lost",
        20 => c"Insufficient Memory",
        25 => c"Argument Version Mismatch",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

/// `nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)`:
/// [`DRIVER_VERSION`].
///
/// # Safety
///
/// `version` must be null or valid for writes of `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    call_init(
        "nvmlSystemGetDriverVersion",
        || format!("len={length}"),
        // SAFETY: forwarded caller contract.
        |_| unsafe { put_str(version, length, DRIVER_VERSION) },
    )
}

/// Shared body of the two CUDA version entry points.
///
/// # Safety
///
/// `v` must be null or valid for writing one `int`.
unsafe fn cuda_version(name: &str, v: *mut c_int) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    call_init(name, String::new, |_| unsafe {
        put(v, CUDA_DRIVER_VERSION)
    })
}

/// `nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)`: 13000.
///
/// # Safety
///
/// `v` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    unsafe { cuda_version("nvmlSystemGetCudaDriverVersion", v) }
}

/// `nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)`: 13000.
///
/// # Safety
///
/// `v` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    unsafe { cuda_version("nvmlSystemGetCudaDriverVersion_v2", v) }
}

/// `nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)`: every physical device
/// (`CUDA_VISIBLE_DEVICES` does not apply).
///
/// # Safety
///
/// `count` must be null or valid for writing one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    call_init("nvmlDeviceGetCount_v2", String::new, |gpus| {
        // SAFETY: forwarded caller contract.
        unsafe { put(count, gpus.len() as c_uint) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)`:
/// `NVML_ERROR_INVALID_ARGUMENT` for an index past the count.
///
/// # Safety
///
/// `device` must be null or valid for writing one `nvmlDevice_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    call_init(
        "nvmlDeviceGetHandleByIndex_v2",
        || format!("index={index}"),
        |gpus| {
            let i = index as usize;
            if i >= gpus.len() {
                return Err(ret::INVALID_ARGUMENT);
            }
            // SAFETY: forwarded caller contract.
            unsafe { put(device, handle(i)) }
        },
    )
}

/// Shared body of the two lookups: the first device `matches` accepts, else `NOT_FOUND`.
///
/// # Safety
///
/// `device` must be null or valid for writing one `nvmlDevice_t`.
unsafe fn lookup(
    name: &str,
    key: &str,
    text: Option<String>,
    device: *mut nvmlDevice_t,
    matches: fn(&Gpu, &str) -> bool,
) -> nvmlReturn_t {
    call_init(
        name,
        || format!("{key}={}", shown(&text)),
        |gpus| {
            let t = text.as_deref().ok_or(ret::INVALID_ARGUMENT)?;
            if device.is_null() {
                return Err(ret::INVALID_ARGUMENT);
            }
            let g = gpus.iter().find(|g| matches(g, t)).ok_or(ret::NOT_FOUND)?;
            // SAFETY: forwarded caller contract.
            unsafe { put(device, handle(g.index as usize)) }
        },
    )
}

/// `nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)`: the
/// full UUID string (`GPU-face5eed-...`, any case); `NVML_ERROR_NOT_FOUND` otherwise.
///
/// # Safety
///
/// `uuid` must be null or a NUL-terminated string; `device` null or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    let text = unsafe { arg_str(uuid) };
    // SAFETY: forwarded caller contract.
    unsafe {
        lookup("nvmlDeviceGetHandleByUUID", "uuid", text, device, |g, t| {
            g.uuid().eq_ignore_ascii_case(t.trim())
        })
    }
}

/// `nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t
/// *device)`: `[domain:]bus:device[.function]` in hex, any case, so both NVML's
/// `00000000:10:00.0` and CUDA's `0000:10:00.0` work; `NVML_ERROR_NOT_FOUND` otherwise.
///
/// # Safety
///
/// `bus_id` must be null or a NUL-terminated string; `device` null or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    let text = unsafe { arg_str(bus_id) };
    // SAFETY: forwarded caller contract.
    unsafe {
        lookup(
            "nvmlDeviceGetHandleByPciBusId_v2",
            "busid",
            text,
            device,
            Gpu::matches_bus_id,
        )
    }
}

/// Runs a per-device query: sleeps [`global::query_delay`] with the library's lock held,
/// resolves the handle, then `body`.
fn query(
    name: &str,
    dev: nvmlDevice_t,
    extra: impl FnOnce() -> String,
    body: impl FnOnce(&Gpu) -> Result<(), u32>,
) -> nvmlReturn_t {
    call_init(
        name,
        || {
            let e = extra();
            if e.is_empty() {
                dev_arg(dev)
            } else {
                format!("{} {e}", dev_arg(dev))
            }
        },
        |gpus| {
            std::thread::sleep(global::query_delay());
            body(resolve(gpus, dev)?)
        },
    )
}

/// `nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)`: the
/// physical index.
///
/// # Safety
///
/// `index` must be null or valid for writing one `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(dev: nvmlDevice_t, index: *mut c_uint) -> nvmlReturn_t {
    query("nvmlDeviceGetIndex", dev, String::new, |g| {
        // SAFETY: forwarded caller contract.
        unsafe { put(index, g.index) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)`:
/// `Fake H200 #p` or the `FAKE_CUDA_NAMES` entry, the same as `cuDeviceGetName`.
///
/// # Safety
///
/// `name` must be null or valid for writes of `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    dev: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    query(
        "nvmlDeviceGetName",
        dev,
        || format!("len={length}"),
        // SAFETY: forwarded caller contract.
        |g| unsafe { put_str(name, length, &g.name) },
    )
}

/// `nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)`:
/// `GPU-face5eed-0000-4000-8000-0000000000pp`, the same bytes as `cuDeviceGetUuid`.
///
/// # Safety
///
/// `uuid` must be null or valid for writes of `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    dev: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    query(
        "nvmlDeviceGetUUID",
        dev,
        || format!("len={length}"),
        // SAFETY: forwarded caller contract.
        |g| unsafe { put_str(uuid, length, &g.uuid()) },
    )
}

/// `nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)`: bus
/// ids in uppercase hex, `busId` = `00000000:10:00.0`, `busIdLegacy` = `0000:10:00.0`.
///
/// # Safety
///
/// `pci` must be null or valid for writing one `nvmlPciInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    dev: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    query("nvmlDeviceGetPciInfo_v3", dev, String::new, |g| {
        let info = nvmlPciInfo_t {
            busIdLegacy: c_field(&g.bus_id_legacy()),
            domain: g.pci_domain,
            bus: g.pci_bus,
            device: g.pci_device,
            pciDeviceId: PCI_DEVICE_ID,
            pciSubSystemId: PCI_SUBSYSTEM_ID,
            busId: c_field(&g.bus_id()),
        };
        // SAFETY: forwarded caller contract.
        unsafe { put(pci, info) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)`:
/// `FAKE_CUDA_TOTAL_MEM` / `FAKE_CUDA_FREE_MEM`, `used = total - free`.
///
/// # Safety
///
/// `memory` must be null or valid for writing one `nvmlMemory_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    dev: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    query("nvmlDeviceGetMemoryInfo", dev, String::new, |g| {
        let m = nvmlMemory_t {
            total: g.total_mem,
            free: g.free_mem,
            used: g.total_mem - g.free_mem,
        };
        // SAFETY: forwarded caller contract.
        unsafe { put(memory, m) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)`:
/// as `nvmlDeviceGetMemoryInfo` with `reserved = 0`; `memory->version` must be
/// [`MEMORY_V2_VERSION`], else `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
///
/// # Safety
///
/// `memory` must be null or valid for reading and writing one `nvmlMemory_v2_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    dev: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    query("nvmlDeviceGetMemoryInfo_v2", dev, String::new, |g| {
        if memory.is_null() {
            return Err(ret::INVALID_ARGUMENT);
        }
        // SAFETY: non-null, and the caller guarantees a readable `nvmlMemory_v2_t`.
        let version = unsafe { std::ptr::addr_of!((*memory).version).read() };
        if version != MEMORY_V2_VERSION {
            return Err(ret::ARGUMENT_VERSION_MISMATCH);
        }
        let m = nvmlMemory_v2_t {
            version,
            total: g.total_mem,
            reserved: 0,
            free: g.free_mem,
            used: g.total_mem - g.free_mem,
        };
        // SAFETY: forwarded caller contract.
        unsafe { put(memory, m) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)`:
/// `FAKE_CUDA_ATTR_20`, or 3 (exclusive process) for a busy device, else 0.
///
/// # Safety
///
/// `mode` must be null or valid for writing one `nvmlComputeMode_t` (an `int`).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(
    dev: nvmlDevice_t,
    mode: *mut c_int,
) -> nvmlReturn_t {
    query("nvmlDeviceGetComputeMode", dev, String::new, |g| {
        // SAFETY: forwarded caller contract.
        unsafe { put(mode, g.compute_mode) }
    })
}

/// Shared body of the running-process queries. The count protocol of `nvml.h`: when
/// `*infoCount` is smaller than the number of processes, it is set to that number and the
/// result is `NVML_ERROR_INSUFFICIENT_SIZE` (so `*infoCount = 0, infos = NULL` asks for the
/// count, `NVML_SUCCESS` meaning none); otherwise the entries are written and `*infoCount`
/// set to their number.
///
/// # Safety
///
/// `count` must be null or valid for reading and writing one `unsigned int`; `infos` null
/// or valid for writing `*count` entries.
unsafe fn running_processes(
    name: &str,
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: read only when non-null (caller contract); used for the log line only.
    let asked = (!count.is_null()).then(|| unsafe { count.read() });
    query(
        name,
        dev,
        || {
            format!(
                "count={}",
                asked.map_or_else(|| "(null)".into(), |n| n.to_string())
            )
        },
        |g| {
            let capacity = asked.ok_or(ret::INVALID_ARGUMENT)?;
            let mut procs: Vec<nvmlProcessInfo_t> = Vec::new();
            if g.busy {
                procs.push(nvmlProcessInfo_t {
                    pid: BUSY_PID,
                    usedGpuMemory: BUSY_USED_MEM,
                    gpuInstanceId: NO_INSTANCE,
                    computeInstanceId: NO_INSTANCE,
                });
            }
            for &(pid, used) in &g.processes {
                procs.push(nvmlProcessInfo_t {
                    pid: pid.unwrap_or_else(std::process::id),
                    usedGpuMemory: used,
                    gpuInstanceId: NO_INSTANCE,
                    computeInstanceId: NO_INSTANCE,
                });
            }
            let n = procs.len() as c_uint;
            if capacity < n {
                // SAFETY: non-null (checked above), caller contract.
                unsafe { count.write(n) };
                return Err(ret::INSUFFICIENT_SIZE);
            }
            if n > 0 && infos.is_null() {
                return Err(ret::INVALID_ARGUMENT);
            }
            // SAFETY: `infos` holds at least `capacity >= n` entries (caller contract) and
            // does not overlap our static source; `count` is non-null.
            unsafe {
                std::ptr::copy_nonoverlapping(procs.as_ptr(), infos, procs.len());
                count.write(n);
            }
            Ok(())
        },
    )
}

/// `nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned
/// int *infoCount, nvmlProcessInfo_t *infos)`: a busy device has one process (pid 4242,
/// 1 GiB), then the `FAKE_NVML_PROCESSES` entries of the device; see [`running_processes`] for the count protocol.
///
/// # Safety
///
/// `count` null or valid for one read and write; `infos` null or valid for `*count` writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    unsafe { running_processes("nvmlDeviceGetComputeRunningProcesses_v3", dev, count, infos) }
}

/// `nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(...)`: the same as `_v3`
/// (`nvmlProcessInfo_v2_t` has the same layout).
///
/// # Safety
///
/// `count` null or valid for one read and write; `infos` null or valid for `*count` writes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    dev: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded caller contract.
    unsafe { running_processes("nvmlDeviceGetComputeRunningProcesses_v2", dev, count, infos) }
}

/// `nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int
/// *minor)`: `FAKE_CUDA_ATTR_75` / `_76`, default 9.0.
///
/// # Safety
///
/// `major` and `minor` must be null or valid for writing one `int` each.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    dev: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    query(
        "nvmlDeviceGetCudaComputeCapability",
        dev,
        String::new,
        |g| {
            if minor.is_null() {
                return Err(ret::INVALID_ARGUMENT);
            }
            // SAFETY: forwarded caller contract.
            unsafe {
                put(major, g.compute_capability.0)?;
                put(minor, g.compute_capability.1)
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_nvml_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<nvmlPciInfo_t>(), 68);
        assert_eq!(offset_of!(nvmlPciInfo_t, domain), 16);
        assert_eq!(offset_of!(nvmlPciInfo_t, pciSubSystemId), 32);
        assert_eq!(offset_of!(nvmlPciInfo_t, busId), 36);
        assert_eq!(size_of::<nvmlMemory_t>(), 24);
        assert_eq!(size_of::<nvmlMemory_v2_t>(), 40);
        assert_eq!(offset_of!(nvmlMemory_v2_t, total), 8);
        assert_eq!(MEMORY_V2_VERSION, 0x0200_0028);
        assert_eq!(size_of::<nvmlProcessInfo_t>(), 24);
        assert_eq!(offset_of!(nvmlProcessInfo_t, usedGpuMemory), 8);
    }

    #[test]
    fn strings() {
        let mut buf = [0x55 as c_char; 8];
        // SAFETY: `buf` has 8 writable bytes.
        assert_eq!(unsafe { put_str(buf.as_mut_ptr(), 8, "1234567") }, Ok(()));
        assert_eq!(buf.map(|c| c as u8), *b"1234567\0");
        // SAFETY: as above; nothing is written when it does not fit.
        let r = unsafe { put_str(buf.as_mut_ptr(), 8, "12345678") };
        assert_eq!(r, Err(ret::INSUFFICIENT_SIZE));
        // SAFETY: null is checked first.
        let r = unsafe { put_str(std::ptr::null_mut(), 8, "x") };
        assert_eq!(r, Err(ret::INVALID_ARGUMENT));
        let f: [c_char; 4] = c_field("abcdef");
        assert_eq!(f.map(|c| c as u8), *b"abc\0");
        // SAFETY: the returned pointers are static C strings.
        let text = |r| unsafe { CStr::from_ptr(nvmlErrorString(r)) }.to_str().ok();
        assert_eq!(text(0), Some("Success"));
        assert_eq!(text(9), Some("Driver Not Loaded"));
        assert_eq!(text(12345), Some("Unknown Error"));
    }
}
