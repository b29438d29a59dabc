//! Device queries: `cuDeviceGet`, `cuDeviceGetCount`, `cuDeviceGetName`,
//! `cuDeviceGetAttribute`, `cuDeviceGetPCIBusId`, `cuDeviceTotalMem_v2`,
//! `cuDeviceGetUuid(_v2)`.

use std::ffi::{c_char, c_int};

use seedance_cuda::{CUdevice, CUresult, CUuuid};

use super::{copy_c_string, non_null};
use crate::global::call_driver;

/// `cuDeviceGet(CUdevice *device, int ordinal)`: the handle equals the ordinal;
/// `CUDA_ERROR_INVALID_DEVICE` outside `0..count`.
///
/// # Safety
///
/// `device` must be null or valid for writing one `CUdevice`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    call_driver(
        "cuDeviceGet",
        || format!("ordinal={ordinal}"),
        |d| {
            non_null(&[device.cast()])?;
            d.ordinal(ordinal)?;
            // SAFETY: non-null, and the caller guarantees it points to a writable CUdevice.
            unsafe { device.write(ordinal) };
            Ok(())
        },
    )
}

/// `cuDeviceGetCount(int *count)`: the number of visible devices.
///
/// # Safety
///
/// `count` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    call_driver("cuDeviceGetCount", String::new, |d| {
        non_null(&[count.cast()])?;
        let n = c_int::try_from(d.device_count()).unwrap_or(c_int::MAX);
        // SAFETY: non-null, and the caller guarantees it points to a writable int.
        unsafe { count.write(n) };
        Ok(())
    })
}

/// `cuDeviceGetName(char *name, int len, CUdevice dev)`: `"Fake H200 #p"` (or the
/// `FAKE_CUDA_NAMES` entry), truncated to `len - 1` bytes and NUL-terminated.
///
/// # Safety
///
/// `name` must be null or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    call_driver(
        "cuDeviceGetName",
        || format!("len={len} dev={dev}"),
        |d| {
            non_null(&[name.cast()])?;
            crate::global::name_delay();
            let text = d.device(dev)?.name();
            // SAFETY: forwarded caller contract (`len` writable bytes at `name`).
            unsafe { copy_c_string(name, len, &text) }
        },
    )
}

/// `cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)`:
/// `CUDA_ERROR_INVALID_VALUE` for an attribute the fake does not model.
///
/// # Safety
///
/// `pi` must be null or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: c_int,
    dev: CUdevice,
) -> CUresult {
    call_driver(
        "cuDeviceGetAttribute",
        || format!("attrib={attrib} dev={dev}"),
        |d| {
            non_null(&[pi.cast()])?;
            let v = d
                .device(dev)?
                .attribute(attrib)
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            // SAFETY: non-null, and the caller guarantees it points to a writable int.
            unsafe { pi.write(v) };
            Ok(())
        },
    )
}

/// `cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)`: `"0000:10:00.0"` style,
/// lowercase hex, truncated to `len - 1` bytes and NUL-terminated.
///
/// # Safety
///
/// `pci_bus_id` must be null or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    pci_bus_id: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    call_driver(
        "cuDeviceGetPCIBusId",
        || format!("len={len} dev={dev}"),
        |d| {
            non_null(&[pci_bus_id.cast()])?;
            let text = d.device(dev)?.pci_bus_id();
            // SAFETY: forwarded caller contract (`len` writable bytes at `pci_bus_id`).
            unsafe { copy_c_string(pci_bus_id, len, &text) }
        },
    )
}

/// `cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)`.
///
/// # Safety
///
/// `bytes` must be null or valid for writing one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    call_driver(
        "cuDeviceTotalMem_v2",
        || format!("dev={dev}"),
        |d| {
            non_null(&[bytes.cast()])?;
            let total = usize::try_from(d.device(dev)?.total_mem).unwrap_or(usize::MAX);
            // SAFETY: non-null, and the caller guarantees it points to a writable size_t.
            unsafe { bytes.write(total) };
            Ok(())
        },
    )
}

/// Shared body of the two UUID entry points.
///
/// # Safety
///
/// `uuid` must be null or valid for writing one `CUuuid`.
unsafe fn device_uuid(name: &str, uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    call_driver(
        name,
        || format!("dev={dev}"),
        |d| {
            non_null(&[uuid.cast()])?;
            let bytes = d.device(dev)?.uuid().map(|b| b as c_char);
            // SAFETY: non-null, and the caller guarantees it points to a writable CUuuid.
            unsafe { uuid.write(CUuuid { bytes }) };
            Ok(())
        },
    )
}

/// `cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)`: bytes `fa ce 5e ed 00 00 40 00 80 00 .. p`.
///
/// # Safety
///
/// `uuid` must be null or valid for writing one `CUuuid`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { device_uuid("cuDeviceGetUuid", uuid, dev) }
}

/// `cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)`: the same bytes as `cuDeviceGetUuid`
/// (the fake has no MIG instances).
///
/// # Safety
///
/// `uuid` must be null or valid for writing one `CUuuid`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    // SAFETY: forwarded caller contract.
    unsafe { device_uuid("cuDeviceGetUuid_v2", uuid, dev) }
}
