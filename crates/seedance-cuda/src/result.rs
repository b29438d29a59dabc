//! `CUresult`: the driver's status code, and the table of names and usual causes.
//!
//! Names are spelled as in `cuda.h` (CUDA 13.0). Codes the table lacks are still valid
//! values: [`CUresult::name`] returns `None` for them and callers print the number.

use std::fmt;

/// A CUDA driver status code (`CUresult` in `cuda.h`), transparent over `u32` so that any
/// value a driver returns, including codes newer than our table, is representable.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CUresult(pub u32);

/// One row of the CUresult table: the code, its `cuda.h` name and a short description of
/// what it means and its usual causes.
#[derive(Debug, Clone, Copy)]
pub struct ResultInfo {
    /// The numeric code.
    pub code: u32,
    /// The enumerator name as NVIDIA spells it, e.g. `CUDA_ERROR_INVALID_DEVICE`.
    pub name: &'static str,
    /// What the code means and what usually causes it.
    pub description: &'static str,
}

macro_rules! results {
    ($( $konst:ident = $code:literal, $desc:literal; )*) => {
        impl CUresult {
            $(
                #[doc = $desc]
                pub const $konst: CUresult = CUresult($code);
            )*
        }

        /// Every code of CUDA 13.0's `cudaError_enum`, in ascending order.
        pub(crate) static TABLE: &[ResultInfo] = &[
            $( ResultInfo { code: $code, name: stringify!($konst), description: $desc }, )*
        ];
    };
}

include!("result_table.rs");

impl CUresult {
    /// The entry for this code, if the table knows it.
    pub fn info(self) -> Option<&'static ResultInfo> {
        TABLE
            .binary_search_by_key(&self.0, |r| r.code)
            .ok()
            .map(|i| &TABLE[i])
    }

    /// The `cuda.h` name (`CUDA_ERROR_OUT_OF_MEMORY`), or `None` for a code our table lacks.
    pub fn name(self) -> Option<&'static str> {
        self.info().map(|r| r.name)
    }

    /// `true` for `CUDA_SUCCESS` (0).
    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// Looks a code up by name (`CUDA_ERROR_INVALID_VALUE`, case-insensitive, with or
    /// without the `CUDA_ERROR_` prefix) or by number (`101`).
    pub fn parse(text: &str) -> Option<CUresult> {
        let t = text.trim();
        if let Ok(n) = t.parse::<u32>() {
            return Some(CUresult(n));
        }
        let upper = t.to_ascii_uppercase();
        TABLE
            .iter()
            .find(|r| r.name == upper || r.name.strip_prefix("CUDA_ERROR_") == Some(&upper))
            .map(|r| CUresult(r.code))
    }

    /// What the shim says on stderr after a call failed with this code: `NAME (code):
    /// description` from the table (cause and what to do), or `code (not in the CUDA 13.0
    /// table)`. The analyzer's problem for such a failure carries the same description
    /// ([`ResultInfo::description`]), so the two never say different things.
    pub fn said(self) -> String {
        match self.info() {
            Some(i) => format!("{} ({}): {}", i.name, i.code, i.description),
            None => format!("{} (not in the CUDA 13.0 table)", self.0),
        }
    }

    /// The whole table, ascending by code.
    pub fn table() -> &'static [ResultInfo] {
        TABLE
    }
}

impl fmt::Debug for CUresult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "CUresult({})", self.0),
        }
    }
}

impl fmt::Display for CUresult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "unknown CUresult {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for w in TABLE.windows(2) {
            assert!(w[0].code < w[1].code, "{} then {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn said_is_name_code_and_description() {
        assert_eq!(
            CUresult(900).said(),
            "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): The operation is not allowed while \
             the stream is captured into a graph (e.g. a synchronous copy, cuMemAlloc, or a sync \
             or query of the capturing stream), and the capture is now invalid; use \
             stream-ordered async variants inside capture or move the call out."
        );
        assert_eq!(CUresult(12345).said(), "12345 (not in the CUDA 13.0 table)");
    }

    #[test]
    fn known_and_unknown_codes() {
        assert_eq!(CUresult(101).name(), Some("CUDA_ERROR_INVALID_DEVICE"));
        assert_eq!(CUresult::CUDA_ERROR_OUT_OF_MEMORY.0, 2);
        assert_eq!(CUresult(2).name(), Some("CUDA_ERROR_OUT_OF_MEMORY"));
        assert_eq!(CUresult(123_456).name(), None);
        assert_eq!(format!("{}", CUresult(123_456)), "unknown CUresult 123456");
        assert_eq!(format!("{}", CUresult(1)), "CUDA_ERROR_INVALID_VALUE (1)");
    }

    #[test]
    fn parse_by_name_and_number() {
        assert_eq!(CUresult::parse("101"), Some(CUresult(101)));
        assert_eq!(CUresult::parse("invalid_device"), Some(CUresult(101)));
        assert_eq!(
            CUresult::parse("CUDA_ERROR_STUB_LIBRARY"),
            Some(CUresult(34))
        );
        assert_eq!(CUresult::parse("no_such_thing"), None);
    }
}
