//! (filled in by the signals work)
