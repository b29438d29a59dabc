//! The driver ABI as data: per entry point its base name, its ABI variants (`_v2`, `_v3`,
//! the per-thread `_ptsz`/`_ptds` forms), the `cudaVersion` from which `cuGetProcAddress`
//! hands each one out, and its argument layout. The rows are [`driver_abi!`](crate::driver_abi)
//! (`abi/table.rs`, where the syntax is described); [`ENTRIES`] is their expansion, and
//! [`select`] the variant choice `cuGetProcAddress` makes from them.

use crate::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

mod table;

/// Which default stream a variant's stream 0 (or its implicit stream) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The legacy default stream (no suffix, or `_v2` and such).
    Legacy,
    /// `_ptsz`: a call that takes a stream, whose stream 0 is the calling thread's per-thread
    /// default stream.
    Ptsz,
    /// `_ptds`: a call on the default stream that takes none (synchronous copies and
    /// memsets), run on the calling thread's per-thread default stream.
    Ptds,
}

impl Form {
    /// Whether `cuGetProcAddress` hands this form out for
    /// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`.
    pub const fn per_thread(self) -> bool {
        !matches!(self, Form::Legacy)
    }
}

/// Which side of this project implements a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sides {
    /// The shim hooks it and the fake driver exports it.
    Both,
    /// The shim hooks it; the fake driver does not export it.
    Hooked,
    /// The fake driver exports it; the shim forwards it untouched.
    Faked,
}

impl Sides {
    /// Whether the shim hooks the variant (`shim/src/hooks.rs` has its line).
    pub const fn hooked(self) -> bool {
        matches!(self, Sides::Both | Sides::Hooked)
    }

    /// Whether the fake driver exports the variant.
    pub const fn faked(self) -> bool {
        matches!(self, Sides::Both | Sides::Faked)
    }
}

/// One C argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    /// Its name in `cuda.h`.
    pub name: &'static str,
    /// Its type as the table writes it (a Rust type of the C type's size and class).
    pub ty: &'static str,
    /// Its size in bytes: what the ABI passes.
    pub size: usize,
}

/// One exported ABI of an entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The exported symbol (`cuMemAlloc_v2`).
    pub symbol: &'static str,
    /// The lowest `cudaVersion` for which `cuGetProcAddress` hands it out (0: any).
    pub since: i32,
    /// Its default-stream form.
    pub form: Form,
    /// Who implements it.
    pub sides: Sides,
    /// Its C arguments, in order (every variant returns `CUresult`).
    pub args: &'static [Arg],
}

/// One driver entry point, as `cuGetProcAddress` is asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The base name (`cuMemAlloc`).
    pub base: &'static str,
    /// Its variants, oldest first, each per-thread form after its legacy one.
    pub variants: &'static [Variant],
}

/// Opaque parameter types the table names only as pointers (`cuda.h` structs the code never
/// reads).
#[allow(non_camel_case_types)]
mod opaque {
    use std::ffi::c_void;
    pub type CUexecAffinityParam = c_void;
    pub type CUctxCreateParams = c_void;
    pub type CUDA_MEMCPY3D = c_void;
    pub type CUgraph = *mut c_void;
    pub type CUgraphExec = *mut c_void;
    pub type CUgreenCtx = *mut c_void;
    pub type CUhostFn = *mut c_void;
    pub type CUlogsCallback = *mut c_void;
    pub type CUlogsCallbackHandle = *mut c_void;
}

/// The argument list of a variant: its own, else the row's.
macro_rules! abi_args {
    (($($a:ident : $t:ty),* $(,)?)) => {
        &[$(Arg { name: stringify!($a), ty: stringify!($t), size: std::mem::size_of::<$t>() }),*]
    };
    ($row:tt $own:tt) => {
        abi_args!($own)
    };
}

macro_rules! abi_form {
    (legacy) => {
        Form::Legacy
    };
    (ptsz) => {
        Form::Ptsz
    };
    (ptds) => {
        Form::Ptds
    };
}

macro_rules! abi_sides {
    (both) => {
        Sides::Both
    };
    (hooked) => {
        Sides::Hooked
    };
    (faked) => {
        Sides::Faked
    };
}

macro_rules! abi_entries {
    ($( $base:ident $args:tt { $( $sym:ident $since:literal $form:ident $sides:ident $( ( $($own:tt)* ) )? ; )* } )*) => {
        /// Every row of the table, in its order.
        pub const ENTRIES: &[Entry] = &[$(
            Entry {
                base: stringify!($base),
                variants: &[$(
                    Variant {
                        symbol: stringify!($sym),
                        since: $since,
                        form: abi_form!($form),
                        sides: abi_sides!($sides),
                        args: abi_args!($args $( ( $($own)* ) )?),
                    },
                )*],
            },
        )*];
    };
}

