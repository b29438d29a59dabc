//! What a CUresult code means and what to try: the `explain` subcommand, and the
//! remediation text of the problems in a report.
//!
//! Names and meanings come from the CUresult table of `seedance-cuda` (CUDA 13.0); the
//! steps to try are kept here, keyed by number, for the codes seen in practice.

use seedance_cuda::CUresult;
use serde::Serialize;

/// The table's CUDA version, as said in messages.
pub const TABLE_VERSION: &str = "CUDA 13.0";

/// The description of one code.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The number.
    pub code: u32,
    /// The `cuda.h` name, `None` when the table lacks the code.
    pub name: Option<String>,
    /// Whether the code is in the table.
    pub known: bool,
    /// What the code means and what usually causes it.
    pub meaning: String,
    /// What to try, most likely fix first.
    pub what_to_try: Vec<String>,
}

/// Why `explain` could not read its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparseable(pub String);

impl std::fmt::Display for Unparseable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is neither a CUresult number nor a name in the {TABLE_VERSION} table \
             (try 101, 0x65, INVALID_DEVICE or CUDA_ERROR_INVALID_DEVICE)",
            self.0
        )
    }
}

impl std::error::Error for Unparseable {}

/// Reads a code given as a decimal or `0x` hex number, or a name with or without the
/// `CUDA_ERROR_` prefix (any case), and describes it. A number the table lacks is still
/// explained (as unknown); a name the table lacks, or anything else, is [`Unparseable`].
pub fn explain(text: &str) -> Result<Explanation, Unparseable> {
    let t = text.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .and_then(|h| u32::from_str_radix(h, 16).ok());
    let code = hex
        .map(CUresult)
        .or_else(|| CUresult::parse(t))
        .ok_or_else(|| Unparseable(text.to_string()))?;
    Ok(explain_code(code.0))
}

/// Describes `code`.
pub fn explain_code(code: u32) -> Explanation {
    match CUresult(code).info() {
        Some(info) => Explanation {
            code,
            name: Some(info.name.to_string()),
            known: true,
            meaning: info.description.to_string(),
            what_to_try: steps(code).iter().map(|s| s.to_string()).collect(),
        },
        None => Explanation {
            code,
            name: None,
            known: false,
            meaning: format!(
                "{code} is not in the {TABLE_VERSION} table of CUresult codes. A newer driver \
                 may return it; its cuda.h, or cuGetErrorName on that host, names it."
            ),
            what_to_try: vec![
                "Check the driver version on the host (nvidia-smi) and the cuda.h of that \
                 version for the code."
                    .to_string(),
                "If the code came from a trace, the session_start record shows the driver \
                 version and library path."
                    .to_string(),
            ],
        },
    }
}

