//! Who holds the memory: the library that asked for each live allocation, named by its file
//! and, for the libraries whose allocators keep memory on purpose, with what releases it.
//!
//! The shim finds the library once per allocation, from the first frame of the allocating
//! call's stack outside the driver, the CUDA runtime and the shim itself (docs/design.md,
//! "Who holds the memory"); this module names it and words the holders for the
//! out-of-memory explanation.

use std::fmt::Write as _;

/// A library whose allocator is known, with what to do about the memory it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// JAX (jaxlib, its XLA extension or CUDA plugin): preallocates.
    Jax,
    /// PyTorch (libtorch_cuda, libc10_cuda): a caching allocator.
    PyTorch,
    /// CuPy: a memory pool.
    CuPy,
    /// NCCL: its communicators' buffers.
    Nccl,
}

impl Known {
    /// The name a user knows.
    pub fn name(self) -> &'static str {
        match self {
            Known::Jax => "JAX",
            Known::PyTorch => "PyTorch",
            Known::CuPy => "CuPy",
            Known::Nccl => "NCCL",
        }
    }

    /// What releases the memory, where that is documented behaviour of the library; `None`
    /// where nothing general is true.
    pub fn hint(self) -> Option<&'static str> {
        match self {
            Known::Jax => Some(
                "JAX preallocates 75% of the device's memory when it starts: set \
                 XLA_PYTHON_CLIENT_PREALLOCATE=false, or a smaller \
                 XLA_PYTHON_CLIENT_MEM_FRACTION",
            ),
            Known::PyTorch => Some(
                "PyTorch's caching allocator keeps freed blocks: torch.cuda.empty_cache() \
                 returns them, PYTORCH_CUDA_ALLOC_CONF tunes it",
            ),
            Known::CuPy => Some(
                "CuPy's memory pool keeps freed blocks: \
                 cupy.get_default_memory_pool().free_all_blocks() returns them",
            ),
            Known::Nccl => None,
        }
    }
}

/// What an allocating frame's object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// The driver, the CUDA runtime or the shim: look further up the stack.
    Pass,
    /// The library that asked: its file name, and which library it is when known.
    Holder {
        /// The object's file name (`libxla_extension.so`).
        file: String,
        /// Which library, when known.
        known: Option<Known>,
    },
}

/// Classifies the object at `path` (as `dladdr` names it) for a holder: `shim` is the
/// shim's own path. The driver (`libcuda.so*`) and the CUDA runtime (`libcudart*`) pass.
pub fn classify(path: &str, shim: &str) -> Object {
    let file = path.rsplit('/').next().unwrap_or(path);
    if path == shim || file.starts_with("libcuda.so") || file.starts_with("libcudart") {
        return Object::Pass;
    }
    let lower = path.to_ascii_lowercase();
    let known = if file.starts_with("libxla_extension")
        || file.contains("xla_cuda_plugin")
        || lower.contains("/jaxlib/")
        || lower.contains("/jax_plugins/")
        || lower.contains("/jax_cuda")
    {
        Some(Known::Jax)
    } else if file.starts_with("libtorch_cuda") || file.starts_with("libc10_cuda") {
        Some(Known::PyTorch)
    } else if lower.contains("/cupy/") || lower.contains("/cupy_backends/") {
        Some(Known::CuPy)
    } else if file.starts_with("libnccl") {
        Some(Known::Nccl)
    } else {
        None
    };
    Object::Holder {
        file: file.to_string(),
        known,
    }
}

/// How a holder is named: `JAX (libxla_extension.so)`, or the file name alone.
pub fn label(file: &str, known: Option<Known>) -> String {
    match known {
        Some(k) => format!("{} ({file})", k.name()),
        None => file.to_string(),
    }
}

/// What one library holds on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The object's file name.
    pub file: String,
    /// Which library, when known.
    pub known: Option<Known>,
    /// Live allocations it asked for.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Most holders named in one explanation; the rest are counted.
pub const MAX_NAMED: usize = 4;

