//! PCI bus id normalization, so ids from the CUDA driver and from NVML compare equal.
//!
//! `cuDeviceGetPCIBusId` (CUDA Driver API reference, Device Management) writes
//! `domain:bus:device.function` as `0000:1a:00.0` (4-digit domain); NVML's
//! `nvmlPciInfo_t.busId` (NVML API reference) writes `00000000:1A:00.0` (8-digit domain,
//! upper case). Both are normalized to lower case with a 4-digit domain, `0000:1a:00.0`.

/// Normalizes a PCI bus id to `dddd:bb:dd.f` in lower case (`0000:1a:00.0`).
///
/// Accepts a domain of any width up to 8 hex digits (NVML's `00000000:1A:00.0`, CUDA's
/// `0000:1a:00.0`) and the short form without a domain (`1a:00.0`, domain 0). A domain
/// above `ffff` keeps all its significant digits. Returns `None` for anything else: wrong
/// number of fields, non-hex digits, bus above `ff`, device above `1f`, function above 7.
pub fn normalize_pci_bus_id(raw: &str) -> Option<String> {
    let s = raw.trim();
    let (head, function) = s.rsplit_once('.')?;
    let fields: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match fields.as_slice() {
        [d, b, dev] => (*d, *b, *dev),
        [b, dev] => ("0", *b, *dev),
        _ => return None,
    };
    let domain = hex(domain, 8)?;
    let bus = hex(bus, 2)?;
    let device = hex(device, 2)?;
    let function = hex(function, 1)?;
    if device > 0x1f || function > 7 {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}"))
}

fn hex(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_and_cuda_forms_agree() {
        assert_eq!(
            normalize_pci_bus_id("00000000:1A:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_pci_bus_id("0000:1a:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_pci_bus_id("0000:1A:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_pci_bus_id(" 1a:00.0 ").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_pci_bus_id("00010000:03:1f.7").as_deref(),
            Some("10000:03:1f.7")
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "1a",
            "1a:00",
            "0000:1a:00",
            "0000:1g:00.0",
            "0000:1a:20.0",
            "0000:1a:00.8",
            "000000000:1a:00.0",
            "0000:100:00.0",
            "0:0:0:0.0",
            "0000:1a:00.",
        ] {
            assert_eq!(normalize_pci_bus_id(bad), None, "{bad:?}");
        }
    }
}
