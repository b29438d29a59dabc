//! Linux/glibc: the trampoline for the exported `dlsym`, the real `dlsym`, what a look-up
//! finds without the shim, library handles, thread ids and cancellation.
//!
//! glibc resolves `dlsym(RTLD_NEXT, ..)` and `dlsym(RTLD_DEFAULT, ..)` relative to the
//! *caller's* return address. Our exported `dlsym` is therefore a naked function
//! ([`dlsym_trampoline`]): it asks a decision function (`crate::interpose::dlsym`) whether
//! to answer, and if not, restores the arguments and tail-jumps to the real `dlsym` with the
//! caller's return address still on the stack, so glibc sees the original caller
//! (docs/design.md, fact 5).

use libc::{c_char, c_int, c_void};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Signature of `dlsym`.
pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// Address of glibc's `dlsym`, 0 until resolved. Read by the naked `dlsym` trampoline.
pub static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// Returned by the trampoline's decision function to mean "forward to the real dlsym".
pub const FORWARD: usize = 1;

/// `RTLD_NEXT` as a handle value.
pub const RTLD_NEXT: *mut c_void = libc::RTLD_NEXT;

#[cfg(target_arch = "x86_64")]
const DLSYM_OLD_VERSION: &CStr = c"GLIBC_2.2.5";
#[cfg(target_arch = "aarch64")]
const DLSYM_OLD_VERSION: &CStr = c"GLIBC_2.17";

/// glibc's own `dlsym`, resolved once with `dlvsym` (never through our export).
#[inline]
pub fn real_dlsym() -> Option<DlsymFn> {
    let p = REAL_DLSYM.load(Ordering::Acquire);
    if p != 0 {
        // SAFETY: only addresses returned by dlvsym for "dlsym" are stored in REAL_DLSYM.
        return Some(unsafe { std::mem::transmute::<usize, DlsymFn>(p) });
    }
    resolve_real_dlsym()
}

#[cold]
fn resolve_real_dlsym() -> Option<DlsymFn> {
    for version in [c"GLIBC_2.34", DLSYM_OLD_VERSION] {
        // SAFETY: dlvsym with RTLD_NEXT and NUL-terminated strings; it is not interposed.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
        if !p.is_null() {
            REAL_DLSYM.store(p as usize, Ordering::Release);
            // SAFETY: p is glibc's dlsym, whose signature is DlsymFn.
            return Some(unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) });
        }
    }
    None
}

/// Looks `name` up in `handle` with the real `dlsym` (null if absent).
pub fn lookup(handle: *mut c_void, name: &CStr) -> *mut c_void {
    match real_dlsym() {
        // SAFETY: handle is a dlopen handle or pseudo-handle; name is NUL-terminated.
        Some(f) => unsafe { f(handle, name.as_ptr()) },
        None => std::ptr::null_mut(),
    }
}

/// One loaded object: its path and the address ranges of its loaded segments.
struct Loaded {
    path: String,
    ranges: Vec<(usize, usize)>,
}

impl Loaded {
    fn contains(&self, addr: usize) -> bool {
        self.ranges.iter().any(|&(lo, hi)| (lo..hi).contains(&addr))
    }
}

/// Every loaded object in the loader's order (`dl_iterate_phdr`: the main program, the
/// preloaded libraries in order, then the rest; other namespaces after the base one).
fn loaded_objects() -> Vec<Loaded> {
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: data is the &mut Vec passed below; info is valid for the callback.
        let (acc, info) = unsafe { (&mut *(data as *mut Vec<Loaded>), &*info) };
        let path = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: dlpi_name is NUL-terminated.
            unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        let mut ranges = Vec::new();
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                let lo = info.dlpi_addr as usize + ph.p_vaddr as usize;
                ranges.push((lo, lo + ph.p_memsz as usize));
            }
        }
        acc.push(Loaded { path, ranges });
        0
    }
    let mut acc: Vec<Loaded> = Vec::new();
    // SAFETY: the callback only touches acc, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut acc as *mut Vec<Loaded> as *mut c_void) };
    acc
}

