//! The fast path of [`crate::read::parse::parse_line`] for the common case: a `call_failed` record
//! as the shim writes it.
//!
//! Most lines of a big trace are `call_failed` records with strings without escapes,
//! non-negative integers and a small `args` object. [`call_failed`] reads such a line in one
//! pass over the bytes, without serde: the envelope fields, `event`, `function`, `result`,
//! `result_name` (borrowed from the line) and the raw text of `args` (validated as JSON, not
//! built). The caller has checked the line to be UTF-8 (once per block of lines); keys are recognised by their bytes (a key
//! written with an escape is left to serde); strings are scanned eight bytes at a time, and
//! so are the first 16 digits of long integers (timestamps). It accepts only a strict subset of what the serde path accepts, and
//! gives the same answer on it; for anything else (another event kind, an unknown or
//! repeated field, a `null`, an escape or control character in a string outside `args`,
//! bytes that are not UTF-8, a number that is not a plain non-negative integer of the
//! field's type or that has 20 digits or more, any syntax error) it returns `None` and the
//! caller falls back to the serde path, which decides.

use crate::read::line::{CallFailedRef, Head, RawArgs};
use std::borrow::Cow;

/// Nesting allowed inside `args` before giving up (serde_json's own limit is 128).
const MAX_DEPTH: usize = 64;

/// Digits of the longest integer read here: every 19-digit number fits in a `u64`.
const MAX_DIGITS: usize = 19;

const ONES: u64 = 0x0101_0101_0101_0101;

/// Whether the eight bytes of `w` are all ASCII digits.
#[inline]
fn all_digits(w: u64) -> bool {
    // A byte 0x30..=0x39 keeps its high nibble 3 when 6 is added; no byte carries over,
    // since every byte that passes the first test is at most 0x3f.
    (w & (0xf0 * ONES)) == 0x30 * ONES
        && (w.wrapping_add(0x06 * ONES) & (0xf0 * ONES)) == 0x30 * ONES
}

