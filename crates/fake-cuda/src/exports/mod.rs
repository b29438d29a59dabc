//! The `extern "C"` entry points, with the exact `cuda.h` (CUDA 13.0) ABIs, grouped by area.
//!
//! Each one runs its body through [`crate::global::call`] or [`crate::global::call_driver`]
//! (stub mode, initialisation check, panic guard, call recorder). Entry points never call
//! each other: shared logic lives in plain Rust functions, so an `LD_PRELOAD` interposer
//! that defines the same names is never re-entered from inside this library.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};

use seedance_cuda::CUresult;

pub mod capture;
pub mod context;
pub mod copy;
pub mod device;
pub mod event;
pub mod function;
pub mod init;
pub mod launch;
pub mod logs;
pub mod memory;
pub mod ops;
pub mod procaddr;
pub mod stream;

pub use capture::*;
pub use context::*;
pub use copy::*;
pub use device::*;
pub use event::*;
pub use function::*;
pub use init::*;
pub use launch::*;
pub use logs::*;
pub use memory::*;
pub use ops::*;
pub use procaddr::*;
pub use stream::*;

/// One statement of [`address_of`] for a table variant this library exports (`both` or
/// `faked`): nothing for a variant only the shim hooks.
macro_rules! export_arm {
    (hooked, $name:ident, $sym:ident) => {};
    ($sides:ident, $name:ident, $sym:ident) => {
        if $name == stringify!($sym) {
            return Some($sym as *mut c_void);
        }
    };
}

/// The exports of this library, from the driver-ABI table (`seedance_cuda::driver_abi!`):
/// every variant marked `both` or `faked` there must be defined here (else this does not
/// compile), and a test checks the converse and each one's argument sizes.
macro_rules! fake_exports {
    ($( $base:ident $args:tt { $( $sym:ident $since:literal $form:ident $sides:ident $( ( $($own:tt)* ) )? ; )* } )*) => {
        /// The address of this library's exported function `name` (what
        /// `dlsym(handle, name)` returns), `None` for a name not exported.
        pub fn address_of(name: &str) -> Option<*mut c_void> {
            $( $( export_arm!($sides, name, $sym); )* )*
            (name == "fakeEventRecordUnseen").then_some(fakeEventRecordUnseen as *mut c_void)
        }

        /// The argument sizes of each exported table variant's definition.
        #[cfg(test)]
        #[allow(clippy::vec_init_then_push)] // one push per exported variant, by the table
        fn defined_arg_sizes() -> Vec<(&'static str, Vec<usize>)> {
            let mut out = Vec::new();
            $( $( signature!(out, $sides, $sym, $args $( ( $($own)* ) )?); )* )*
            out
        }
    };
}

/// `$sym` as a function pointer of its arity (for [`seedance_cuda::abi::arg_sizes_of`]);
/// the entry points that a thread cancellation may unwind through are `"C-unwind"`.
#[cfg(test)]
macro_rules! signature {
    ($out:ident, hooked, $($rest:tt)*) => {};
    ($out:ident, $sides:ident, $sym:ident, $row:tt $own:tt) => {
        signature!($out, $sides, $sym, $own)
    };
    ($out:ident, $sides:ident, cuCtxSynchronize, ()) => {
        $out.push(("cuCtxSynchronize", seedance_cuda::abi::arg_sizes_of(cuCtxSynchronize as unsafe extern "C-unwind" fn() -> _)))
    };
    ($out:ident, $sides:ident, cuStreamSynchronize, ($a:ident : $t:ty)) => {
        $out.push(("cuStreamSynchronize", seedance_cuda::abi::arg_sizes_of(cuStreamSynchronize as unsafe extern "C-unwind" fn(_) -> _)))
    };
    ($out:ident, $sides:ident, cuStreamSynchronize_ptsz, ($a:ident : $t:ty)) => {
        $out.push(("cuStreamSynchronize_ptsz", seedance_cuda::abi::arg_sizes_of(cuStreamSynchronize_ptsz as unsafe extern "C-unwind" fn(_) -> _)))
    };
    ($out:ident, $sides:ident, $sym:ident, ($($a:ident : $t:ty),*)) => {
        $out.push((stringify!($sym), seedance_cuda::abi::arg_sizes_of($sym as unsafe extern "C" fn($(placeholder!($t)),*) -> _)))
    };
}

/// `_`, for one argument type.
#[cfg(test)]
macro_rules! placeholder {
    ($t:ty) => {
        _
    };
}

seedance_cuda::driver_abi!(fake_exports);

/// Every exported entry point's symbol name: the table's `both` and `faked` variants, and
/// `fakeEventRecordUnseen` (the fake's own, no driver entry point).
pub fn exported() -> Vec<&'static str> {
    seedance_cuda::abi::ENTRIES
        .iter()
        .flat_map(|e| e.variants)
        .filter(|v| v.sides.faked())
        .map(|v| v.symbol)
        .chain(["fakeEventRecordUnseen"])
        .collect()
}

