//! Link settings for the fake `libcuda.so.1`.
//!
//! * `-soname libcuda.so.1`: programs linked with `-lcuda` against `target/debug/libcuda.so`
//!   record a `NEEDED libcuda.so.1`, as with the real driver.
//! * `-Bsymbolic`: references from inside the library to its own exported functions bind
//!   locally, so the pointers `cuGetProcAddress` hands out are this library's functions even
//!   when an `LD_PRELOAD` interposer defines the same names (as the real driver behaves).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
}
