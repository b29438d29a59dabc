//! The CUDA libraries a process has loaded, from the text of `/proc/self/maps`, with the
//! version their file names give: the environment's fingerprint in the exit summary.
//!
//! `/proc/self/maps` shows each mapped file by its resolved path, so a library loaded as
//! `libcudart.so.13` appears under its real name, `libcudart.so.13.0.96`. Libraries whose
//! file names carry no version (`libtorch_cuda.so`) are listed without one.

/// One CUDA library found in the maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// Which library (see [`KNOWN`]).
    pub name: &'static str,
    /// The mapped file.
    pub path: String,
    /// The version after `.so.` in the file name (`13.0.96`), or before `.so` where a
    /// library puts it there (`libcudnn.so.9` -> `9`); `None` when the name has none.
    pub version: Option<String>,
}

/// File-name stems (`lib<stem>.so...`) recognised, and the name each is reported under.
pub const KNOWN: &[(&str, &str)] = &[
    ("cudart", "cudart"),
    ("cublasLt", "cublasLt"),
    ("cublas", "cublas"),
    ("cudnn", "cudnn"),
    ("nccl", "nccl"),
    ("nvrtc", "nvrtc"),
    ("cufft", "cufft"),
    ("curand", "curand"),
    ("cusparse", "cusparse"),
    ("cusolver", "cusolver"),
    ("torch_cuda", "torch_cuda"),
    ("cuda", "cuda"),
];

/// Most libraries listed.
pub const MAX_LIBRARIES: usize = 64;

/// The CUDA libraries named in `maps` (the text of `/proc/<pid>/maps`), each file once, in
/// the order first mapped.
pub fn from_maps(maps: &str) -> Vec<Library> {
    let mut out: Vec<Library> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path: the path is the sixth field and may hold
        // spaces, so take everything from the first '/'.
        let Some(at) = line.find('/') else { continue };
        let path = line[at..].trim_end();
        let Some(lib) = classify(path) else { continue };
        if out.iter().any(|l| l.path == lib.path) {
            continue;
        }
        if out.len() >= MAX_LIBRARIES {
            break;
        }
        out.push(lib);
    }
    out
}

/// The library `path` names, if it is one of [`KNOWN`].
pub fn classify(path: &str) -> Option<Library> {
    let file = path.rsplit('/').next()?;
    let rest = file.strip_prefix("lib")?;
    let so = rest.find(".so")?;
    let stem = &rest[..so];
    let after = &rest[so + 3..];
    let (name, version) = KNOWN.iter().find_map(|&(k, name)| {
        // `libcudnn.so.9`, `libcudnn_ops.so.9` (a part of cuDNN), `libcudart.so.13.0.96`.
        let tail = stem.strip_prefix(k)?;
        if tail.is_empty() || tail.starts_with('_') && k == "cudnn" {
            Some((name, version_of(after)))
        } else {
            None
        }
    })?;
    if !(after.is_empty() || after.starts_with('.')) {
        return None;
    }
    Some(Library {
        name,
        path: path.to_string(),
        version,
    })
}

fn version_of(after_so: &str) -> Option<String> {
    let v = after_so.strip_prefix('.')?;
    (!v.is_empty()
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cuda_libraries_with_versions() {
        let maps = "\
7f0000000000-7f0000001000 r--p 00000000 fd:01 1 /usr/local/cuda/lib64/libcudart.so.13.1.80
7f0000001000-7f0000002000 r-xp 00001000 fd:01 1 /usr/local/cuda/lib64/libcudart.so.13.1.80
7f0000003000-7f0000004000 r--p 00000000 fd:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f0000005000-7f0000006000 r--p 00000000 fd:01 3 /opt/py/site-packages/nvidia/cublas/lib/libcublasLt.so.13
7f0000007000-7f0000008000 r--p 00000000 fd:01 4 /opt/py/site-packages/nvidia/cublas/lib/libcublas.so.13.2.0.9
7f0000009000-7f000000a000 r--p 00000000 fd:01 5 /opt/py/site-packages/nvidia/cudnn/lib/libcudnn_ops.so.9
7f000000b000-7f000000c000 r--p 00000000 fd:01 6 /opt/py/site-packages/nvidia/nccl/lib/libnccl.so.2
7f000000d000-7f000000e000 r--p 00000000 fd:01 7 /opt/py/site-packages/torch/lib/libtorch_cuda.so
7f000000f000-7f0000010000 r--p 00000000 fd:01 8 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000011000-7f0000012000 r--p 00000000 fd:01 9 /tmp/x/libcudaxyz.so
7f0000013000-7f0000014000 r--p 00000000 fd:01 10 /tmp/libseedance_fix.so
7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]
";
        let libs = from_maps(maps);
        let got: Vec<(&str, Option<&str>)> = libs
            .iter()
            .map(|l| (l.name, l.version.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("cudart", Some("13.1.80")),
                ("cuda", Some("580.159.04")),
                ("cublasLt", Some("13")),
                ("cublas", Some("13.2.0.9")),
                ("cudnn", Some("9")),
                ("nccl", Some("2")),
                ("torch_cuda", None),
            ]
        );
        assert_eq!(
            from_maps(maps)[0].path,
            "/usr/local/cuda/lib64/libcudart.so.13.1.80"
        );
    }

    #[test]
    fn odd_lines_are_skipped() {
        assert!(from_maps("").is_empty());
        assert!(from_maps("garbage\n/\n/lib\n/libcudart\n").is_empty());
        let l = classify("/a dir/libcudart.so").unwrap();
        assert_eq!((l.name, l.version), ("cudart", None));
        assert!(classify("/x/libcudart.so.13.x").unwrap().version.is_none());
        assert!(classify("/x/libcudartfoo.so.1").is_none());
    }
}