/// The holders for the out-of-memory explanation, largest first: `JAX
/// (libxla_extension.so) holds 104.9 GiB in 4 allocations (JAX preallocates ...)`, each
/// with its hint, joined by `; `. `short` formats bytes. Empty when `held` is.
pub fn describe(held: &[Holding], short: impl Fn(u64) -> String) -> String {
    let mut v: Vec<&Holding> = held.iter().filter(|h| h.count > 0).collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.file.cmp(&b.file)));
    let mut t = String::new();
    for (i, h) in v.iter().take(MAX_NAMED).enumerate() {
        if i > 0 {
            t.push_str("; ");
        }
        let _ = write!(
            t,
            "{} holds {} in {} allocation{}",
            label(&h.file, h.known),
            short(h.bytes),
            h.count,
            if h.count == 1 { "" } else { "s" }
        );
        if let Some(hint) = h.known.and_then(Known::hint) {
            let _ = write!(t, " ({hint})");
        }
    }
    if v.len() > MAX_NAMED {
        let _ = write!(t, "; {} more libraries", v.len() - MAX_NAMED);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_libraries() {
        let shim = "/opt/s/libseedance_fix.so";
        for p in [
            shim,
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159",
            "/venv/nvidia/cu13/lib/libcudart.so.13",
        ] {
            assert_eq!(classify(p, shim), Object::Pass, "{p}");
        }
        let known = |p: &str| match classify(p, shim) {
            Object::Holder { file, known } => (file, known),
            Object::Pass => panic!("{p} passed"),
        };
        assert_eq!(
            known("/venv/jaxlib/xla_extension/libxla_extension.so"),
            ("libxla_extension.so".into(), Some(Known::Jax))
        );
        assert_eq!(
            known("/venv/jax_plugins/xla_cuda13/xla_cuda_plugin.so"),
            ("xla_cuda_plugin.so".into(), Some(Known::Jax))
        );
        assert_eq!(
            known("/venv/torch/lib/libc10_cuda.so"),
            ("libc10_cuda.so".into(), Some(Known::PyTorch))
        );
        assert_eq!(
            known("/venv/torch/lib/libtorch_cuda.so"),
            ("libtorch_cuda.so".into(), Some(Known::PyTorch))
        );
        assert_eq!(
            known("/venv/cupy_backends/cuda/api/runtime.cpython-311-x86_64-linux-gnu.so"),
            (
                "runtime.cpython-311-x86_64-linux-gnu.so".into(),
                Some(Known::CuPy)
            )
        );
        assert_eq!(
            known("/venv/nvidia/nccl/lib/libnccl.so.2"),
            ("libnccl.so.2".into(), Some(Known::Nccl))
        );
        assert_eq!(
            known("/tmp/t/libholder_a.so"),
            ("libholder_a.so".into(), None)
        );
        assert_eq!(known("/tmp/t/holder_main"), ("holder_main".into(), None));
    }

    #[test]
    fn describes_the_largest_first_with_true_hints_only() {
        let gib = |b: u64| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
        let held = [
            Holding {
                file: "libholder_a.so".into(),
                known: None,
                count: 1,
                bytes: 1 << 30,
            },
            Holding {
                file: "libxla_extension.so".into(),
                known: Some(Known::Jax),
                count: 4,
                bytes: 100 << 30,
            },
            Holding {
                file: "libnccl.so.2".into(),
                known: Some(Known::Nccl),
                count: 2,
                bytes: 2 << 30,
            },
        ];
        assert_eq!(
            describe(&held, gib),
            "JAX (libxla_extension.so) holds 100.0 GiB in 4 allocations (JAX preallocates \
             75% of the device's memory when it starts: set XLA_PYTHON_CLIENT_PREALLOCATE=false, \
             or a smaller XLA_PYTHON_CLIENT_MEM_FRACTION); NCCL (libnccl.so.2) holds 2.0 GiB \
             in 2 allocations; libholder_a.so holds 1.0 GiB in 1 allocation"
        );
        assert_eq!(describe(&[], gib), "");
    }
}
