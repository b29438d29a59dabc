//! The state of one file while it is read ([`FileState`]): which process each pid's
//! records belong to, and its `call_failed` records held in a table keyed by a hash of
//! their key bytes until the end of the file.

use crate::aggregate::process::Examples;
use crate::aggregate::timeline::TIMELINE_BASE_NS;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Per-file state while a file is read: which process each pid's records belong to, and
/// the `call_failed` records not yet added to their processes (see [`Aggregate::end_file`]).
pub struct FileState {
    pub(crate) name: String,
    pub(crate) by_pid: HashMap<u32, usize>,
    pub(crate) last: Option<(u32, usize)>,
    pub(crate) failed: FailedTable,
    /// `call_failed` records after the first, not yet in `Counters::records_by_kind`.
    pub(crate) failed_kind_pending: u64,
    /// Whether the first `call_failed` record was counted in `records_by_kind` (it decides
    /// whether the kind gets its own entry there or goes to [`OTHER_KINDS`]).
    pub(crate) failed_kind_seen: bool,
}

/// The `call_failed` records of one file by (process, function, result key), each kind of
/// record found by a hash of its key bytes instead of a lookup by string per record in the
/// process's maps and the timeline.
#[derive(Default)]
pub(crate) struct FailedTable {
    /// Key hash -> first slot with that hash (the others follow `FailedSlot::next`).
    index: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    pub(crate) slots: Vec<FailedSlot>,
}

/// The `call_failed` records of one (process, function, result key) in one file.
pub(crate) struct FailedSlot {
    pub(crate) next: Option<u32>,
    pub(crate) process: usize,
    pub(crate) function: String,
    /// The result key (name, else number).
    pub(crate) key: String,
    /// The CUresult number of the first record.
    pub(crate) code: u32,
    pub(crate) count: u64,
    pub(crate) examples: Examples,
    /// Errors over time not yet in the timeline: their one-second bucket, and how many.
    pub(crate) bucket: u64,
    pub(crate) pending: u64,
}

/// Keys of [`FailedTable::index`] are hashes already.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// An FxHash-style hash (multiply and rotate, eight bytes at a time): fast on short keys,
/// and only used to find candidates that are then compared byte for byte.
#[inline]
fn fx_add(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

#[inline]
fn fx_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = fx_add(h, u64::from_le_bytes(c.try_into().unwrap_or_default()));
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    fx_add(fx_add(h, u64::from_le_bytes(last)), bytes.len() as u64)
}

/// Width of the buckets `call_failed` errors are held in before they reach the timeline:
/// its finest width, so holding them changes nothing.
pub(crate) const PENDING_BUCKET_NS: u64 = TIMELINE_BASE_NS;

impl FailedTable {
    /// The slot of (process, function, key), created with `code` if new.
    #[inline]
    pub(crate) fn slot(
        &mut self,
        process: usize,
        function: &str,
        key: &str,
        code: u32,
    ) -> &mut FailedSlot {
        let h = fx_bytes(
            fx_bytes(process as u64, function.as_bytes()),
            key.as_bytes(),
        );
        let mut at = self.index.get(&h).copied();
        let mut last = None;
        while let Some(id) = at {
            let s = &self.slots[id as usize];
            if s.process == process && s.function == function && s.key == key {
                return &mut self.slots[id as usize];
            }
            last = Some(id);
            at = s.next;
        }
        let id = self.slots.len() as u32;
        match last {
            Some(l) => self.slots[l as usize].next = Some(id),
            None => {
                self.index.insert(h, id);
            }
        }
        self.slots.push(FailedSlot {
            next: None,
            process,
            function: function.to_string(),
            key: key.to_string(),
            code,
            count: 0,
            examples: Examples::default(),
            bucket: 0,
            pending: 0,
        });
        &mut self.slots[id as usize]
    }
}