/// The steps to try for `code`, most likely fix first; generic advice for codes without
/// specific steps.
pub fn steps(code: u32) -> &'static [&'static str] {
    match code {
        0 => &["Nothing: CUDA_SUCCESS is not an error."],
        1 => &[
            "Look at the arguments of the failing call in the trace (call_failed.args): a zero \
             size, a null pointer, or a grid/block dimension over the device limit is typical.",
            "For launches, compare blockDim and shared memory with the device limits \
             (cuDeviceGetAttribute).",
        ],
        2 => &[
            "Reduce what each process allocates (batch size, model shards, caching allocator \
             limits such as PYTORCH_CUDA_ALLOC_CONF).",
            "Check for other processes on the same GPU (nvidia-smi): several ranks mapped to \
             one device is a common cause.",
            "Check that each process uses the device you expect (CUDA_VISIBLE_DEVICES, \
             LOCAL_RANK to device mapping).",
            "Look for leaks: allocations that grow with iterations.",
        ],
        3 => &[
            "Make sure cuInit(0) is called, and succeeded, before any other driver call.",
            "If cuInit itself failed, its error (in the trace) is the real cause.",
        ],
        4 => &[
            "A call arrived while CUDA was shutting down, usually from a static destructor or \
             an atexit handler: free CUDA resources before main returns.",
            "Usually harmless at exit; worry only if it happens before the program ends.",
        ],
        34 => &[
            "The toolkit's stub libcuda.so (lib64/stubs) was loaded instead of the driver's \
             libcuda.so.1: remove the stubs directory from LD_LIBRARY_PATH and the rpath.",
            "In containers, start with the NVIDIA container runtime (--gpus all, or the device \
             plugin in Kubernetes) so the real driver library is mounted.",
            "The trace's session_start.libcuda_path shows which file was loaded.",
        ],
        46 => &[
            "Another process holds the GPU in exclusive-process compute mode, or the device is \
             prohibited: check nvidia-smi (compute mode, running processes).",
            "In Kubernetes, check that the pod was actually allocated this GPU.",
        ],
        100 => &[
            "No GPU is visible: check CUDA_VISIBLE_DEVICES (empty, or only invalid entries, \
             hides every device) and that the driver is loaded (nvidia-smi).",
            "In containers, run with the NVIDIA container runtime or a GPU resource request.",
        ],
        101 => &[
            "The ordinal is at or above the number of visible devices: ordinals count from 0 \
             over the devices left after CUDA_VISIBLE_DEVICES, not physical GPU numbers.",
            "With CUDA_VISIBLE_DEVICES=2,3 the devices are ordinals 0 and 1: a program that \
             also selects device 2 or 3 (LOCAL_RANK, --device) fails.",
            "Compare the failing ordinal (call_failed.args) with the device list of the \
             process's session_start; fix the rank-to-device mapping or run seedance-fix in \
             fix mode to fall back to a valid device.",
        ],
        200 | 209 | 218 | 222 => &[
            "The kernel image does not fit this GPU or driver: rebuild for the device's \
             architecture (-gencode arch=compute_XX,code=sm_XX) and include PTX for newer \
             GPUs.",
            "PTX newer than the driver's JIT: upgrade the driver or build with an older \
             toolkit.",
        ],
        201 => &[
            "No context is current on the calling thread: call cuCtxSetCurrent or retain the \
             primary context on each thread that makes driver calls.",
            "A handle from a destroyed context was used: check context lifetimes.",
        ],
        400 => &[
            "A stream, event, module or function handle was used after it was destroyed, or \
             belongs to another context.",
            "Check teardown order; the trace's call arguments show the handle.",
        ],
        500 => &[
            "A symbol, kernel or entry point was not found: check the name and that the module \
             loaded is the one you built.",
            "From cuGetProcAddress this is usually benign: the caller probes for optional entry \
             points.",
        ],
        600 => &["Not an error: an asynchronous operation is still running (query calls)."],
        700 | 716 | 717 | 718 | 714 | 715 => &[
            "A kernel faulted: out-of-bounds or misaligned access. The context is unusable; the \
             process must restart.",
            "Reproduce with compute-sanitizer to find the kernel and the address.",
        ],
        701 => &[
            "Reduce the block size, registers per thread (-maxrregcount, launch bounds) or \
             dynamic shared memory of the launch.",
        ],
        702 => &[
            "A kernel ran longer than the watchdog allows (display GPU): shorten kernels or use \
             a GPU without a display.",
        ],
        709 => &[
            "The call used a context that was already destroyed: check the order of teardown \
             (streams, modules and memory before the context).",
        ],
        719 => &[
            "A kernel failed while running; the context is unusable and the process must \
             restart. Run compute-sanitizer to find the faulting kernel.",
        ],
        802 => &[
            "The system is not ready (e.g. Fabric Manager not running on NVSwitch systems): \
             start nvidia-fabricmanager and check its log.",
        ],
        803 => &[
            "The kernel driver and the user-mode libcuda differ in version: reinstall the driver \
             or fix the container's library mounts.",
        ],
        804 => &["Forward compatibility is not supported on this GPU: upgrade the driver instead."],
        999 => &[
            "An internal driver error: check dmesg for Xid messages and the driver version; \
             retry on another host to rule out a hardware fault.",
        ],
        _ => GENERIC,
    }
}

