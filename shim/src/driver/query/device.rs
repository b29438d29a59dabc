//! The devices and the driver: count, handles and ordinals, attributes, names, PCI bus
//! ids, UUIDs, memory, and the driver's version (the session record and the topology).

use super::entry::{
    typed, RealFn, DEVICE_GET, DEVICE_GET_ATTRIBUTE, DEVICE_GET_COUNT, DEVICE_GET_NAME,
    DEVICE_GET_PCI_BUS_ID, DEVICE_GET_UUID, DEVICE_TOTAL_MEM, DRIVER_GET_VERSION,
};
use libc::c_int;
use seedance_cuda::{CUdevice, CUresult};
use std::ffi::CStr;

/// What the driver says about one visible device.
#[derive(Debug, Clone, Default)]
pub struct DeviceFacts {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: Option<String>,
    /// `cuDeviceGetPCIBusId`, lower-cased (`0000:1a:00.0`).
    pub pci_bus_id: Option<String>,
    /// `cuDeviceGetUuid_v2`, as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: Option<String>,
    /// `cuDeviceTotalMem_v2`, bytes.
    pub total_mem_bytes: Option<u64>,
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`: 0 default, 2 prohibited, 3 exclusive process.
    pub compute_mode: Option<i32>,
}

/// `cuDeviceGetCount` through the real driver; `None` if it fails (e.g. before `cuInit`).
pub fn device_count() -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = DEVICE_GET_COUNT.get()?;
    // SAFETY: p is cuDeviceGetCount.
    let f: F = unsafe { typed(p) };
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-pointer.
    unsafe { f(&mut n) }.is_success().then_some(n)
}

/// `cuDeviceGet` through the real driver.
pub fn device_handle(ordinal: i32) -> Option<CUdevice> {
    type F = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
    let p = DEVICE_GET.get()?;
    // SAFETY: p is cuDeviceGet.
    let f: F = unsafe { typed(p) };
    let mut d: CUdevice = 0;
    // SAFETY: d is a valid out-pointer.
    unsafe { f(&mut d, ordinal) }.is_success().then_some(d)
}

/// The ordinal of a `CUdevice` handle: the ordinal whose `cuDeviceGet` returns it. On every
/// driver we know the handle equals the ordinal; this does not rely on it.
pub fn ordinal_of(handle: CUdevice) -> Option<i32> {
    let n = device_count()?;
    (0..n).find(|&o| device_handle(o) == Some(handle))
}

/// `cuDriverGetVersion` through the real driver. A fork waits for it to end
/// ([`crate::rt::config::hold_fork`]).
pub fn driver_version() -> Option<i32> {
    let _hold = crate::rt::config::hold_fork();
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = DRIVER_GET_VERSION.get()?;
    // SAFETY: p is cuDriverGetVersion.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v) }.is_success().then_some(v)
}

/// `cuDeviceGetAttribute(attrib, dev)`, `None` if it fails.
pub fn device_attribute(attrib: i32, dev: CUdevice) -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    let p = DEVICE_GET_ATTRIBUTE.get()?;
    // SAFETY: p is cuDeviceGetAttribute.
    let f: F = unsafe { typed(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, attrib, dev) }.is_success().then_some(v)
}

/// `cuDeviceTotalMem_v2(dev)`, bytes.
pub fn device_total_mem(dev: CUdevice) -> Option<u64> {
    type F = unsafe extern "C" fn(*mut usize, CUdevice) -> CUresult;
    let p = DEVICE_TOTAL_MEM.get()?;
    // SAFETY: p is cuDeviceTotalMem_v2.
    let f: F = unsafe { typed(p) };
    let mut v: usize = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v, dev) }.is_success().then_some(v as u64)
}

/// A `(char *buf, int len, CUdevice)` text query (`cuDeviceGetName`, `cuDeviceGetPCIBusId`).
fn device_text(f: &RealFn, dev: CUdevice) -> Option<String> {
    type F = unsafe extern "C" fn(*mut libc::c_char, c_int, CUdevice) -> CUresult;
    let p = f.get()?;
    // SAFETY: p is one of the two text queries, whose signature F spells.
    let f: F = unsafe { typed(p) };
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: buf is writable for 256 bytes and we pass that length.
    if !unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) }.is_success() {
        return None;
    }
    buf[255] = 0;
    // SAFETY: buf is NUL-terminated (forced above).
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `cuDeviceGetUuid_v2(dev)` in the `GPU-...` form nvidia-smi and `CUDA_VISIBLE_DEVICES` use.
fn device_uuid(dev: CUdevice) -> Option<String> {
    type F = unsafe extern "C" fn(*mut [u8; 16], CUdevice) -> CUresult;
    let p = DEVICE_GET_UUID.get()?;
    // SAFETY: p is cuDeviceGetUuid_v2 (CUuuid is 16 bytes).
    let f: F = unsafe { typed(p) };
    let mut u = [0u8; 16];
    // SAFETY: u is 16 writable bytes.
    unsafe { f(&mut u, dev) }
        .is_success()
        .then(|| seedance_topology::model::format_uuid(&u))
}

/// Facts about every visible device; empty if the driver is not initialised. A fork waits
/// for the whole burst of queries to end ([`crate::rt::config::hold_fork`]).
pub fn devices() -> Vec<DeviceFacts> {
    // The session record's thread runs this while the program may fork.
    let _hold = crate::rt::config::hold_fork();
    let Some(n) = device_count() else {
        return Vec::new();
    };
    (0..n)
        .filter_map(|ordinal| {
            let dev = device_handle(ordinal)?;
            Some(DeviceFacts {
                ordinal,
                name: device_text(&DEVICE_GET_NAME, dev),
                pci_bus_id: device_text(&DEVICE_GET_PCI_BUS_ID, dev)
                    .map(|s| s.to_ascii_lowercase()),
                uuid: device_uuid(dev),
                total_mem_bytes: device_total_mem(dev),
                compute_mode: device_attribute(seedance_cuda::attr::COMPUTE_MODE, dev),
            })
        })
        .collect()
}
