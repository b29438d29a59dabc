//! A host write the host-write guard caught (`SEEDANCE_HOST_GUARD`): one type for the Linux
//! guard (`hostguard.rs`) and the stand-in of other platforms (`hostguard_other.rs`).

/// A recorded write, for the report (made only by the Linux guard).
pub struct Write {
    /// Writing thread.
    pub tid: u64,
    /// Faulting address.
    pub addr: u64,
    /// Fix mode waited for the copy.
    pub waited: bool,
    /// The copy's hook index.
    pub function: usize,
    /// The copy's stream key.
    pub key: u64,
    /// The copying thread.
    pub copy_tid: u64,
    /// The copy's source and bytes.
    pub src: u64,
    /// Bytes.
    pub bytes: u64,
    /// Symbolized frames, innermost first (the shim's own handler frames left out).
    pub frames: Vec<String>,
    /// Writes caught and not reported.
    pub more: u64,
}
