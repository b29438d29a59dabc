//! A few records written at once on the calling thread, without the writer thread: for a
//! process whose threads may be gone (a child `fork()`ed after the parent started its
//! trace: the parent's writer thread does not exist there, and the parent's trace is not
//! the child's). One `write` of whole lines, then the file is closed.

use crate::schema::{Event, Record, SCHEMA_VERSION};
use crate::writer::{now_ns, TraceFile};
use std::io::{self, Write};

/// Writes `events` to `file`, numbered from 0, each stamped with the current time, `pid`
/// and `tid`, and closes it. Errors: a record that does not serialize, or the write.
pub fn write_now(file: TraceFile, pid: u32, tid: u64, events: Vec<Event>) -> io::Result<()> {
    let mut text = Vec::new();
    for (seq, event) in events.into_iter().enumerate() {
        let record = Record {
            v: SCHEMA_VERSION,
            seq: seq as u64,
            ts_ns: now_ns(),
            pid,
            tid,
            event,
        };
        serde_json::to_writer(&mut text, &record)?;
        text.push(b'\n');
    }
    let mut f = file.file;
    f.write_all(&text)?;
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ExitSummary;

    #[test]
    fn writes_whole_lines_numbered_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let file = TraceFile::create(dir.path(), "h", 7, 9).unwrap();
        let path = file.path.clone();
        let events = vec![
            Event::ExitSummary(ExitSummary::default()),
            Event::ExitSummary(ExitSummary::default()),
        ];
        write_now(file, 7, 8, events).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        let records: Vec<Record> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 2);
        assert_eq!((records[1].seq, records[1].pid, records[1].tid), (1, 7, 8));
        assert!(text.ends_with('\n'));
    }
}
