//! End-to-end tests: real processes, real `LD_PRELOAD`, the fake driver.
//!
//! * `loading_paths`: the three ways programs reach the driver, with and without the shim.
//! * `rtld_next`: a library's `dlsym(RTLD_NEXT, ..)` still finds its own next symbol.
//! * `unused`: a program that never touches CUDA sees nothing of the shim; exit ordering.
//! * `modes`: `SEEDANCE_MODE`, bad values, the library-path override and the stub library.
//! * `echoes`: what the shim repeats of a setting's value: clipped to 200 bytes, escaped.
//! * `failures`: what a failed call leaves in the trace and on stderr.
//! * `recovered`: failures the program recovers from (a retry after making a context
//!   current, a fallback to another handle type): counted, silent; the same failures
//!   without the recovery: explained as before.
//! * `metrics`: the Prometheus metrics file.
//! * `files`: the program's descriptors are its own (closed and reused ones, descriptor 2).
//! * `process`: fork (the child only forwards; a child forked after initialisation hears why
//!   its calls fail, once) and exit paths.
//! * `devices`: device ordinals explained and repaired (fallback to the next device).
//! * `launch`: launches over a device or kernel limit, or without a usable context, explained.
//! * `alloc`: zero, wrapped and off-granularity sizes and out-of-memory, explained.
//! * `lifetime`: destroy before synchronise, handles used after their context ended, pinned
//!   memory freed under a copy, the exit report: explained, and repaired in `fix` mode.
//! * `hazards`: asynchronous copies racing on pinned host memory from unordered streams:
//!   explained, and ordered in `fix` mode.
//! * `legacy_streams`: the legacy default stream's implicit synchronisation with blocking
//!   streams (simpleStreams' event on stream 0, synchronous copies and memsets, stream 0
//!   and context synchronisation): silent; non-blocking and per-thread streams: reported.
//! * `host_guard`: host writes into a pending copy's source (`SEEDANCE_HOST_GUARD`) from
//!   threads, `read(2)`, after the program changed its signals, under a free or a
//!   synchronous copy: reported, and kept from the device in `fix` mode; a correct ring
//!   stays silent.
//! * `signals`: SIGTERM, SIGINT, SIGKILL, `exit()` from another thread and `_exit`: the
//!   trace written before the end stays readable.
//! * `secure`: a setuid process (`AT_SECURE`) ignores every `SEEDANCE_*` variable.
//! * `early`: driver calls from library constructors, `preinit_array`, `pthread_once` bodies
//!   and a preloaded allocator that itself calls `dlsym`.
//! * `memcheck`: the test programs under valgrind memcheck with the shim preloaded.
//! * `cancel`: threads cancelled (`pthread_cancel`) around driver calls, as natively.
//! * `reentrancy`: driver calls from a signal handler that interrupts the shim's own work.
//! * `reopen`: the driver closed and opened again, a stub then the driver, pseudo-handle look-ups.
//! * `libs`: the program's libraries and signals stay its own: a driver it closed unloads
//!   and is never called again (at exit, from the shim's thread), its signal handlers run on
//!   its own threads, and a handler that calls `exit()` ends the process.
//! * `bench_scripts`: the thread-scaling benchmark's script and statistics, without a GPU.
//! * `wheel_settings`: the wheel build backend's settings, bad values warned and defaulted.
//! * `nvml_hang`: NVML that does not answer (`nvmlInit` or its queries blocked): bounded by
//!   `SEEDANCE_NVML_TIMEOUT`, then the driver's own queries, one line.

mod alloc;
mod bench_scripts;
mod cancel;
mod corpus_script;
mod devices;
mod early;
mod echoes;
mod failures;
mod files;
mod hazards;
mod host_guard;
mod launch;
mod legacy_streams;
mod libs;
mod lifetime;
mod loading_paths;
mod memcheck;
mod metrics;
mod modes;
mod nvml_hang;
mod process;
mod recovered;
mod reentrancy;
mod reopen;
mod rtld_next;
mod secure;
mod signals;
mod stray;
mod unused;
mod wheel_settings;
