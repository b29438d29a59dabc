//! The library that asked for an allocation (docs/design.md, "Who holds the memory"): once
//! per successful allocation call, the stack is walked ([`crate::platform::walk_stack`],
//! the unwinder Rust's standard library already links) to the first frame outside the shim,
//! the driver and the CUDA runtime, and that frame's object is the holder. Each return
//! address is looked up once with `dladdr` and cached ([`PCS`]); each object is named once,
//! by its load base ([`NAMES`]). Never on the launch or copy paths, never on a free.

use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use seedance_core::holders::{classify, Known, Object};
use seedance_hotpath::live::LiveTable;

/// Return address -> what its object is: a holder index (1 to 255), [`PASS`] or
/// [`UNKNOWN`] (in the table's size word).
static PCS: LiveTable<1024> = LiveTable::new();
/// A frame of the shim, the driver or the runtime: look further.
const PASS: u64 = 0x100;
/// A frame `dladdr` cannot place (JIT code), or the holder table is full: stop, unknown.
const UNKNOWN: u64 = 0x200;
/// Most frames walked per allocation.
const MAX_FRAMES: usize = 24;

/// One named object.
struct Named {
    base: usize,
    file: String,
    known: Option<Known>,
}

/// Objects named so far; holder index `i` is `NAMES[i - 1]`.
static NAMES: Mutex<Vec<Named>> = Mutex::new(Vec::new());

/// The shim's own path.
fn shim_path() -> &'static str {
    static PATH: OnceCell<String> = OnceCell::new();
    PATH.get_or_init(|| {
        crate::platform::object_of(shim_path as *const libc::c_void)
            .and_then(|o| o.path)
            .unwrap_or_default()
    })
}

/// What the object containing `pc` is (cold: once per return address); `None` when this
/// thread is already inside the shim's work (a signal handler that interrupted it, which
/// may hold [`NAMES`]), or on a panic: unknown this time, not cached.
#[cold]
#[inline(never)]
fn resolve(pc: usize) -> Option<u64> {
    let _inside = crate::rt::guard::enter()?;
    std::panic::catch_unwind(|| resolve_inside(pc)).ok()
}

fn resolve_inside(pc: usize) -> u64 {
    let Some(o) = crate::platform::object_of(pc as *const libc::c_void) else {
        return UNKNOWN;
    };
    let Some(path) = o.path else { return UNKNOWN };
    let mut names = NAMES.lock();
    if let Some(i) = names.iter().position(|n| n.base == o.base) {
        return i as u64 + 1;
    }
    match classify(&path, shim_path()) {
        Object::Pass => PASS,
        Object::Holder { file, known } if names.len() < 255 => {
            names.push(Named {
                base: o.base,
                file,
                known,
            });
            names.len() as u64
        }
        Object::Holder { .. } => UNKNOWN,
    }
}

/// The holder index of the calling allocation (0: unknown). Called on the success path of
/// the allocation calls only.
#[inline(never)]
pub(super) fn caller() -> u8 {
    let mut holder = 0u8;
    let mut frames = 0usize;
    crate::platform::walk_stack(&mut |ip| {
        frames += 1;
        if frames > MAX_FRAMES {
            return false;
        }
        // The return address may be one past the call's last byte: look up inside it.
        let pc = ip - 1;
        let what = match PCS.get(pc as u64) {
            Some(e) => e.bytes,
            None => match resolve(pc) {
                Some(w) => {
                    PCS.insert(pc as u64, w, None);
                    w
                }
                None => UNKNOWN,
            },
        };
        match what {
            PASS => true,
            UNKNOWN => false,
            i => {
                holder = i as u8;
                false
            }
        }
    });
    holder
}

/// The file and library of holder index `i`; `None` for 0 or an index never handed out.
pub fn named(i: u8) -> Option<(String, Option<Known>)> {
    let i = usize::from(i).checked_sub(1)?;
    NAMES.lock().get(i).map(|n| (n.file.clone(), n.known))
}