/// `RTLD_DL_LINKMAP` (glibc `<dlfcn.h>`): `dladdr1` returns the object's link map.
const RTLD_DL_LINKMAP: c_int = 2;

/// Whether `addr` lies in an object of the base namespace (`LM_ID_BASE`), where the shim
/// is; unknown counts as yes.
fn in_base_namespace(addr: usize) -> bool {
    // SAFETY: Dl_info is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 reads addr and writes info and, with RTLD_DL_LINKMAP, the link map.
    let found = unsafe {
        libc::dladdr1(
            addr as *const c_void,
            &mut info,
            &mut map as *mut *mut c_void,
            RTLD_DL_LINKMAP,
        )
    };
    if found == 0 || map.is_null() {
        return true;
    }
    let mut lmid: libc::Lmid_t = 0;
    // SAFETY: a link map is a valid handle for dlinfo (glibc); lmid is a valid out-pointer.
    let r = unsafe { libc::dlinfo(map, libc::RTLD_DI_LMID, &mut lmid as *mut _ as *mut c_void) };
    r != 0 || lmid == libc::LM_ID_BASE
}

/// What `dlsym(handle, name)` (`RTLD_DEFAULT` or `RTLD_NEXT`, called from `caller`) finds
/// without the shim, for a name the shim exports: `None` when glibc's own answer cannot be
/// ours (forward it: exact), else the native answer, null when there is none.
///
/// glibc searches the caller's scope in the loader's order; it returns our export only if
/// no object before us in that order defines the name. The native answer is then the
/// first definition after us: for `RTLD_NEXT` from an object before us (the program,
/// an earlier preload), the objects between it and us, then what our own `RTLD_NEXT`
/// look-up finds; for `RTLD_DEFAULT`, our own `RTLD_NEXT` look-up (the rest of the global
/// scope), then the caller's own dependencies when it was opened `RTLD_LOCAL`.
pub fn native_pseudo(handle: *mut c_void, name: &CStr, caller: usize) -> Option<*mut c_void> {
    let objects = loaded_objects();
    let ours = objects
        .iter()
        .position(|o| o.contains(native_pseudo as *const () as usize))?;
    let at = objects.iter().position(|o| o.contains(caller));
    let defined_in = |o: &Loaded| -> *mut c_void {
        if o.path.is_empty() {
            return std::ptr::null_mut();
        }
        let h = super::open(&o.path, libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if h.is_null() {
            return std::ptr::null_mut();
        }
        let p = lookup(h, name);
        // SAFETY: h came from dlopen(RTLD_NOLOAD), which took a reference we give back.
        unsafe { libc::dlclose(h) };
        if o.contains(p as usize) {
            p
        } else {
            std::ptr::null_mut()
        }
    };
    if handle == libc::RTLD_NEXT {
        let at = at.filter(|&a| a < ours)?;
        if let Some(p) = objects[at + 1..ours]
            .iter()
            .map(defined_in)
            .find(|p| !p.is_null())
        {
            return Some(p);
        }
        return Some(lookup(libc::RTLD_NEXT, name));
    }
    if !in_base_namespace(caller) {
        return None;
    }
    let first = lookup(libc::RTLD_DEFAULT, name);
    if !first.is_null() && !super::is_ours(first) {
        return Some(first);
    }
    let next = lookup(libc::RTLD_NEXT, name);
    if !next.is_null() {
        return Some(next);
    }
    // Loaded after us and maybe with RTLD_LOCAL: its own dependencies are in its scope.
    let own = at
        .filter(|&a| a > ours)
        .map(|a| {
            let o = &objects[a];
            let h = super::open(&o.path, libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if h.is_null() {
                return std::ptr::null_mut();
            }
            let p = lookup(h, name);
            // SAFETY: as above.
            unsafe { libc::dlclose(h) };
            p
        })
        .filter(|p| !p.is_null() && !super::is_ours(*p));
    Some(own.unwrap_or(std::ptr::null_mut()))
}

/// Defines the exported `dlsym`: a naked trampoline that calls `$decide(handle, symbol,
/// caller)` (`caller`: the return address of the program's call, where glibc looks for the
/// caller's object) and returns its answer, or, when it returns [`FORWARD`], tail-jumps to
/// the real `dlsym` with the arguments and the caller's return address as they came in.
///
/// `$decide` must be an `unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> usize`
/// that never unwinds. Used once, by `crate::interpose::dlsym`, where the decision lives;
/// the machine code stays here, with the OS. x86-64 (System V) and AArch64 (AAPCS64; run
/// under qemu-user in CI, not on Arm hardware: docs/reliability.md, "aarch64 under
/// qemu-user").
macro_rules! dlsym_trampoline {
    ($decide:path) => {
        /// The exported `dlsym` (x86-64 System V): see `crate::platform::dlsym_trampoline`.
        ///
        /// # Safety
        /// Same contract as glibc's `dlsym`.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn dlsym(
            handle: *mut ::libc::c_void,
            symbol: *const ::libc::c_char,
        ) -> *mut ::libc::c_void {
            // At entry rsp % 16 == 8; two pushes and 8 bytes re-align it for the call. The
            // caller's return address goes to the decision as its third argument.
            core::arch::naked_asm!(
                "mov rdx, [rsp]",
                "push rdi",
                "push rsi",
                "sub rsp, 8",
                "call {hook}",
                "add rsp, 8",
                "pop rsi",
                "pop rdi",
                "cmp rax, 1",
                "je 2f",
                "ret",
                "2:",
                "jmp qword ptr [rip + {real}]",
                hook = sym $decide,
                real = sym $crate::platform::REAL_DLSYM,
            )
        }

        /// The exported `dlsym` (AArch64 AAPCS64): see `crate::platform::dlsym_trampoline`.
        ///
        /// # Safety
        /// Same contract as glibc's `dlsym`.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn dlsym(
            handle: *mut ::libc::c_void,
            symbol: *const ::libc::c_char,
        ) -> *mut ::libc::c_void {
            core::arch::naked_asm!(
                "stp x29, x30, [sp, #-32]!",
                "mov x29, sp",
                "stp x0, x1, [sp, #16]",
                "mov x2, x30",
                "bl {hook}",
                "mov x9, x0",
                "ldp x0, x1, [sp, #16]",
                "ldp x29, x30, [sp], #32",
                "cmp x9, #1",
                "b.eq 2f",
                "mov x0, x9",
                "ret",
                "2:",
                "adrp x16, {real}",
                "ldr x16, [x16, :lo12:{real}]",
                "br x16",
                hook = sym $decide,
                real = sym $crate::platform::REAL_DLSYM,
            )
        }
    };
}
pub(crate) use dlsym_trampoline;

