//! The top layer of the hook table: the exported wrapper of each `wrapped` line of
//! [`hook_table!`](super), for programs linked with `-lcuda` (and handed out by `dlsym` and
//! `cuGetProcAddress`). A wrapper forwards, counts, and calls the line's clauses with the
//! arguments each one names.

use crate::exit::record;
use crate::faults::{alloc, capture, devices, hazard, hostguard, launch, lifetime};
use crate::hooks::ids::{slots, HookId};
use crate::rt::args::ArgVal;
use crate::rt::{config, deferred, output};
use libc::{c_int, c_uchar, c_uint, c_ushort, c_void};
use seedance_cuda::*;

type CUexecAffinityParam = c_void;
type CUctxCreateParams = c_void;
type HostPtr = *mut c_void;
/// `CUgraphExec`: an opaque handle, only passed on.
type GraphExec = *mut c_void;
/// `CUhostFn` (`void (*)(void *)`): only passed on, never called by the shim.
type HostFn = *mut c_void;

/// One argument of a clause call: `id` (the line's [`HookId`]), `r` (the driver's result),
/// `[a, b, c]` (C arguments as one array) or a C argument by name.
macro_rules! arg {
    ($id:expr, $r:expr, id) => {
        $id
    };
    ($id:expr, $r:expr, r) => {
        $r
    };
    ($id:expr, $r:expr, [$($x:ident),*]) => {
        [$($x),*]
    };
    ($id:expr, $r:expr, $x:ident) => {
        $x
    };
}

/// A clause's call, `(path::to::f(arg, ..))`, with its arguments resolved by [`arg!`].
macro_rules! call {
    ($id:expr, $r:expr, ($($f:ident)::+ ($($a:tt),*))) => {
        $($f)::+($(arg!($id, $r, $a)),*)
    };
}

/// For wrappers of calls that take a device (`device(ARG: Ordinal|Handle)`): hands a
/// failure to [`crate::faults::devices::on_failure`] with a closure that repeats the call
/// with another device. For the others: `None`, the generic failure report.
macro_rules! device_fault {
    ($id:expr, $r:expr, (), $call:expr) => {
        None
    };
    ($id:expr, $r:expr, ($dev:ident $kind:ident), $call:expr) => {
        devices::on_failure(
            $id,
            $r,
            devices::Target::$kind($dev),
            &mut |target: devices::Target| {
                let $dev = target.value();
                $call
            },
        )
    };
}

/// For wrappers with a `pre(..)` clause (launch and allocation checks, lifetime refusals):
/// a call the clause refuses returns its code without reaching the driver. Without the
/// clause: nothing.
macro_rules! pre_check {
    ($id:expr, ()) => {};
    ($id:expr, ($clause:tt)) => {
        // SAFETY: the program's own arguments, under the driver function's contract. The
        // check itself returns at once (one relaxed load) unless its switch is on.
        if let Some(code) = unsafe {
            call!(
                $id,
                compile_error!("a pre clause runs before the call: no `r`"),
                $clause
            )
        } {
            output::count($id, code);
            return code;
        }
    };
}

/// For wrappers with a `fault(..)` clause: a failure the clause explains is reported by it
/// (a `launch_fault`, `alloc_fault` or `lifetime_fault` event); otherwise `$otherwise`
/// (the plain report).
macro_rules! fault_check {
    ($id:expr, $r:expr, (), $otherwise:block) => {
        $otherwise
    };
    ($id:expr, $r:expr, ($clause:tt), $otherwise:block) => {
        // SAFETY: the program's own arguments, under the driver function's contract.
        if !unsafe { call!($id, $r, $clause) } $otherwise
    };
}

/// For wrappers with an `ok(..)` clause: called after a success (allocation and lifetime
/// tracking).
macro_rules! ok_note {
    ($id:expr, $r:expr, ()) => {};
    ($id:expr, $r:expr, ($clause:tt)) => {
        if $r.0 == 0 {
            // SAFETY: the program's own arguments, which the driver just filled in.
            unsafe { call!($id, $r, $clause) }
        }
    };
}

/// `stream_op(hStream)`: a failure is explained when that stream's context has ended.
macro_rules! stream_fault {
    ($id:expr, $r:expr, ()) => {
        false
    };
    ($id:expr, $r:expr, ($st:ident)) => {
        lifetime::launches::fault_on_stream($id, $r, $st)
    };
}

/// How a wrapper counts its call: with a `count(..)` clause, that function counts it (with
/// the arguments it names, so that it can record more in the same thread-local access:
/// launches); without, [`output::count`].
macro_rules! count_call {
    ($id:expr, $r:expr, ()) => {
        output::count($id, $r)
    };
    ($id:expr, $r:expr, ($clause:tt)) => {
        #[allow(unused_unsafe)] // a clause that reads no pointer is a safe function
        // SAFETY: the program's own arguments, under the driver function's contract.
        unsafe {
            call!($id, $r, $clause)
        }
    };
}

