//! Splitting a stream into lines of bounded length: [`read_line_bounded`] for a
//! [`std::io::BufRead`], and [`LineReader`], which reads blocks into one reused buffer and
//! yields the whole lines of each block in place.

use std::io::{self, BufRead, Read};

/// The outcome of reading one raw line from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawLine {
    /// The line ended with a newline (false for the last line of a file cut short).
    pub newline: bool,
    /// The line was longer than the limit; the buffer holds only its start.
    pub oversized: bool,
    /// Bytes the line took in the stream, newline included.
    pub len: u64,
}

/// Reads the next line into `buf` (cleared first), keeping at most `max` bytes of it and
/// discarding the rest. Returns `None` at the end of the stream.
pub fn read_line_bounded<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<RawLine>> {
    buf.clear();
    let mut len = 0u64;
    let mut oversized = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((len > 0).then_some(RawLine {
                newline: false,
                oversized,
                len,
            }));
        }
        let (chunk, used, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        if !oversized {
            if buf.len() + chunk.len() <= max {
                buf.extend_from_slice(chunk);
            } else {
                oversized = true;
            }
        }
        len += used as u64;
        reader.consume(used);
        if done {
            return Ok(Some(RawLine {
                newline: true,
                oversized,
                len,
            }));
        }
    }
}

/// Splits a stream into lines in place: reads large blocks into one buffer and hands out
/// the whole lines in it as one slice ([`Block::Lines`], split by [`split_lines`]), without
/// copying them. Gives the same lines, lengths and flags as repeated [`read_line_bounded`]
/// calls with the same `max`; a line longer than `max` that has not ended yet is skipped
/// as it streams by (the buffer never holds more than `max` bytes of a line plus one
/// block).
pub struct LineReader {
    buf: Vec<u8>,
    /// Start of the next line in `buf`.
    pos: usize,
    /// End of the data in `buf`.
    end: usize,
    /// `buf[pos..scanned]` is known to hold no newline.
    scanned: usize,
    /// Block size of each read.
    block: usize,
    max: usize,
    eof: bool,
    /// Most bytes of one over-long line skipped before the reader gives up on the stream
    /// (it then ends as if at end of file); `u64::MAX` for no limit.
    skip_limit: u64,
}

/// What [`LineReader::next_block`] hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Block<'a> {
    /// One or more whole lines, each with its newline (a line of it may be over the limit:
    /// [`split_lines`] tells).
    Lines(&'a [u8]),
    /// One line on its own: the last line of the stream when it has no newline, or a line
    /// over the limit that was skipped (empty, `oversized`).
    Line(&'a [u8], RawLine),
}

/// The lines of a [`Block::Lines`]: the range of each in the block, without its newline,
/// and how it was read (`oversized` when longer than `max`).
pub fn split_lines(
    block: &[u8],
    max: usize,
) -> impl Iterator<Item = (std::ops::Range<usize>, RawLine)> + '_ {
    let mut start = 0;
    memchr::memchr_iter(b'\n', block).map(move |nl| {
        let line = start..nl;
        start = nl + 1;
        let raw = RawLine {
            newline: true,
            oversized: line.len() > max,
            len: line.len() as u64 + 1,
        };
        (line, raw)
    })
}

impl LineReader {
    /// A reader handing out lines of at most `max` bytes, reading `block` bytes at a time.
    pub fn new(block: usize, max: usize) -> LineReader {
        let block = block.max(1);
        LineReader {
            buf: vec![0; block],
            pos: 0,
            end: 0,
            scanned: 0,
            block,
            max,
            eof: false,
            skip_limit: u64::MAX,
        }
    }

    /// Limits how much of one over-long line is skipped: past `bytes` the stream is treated
    /// as ended (a device like `/dev/zero` never ends its first line). The line is still
    /// reported, as oversized and without a newline.
    pub fn set_skip_limit(&mut self, bytes: u64) {
        self.skip_limit = bytes;
    }

