//! The static NUL-terminated strings `cuGetErrorName` and `cuGetErrorString` hand out,
//! built once from the seedance-cuda `CUresult` table and kept for the life of the process.
//!
//! Names are the `cuda.h` enumerator names (`CUDA_ERROR_INVALID_VALUE`); strings are the
//! table's descriptions.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use seedance_cuda::CUresult;

struct Entry {
    code: u32,
    name: CString,
    description: CString,
}

static TABLE: OnceLock<Vec<Entry>> = OnceLock::new();

fn table() -> &'static [Entry] {
    TABLE.get_or_init(|| {
        CUresult::table()
            .iter()
            .filter_map(|r| {
                Some(Entry {
                    code: r.code,
                    name: CString::new(r.name).ok()?,
                    description: CString::new(r.description).ok()?,
                })
            })
            .collect()
    })
}

fn entry(code: CUresult) -> Option<&'static Entry> {
    table().iter().find(|e| e.code == code.0)
}

/// The enumerator name of `code` as a static C string, `None` for a code the table lacks.
pub fn name(code: CUresult) -> Option<*const c_char> {
    entry(code).map(|e| e.name.as_ptr())
}

/// The description of `code` as a static C string, `None` for a code the table lacks.
pub fn description(code: CUresult) -> Option<*const c_char> {
    entry(code).map(|e| e.description.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn known_and_unknown() {
        let p = name(CUresult(101)).expect("known");
        // SAFETY: `p` points into the static table, NUL-terminated.
        let text = unsafe { CStr::from_ptr(p) };
        assert_eq!(text.to_str(), Ok("CUDA_ERROR_INVALID_DEVICE"));
        assert_eq!(name(CUresult(101)), Some(p), "the same pointer every time");
        let d = description(CUresult(0)).expect("known");
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(d) };
        assert_eq!(
            text.to_str(),
            Ok(CUresult(0).info().expect("row").description)
        );
        assert_eq!(name(CUresult(123_456)), None);
        assert_eq!(description(CUresult(123_456)), None);
    }
}
