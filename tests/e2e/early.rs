//! (filled in by the early-calls work)
