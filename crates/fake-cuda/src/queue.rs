//! Asynchrony: the work queued on each stream, which completes only when something
//! synchronises it.
//!
//! A launch or an asynchronous copy is appended to its stream's [`Queue`] and nothing
//! happens yet. The queue runs (in order) when the program synchronises the stream, its
//! context or an event recorded on it, or makes a call the real driver orders after it
//! (`cuStreamDestroy`, `cuMemFree`, a synchronous copy); see [`crate::state`]. A copy reads
//! its source when it runs, so a pinned buffer freed or overwritten before the copy ran is
//! what the destination gets, as with a real DMA engine. Destroying or resetting the
//! context discards its queues: the work is lost.
//!
//! Queues are keyed by [`QueueKey`]: a created stream's handle, or the context handle with
//! tag 1 for that context's default stream (the legacy and the per-thread default stream
//! share one queue here).

use std::collections::VecDeque;

/// A created stream's handle, or `ctx | 1` for a context's default stream.
pub type QueueKey = usize;

/// The default stream's queue key of context `ctx`.
pub fn default_queue(ctx: usize) -> QueueKey {
    ctx | 1
}

/// One side of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Host memory at this address (the program's, or pinned memory of this driver).
    Host(usize),
    /// Device memory at this address.
    Device(u64),
}

/// One piece of queued work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// This many kernel launches (nothing runs on a device; consecutive launches merge).
    Launches(u64),
    /// A copy of `bytes` from `src` to `dst`.
    Copy {
        /// Destination.
        dst: Side,
        /// Source.
        src: Side,
        /// Bytes.
        bytes: usize,
    },
    /// `cuStreamWaitEvent`: before what follows, run `queue` up to position `upto`.
    Wait {
        /// The queue the event was recorded on.
        queue: QueueKey,
        /// The position the event marks.
        upto: u64,
    },
}

impl Op {
    /// Positions the op takes (a merged run of launches takes one per launch).
    fn weight(&self) -> u64 {
        match self {
            Op::Launches(n) => *n,
            _ => 1,
        }
    }
}

/// The work of one stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Queue {
    ops: VecDeque<Op>,
    /// Positions submitted so far (launches count one each).
    pub submitted: u64,
    /// Positions completed so far.
    pub completed: u64,
}

impl Queue {
    /// Appends `op`.
    pub fn push(&mut self, op: Op) {
        self.submitted += op.weight();
        if let (Op::Launches(n), Some(Op::Launches(last))) = (&op, self.ops.back_mut()) {
            *last += n;
            return;
        }
        self.ops.push_back(op);
    }

    /// Whether a queued copy reads or writes host bytes in `[lo, hi)`.
    pub fn touches_host(&self, lo: usize, hi: usize) -> bool {
        let hits = |side: &Side, bytes: usize| match *side {
            Side::Host(a) => a < hi && a.saturating_add(bytes) > lo,
            Side::Device(_) => false,
        };
        self.ops.iter().any(|op| match op {
            Op::Copy { dst, src, bytes } => hits(dst, *bytes) || hits(src, *bytes),
            _ => false,
        })
    }

    /// Whether work is still queued.
    pub fn busy(&self) -> bool {
        !self.ops.is_empty()
    }

    /// Takes the ops up to position `upto` (all of them for `u64::MAX`), splitting a run of
    /// launches if needed, and counts them completed.
    pub fn take_upto(&mut self, upto: u64) -> Vec<Op> {
        let mut out = Vec::new();
        while self.completed < upto {
            let Some(op) = self.ops.pop_front() else {
                break;
            };
            let w = op.weight();
            if let Op::Launches(n) = op {
                let room = upto - self.completed;
                if n > room {
                    self.ops.push_front(Op::Launches(n - room));
                    self.completed += room;
                    out.push(Op::Launches(room));
                    break;
                }
            }
            self.completed += w;
            out.push(op);
        }
        out
    }

    /// Ops still queued.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_merge_and_split() {
        let mut q = Queue::default();
        q.push(Op::Launches(1));
        q.push(Op::Launches(2));
        assert_eq!(q.len(), 1);
        q.push(Op::Copy {
            dst: Side::Device(0x7000),
            src: Side::Host(0x10),
            bytes: 4,
        });
        assert_eq!(q.submitted, 4);
        let first = q.take_upto(2);
        assert_eq!(first, vec![Op::Launches(2)]);
        assert!(q.busy());
        let rest = q.take_upto(u64::MAX);
        assert_eq!(rest.len(), 2);
        assert_eq!(q.completed, 4);
        assert!(q.is_empty());
        assert_eq!(default_queue(0x5eed_c000_0100), 0x5eed_c000_0101);
    }
}