/// Paths of loaded objects whose file name contains `needle` (via `dl_iterate_phdr`).
pub fn loaded_objects_matching(needle: &str) -> Vec<String> {
    struct Acc<'a> {
        needle: &'a str,
        found: Vec<String>,
    }
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: data is the &mut Acc passed below; info is valid for the callback.
        let acc = unsafe { &mut *(data as *mut Acc) };
        // SAFETY: info is non-null for the duration of the callback.
        let name = unsafe { (*info).dlpi_name };
        if !name.is_null() {
            // SAFETY: dlpi_name is NUL-terminated.
            let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            if s.contains(acc.needle) {
                acc.found.push(s.into_owned());
            }
        }
        0
    }
    let mut acc = Acc {
        needle,
        found: Vec::new(),
    };
    // SAFETY: the callback only touches acc, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut acc as *mut Acc as *mut c_void) };
    acc.found
}

/// The calling thread's thread pointer: an address unique among the process's live threads
/// (its thread control block), read from the thread register with one instruction and no
/// thread-local access (`seedance_hotpath::held_lines`). x86-64: the first word of the control
/// block, which the x86-64 ELF TLS ABI defines as its own address (`fs:0`); aarch64:
/// `tpidr_el0`. 0 on other architectures (no entry is found by it).
#[inline(always)]
pub fn thread_pointer() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let tp: usize;
        // SAFETY: a read of the calling thread's own control block's first word, which the
        // C library sets up before any code of the thread runs and never moves; nothing is
        // written.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, preserves_flags, readonly, pure))
        };
        tp
    }
    #[cfg(target_arch = "aarch64")]
    {
        let tp: usize;
        // SAFETY: reads the thread register, which user code may read at any time; no memory
        // is touched.
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags, pure))
        };
        tp
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        0
    }
}

