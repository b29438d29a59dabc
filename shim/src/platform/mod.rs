//! The operating-system layer: how symbols are interposed and libraries found.
//!
//! Everything that differs between Linux (ELF, glibc, `LD_PRELOAD`) and macOS (Mach-O,
//! dyld, `DYLD_INSERT_LIBRARIES`) lives under this module, one file per OS, and what they share in `posix`. The rest of the
//! shim only uses the functions re-exported here.

mod posix;
pub use posix::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;
