//! Which symbol names are CUDA driver entry points.

/// `true` for `cu` followed by an upper-case ASCII letter (`cuInit`, `cuMemAlloc_v2`), and
/// `false` for `cudnnCreate`, `cublasCreate`, `curl_easy_init`, `cudaMalloc`
/// (docs/design.md, fact 6).
pub fn is_driver_name(name: &[u8]) -> bool {
    name.len() > 2 && name[0] == b'c' && name[1] == b'u' && name[2].is_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_only() {
        for yes in [
            "cuInit",
            "cuMemAlloc_v2",
            "cuLaunchKernel_ptsz",
            "cuGetProcAddress",
        ] {
            assert!(is_driver_name(yes.as_bytes()), "{yes}");
        }
        for no in [
            "cudnnCreate",
            "cublasCreate",
            "curl_easy_init",
            "cudaSetDevice",
            "cu",
            "c",
            "",
        ] {
            assert!(!is_driver_name(no.as_bytes()), "{no}");
        }
    }
}