    /// Reads into the free end of the buffer, after moving the current partial line to the
    /// front and growing the buffer if a whole block does not fit. Returns the bytes read.
    fn fill<R: Read>(&mut self, reader: &mut R) -> io::Result<usize> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.scanned -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() - self.end < self.block {
            self.buf.resize(self.end + self.block, 0);
        }
        loop {
            match reader.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    if n == 0 {
                        self.eof = true;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole lines, or line, or `None` at the end of the stream.
    pub fn next_block<R: Read>(&mut self, reader: &mut R) -> io::Result<Option<Block<'_>>> {
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.buf[self.scanned..self.end]) {
                let start = self.pos;
                self.pos = self.scanned + i + 1;
                self.scanned = self.pos;
                return Ok(Some(Block::Lines(&self.buf[start..self.pos])));
            }
            self.scanned = self.end;
            if self.end - self.pos > self.max {
                let raw = self.skip_line(reader)?;
                return Ok(Some(Block::Line(&[], raw)));
            }
            if self.eof {
                if self.pos == self.end {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.end;
                let raw = RawLine {
                    newline: false,
                    oversized: false,
                    len: (self.end - start) as u64,
                };
                return Ok(Some(Block::Line(&self.buf[start..self.end], raw)));
            }
            self.fill(reader)?;
        }
    }

    /// Skips the rest of a line already known to be over `max` bytes.
    fn skip_line<R: Read>(&mut self, reader: &mut R) -> io::Result<RawLine> {
        let mut len = (self.end - self.pos) as u64;
        self.pos = 0;
        self.end = 0;
        self.scanned = 0;
        loop {
            if self.eof {
                return Ok(oversized(false, len));
            }
            if len >= self.skip_limit {
                self.eof = true;
                return Ok(oversized(false, len));
            }
            self.fill(reader)?;
            if let Some(i) = memchr::memchr(b'\n', &self.buf[..self.end]) {
                self.pos = i + 1;
                self.scanned = self.pos;
                return Ok(oversized(true, len + i as u64 + 1));
            }
            len += self.end as u64;
            self.end = 0;
        }
    }
}

fn oversized(newline: bool, len: u64) -> RawLine {
    RawLine {
        newline,
        oversized: true,
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lines() {
        let data = b"abc\n0123456789\nxyz";
        let mut r = io::BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert_eq!(
            (buf.as_slice(), l.newline, l.oversized, l.len),
            (&b"abc"[..], true, false, 4)
        );
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert!(l.oversized && l.newline);
        assert_eq!(l.len, 11);
        let l = read_line_bounded(&mut r, &mut buf, 5).unwrap().unwrap();
        assert_eq!((buf.as_slice(), l.newline), (&b"xyz"[..], false));
        assert!(read_line_bounded(&mut r, &mut buf, 5).unwrap().is_none());
    }

    /// Hands out at most `step` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn split_bounded(data: &[u8], max: usize) -> Vec<(Vec<u8>, RawLine)> {
        let mut r = io::BufReader::with_capacity(7, data);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(l) = read_line_bounded(&mut r, &mut buf, max).unwrap() {
            out.push((if l.oversized { Vec::new() } else { buf.clone() }, l));
        }
        out
    }

    fn split_in_place(
        data: &[u8],
        block: usize,
        step: usize,
        max: usize,
    ) -> Vec<(Vec<u8>, RawLine)> {
        let mut r = Trickle { data, step };
        let mut lines = LineReader::new(block, max);
        let mut out = Vec::new();
        while let Some(b) = lines.next_block(&mut r).unwrap() {
            match b {
                Block::Lines(b) => {
                    assert_eq!(b.last(), Some(&b'\n'));
                    for (range, raw) in split_lines(b, max) {
                        out.push((
                            if raw.oversized {
                                Vec::new()
                            } else {
                                b[range].to_vec()
                            },
                            raw,
                        ));
                    }
                }
                Block::Line(l, raw) => out.push((l.to_vec(), raw)),
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn line_reader_splits_like_read_line_bounded(
            data in proptest::collection::vec(
                proptest::prop_oneof![8 => b'a'..=b'z', 1 => proptest::strategy::Just(b'\n')],
                0..3000,
            ),
            block in 1usize..300,
            step in 1usize..500,
            max in 0usize..120,
        ) {
            proptest::prop_assert_eq!(
                split_in_place(&data, block, step, max),
                split_bounded(&data, max)
            );
        }
    }

    #[test]
    fn line_reader_edges() {
        for data in [
            &b""[..],
            b"\n",
            b"\n\n",
            b"a",
            b"abc\n",
            b"abcdef\nxy",
            b"abcdefgh",
        ] {
            for block in 1..10 {
                for max in 0..10 {
                    assert_eq!(
                        split_in_place(data, block, 1000, max),
                        split_bounded(data, max),
                        "{data:?} {block} {max}"
                    );
                }
            }
        }
    }
}
