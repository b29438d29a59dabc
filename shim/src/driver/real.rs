//! Where the real driver functions come from.
//!
//! Each hooked ABI variant has a [`Slot`] holding the real function's address. An answer
//! the program asked for sets it, the latest one winning: the `dlsym` override (the
//! address in the library behind the handle the caller passed) and `cuGetProcAddress` (the
//! pointer the real driver returned). So a program that closes libcuda and opens another
//! copy, or falls back from a stub library to the driver, gets the library it looked the
//! function up in now, not the first one (which may be unmapped). A wrapper called with an
//! empty slot (programs linked with `-lcuda`) fills it from [`libcuda`]: `SEEDANCE_LIBCUDA`
//! if set, else the `libcuda.so.1` already loaded (`RTLD_NOLOAD`), else a fresh `dlopen`.
//! Each change of a slot to another address bumps [`generation`], so the shim's own cached
//! driver entry points (`query`) follow. `dlsym(RTLD_NEXT)` alone is never used for
//! libcuda: under cudart and PyTorch libcuda is `RTLD_LOCAL` and invisible to it
//! (docs/design.md, fact 4).

use crate::hooks::ids::Slot;
use crate::platform;
use libc::c_void;
use once_cell::sync::OnceCell;
use std::ffi::CStr;
use std::sync::atomic::Ordering;

// `Slot` (hooks/ids.rs, the bottom layer) gets its resolution here, where libcuda is
// opened: the ids hold the slots, this layer fills them.
impl Slot {
    /// The real function, resolving it from libcuda on first use; null if it cannot be found.
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    /// The real function the slot holds now, null if none: never resolves (a look-up could
    /// load the driver, or take a reference to it, for good: [`libcuda`]).
    #[inline]
    pub fn peek(&self) -> *mut c_void {
        self.ptr.load(Ordering::Acquire)
    }

    #[cold]
    fn resolve(&self) -> *mut c_void {
        let lib = libcuda();
        if !lib.is_null() {
            self.offer(platform::lookup(lib, self.name()));
        }
        self.ptr.load(Ordering::Acquire)
    }

