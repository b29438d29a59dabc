//! The configuration: the validated `SEEDANCE_*` settings ([`get`]) and the configuration
//! word ([`switches`]), the one place every mode switch lives.
//!
//! The configuration is read on the first intercepted look-up or call (never in a library
//! constructor, so programs that never touch CUDA pay nothing and see nothing). Every switch
//! a wrapper or fault module reads (mode, pre-checks, lifetime tracking, the host-write
//! guard, quiet, fallback, the forked-child state) is a bit of one atomic word: one relaxed
//! load answers any of them, and the fork handler turns them all off in one store.

use crate::platform;
use once_cell::sync::OnceCell;
use seedance_core::{Config, Mode, RawConfig};
use std::sync::atomic::{AtomicU32, Ordering};

/// The bits of the configuration word ([`switches`]).
pub mod sw {
    /// The configuration has been read (until then every other bit is clear).
    pub const READ: u32 = 1;
    /// Mode `observe` or `fix`: wrappers count, explain and trace; look-ups are swapped.
    pub const ACTIVE: u32 = 1 << 1;
    /// Mode `fix`: the documented repairs.
    pub const FIX: u32 = 1 << 2;
    /// `SEEDANCE_VALIDATE=pre` (with the mode active): launches and allocations checked
    /// before the call.
    pub const PRE: u32 = 1 << 3;
    /// `SEEDANCE_LIFETIME` on (with the mode active): lifetime tracking.
    pub const LIFETIME: u32 = 1 << 4;
    /// `SEEDANCE_QUIET`: no stderr lines (the panic hook's included).
    pub const QUIET: u32 = 1 << 5;
    /// `SEEDANCE_FALLBACK` on (with `fix`): requests for unusable devices go elsewhere.
    pub const FALLBACK: u32 = 1 << 6;
    /// Some context ended with device allocations in it (set by the lifetime tracker):
    /// frees and allocations check the dead-address table.
    pub const ANY_DEAD: u32 = 1 << 7;
    /// This process is a child created by `fork()`: it only forwards.
    pub const FORKED: u32 = 1 << 8;
    /// `SEEDANCE_HOST_GUARD` on (with lifetime tracking, Linux only): the sources of
    /// host-to-device copies from pinned memory are digested at submission and compared at
    /// completion, and in `fix` mode sent from a snapshot (`shim/src/faults/hostguard.rs`).
    pub const HOST_GUARD: u32 = 1 << 9;
    /// Some thread has a failure whose stderr line waits for what the program does next
    /// (`crate::rt::deferred`): a successful call looks at its thread's pending failure.
    /// Set and cleared while running, by that module only.
    pub const DEFERRED: u32 = 1 << 10;
}

/// The configuration word: every switch a wrapper reads ([`sw`]), in one atomic, so that
/// one relaxed load answers any of them and the fork handler turns them all off in one
/// store. Written once when the configuration is read; `ANY_DEAD` is or-ed in later.
/// With the other hot words ([`crate::rt::hot`]): every hooked call reads it.
#[inline(always)]
pub(crate) fn word() -> &'static AtomicU32 {
    &crate::rt::hot::hot().word
}

/// The configuration word (reading the configuration first if that has not happened).
#[inline(always)]
pub fn switches() -> u32 {
    let w = word().load(Ordering::Relaxed);
    if w & sw::READ != 0 {
        w
    } else {
        read_switches()
    }
}

#[cold]
#[inline(never)]
fn read_switches() -> u32 {
    get();
    word().load(Ordering::Relaxed)
}

/// The configuration word as it is, without reading the configuration: all clear before
/// it is read (for hooks that may run first, and the panic hook).
#[inline(always)]
pub fn switches_now() -> u32 {
    word().load(Ordering::Relaxed)
}

/// Sets `bit` (only [`sw::ANY_DEAD`] changes after start-up, and [`sw::DEFERRED`], which
/// `crate::rt::deferred` sets and clears itself). Not in a forked child.
pub fn set_switch(bit: u32) {
    let _ = word().fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
        (w & sw::FORKED == 0).then_some(w | bit)
    });
}

