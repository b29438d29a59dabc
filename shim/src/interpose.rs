//! The ways a program reaches the driver other than the exported symbols: the driver's
//! `cuGetProcAddress` and the runtime's `cudaSetDevice` (the `dlsym` override lives in
//! [`crate::platform`]).

pub mod procaddr;
pub mod runtime;