macro_rules! wrappers {
    (
        wrapped { $( $sym:ident ( $($arg:ident : $ty:ty),* ) $(device($dev:ident : $kind:ident))? $(pre $pre:tt)? $(source($sarg:ident = $($src:tt)+))? $(fault $fault:tt)? $(ok $ok:tt)? $(count $count:tt)? $(stream_op($st:ident))? $(after $after:tt)? ; )* }
        custom { $( $csym:ident ; )* }
        unlisted { $( $usym:ident ; )* }
    ) => {
        $(
            #[doc = concat!("Wrapper exported as `", stringify!($sym), "`: forwards to the real driver and counts the call.")]
            ///
            /// # Safety
            /// Same contract as the driver function of that name.
            #[no_mangle]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn $sym($($arg: $ty),*) -> CUresult {
                type Real = unsafe extern "C" fn($($ty),*) -> CUresult;
                let real = slots::ALL.$sym.get();
                if real.is_null() {
                    return crate::driver::missing::missing(HookId::$sym, |_r| { $( call!(HookId::$sym, _r, $after); )? });
                }
                // SAFETY: the slot holds the real driver function for exactly this ABI
                // variant (resolved by this symbol's name, or matched by address).
                let f: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
                pre_check!(HookId::$sym, ($($pre)?));
                $(
                    // `source(arg = f(..))`: the driver is given f's answer for that argument
                    // (the host-write guard's snapshot); every clause after the call sees
                    // the program's own value again.
                    let program_source = $sarg;
                    // SAFETY: the program's own arguments; the answer is the program's
                    // pointer or a staging buffer of at least as many bytes.
                    let $sarg = unsafe {
                        call!(HookId::$sym, compile_error!("a source clause runs before the call: no `r`"), ($($src)+))
                    };
                )?
                // SAFETY: arguments are passed through unchanged under the same contract
                // (but for a `source` clause's argument: the same bytes, in another buffer).
                let r = unsafe { f($($arg),*) };
                $(
                    hostguard::submitted(r);
                    let $sarg = program_source;
                )?
                let switches = config::switches();
                if switches & config::sw::ACTIVE != 0 {
                    if r.0 != 0 {
                        // SAFETY: the program's own arguments and the driver function.
                        return unsafe { failed($($arg,)* f, r) };
                    }
                    count_call!(HookId::$sym, r, ($($count)?));
                    // SAFETY: the program's own arguments, which the driver just accepted.
                    unsafe { settled($($arg,)* r) };
                    // A failure of this thread may wait for this call (`crate::rt::deferred`):
                    // one bit of the word already loaded.
                    if switches & config::sw::DEFERRED != 0 {
                        deferred::after_success(HookId::$sym);
                    }
                } else if r.0 == 3 && config::forked() {
                    // CUDA_ERROR_NOT_INITIALIZED in a forked child: explained once when the
                    // parent had initialised CUDA before the fork.
                    crate::faults::forked::failed(HookId::$sym, r);
                }
                return r;

                /// The clauses after a counted call, failed or not: an `ok` clause and a
                /// stream operation's note after a success, an `after` clause always.
                ///
                /// # Safety
                /// The wrapper's arguments (the program's own values) and the driver's result.
                #[inline(always)]
                #[allow(unused_variables)] // the arguments no clause of this line names
                #[allow(clippy::too_many_arguments)] // the driver function's, plus one
                unsafe fn settled($($arg: $ty,)* r: CUresult) {
                    ok_note!(HookId::$sym, r, ($($ok)?));
                    $( if r.0 == 0 { lifetime::launches::note_stream_op(HookId::$sym, $st); } )?
                    $( call!(HookId::$sym, r, $after); )?
                }

                /// After a failed call: counts it, then repairs, explains or reports it,
                /// then runs the clauses a success runs if a repair succeeded. Out of line,
                /// so that the success path saves only the registers it uses.
                ///
                /// # Safety
                /// The wrapper's arguments (the program's own values) and the driver
                /// function it called.
                #[cold]
                #[inline(never)]
                #[allow(unused_variables)] // `f`: only a `device(..)` clause repeats the call
                #[allow(clippy::too_many_arguments)] // the driver function's, plus two
                unsafe fn failed($($arg: $ty,)* f: Real, mut r: CUresult) -> CUresult {
                    count_call!(HookId::$sym, r, ($($count)?));
                    if config::switches_now() & config::sw::DEFERRED != 0 {
                        deferred::before_failure(HookId::$sym, r.0);
                    }
                    if r == CUresult::CUDA_ERROR_DEINITIALIZED {
                        lifetime::exit::after_deinit(HookId::$sym);
                    }
                    let repaired: Option<CUresult> = device_fault!(
                        HookId::$sym, r, ($($dev $kind)?),
                        // SAFETY: same arguments, the device argument replaced by another
                        // valid ordinal or handle of the same driver.
                        unsafe { f($($arg),*) }
                    );
                    match repaired {
                        Some(r2) => r = r2,
                        None => fault_check!(HookId::$sym, r, ($($fault)?), {
                            if !stream_fault!(HookId::$sym, r, ($($st)?)) {
                                output::failed(HookId::$sym, r, &[$((stringify!($arg), ArgVal::from($arg))),*])
                            }
                        }),
                    }
                    // SAFETY: the program's own arguments; the driver's (or the repair's) result.
                    unsafe { settled($($arg,)* r) };
                    r
                }
            }
        )*
    };
}

hook_table!(wrappers);