mod expanded {
    use super::opaque::*;
    use super::{Arg, Entry, Form, Sides, Variant};
    use crate::*;
    use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ushort, c_void};

    crate::driver_abi!(abi_entries);
}

pub use expanded::ENTRIES;

/// `a == b`, usable in constants.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The row and variant of exported `symbol` (evaluated at compile time where the shim builds
/// its tables).
pub const fn find(symbol: &str) -> Option<(&'static Entry, &'static Variant)> {
    let mut e = 0;
    while e < ENTRIES.len() {
        let entry = &ENTRIES[e];
        let mut v = 0;
        while v < entry.variants.len() {
            if same(entry.variants[v].symbol, symbol) {
                return Some((entry, &entry.variants[v]));
            }
            v += 1;
        }
        e += 1;
    }
    None
}

/// The base name of exported `symbol`; a compile-time error (a panic at run time) when the
/// table has no such variant.
pub const fn base_of(symbol: &str) -> &'static str {
    match find(symbol) {
        Some((entry, _)) => entry.base,
        None => panic!("a symbol without a row in crates/seedance-cuda/src/abi/table.rs"),
    }
}

/// The row of base name `base`.
pub fn entry(base: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.base == base)
}

/// The outcome of a `cuGetProcAddress` look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The exported symbol to return.
    Found(&'static str),
    /// The name is not a driver entry point (`CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`).
    NotFound,
    /// The entry point exists but not for this version
    /// (`CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`).
    VersionNotSufficient,
}

/// The variant `cuGetProcAddress(base, cuda_version, flags)` picks among the variants `has`
/// accepts (a library that lacks some ABIs passes the ones it has; `|_| true` for the
/// driver's full choice): the per-thread form when `flags` asks for it and one is there, else
/// the legacy forms; of those, the newest whose `since` is at most `cuda_version`. A base
/// name with no such variant at any version is not found; one whose variants are all newer
/// than `cuda_version` is not sufficient. Suffixed names (`cuMemAlloc_v2`) are not base names.
pub fn select(base: &str, cuda_version: i32, flags: u64, has: impl Fn(&Variant) -> bool) -> Lookup {
    let Some(entry) = entry(base) else {
        return Lookup::NotFound;
    };
    let candidates = || entry.variants.iter().filter(|v| has(v));
    if candidates().next().is_none() {
        return Lookup::NotFound;
    }
    let per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0
        && candidates().any(|v| v.form.per_thread());
    candidates()
        .filter(|v| v.form.per_thread() == per_thread && v.since <= cuda_version)
        .max_by_key(|v| v.since)
        .map_or(Lookup::VersionNotSufficient, |v| Lookup::Found(v.symbol))
}

/// The argument sizes of a function pointer type: what a test compares with a variant's
/// [`Variant::args`] to check a definition (a wrapper, a fake export) against the table.
pub trait ArgSizes {
    /// The size of each argument, in order.
    fn arg_sizes() -> Vec<usize>;
}

macro_rules! arg_sizes {
    ($($a:ident)*) => {
        impl<R, $($a),*> ArgSizes for unsafe extern "C" fn($($a),*) -> R {
            fn arg_sizes() -> Vec<usize> {
                vec![$(std::mem::size_of::<$a>()),*]
            }
        }
        impl<R, $($a),*> ArgSizes for unsafe extern "C-unwind" fn($($a),*) -> R {
            fn arg_sizes() -> Vec<usize> {
                vec![$(std::mem::size_of::<$a>()),*]
            }
        }
    };
}

arg_sizes!();
arg_sizes!(A);
arg_sizes!(A B);
arg_sizes!(A B C);
arg_sizes!(A B C D);
arg_sizes!(A B C D E);
arg_sizes!(A B C D E F);
arg_sizes!(A B C D E F G);
arg_sizes!(A B C D E F G H);
arg_sizes!(A B C D E F G H I);
arg_sizes!(A B C D E F G H I J);
arg_sizes!(A B C D E F G H I J K);

/// The argument sizes of function pointer `_f` ([`ArgSizes`]).
pub fn arg_sizes_of<F: ArgSizes>(_f: F) -> Vec<usize> {
    F::arg_sizes()
}

impl Variant {
    /// The size of each argument, in order (compare with [`arg_sizes_of`]).
    pub fn arg_sizes(&self) -> Vec<usize> {
        self.args.iter().map(|a| a.size).collect()
    }

    /// The name of each argument, in order.
    pub fn arg_names(&self) -> Vec<&'static str> {
        self.args.iter().map(|a| a.name).collect()
    }
}

#[cfg(test)]
mod tests;
