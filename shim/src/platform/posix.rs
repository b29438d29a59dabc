//! What Linux and macOS share: `dladdr`, `dlopen` and `dlerror` behave alike under glibc and
//! dyld (an "object" is an ELF shared object or a Mach-O image), and thread cancellation
//! works alike (only the value of `PTHREAD_CANCEL_DISABLE` differs).

use libc::{c_int, c_void};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What `dladdr` says about an address: the object's path and load base (ELF) or mach
/// header (Mach-O).
pub struct ObjectInfo {
    /// Path of the shared object containing the address.
    pub path: Option<String>,
    /// Load base of that object.
    pub base: usize,
}

/// The shared object that contains `addr`, if any.
pub fn object_of(addr: *const c_void) -> Option<ObjectInfo> {
    // SAFETY: Dl_info is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads addr and writes info.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 {
        return None;
    }
    let path = if info.dli_fname.is_null() {
        None
    } else {
        // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
        Some(
            unsafe { CStr::from_ptr(info.dli_fname) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    Some(ObjectInfo {
        path,
        base: info.dli_fbase as usize,
    })
}

/// `true` if `addr` lies in libseedance_fix itself.
pub fn is_ours(addr: *const c_void) -> bool {
    static OUR_BASE: AtomicUsize = AtomicUsize::new(0);
    let mut base = OUR_BASE.load(Ordering::Relaxed);
    if base == 0 {
        base = object_of(is_ours as *const c_void).map_or(usize::MAX, |o| o.base);
        OUR_BASE.store(base, Ordering::Relaxed);
    }
    object_of(addr).is_some_and(|o| o.base == base)
}

/// `dlopen(path, flags)`; null on failure.
pub fn open(path: &str, flags: c_int) -> *mut c_void {
    let Ok(c) = CString::new(path) else {
        return std::ptr::null_mut();
    };
    // SAFETY: c is NUL-terminated; dlopen has no other preconditions.
    unsafe { libc::dlopen(c.as_ptr(), flags) }
}

/// A handle to the already-loaded object containing `addr` (`RTLD_NOLOAD`: a reference the
/// caller gives back with `dlclose`), or null. Under glibc the object is looked for in the
/// link-map namespace it was loaded in (a driver the program opened with `dlmopen`);
/// elsewhere in the default one.
pub fn handle_of(addr: *const c_void) -> *mut c_void {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Some(h) = handle_in_namespace(addr) {
        return h;
    }
    match object_of(addr).and_then(|o| o.path) {
        Some(p) => open(&p, libc::RTLD_NOW | libc::RTLD_NOLOAD),
        None => std::ptr::null_mut(),
    }
}

/// `dladdr1`'s request for the object's `struct link_map *` (glibc's `<dlfcn.h>`,
/// `RTLD_DL_LINKMAP = 2`; the libc crate does not define it).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// [`handle_of`] under glibc: `dladdr1(RTLD_DL_LINKMAP)` names the object's link map, which
/// is also its `dlopen` handle there, so `dlinfo(RTLD_DI_LMID)` gives its namespace, and
/// `dlmopen(that namespace, path, RTLD_NOLOAD)` a reference to that very object. `None`
/// when glibc cannot say (the caller then looks in the default namespace); `Some(null)`
/// when no object holds `addr`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn handle_in_namespace(addr: *const c_void) -> Option<*mut c_void> {
    // SAFETY: Dl_info is plain data; zeroed is a valid initial value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only reads addr and writes info and map (a link_map pointer).
    let found = unsafe { libc::dladdr1(addr, &mut info, &mut map, RTLD_DL_LINKMAP) };
    if found == 0 {
        return Some(std::ptr::null_mut());
    }
    if map.is_null() || info.dli_fname.is_null() {
        return None;
    }
    let mut lmid: libc::Lmid_t = 0;
    // SAFETY: under glibc a link map is the handle dlopen returns for its object; dlinfo
    // writes one Lmid_t.
    if unsafe { libc::dlinfo(map, libc::RTLD_DI_LMID, &mut lmid as *mut _ as *mut c_void) } != 0 {
        return None;
    }
    // SAFETY: dli_fname is the loader's NUL-terminated path of the object; dlmopen with
    // RTLD_NOLOAD only finds an object already loaded in that namespace.
    Some(unsafe { libc::dlmopen(lmid, info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) })
}

/// The last `dlerror()` message, if any.
pub fn last_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated thread-local string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        String::from("unknown error")
    } else {
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

#[cfg(target_os = "linux")]
use super::linux::CANCEL_DISABLE;
#[cfg(target_os = "macos")]
use super::macos::CANCEL_DISABLE;

extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
}

/// Disables cancellation of the calling thread (pthread_setcancelstate(3)) and returns the
/// previous state for [`restore_cancellation`]. A pending cancel then waits for the next
/// cancellation point after the restore, as if the shim's own work had not been there.
/// `PTHREAD_CANCEL_DISABLE` differs by C library (glibc 1, macOS 0): each OS file defines
/// `CANCEL_DISABLE`.
pub fn disable_cancellation() -> c_int {
    let mut old: c_int = CANCEL_DISABLE;
    // SAFETY: a valid state and a valid out-pointer; never fails with those.
    unsafe { pthread_setcancelstate(CANCEL_DISABLE, &mut old) };
    old
}

/// Puts back the state [`disable_cancellation`] returned.
pub fn restore_cancellation(old: c_int) {
    let mut ignored: c_int = 0;
    // SAFETY: as above; `old` is a state pthread_setcancelstate returned.
    unsafe { pthread_setcancelstate(old, &mut ignored) };
}

/// Registers fork handlers (pthread_atfork(3)): `prepare` runs in the forking thread before
/// `fork()`, `parent` in the parent after it, `child` in the child.
pub fn on_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: registering plain function pointers that live as long as the process (the
    // shim is never unloaded).
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// A second copy of libm in a namespace of its own (`dlmopen`): the handle found for an
    /// address in that copy is that copy's, not the default namespace's libm.
    #[test]
    fn handle_of_finds_the_object_in_its_own_namespace() {
        // SAFETY: dlmopen/dlsym with NUL-terminated names; the handle is closed below.
        let other =
            unsafe { libc::dlmopen(libc::LM_ID_NEWLM, c"libm.so.6".as_ptr(), libc::RTLD_NOW) };
        assert!(!other.is_null(), "{}", last_error());
        // SAFETY: as above.
        let cos = unsafe { libc::dlsym(other, c"cos".as_ptr()) };
        assert!(!cos.is_null());
        let h = handle_of(cos);
        assert!(!h.is_null(), "{}", last_error());
        // SAFETY: h is a live handle from handle_of.
        assert_eq!(unsafe { libc::dlsym(h, c"cos".as_ptr()) }, cos);
        // SAFETY: both references were taken above and are given back once.
        unsafe {
            libc::dlclose(h);
            libc::dlclose(other);
        }
    }
}
