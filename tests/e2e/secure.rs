//! (filled in by the secure work)
