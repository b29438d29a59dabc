//! Link settings for the fake `libnvidia-ml.so.1`.
//!
//! * `-soname libnvidia-ml.so.1`: programs linked with `-lnvidia-ml` against a copy named
//!   `libnvidia-ml.so` record a `NEEDED libnvidia-ml.so.1`, as with the real library.
//! * `-Bsymbolic`: references from inside the library to its own exported functions bind
//!   locally, even when an `LD_PRELOAD` interposer defines the same names.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
}
