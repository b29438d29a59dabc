//! (filled in by the memcheck work)