/// Kernel thread id of the calling thread (cached per thread).
pub fn thread_id() -> u64 {
    thread_local! {
        static TID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    TID.try_with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as u64);
        }
        t.get()
    })
    // SAFETY: gettid has no preconditions.
    .unwrap_or_else(|_| unsafe { libc::syscall(libc::SYS_gettid) } as u64)
}

/// The process's environment as `exec` gave it, for a caller that runs before the C library
/// initialised itself: a driver call from the program's `.preinit_array` comes before
/// libc's own initialiser, and there (glibc 2.36) `environ` is still null, so `getenv` and
/// `std::env` find nothing. Then the variables are read from `/proc/self/environ`, which
/// nothing can have changed yet. `None` once the C library is initialised (use `std::env`;
/// a program that cleared its environment keeps it cleared), or if `/proc` is unreadable.
pub fn environment_before_libc_init() -> Option<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
    use std::os::unix::ffi::OsStrExt;
    extern "C" {
        static environ: *const *const c_char;
        static program_invocation_name: *const c_char;
    }
    // SAFETY: plain reads of two pointers the C library owns. program_invocation_name is
    // "" until libc's initialiser sets it to argv[0] (with environ); both null/"" means
    // that initialiser has not run yet (clearenv alone leaves the name set).
    let early = unsafe {
        environ.is_null() && (program_invocation_name.is_null() || *program_invocation_name == 0)
    };
    if !early {
        return None;
    }
    let raw = std::fs::read("/proc/self/environ").ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|entry| {
                let eq = entry.iter().position(|b| *b == b'=')?;
                Some((
                    std::ffi::OsStr::from_bytes(&entry[..eq]).to_owned(),
                    std::ffi::OsStr::from_bytes(&entry[eq + 1..]).to_owned(),
                ))
            })
            .collect(),
    )
}

/// `true` when the process runs with `AT_SECURE` set (setuid, setgid, or file
/// capabilities): see getauxval(3).
pub fn secure_execution() -> bool {
    // SAFETY: getauxval has no preconditions; an unknown type returns 0.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// `PTHREAD_CANCEL_DISABLE` (glibc <pthread.h>: PTHREAD_CANCEL_ENABLE = 0, PTHREAD_CANCEL_DISABLE = 1).
pub(super) const CANCEL_DISABLE: c_int = 1;

/// Waits until `word` may no longer hold `expected`, at most `timeout` (a spurious wake-up or
/// a signal returns early). A `futex` wait: no allocation, lock or descriptor, so it is safe
/// on a thread interrupted anywhere.
pub fn wait_word(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let op = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAIT only reads it and sleeps,
    // with a relative timeout read from `ts`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            expected,
            &ts as *const _,
        )
    };
}

/// Wakes every thread waiting in [`wait_word`] on `word`.
pub fn wake_word(word: &std::sync::atomic::AtomicU32) {
    let op = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE does not access memory.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, i32::MAX) };
}
