//! Direct calls to the real driver made by the shim itself (never through our wrappers,
//! so they are not counted): device queries for the session record and the explanations.

use crate::hooks::slots;
use libc::{c_char, c_int, c_void};
use seedance_cuda::{attr, CUdevice, CUresult};
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

fn sibling(name: &CStr) -> *mut c_void {
    let anchor = slots::cuInit.get();
    if anchor.is_null() {
        return std::ptr::null_mut();
    }
    crate::real::sibling(anchor, name)
}

/// `cuDeviceGetCount` through the real driver; `None` if it fails (e.g. before `cuInit`).
pub fn device_count() -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = slots::cuDeviceGetCount.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDeviceGetCount.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    let mut n: c_int = 0;
    // SAFETY: n is a valid out-pointer.
    unsafe { f(&mut n) }.is_success().then_some(n)
}

/// `cuDeviceGet` through the real driver.
pub fn device_handle(ordinal: i32) -> Option<CUdevice> {
    type F = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
    let p = slots::cuDeviceGet.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDeviceGet.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
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

/// `cuDriverGetVersion` through the real driver.
pub fn driver_version() -> Option<i32> {
    type F = unsafe extern "C" fn(*mut c_int) -> CUresult;
    let p = slots::cuDriverGetVersion.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: the slot holds the driver's cuDriverGetVersion.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    let mut v: c_int = 0;
    // SAFETY: v is a valid out-pointer.
    unsafe { f(&mut v) }.is_success().then_some(v)
}

/// Facts about every visible device; empty if the driver is not initialised.
pub fn devices() -> Vec<DeviceFacts> {
    let Some(n) = device_count() else {
        return Vec::new();
    };
    type Text = unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult;
    type Mem = unsafe extern "C" fn(*mut usize, CUdevice) -> CUresult;
    type Uuid = unsafe extern "C" fn(*mut [u8; 16], CUdevice) -> CUresult;
    type Attr = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    let name_f = sibling(c"cuDeviceGetName");
    let bus_f = sibling(c"cuDeviceGetPCIBusId");
    let mem_f = sibling(c"cuDeviceTotalMem_v2");
    let uuid_f = sibling(c"cuDeviceGetUuid_v2");
    let attr_f = sibling(c"cuDeviceGetAttribute");
    let text = |f: *mut c_void, dev: CUdevice| -> Option<String> {
        if f.is_null() {
            return None;
        }
        // SAFETY: f is the named driver function with the Text signature.
        let f: Text = unsafe { std::mem::transmute::<*mut c_void, Text>(f) };
        let mut buf = [0 as c_char; 256];
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
    };
    (0..n)
        .filter_map(|ordinal| {
            let handle = device_handle(ordinal)?;
            let total_mem_bytes = (!mem_f.is_null())
                .then(|| {
                    // SAFETY: mem_f is cuDeviceTotalMem_v2.
                    let f: Mem = unsafe { std::mem::transmute::<*mut c_void, Mem>(mem_f) };
                    let mut b: usize = 0;
                    // SAFETY: b is a valid out-pointer.
                    unsafe { f(&mut b, handle) }
                        .is_success()
                        .then_some(b as u64)
                })
                .flatten();
            let uuid = (!uuid_f.is_null())
                .then(|| {
                    // SAFETY: uuid_f is cuDeviceGetUuid_v2 (CUuuid is 16 bytes).
                    let f: Uuid = unsafe { std::mem::transmute::<*mut c_void, Uuid>(uuid_f) };
                    let mut u = [0u8; 16];
                    // SAFETY: u is 16 writable bytes.
                    unsafe { f(&mut u, handle) }
                        .is_success()
                        .then(|| format_uuid(&u))
                })
                .flatten();
            let compute_mode = (!attr_f.is_null())
                .then(|| {
                    // SAFETY: attr_f is cuDeviceGetAttribute.
                    let f: Attr = unsafe { std::mem::transmute::<*mut c_void, Attr>(attr_f) };
                    let mut v: c_int = 0;
                    // SAFETY: v is a valid out-pointer.
                    unsafe { f(&mut v, attr::COMPUTE_MODE, handle) }
                        .is_success()
                        .then_some(v)
                })
                .flatten();
            Some(DeviceFacts {
                ordinal,
                name: text(name_f, handle),
                pci_bus_id: text(bus_f, handle).map(|s| s.to_ascii_lowercase()),
                uuid,
                total_mem_bytes,
                compute_mode,
            })
        })
        .collect()
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the form nvidia-smi and
/// `CUDA_VISIBLE_DEVICES` use.
pub fn format_uuid(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_format() {
        let mut u = [0u8; 16];
        u[..4].copy_from_slice(&[0xfa, 0xce, 0x5e, 0xed]);
        u[6] = 0x40;
        u[8] = 0x80;
        u[15] = 0x01;
        assert_eq!(format_uuid(&u), "GPU-face5eed-0000-4000-8000-000000000001");
    }
}