/// `Err(CUDA_ERROR_INVALID_VALUE)` when any of the pointers is null.
pub(crate) fn non_null(ptrs: &[*const c_void]) -> Result<(), CUresult> {
    if ptrs.iter().any(|p| p.is_null()) {
        Err(CUresult::CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// Copies `s` into the caller's buffer `dst` of `len` bytes, truncating, always
/// NUL-terminating (as the driver does for names and PCI ids). `INVALID_VALUE` for a null
/// buffer or `len <= 0`.
///
/// # Safety
///
/// `dst` must be null or valid for writes of `len` bytes.
pub(crate) unsafe fn copy_c_string(dst: *mut c_char, len: i32, s: &str) -> Result<(), CUresult> {
    let Ok(len) = usize::try_from(len) else {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    if dst.is_null() || len == 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let n = s.len().min(len - 1);
    // SAFETY: `dst` is non-null and the caller guarantees `len` writable bytes; we write
    // `n + 1 <= len` bytes from a source that does not overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), n);
        dst.add(n).write(0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_table_is_complete() {
        assert_eq!(exported().len(), 122);
        for name in exported() {
            assert!(address_of(name).is_some_and(|p| !p.is_null()), "{name}");
        }
        assert_eq!(address_of("cuMemAlloc"), None);
        assert_eq!(
            address_of("cuMemAlloc_v2"),
            Some(cuMemAlloc_v2 as *mut c_void)
        );
    }

    /// The converse of [`fake_exports`]'s compile-time check: every `extern` function the
    /// export modules define is a table variant this library exports (or the fake's own
    /// `fakeEventRecordUnseen`), and each definition has the table's argument sizes.
    #[test]
    fn every_definition_is_a_table_variant_with_its_argument_sizes() {
        let sources = [
            include_str!("capture.rs"),
            include_str!("context.rs"),
            include_str!("copy.rs"),
            include_str!("device.rs"),
            include_str!("event.rs"),
            include_str!("function.rs"),
            include_str!("init.rs"),
            include_str!("launch.rs"),
            include_str!("logs.rs"),
            include_str!("memory.rs"),
            include_str!("ops.rs"),
            include_str!("procaddr.rs"),
            include_str!("stream.rs"),
        ];
        let mut defined = std::collections::BTreeSet::new();
        for src in sources {
            for line in src.lines().map(str::trim) {
                // `pub unsafe extern "C" fn name(` and the memset macros' `name / name_ptsz (`.
                let names: Vec<&str> = if let Some(rest) = line.split(" fn ").nth(1) {
                    rest.split('(').next().into_iter().collect()
                } else if line.starts_with("cu") && line.contains(" / ") {
                    line.split(" (").next().unwrap().split(" / ").collect()
                } else {
                    continue;
                };
                if line.contains("fn ") && !line.contains("extern \"C") {
                    continue;
                }
                defined.extend(names.into_iter().filter(|n| !n.starts_with('$')));
            }
        }
        let listed: std::collections::BTreeSet<&str> = exported().into_iter().collect();
        assert_eq!(defined, listed);
        let sizes = defined_arg_sizes();
        assert_eq!(sizes.len(), listed.len() - 1);
        for (name, sizes) in sizes {
            let (_, v) = seedance_cuda::abi::find(name).unwrap();
            assert_eq!(sizes, v.arg_sizes(), "{name}");
        }
    }

    #[test]
    fn c_string_copy_truncates() {
        const BAD: Result<(), CUresult> = Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        let mut buf = [0x55 as c_char; 8];
        let dst = buf.as_mut_ptr();
        // SAFETY: `buf` has 8 writable bytes.
        let r = unsafe { copy_c_string(dst, 8, "Fake H200 #0") };
        assert_eq!(r, Ok(()));
        assert_eq!(buf.map(|c| c as u8), *b"Fake H2\0");
        let dst = buf.as_mut_ptr();
        // SAFETY: as above; 3 <= 8.
        let r = unsafe { copy_c_string(dst, 3, "ab") };
        assert_eq!(r, Ok(()));
        assert_eq!(
            buf[..3].iter().map(|&c| c as u8).collect::<Vec<_>>(),
            b"ab\0"
        );
        let dst = buf.as_mut_ptr();
        // SAFETY: nothing is written for a zero or negative length.
        let r = unsafe { copy_c_string(dst, 0, "x") };
        assert_eq!(r, BAD);
        // SAFETY: as above.
        let r = unsafe { copy_c_string(dst, -1, "x") };
        assert_eq!(r, BAD);
        // SAFETY: null is checked before writing.
        let r = unsafe { copy_c_string(std::ptr::null_mut(), 4, "x") };
        assert_eq!(r, BAD);
    }
}
