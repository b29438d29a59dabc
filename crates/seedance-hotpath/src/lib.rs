//! The shim's hot-path state: what every hooked call writes, kept apart from the decisions
//! (`seedance-core`, which reads it). Per-function call counters ([`counters`]), the
//! per-thread shards of launch and copy counts and the work pending on each stream
//! ([`work`], a thread's state in [`thread`]), a thread's latest allocation held on a cache
//! line of its own ([`held`], [`held_lines`]), the lock-free table of live allocations
//! ([`live`]) and allocations by owning context ([`owners`]).
//!
//! Everything here takes no lock and allocates nothing after a thread's first call; values
//! written by different threads sit on lines of their own ([`cache_padded`]). One `unsafe`
//! block, in [`thread`], with its `// SAFETY:` line.
#![deny(missing_docs)]

pub mod cache_padded;
pub mod counters;
pub mod held;
pub mod held_lines;
pub mod live;
pub mod owners;
mod thread;
pub mod work;

pub use counters::Counters;