/// The word for a validated configuration.
fn word_of(cfg: &Config) -> u32 {
    let mut w = sw::READ;
    if cfg.quiet {
        w |= sw::QUIET;
    }
    if cfg.mode != Mode::Off {
        w |= sw::ACTIVE;
        if cfg.mode == Mode::Fix {
            w |= sw::FIX;
            if cfg.fallback {
                w |= sw::FALLBACK;
            }
        }
        if cfg.validate == seedance_core::Validate::Pre {
            w |= sw::PRE;
        }
        if cfg.lifetime {
            w |= sw::LIFETIME;
            if cfg.host_guard && cfg!(target_os = "linux") {
                w |= sw::HOST_GUARD;
            }
        }
    }
    w
}

static CONFIG: OnceCell<Config> = OnceCell::new();

/// The validated configuration, read from the environment on first use. Bad values are
/// announced once on stderr and replaced by defaults.
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| {
        // A setuid/setgid or capability-raised process (AT_SECURE) must not let its caller
        // steer the shim: every SEEDANCE_* variable is ignored (no trace, no library path
        // override), as the dynamic loader itself ignores LD_LIBRARY_PATH there.
        crate::rt::guard::install_panic_hook(quiet_now);
        crate::rt::fd2::remember();
        let raw = if platform::secure_execution() {
            RawConfig::default()
        } else if let Some(env) = platform::environment_before_libc_init() {
            // A driver call from a `.preinit_array` function: libc's `environ` is not set
            // up yet, and the configuration is read only once.
            RawConfig::from_vars(env)
        } else {
            RawConfig::from_env()
        };
        let (cfg, warnings) = Config::from_raw(&raw);
        let _cancel = crate::rt::guard::NoCancel::new();
        for w in &warnings {
            crate::rt::fd2::write_line(w);
        }
        let (selectors, warnings) = cfg
            .exclude_devices
            .as_deref()
            .map(seedance_topology::explain::parse_exclusions)
            .unwrap_or_default();
        for w in &warnings {
            crate::rt::fd2::write_line(w);
        }
        let _ = EXCLUSIONS.set(selectors);
        if cfg.host_guard && !cfg!(target_os = "linux") && !cfg.quiet {
            // The guard reads the program's memory through Linux's `process_vm_readv`
            // (`shim/src/faults/hostguard_other.rs`).
            crate::rt::fd2::write_line("SEEDANCE_HOST_GUARD: only available on Linux; guard off");
        }
        let w = word_of(&cfg);
        word().fetch_or(w, Ordering::Release);
        if w & sw::ACTIVE != 0 {
            platform::on_fork(fork_prepare, fork_parent, forked_child);
        }
        cfg
    })
}

/// The configuration if it has been read, without waiting for it: for a forked child,
/// where a thread that was reading it at the fork is gone.
pub fn read_already() -> Option<&'static Config> {
    CONFIG.get()
}

/// Whether `SEEDANCE_QUIET` is in force, without reading the configuration (clear until it
/// is read): for the panic hook, which must never wait for the configuration's cell.
fn quiet_now() -> bool {
    switches_now() & sw::QUIET != 0
}

/// `pthread_atfork` child handler. A forked child keeps a copy of the shim's state but not
/// its threads: the trace writer's thread is gone, and a lock another thread held at the
/// fork stays held forever. So the child switches to forwarding only (as `SEEDANCE_MODE=off`:
/// no counting, no pre-checks, no lifetime tracking, no trace, no lock taken) and writes no
/// trace of its own; the parent's trace is untouched. (One exception: in a child forked
/// after initialisation, the first call that fails with `CUDA_ERROR_NOT_INITIALIZED` is
/// explained, `crate::faults::forked`.) Every switch is a bit of one word, so
/// this one store turns them all off. A child that calls `exec` starts afresh from its
/// environment.
extern "C" fn forked_child() {
    word().store(sw::READ | sw::FORKED, Ordering::Relaxed);
    crate::rt::lineage::in_child();
    // The child has only the forking thread: no query is running in it.
    FORK_GATE.store(0, Ordering::Release);
    let _ = CLOSED_GATE.try_with(|c| c.set(false));
}

/// The fork gate: [`GATE_FORKING`] while a thread is forking, and below it the number of
/// the shim's own bursts of driver queries in flight ([`hold_fork`]).
///
/// The shim queries the driver on threads of its own (the session record's, started by the
/// first `cuInit`: device count, names, PCI bus ids, memory, version). Were the program to
/// fork while such a query is inside the driver, the child would inherit the driver's lock
/// taken by a thread it does not have, and its first driver call would wait forever (seen
/// under qemu-user, where that thread is slow: the fake driver's lock; docs/reliability.md).
/// Without the shim the program has no such thread. So a fork waits, in its prepare
/// handler, until the queries in flight are done, and no new one starts until it is over.
static FORK_GATE: AtomicU32 = AtomicU32::new(0);