/// What a report's problem for failures with `code` says to do: the shim's own words
/// first (the CUresult table's description, which the shim prints on stderr after
/// `returned NAME (code):`, [`CUresult::said`]), then the steps specific to the code; the
/// generic step only for a code the table lacks.
pub fn remediation(code: u32) -> Vec<String> {
    let specific = steps(code);
    match CUresult(code).info() {
        Some(info) => std::iter::once(info.description)
            .chain(specific.iter().copied().filter(|s| *s != GENERIC[0]))
            .map(str::to_string)
            .collect(),
        None => specific.iter().map(|s| s.to_string()).collect(),
    }
}

/// The step for codes without specific advice.
const GENERIC: &[&str] = &[
    "Look at the failing call and its arguments in the trace, then the CUDA \
                            driver API documentation of that function for this result.",
];

/// `cuda.h` names of the codes [`steps`] has specific advice for, so that reports can
/// name, rank and advise on them even while the CUresult table lacks a row.
const NAMES: &[(u32, &str)] = &[
    (0, "CUDA_SUCCESS"),
    (1, "CUDA_ERROR_INVALID_VALUE"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    (3, "CUDA_ERROR_NOT_INITIALIZED"),
    (4, "CUDA_ERROR_DEINITIALIZED"),
    (34, "CUDA_ERROR_STUB_LIBRARY"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
    (100, "CUDA_ERROR_NO_DEVICE"),
    (101, "CUDA_ERROR_INVALID_DEVICE"),
    (200, "CUDA_ERROR_INVALID_IMAGE"),
    (201, "CUDA_ERROR_INVALID_CONTEXT"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
    (218, "CUDA_ERROR_INVALID_PTX"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    (400, "CUDA_ERROR_INVALID_HANDLE"),
    (500, "CUDA_ERROR_NOT_FOUND"),
    (600, "CUDA_ERROR_NOT_READY"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
    (704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, "CUDA_ERROR_INVALID_PC"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (999, "CUDA_ERROR_UNKNOWN"),
];

/// The number of a result as traces name it: a `cuda.h` name (from the CUresult table, or
/// the names [`steps`] knows) or a decimal number.
pub fn code_of(name: &str) -> Option<u32> {
    CUresult::parse(name).map(|c| c.0).or_else(|| {
        let upper = name.trim().to_ascii_uppercase();
        NAMES
            .iter()
            .find(|(_, n)| *n == upper || n.strip_prefix("CUDA_ERROR_") == Some(upper.as_str()))
            .map(|(c, _)| *c)
    })
}

/// Whether `code` is named by the CUresult table or has specific advice here.
pub fn is_known(code: u32) -> bool {
    CUresult(code).info().is_some() || NAMES.iter().any(|(c, _)| *c == code)
}

/// Renders an explanation as text for the terminal.
pub fn render_text(e: &Explanation) -> String {
    let mut out = String::new();
    match &e.name {
        Some(n) => out.push_str(&format!("{n} ({})\n", e.code)),
        None => out.push_str(&format!(
            "CUresult {} (not in the {TABLE_VERSION} table)\n",
            e.code
        )),
    }
    out.push('\n');
    out.push_str("Meaning:\n");
    for l in crate::fmt::wrap(&e.meaning, 88) {
        out.push_str(&format!("  {l}\n"));
    }
    out.push('\n');
    out.push_str("What to try:\n");
    for s in &e.what_to_try {
        for (i, l) in crate::fmt::wrap(s, 86).iter().enumerate() {
            let bullet = if i == 0 { "- " } else { "  " };
            out.push_str(&format!("  {bullet}{l}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_number_name_and_hex() {
        for t in [
            "101",
            "INVALID_DEVICE",
            "cuda_error_invalid_device",
            "0x65",
            " 101 ",
        ] {
            let e = explain(t).unwrap();
            assert_eq!(e.code, 101, "{t}");
            assert_eq!(e.name.as_deref(), Some("CUDA_ERROR_INVALID_DEVICE"));
            assert!(e.known);
        }
        let e = explain("999999").unwrap();
        assert!(!e.known);
        assert!(e.meaning.contains("not in the CUDA 13.0 table"));
        assert!(explain("garbage").is_err());
        assert!(explain("-1").is_err());
        assert!(explain("").is_err());
    }
}
