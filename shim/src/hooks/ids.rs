//! The bottom layer of the hook table: a [`HookId`] per hooked function, the slot holding
//! each real driver address ([`slots`]), and [`TABLE`], what the `dlsym` and
//! `cuGetProcAddress` overrides look up. Generated from [`hook_table!`](super) (the clauses
//! and argument types are only read by the wrappers); every module may use it, it uses none
//! of the shim's but the hot words that share the slots' first line ([`crate::rt::hot::Hot`]);
//! the driver layer resolves the slots (`crate::driver::real`).

use libc::c_void;
use std::ffi::CStr;
use std::sync::atomic::AtomicPtr;

/// The real address of one hooked symbol: 16 bytes (the address and a thin pointer to the
/// name), so that the two slots beside the hot words share their line
/// ([`slots`]). Filled by the driver layer (`crate::driver::real`: `get`, `offer`, `set`).
pub struct Slot {
    /// The real address (null until resolved: `crate::driver::real`, `Slot::get`).
    pub(crate) ptr: AtomicPtr<c_void>,
    name: Name,
}

/// A symbol name as a thin pointer to its NUL-terminated bytes (a `&CStr` is 16 bytes).
struct Name(*const libc::c_char);

// SAFETY: the pointer is only ever that of a `&'static CStr` (`Slot::new`): immutable bytes
// that live for the whole process, which any thread may read.
unsafe impl Sync for Name {}

impl Slot {
    /// An empty slot for the exported symbol `name`.
    pub const fn new(name: &'static CStr) -> Slot {
        Slot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            name: Name(name.as_ptr()),
        }
    }

    /// The exported symbol name of this slot.
    pub fn name(&self) -> &'static CStr {
        // SAFETY: `Slot::new` took the pointer from a `&'static CStr`: NUL-terminated bytes
        // that live for the whole process.
        unsafe { CStr::from_ptr(self.name.0) }
    }
}

/// One entry of the hook table.
pub struct Hook {
    /// Base name the driver's `cuGetProcAddress` is asked for (`cuMemAlloc`).
    pub base: &'static str,
    /// The hooked function (its wrapper is the one handed out).
    pub id: HookId,
    /// Where the real address lives.
    pub slot: &'static Slot,
}

