//! End-to-end tests: real processes, real `LD_PRELOAD`, the fake driver.
//!
//! * `loading_paths`: the three ways programs reach the driver, with and without the shim.
//! * `rtld_next`: a library's `dlsym(RTLD_NEXT, ..)` still finds its own next symbol.
//! * `unused`: a program that never touches CUDA sees nothing of the shim; exit ordering.
//! * `modes`: `SEEDANCE_MODE`, bad values, the library-path override and the stub library.
//! * `failures`: what a failed call leaves in the trace and on stderr.
//! * `devices`: device ordinals explained and repaired (fallback to the next device).

mod devices;
mod failures;
mod loading_paths;
mod modes;
mod rtld_next;
mod unused;