/// The value of eight ASCII digits (the first in the lowest byte).
#[inline]
fn parse8(w: u64) -> u64 {
    let w = w - 0x30 * ONES;
    let w = ((w & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(10 * 256 + 1)) >> 8;
    let w = ((w & 0x00ff_00ff_00ff_00ff).wrapping_mul(100 * 65536 + 1)) >> 16;
    ((w & 0x0000_ffff_0000_ffff).wrapping_mul(10000 * (1 << 32) + 1)) >> 32
}

/// Flags (high bit of each byte) the bytes of `w` that stop a string scan: `"`, `\\` and
/// control characters. The lowest flag is exact (the borrows of the subtractions only
/// reach bytes above a flagged one), which is all [`str_stop`] uses.
#[inline]
fn string_stops(w: u64) -> u64 {
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & (0x80 * ONES);
    let control = w.wrapping_sub(0x20 * ONES) & !w & (0x80 * ONES);
    zero(w ^ (b'"' as u64 * ONES)) | zero(w ^ (b'\\' as u64 * ONES)) | control
}

/// The index of the first `"`, `\\` or control character in `s` from `i`, eight bytes at
/// a time.
#[inline]
fn str_stop(s: &[u8], mut i: usize) -> Option<usize> {
    while let Some(chunk) = s.get(i..i + 8) {
        let stops = string_stops(u64::from_le_bytes(chunk.try_into().ok()?));
        if stops != 0 {
            return Some(i + (stops.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    while let Some(&b) = s.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The keys of a `call_failed` record.
#[derive(Clone, Copy)]
enum Key {
    V,
    Seq,
    TsNs,
    Pid,
    Tid,
    Event,
    Function,
    Result,
    ResultName,
    Args,
}

/// A position in a line. `WS`: whitespace is allowed between tokens; without it, the
/// cursor reads the compact form the shim writes, with no whitespace checks at all.
struct Cursor<'a, const WS: bool> {
    s: &'a [u8],
    i: usize,
}

impl<'a, const WS: bool> Cursor<'a, WS> {
    #[inline]
    fn ws(&mut self) {
        if WS {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
                self.i += 1;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        if self.peek()? == b {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// Whether the rest starts with `lit`; if so, steps over it.
    #[inline]
    fn lit(&mut self, lit: &[u8]) -> bool {
        let hit = self.s.get(self.i..self.i + lit.len()) == Some(lit);
        if hit {
            self.i += lit.len();
        }
        hit
    }

    /// An object key of a `call_failed` record, written without escapes, and its colon.
    #[inline]
    fn key(&mut self) -> Option<Key> {
        self.ws();
        let first = *self.s.get(self.i + 1)?;
        let key = match first {
            b'v' if self.lit(b"\"v\"") => Key::V,
            b's' if self.lit(b"\"seq\"") => Key::Seq,
            b't' if self.lit(b"\"ts_ns\"") => Key::TsNs,
            b't' if self.lit(b"\"tid\"") => Key::Tid,
            b'p' if self.lit(b"\"pid\"") => Key::Pid,
            b'e' if self.lit(b"\"event\"") => Key::Event,
            b'f' if self.lit(b"\"function\"") => Key::Function,
            b'r' if self.lit(b"\"result\"") => Key::Result,
            b'r' if self.lit(b"\"result_name\"") => Key::ResultName,
            b'a' if self.lit(b"\"args\"") => Key::Args,
            _ => return None,
        };
        self.eat(b':')?;
        Some(key)
    }

    /// A string without escapes or control characters (the opening quote is next): the
    /// range of its body.
    #[inline]
    fn plain_str(&mut self) -> Option<std::ops::Range<usize>> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let end = str_stop(self.s, start)?;
        if self.s[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(start..end)
    }

    /// A plain non-negative integer of at most [`MAX_DIGITS`] digits (no sign, fraction,
    /// exponent or leading zero).
    #[inline(always)]
    fn uint(&mut self) -> Option<u64> {
        self.ws();
        let s = &self.s[self.i..];
        let mut v: u64 = 0;
        let mut n = 0;
        while n + 8 <= MAX_DIGITS {
            let Some(chunk) = s.get(n..n + 8) else { break };
            let w = u64::from_le_bytes(chunk.try_into().ok()?);
            if !all_digits(w) {
                break;
            }
            v = v * 100_000_000 + parse8(w);
            n += 8;
        }
        while let Some(&d @ b'0'..=b'9') = s.get(n) {
            if n == MAX_DIGITS {
                return None;
            }
            v = v * 10 + u64::from(d - b'0');
            n += 1;
        }
        if n == 0 || (n > 1 && s[0] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = s.get(n) {
            return None;
        }
        self.i += n;
        Some(v)
    }

    #[inline]
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.uint()?).ok()
    }

    /// Skips one JSON value, validating it strictly; returns its bytes.
    fn value(&mut self, depth: usize) -> Option<&'a [u8]> {
        self.ws();
        let start = self.i;
        match self.peek()? {
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                } else {
                    loop {
                        self.json_str()?;
                        self.eat(b':')?;
                        self.value(depth + 1)?;
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                } else {
                    loop {
                        self.value(depth + 1)?;
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
            }
            b'"' => self.json_str()?,
            b't' => self.word(b"true")?,
            b'f' => self.word(b"false")?,
            b'n' => self.word(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        self.s.get(start..self.i)
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        self.lit(w).then_some(())
    }

    /// A string in `args`, with the escapes JSON allows.
    fn json_str(&mut self) -> Option<()> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        loop {
            self.i = str_stop(self.s, self.i)?;
            let b = self.s[self.i];
            self.i += 1;
            match b {
                b'"' => return Some(()),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            // Surrogates need pairing rules: leave them to serde.
                            let hex = self.s.get(self.i..self.i + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit)
                                || matches!(hex[0], b'd' | b'D')
                            {
                                return None;
                            }
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

/// Sets a field once; a repeated field is left to serde (which rejects it).
#[inline]
fn set<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(v);
    Some(())
}

/// Reads `text` (a trimmed line, starting with `{`) as a `call_failed` record, or gives up.
pub(crate) fn call_failed(text: &str) -> Option<(Head, CallFailedRef<'_>)> {
    // Compact first (what the shim writes), then allowing whitespace: the first reads a
    // subset of the lines the second reads, with the same answer.
    read_call_failed::<false>(text).or_else(|| read_call_failed::<true>(text))
}

fn read_call_failed<const WS: bool>(text: &str) -> Option<(Head, CallFailedRef<'_>)> {
    let line = text.as_bytes();
    let mut c = Cursor::<WS> { s: line, i: 0 };
    c.eat(b'{')?;
    let (mut v, mut seq, mut ts_ns, mut pid, mut tid) = (None, None, None, None, None);
    let (mut event, mut function, mut result, mut result_name, mut args) =
        (false, None, None, None, None);
    loop {
        match c.key()? {
            Key::V => set(&mut v, c.u32()?)?,
            Key::Seq => set(&mut seq, c.uint()?)?,
            Key::TsNs => set(&mut ts_ns, c.uint()?)?,
            Key::Pid => set(&mut pid, c.u32()?)?,
            Key::Tid => set(&mut tid, c.uint()?)?,
            Key::Event => {
                c.ws();
                if event || !c.lit(b"\"call_failed\"") {
                    return None;
                }
                event = true;
            }
            Key::Function => set(&mut function, text.get(c.plain_str()?)?)?,
            Key::Result => set(&mut result, c.u32()?)?,
            Key::ResultName => set(&mut result_name, text.get(c.plain_str()?)?)?,
            Key::Args => {
                c.ws();
                if c.peek()? == b'n' {
                    return None;
                }
                let start = c.i;
                c.value(0)?;
                let raw = text.get(start..c.i)?;
                set(&mut args, RawArgs(raw))?
            }
        }
        c.ws();
        match c.peek()? {
            b',' => c.i += 1,
            b'}' => {
                c.i += 1;
                break;
            }
            _ => return None,
        }
    }
    c.ws();
    if c.i != line.len() || !event {
        return None;
    }
    let head = Head {
        v: v?,
        seq: seq?,
        ts_ns: ts_ns?,
        pid: pid?,
        tid: tid.unwrap_or(0),
    };
    Some((
        head,
        CallFailedRef {
            function: Cow::Borrowed(function?),
            result: result?,
            result_name: result_name.map(Cow::Borrowed),
            args,
        },
    ))
}

#[cfg(test)]
mod tests;