macro_rules! cstr {
    ($s:expr) => {
        match CStr::from_bytes_with_nul(concat!($s, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("symbol names contain no NUL"),
        }
    };
}

macro_rules! ids {
    (
        wrapped { $( $sym:ident $args:tt $( $clause:ident $body:tt )* ; )* }
        custom { $( $csym:ident ; )* }
        unlisted { $( $usym:ident ; )* }
    ) => {
        /// Identifies a hooked function; the value indexes the call counters.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(usize)]
        pub enum HookId { $($sym,)* $($csym,)* $($usym,)* }

        impl HookId {
            /// Every id, in counter order.
            pub const ALL: &'static [HookId] = &[$(HookId::$sym,)* $(HookId::$csym,)* $(HookId::$usym,)*];

            /// The exported symbol name (`cuMemAlloc_v2`). Inlined: with a constant id (every
            /// wrapper's) the name, and tests on it such as `ends_with("_ptsz")`, fold away.
            #[inline(always)]
            pub fn name(self) -> &'static str {
                match self {
                    $(HookId::$sym => stringify!($sym),)*
                    $(HookId::$csym => stringify!($csym),)*
                    $(HookId::$usym => stringify!($usym),)*
                }
            }

            /// Whether the function is a `_ptsz` form, whose stream 0 is the calling
            /// thread's per-thread default stream (cuda.h's `CUDA_API_PER_THREAD_DEFAULT_STREAM`
            /// names). A bit of a compile-time bitset on one cache line: with a constant id
            /// it folds away, otherwise one load (comparing the name's end cost about 40
            /// instructions; a table of one byte per id spanned three lines, each a miss
            /// after the driver's own work).
            #[inline(always)]
            pub fn per_thread(self) -> bool {
                const NAMES: &[&str] = &[
                    $(stringify!($sym),)*
                    $(stringify!($csym),)*
                    $(stringify!($usym),)*
                ];
                const WORDS: usize = NAMES.len().div_ceil(64);
                static BITS: PtszBits<WORDS> = PtszBits(ptsz_bits::<WORDS>(NAMES));
                let i = self as usize;
                (BITS.0[i / 64] >> (i % 64)) & 1 != 0
            }
        }

        /// Real-function slots, one per hooked driver symbol.
        pub mod slots {
            use super::*;

            /// The hot words, then every slot in the table's order, in one block aligned
            /// to a line pair: the slots of hooks next to each other in the table share a
            /// cache line, and the table's first two, `cuMemAlloc_v2` and `cuMemFree_v2`,
            /// share the hot words' (`crate::rt::hot`), which after the driver's own work
            /// is one miss for the switches and the driver's function instead of two (a
            /// test below checks that line).
            #[allow(non_snake_case)]
            #[repr(C, align(128))]
            pub struct All {
                /// The hot words (`crate::rt::hot::hot`).
                pub hot: crate::rt::hot::Hot,
                $( #[doc = concat!("`", stringify!($sym), "`.")] pub $sym: Slot, )*
                $( #[doc = concat!("`", stringify!($csym), "`.")] pub $csym: Slot, )*
            }

            /// The process's slots.
            pub static ALL: All = All {
                hot: crate::rt::hot::Hot::new(),
                $( $sym: Slot::new(cstr!(stringify!($sym))), )*
                $( $csym: Slot::new(cstr!(stringify!($csym))), )*
            };
        }

        /// Every hook that `dlsym` and `cuGetProcAddress` can hand out.
        pub static TABLE: &[Hook] = &[
            $( Hook { base: seedance_cuda::abi::base_of(stringify!($sym)), id: HookId::$sym, slot: &slots::ALL.$sym }, )*
            $( Hook { base: seedance_cuda::abi::base_of(stringify!($csym)), id: HookId::$csym, slot: &slots::ALL.$csym }, )*
        ];
    };
}

/// One bit per [`HookId`], set for the `_ptsz` forms (the table's `ptsz` variants); aligned so that up to 256 ids lie on
/// one cache line.
#[repr(align(32))]
struct PtszBits<const W: usize>([u64; W]);

/// The bitset of [`HookId::per_thread`] for `names` in id order (compile time).
const fn ptsz_bits<const W: usize>(names: &[&str]) -> [u64; W] {
    let mut out = [0u64; W];
    let mut i = 0;
    while i < names.len() {
        if is_ptsz(names[i]) {
            out[i / 64] |= 1 << (i % 64);
        }
        i += 1;
    }
    out
}

/// Whether `name` is a `_ptsz` form in the driver-ABI table (a `const fn`: the per-thread
/// table is built at compile time); `false` for a name the table lacks (`cudaSetDevice`).
const fn is_ptsz(name: &str) -> bool {
    match seedance_cuda::abi::find(name) {
        Some((_, v)) => matches!(v.form, seedance_cuda::abi::Form::Ptsz),
        None => false,
    }
}

hook_table!(ids);

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache line of a slot in the block.
    fn line(slot: &Slot) -> usize {
        slot as *const Slot as usize / 64
    }

    #[test]
    fn an_allocation_and_its_free_read_the_hot_words_and_their_slots_on_one_line() {
        assert_eq!(&slots::ALL as *const slots::All as usize % 128, 0);
        assert_eq!(std::mem::size_of::<Slot>(), 16);
        assert_eq!(std::mem::size_of::<crate::rt::hot::Hot>(), 32);
        let hot = crate::rt::hot::hot() as *const _ as usize / 64;
        for (name, slot) in [
            ("cuMemAlloc_v2", &slots::ALL.cuMemAlloc_v2),
            ("cuMemFree_v2", &slots::ALL.cuMemFree_v2),
        ] {
            assert_eq!(
                line(slot),
                hot,
                "{name}: keep cuMemAlloc_v2 and cuMemFree_v2 first in shim/src/hooks.rs"
            );
            assert_eq!(slot.name().to_str().unwrap(), name);
        }
    }

    #[test]
    fn per_thread_is_the_ptsz_suffix_for_every_id() {
        for &id in HookId::ALL {
            assert_eq!(id.per_thread(), id.name().ends_with("_ptsz"), "{id:?}");
        }
        assert!(HookId::cuStreamWaitEvent_ptsz.per_thread());
        assert!(!HookId::cuStreamWaitEvent.per_thread());
    }
}