    /// Records `p` as the real function unless the slot is already filled, or `p` is null
    /// or one of our own wrappers (which would make the wrapper call itself).
    pub fn offer(&self, p: *mut c_void) {
        if p.is_null() || platform::is_ours(p) {
            return;
        }
        let _ =
            self.ptr
                .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Records `p`, the real function the program just looked up, replacing what the slot
    /// held (unless `p` is null or one of our own wrappers). Cold: once per look-up.
    pub fn set(&self, p: *mut c_void) {
        if p.is_null() || platform::is_ours(p) {
            return;
        }
        let old = self.ptr.swap(p, Ordering::AcqRel);
        if !old.is_null() && old != p {
            GENERATION.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Bumped each time a slot changes from one real address to another (a library closed
/// and another opened, a stub replaced by the driver).
static GENERATION: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many times a slot changed library: caches of driver entry points found through a
/// slot (siblings of `cuInit`) are stale when this moved.
pub fn generation() -> usize {
    GENERATION.load(Ordering::Acquire)
}

/// The value in `cell`, computed by `make` on first use *outside* the cell's initialiser.
///
/// For once-only set-up that calls `dlopen`, `dlsym` or `dladdr` (opening libcuda or NVML,
/// looking up entry points, the topology): those wait for the dynamic loader's lock, which a
/// thread running a library constructor during `dlopen` holds. Had this thread held the cell
/// while waiting, that constructor's own first driver call (or device fault) would wait for
/// the cell forever (e2e::early). Threads that race here each compute a value; the first one
/// stored is kept and the others are dropped.
pub fn once_outside_loader_lock<T>(
    cell: &'static OnceCell<T>,
    make: impl FnOnce() -> T,
) -> &'static T {
    if let Some(v) = cell.get() {
        return v;
    }
    let v = make();
    cell.get_or_init(|| v)
}

/// The handle [`libcuda`] opened, once it has.
static HANDLE: OnceCell<usize> = OnceCell::new();

/// Handle of the real driver library, or null if none could be loaded (a one-line message
/// says why, once).
pub fn libcuda() -> *mut c_void {
    if let Some(h) = HANDLE.get() {
        return *h as *mut c_void;
    }
    // Opened outside the cell's initialiser, as `once_outside_loader_lock` does (`dlopen`
    // waits for the loader's lock); unlike it, a thread that loses the race gives its
    // library reference back.
    let h = open_libcuda();
    if HANDLE.set(h as usize).is_err() && !h.is_null() {
        // SAFETY: h came from dlopen in open_libcuda; the kept handle holds its own reference.
        unsafe { libc::dlclose(h) };
    }
    *HANDLE.get().unwrap_or(&0) as *mut c_void
}

fn open_libcuda() -> *mut c_void {
    let now = libc::RTLD_NOW;
    if let Some(path) = crate::rt::config::get().libcuda.as_ref() {
        let p = path.to_string_lossy();
        let mut h = platform::open(&p, now | libc::RTLD_NOLOAD);
        if h.is_null() {
            h = platform::open(&p, now | libc::RTLD_LOCAL);
        }
        if h.is_null() {
            // say_once: two threads can race through here (see `libcuda`).
            crate::rt::stderr::say_once(
                "libcuda:override",
                &format!(
                    "SEEDANCE_LIBCUDA={} could not be loaded ({}); falling back to libcuda.so.1",
                    seedance_core::text::clip(&p),
                    seedance_core::text::clip(&platform::last_error())
                ),
            );
        } else {
            return h;
        }
    }
    for name in ["libcuda.so.1", "libcuda.so"] {
        let h = platform::open(name, now | libc::RTLD_NOLOAD);
        if !h.is_null() {
            return h;
        }
    }
    let h = platform::open("libcuda.so.1", now | libc::RTLD_LOCAL);
    if h.is_null() {
        crate::rt::stderr::say_once(
            "libcuda:missing",
            &format!(
                "cannot load the CUDA driver libcuda.so.1 ({}); driver calls will fail with \
                 CUDA_ERROR_NOT_FOUND. Set SEEDANCE_LIBCUDA to its path if it is installed \
                 elsewhere",
                platform::last_error()
            ),
        );
    }
    h
}

/// Path of the library the real function at `p` lives in.
pub fn library_path_of(p: *const c_void) -> Option<String> {
    platform::object_of(p).and_then(|o| o.path)
}

/// Looks `name` up in the library that holds the real function `anchor` (null if absent).
pub fn sibling(anchor: *const c_void, name: &CStr) -> *mut c_void {
    let h = platform::handle_of(anchor);
    if h.is_null() {
        return std::ptr::null_mut();
    }
    let p = platform::lookup(h, name);
    // SAFETY: h came from dlopen(RTLD_NOLOAD), which took a reference we give back.
    unsafe { libc::dlclose(h) };
    p
}

/// The real `cuInit` the shim's own queries are anchored to: the one the program looked up
/// last, or, for a program linked with `-lcuda` whose wrappers resolved from [`libcuda`],
/// the one there. Null when there is none; never loads anything.
pub fn anchor() -> *mut c_void {
    let all = &crate::hooks::ids::slots::ALL;
    let p = all.cuInit.peek();
    if p.is_null() && HANDLE.get().is_some_and(|h| *h != 0) {
        return all.cuInit.get();
    }
    p
}

/// A reference of the shim's own to the driver library that holds the real `cuInit`, taken
/// with `dlopen(RTLD_NOLOAD)` and given back (`dlclose`) on drop: while it lives, a program
/// that closes that library (to open another copy) does not unmap it under a thread of the
/// shim's that queries it. Both steps hold the fork gate, as the queries do
/// ([`crate::rt::config::hold_fork`]).
pub struct HeldDriver {
    handle: *mut c_void,
    /// The real `cuInit` the reference was taken for.
    anchor: *mut c_void,
}

impl HeldDriver {
    /// The held library's path (`dladdr`), if the loader knows it.
    pub fn path(&self) -> Option<String> {
        library_path_of(self.anchor)
    }
}

/// What [`hold_driver`] found. While it lives, every query the calling thread makes
/// (`crate::driver::query`) calls into the held library only, by names looked up in it, or,
/// with none held, calls nothing ([`held_here`]); dropping it gives the reference back and
/// restores the thread's previous state.
///
/// Why a reference per use, and not a handle kept or `dlclose` interposed: a handle kept by
/// the shim keeps the program's `dlclose` from unloading the driver (its next `dlopen` gets
/// the old, initialised instance); an interposed `dlclose` learns of the program's close
/// but cannot make a query already running on another thread safe. A reference taken by
/// the thread that calls, for the time it calls, is both: the program's `dlclose` then
/// unloads the library as soon as the shim's work ends, and a library the program already
/// closed is found gone (nothing, or another object, mapped at the address the program
/// looked `cuInit` up at) and never called. The cached entry points of the program's own
/// threads (queries made inside one of the program's driver calls, into the copy it is
/// calling) are not used under a hold.
pub struct DriverHold {
    /// What was found (and, for a library, held).
    pub found: Found,
    _scope: Scope,
}

/// What [`hold_driver`] found.
pub enum Found {
    /// No driver was looked up or loaded (no real `cuInit`): the queries find none.
    NoDriver,
    /// The library the cuInit slot points into, held until the [`DriverHold`] is dropped.
    Held(HeldDriver),
    /// The slot points at an address where no driver library is mapped any more: the
    /// program closed it. Its entry points must not be called.
    Gone,
}

impl DriverHold {
    fn new(found: Found, state: usize) -> DriverHold {
        DriverHold {
            found,
            _scope: Scope::enter(state),
        }
    }
}

/// The calling thread's query state while a [`DriverHold`] lives; restores the previous one
/// when dropped.
pub struct Scope(usize);

impl Scope {
    fn enter(state: usize) -> Scope {
        Scope(HERE.try_with(|h| h.replace(state)).unwrap_or(NOTHING))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let _ = HERE.try_with(|h| h.set(self.0));
    }
}

/// [`HERE`]'s value outside any hold: queries use the shared cache.
const NOTHING: usize = 0;
/// [`HERE`]'s value under a hold that found no driver: queries call nothing.
const NONE_HELD: usize = 1;

thread_local! {
    /// What the calling thread's queries may call: [`NOTHING`], [`NONE_HELD`], or the handle
    /// of the library a [`DriverHold`] holds.
    static HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(NOTHING) };
}

/// Where the calling thread's queries look their entry points up.
pub enum Here {
    /// Not under a hold: the shared cache (the program's own threads, inside its driver calls).
    Anywhere,
    /// Under a hold that found no driver: nowhere.
    Nowhere,
    /// Under a hold: in this library only.
    In(*mut c_void),
}

/// See [`Here`].
pub fn held_here() -> Here {
    match HERE.try_with(std::cell::Cell::get).unwrap_or(NONE_HELD) {
        NOTHING => Here::Anywhere,
        NONE_HELD => Here::Nowhere,
        h => Here::In(h as *mut c_void),
    }
}

/// Takes a reference to the driver library the shim's queries call into (the one that holds
/// the real `cuInit`), for the calling thread's queries until the value is dropped. The
/// object found at the anchor's address must still export `cuInit`: an address where the
/// program's `dlclose` left nothing, or where another library took the range, is
/// [`DriverHold::Gone`]. For every call the shim makes outside the program's own driver
/// calls: the session record's thread, the metrics thread, the exit.
pub fn hold_driver() -> DriverHold {
    let anchor = anchor();
    if anchor.is_null() {
        return DriverHold::new(Found::NoDriver, NONE_HELD);
    }
    let _fork = crate::rt::config::hold_fork();
    let h = platform::handle_of(anchor);
    if h.is_null() {
        return DriverHold::new(Found::Gone, NONE_HELD);
    }
    if platform::lookup(h, c"cuInit").is_null() {
        // SAFETY: h came from dlopen(RTLD_NOLOAD), which took a reference we give back.
        unsafe { libc::dlclose(h) };
        return DriverHold::new(Found::Gone, NONE_HELD);
    }
    DriverHold::new(Found::Held(HeldDriver { handle: h, anchor }), h as usize)
}

impl Drop for HeldDriver {
    fn drop(&mut self) {
        let _fork = crate::rt::config::hold_fork();
        // SAFETY: self.handle came from dlopen(RTLD_NOLOAD) in hold_driver, which took the
        // reference given back here, once.
        unsafe { libc::dlclose(self.handle) };
    }
}