/// The bit of [`FORK_GATE`] set from a fork's prepare handler to its parent handler.
const GATE_FORKING: u32 = 1 << 31;

/// Longest a fork waits for the shim's queries in flight (natively they take microseconds),
/// and a query for a fork; past it each goes on as without the gate (fail open: a query
/// that cannot finish, e.g. waiting for a driver lock the forking thread holds, never
/// blocks the fork for longer).
const FORK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How often a waiter looks at the gate again.
const GATE_POLL: std::time::Duration = std::time::Duration::from_micros(200);

thread_local! {
    /// This thread's prepare handler set [`GATE_FORKING`]: its parent handler clears it.
    static CLOSED_GATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A burst of the shim's own driver queries in flight: a fork waits for its end
/// ([`FORK_GATE`]). Taken by [`hold_fork`], released when dropped.
pub struct ForkHold(bool);

impl Drop for ForkHold {
    fn drop(&mut self) {
        if self.0 {
            FORK_GATE.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Marks the start of a burst of the shim's own driver queries (held until the returned
/// value is dropped). Waits while another thread forks (at most [`FORK_WAIT`]).
pub fn hold_fork() -> ForkHold {
    let started = std::time::Instant::now();
    loop {
        let g = FORK_GATE.load(Ordering::Acquire);
        if g & GATE_FORKING == 0 {
            if FORK_GATE
                .compare_exchange_weak(g, g + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return ForkHold(true);
            }
            continue;
        }
        if started.elapsed() >= FORK_WAIT {
            return ForkHold(false);
        }
        std::thread::sleep(GATE_POLL);
    }
}

/// `pthread_atfork` prepare handler: closes the gate, then waits until the shim's queries in
/// flight are done (each at most [`FORK_WAIT`]).
extern "C" fn fork_prepare() {
    crate::rt::lineage::before_fork();
    let started = std::time::Instant::now();
    loop {
        let g = FORK_GATE.load(Ordering::Acquire);
        if g & GATE_FORKING == 0 {
            if FORK_GATE
                .compare_exchange_weak(g, g | GATE_FORKING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                break;
            }
            continue;
        }
        // Another thread forks at the same time.
        if started.elapsed() >= FORK_WAIT {
            return;
        }
        std::thread::sleep(GATE_POLL);
    }
    let _ = CLOSED_GATE.try_with(|c| c.set(true));
    while FORK_GATE.load(Ordering::Acquire) & !GATE_FORKING != 0 && started.elapsed() < FORK_WAIT {
        std::thread::sleep(GATE_POLL);
    }
}

/// `pthread_atfork` parent handler: opens the gate this thread's prepare handler closed.
extern "C" fn fork_parent() {
    if CLOSED_GATE.try_with(|c| c.replace(false)).unwrap_or(false) {
        FORK_GATE.fetch_and(!GATE_FORKING, Ordering::Release);
    }
}

/// Whether this process is a child created by `fork()` (which only forwards).
pub fn forked() -> bool {
    switches_now() & sw::FORKED != 0
}

/// The parsed `SEEDANCE_EXCLUDE_DEVICES` selectors (bad entries announced once and skipped).
pub fn exclusions() -> &'static [seedance_topology::DeviceSelector] {
    get();
    EXCLUSIONS.get().map_or(&[], Vec::as_slice)
}

/// `SEEDANCE_EXCLUDE_DEVICES`, parsed with the rest of the configuration so that a bad
/// entry is announced at start-up with the other bad values.
static EXCLUSIONS: OnceCell<Vec<seedance_topology::DeviceSelector>> = OnceCell::new();

/// `true` unless `SEEDANCE_MODE=off`: wrappers count and report, look-ups are swapped.
#[inline(always)]
pub fn active() -> bool {
    switches() & sw::ACTIVE != 0
}

/// `true` when `dlsym` and `cuGetProcAddress` look-ups should be answered with wrappers.
/// In `off` mode they pass through untouched, so only `-lcuda` callers reach a wrapper,
/// which then only forwards.
#[inline]
pub fn interposing() -> bool {
    active()
}
