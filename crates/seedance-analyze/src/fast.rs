//! The fast path of [`crate::parse::parse_line`] for the common case: a `call_failed` record
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

use crate::line::{CallFailedRef, Head, RawArgs};
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
mod tests {
    use super::*;

    type Owned = Option<(Head, String, u32, Option<String>, Option<String>)>;

    fn slow(line: &[u8]) -> Owned {
        match crate::parse::parse_line_serde(line) {
            crate::line::Line::CallFailed(h, c) => Some((
                h,
                c.function.into_owned(),
                c.result,
                c.result_name.map(Cow::into_owned),
                c.args.map(|a| a.get().to_owned()),
            )),
            _ => None,
        }
    }

    fn fast(line: &[u8]) -> Owned {
        call_failed(std::str::from_utf8(line).ok()?).map(|(h, c)| {
            (
                h,
                c.function.into_owned(),
                c.result,
                c.result_name.map(Cow::into_owned),
                c.args.map(|a| a.get().to_owned()),
            )
        })
    }

    #[test]
    fn agrees_with_serde_or_gives_up() {
        let lines: &[&str] = &[
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"tid":8,"event":"call_failed","args":{"bytesize":134217728},"function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY"}"#,
            r#"{ "v" : 1 , "seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":0 }"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":4294967295,"args":[1,-2.5e+3,"a\"b\u0041",{"x":[true,false,null]},{}, []]}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":4294967296}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":01}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1.0}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":-1}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"result":2}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1}x"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f\u0041","result":1}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"args":{"a":01}}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"args":{"a":1.}}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"args":{"a":"\x"}}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"args":null}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f"}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"event":"call_failed","function":"f","result":1}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"f","result":1,"extra":1}"#,
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"call_failed","function":"fé","result":1,"args":{"é":"\u00e9ü"}}"#,
            "{\"v\":1,\"seq\":1,\"ts_ns\":5,\"pid\":7,\"event\":\"call_failed\",\"function\":\"f\t\",\"result\":1}",
            r#"{"v":1,"seq":1,"ts_ns":5,"pid":7,"event":"session_start"}"#,
        ];
        for l in lines {
            let f = fast(l.as_bytes());
            if f.is_some() {
                assert_eq!(f, slow(l.as_bytes()), "{l}");
            }
        }
        assert!(fast(lines[0].as_bytes()).is_some());
        assert!(fast(lines[1].as_bytes()).is_some());
        assert!(fast(lines[2].as_bytes()).is_some());
    }

    #[test]
    fn string_scan_stops_where_a_byte_loop_does() {
        let mut rng: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|k| {
                    let r = rng.rotate_left(k as u32 * 3) as u8;
                    // Mostly plain text, sometimes a stop byte or a high byte.
                    match r % 16 {
                        0 => b'"',
                        1 => b'\\',
                        2 => r % 32,
                        3 => 0x80 | r,
                        _ => b'a' + r % 26,
                    }
                })
                .collect();
            for from in 0..=len.min(9) {
                let want = (from..len).find(|&k| matches!(bytes[k], b'"' | b'\\' | 0..=0x1f));
                assert_eq!(str_stop(&bytes, from), want, "{bytes:?} {from}");
            }
        }
    }

    #[test]
    fn integers_of_every_length() {
        let mut n: u64 = 0;
        let mut text = String::new();
        for len in 1..=20 {
            for first in b'1'..=b'9' {
                text.clear();
                text.push(first as char);
                for k in 1..len {
                    text.push((b'0' + ((k * 7 + usize::from(first)) % 10) as u8) as char);
                }
                let want = text.parse::<u64>().ok().filter(|_| len <= MAX_DIGITS);
                for tail in ["", ",", "}", " ", ".5", "e1", "x"] {
                    let l = format!("{text}{tail}");
                    let mut c = Cursor::<true> {
                        s: l.as_bytes(),
                        i: 0,
                    };
                    let got = c.uint();
                    let expect = if matches!(tail, ".5" | "e1") {
                        None
                    } else {
                        want
                    };
                    assert_eq!(got, expect, "{l}");
                    if got.is_some() {
                        assert_eq!(c.i, len);
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 0);
        for bad in ["", "-1", "01", "00", "+1", "a"] {
            assert_eq!(
                Cursor::<true> {
                    s: bad.as_bytes(),
                    i: 0
                }
                .uint(),
                None,
                "{bad}"
            );
        }
        assert_eq!(Cursor::<true> { s: b"0", i: 0 }.uint(), Some(0));
        assert_eq!(
            Cursor::<true> {
                s: b"9999999999999999999",
                i: 0
            }
            .uint(),
            Some(9_999_999_999_999_999_999)
        );
        assert!(all_digits(u64::from_le_bytes(*b"01234567")));
        assert!(!all_digits(u64::from_le_bytes(*b"0123456:")));
        assert!(!all_digits(u64::from_le_bytes(*b"/1234567")));
        assert_eq!(parse8(u64::from_le_bytes(*b"12345678")), 12_345_678);
        assert_eq!(parse8(u64::from_le_bytes(*b"90000001")), 90_000_001);
    }

    /// The usual shapes, in the shim's field order and in sorted order, are read by the
    /// fast path.
    #[test]
    fn reads_the_usual_shapes() {
        for l in [
            r#"{"v":4,"seq":3,"ts_ns":1700000000000000000,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","args":{"bytesize":0}}"#,
            r#"{"v":1,"seq":1,"ts_ns":1764470520000013410,"pid":10000,"tid":10001,"event":"call_failed","args":{"bytesize":134217728},"function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY"}"#,
            r#"{"v":1,"seq":3,"ts_ns":1764470520000337490,"pid":10000,"tid":10003,"event":"call_failed","args":{"hmod":"0x7f00029d3f40"},"function":"cuModuleGetFunction","result":500,"result_name":"CUDA_ERROR_NOT_FOUND"}"#,
            r#"{"v":1,"seq":3,"ts_ns":5,"pid":1,"event":"call_failed","function":"cudaSetDevice","result":101}"#,
        ] {
            assert!(fast(l.as_bytes()).is_some(), "{l}");
            assert_eq!(fast(l.as_bytes()), slow(l.as_bytes()), "{l}");
        }
    }

    /// Random edits of record lines: wherever the fast path answers, serde agrees.
    #[test]
    fn random_edits_agree_with_serde() {
        const BASES: &[&str] = &[
            r#"{"v":4,"seq":3,"ts_ns":1700000000000000000,"pid":42,"tid":43,"event":"call_failed","function":"cuMemAlloc_v2","result":1,"result_name":"CUDA_ERROR_INVALID_VALUE","args":{"bytesize":0,"x":[1,-2.5e+3,"a\"b\u0041é",{"y":null},true,false]}}"#,
            r#"{"v":1,"seq":1,"ts_ns":1764470520000013410,"pid":10000,"tid":10001,"event":"call_failed","args":{"bytesize":134217728},"function":"cuMemAlloc_v2","result":2,"result_name":"CUDA_ERROR_OUT_OF_MEMORY"}"#,
            r#"{ "v" : 1 , "seq" : 18446744073709551615 , "ts_ns":5,"pid":4294967295,"event":"call_failed","function":"fé","result":0 , "args" : [ ] }"#,
        ];
        const BYTES: &[u8] = b"{}[]\":,\\ \t0123456789-+.eEutrfalsn_xv\x00\x1f\x7f\xc3\xa9\xff";
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut answered = 0;
        for round in 0..60_000 {
            let mut l = BASES[round % BASES.len()].as_bytes().to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % (l.len() as u64 + 1)) as usize;
                let b = BYTES[(next() % BYTES.len() as u64) as usize];
                match next() % 3 {
                    0 if at < l.len() => l[at] = b,
                    1 if at < l.len() => {
                        l.remove(at);
                    }
                    _ => l.insert(at, b),
                }
            }
            let t = l.trim_ascii();
            if t.first() != Some(&b'{') {
                continue;
            }
            let f = fast(t);
            if f.is_some() {
                answered += 1;
                assert_eq!(f, slow(t), "{}", String::from_utf8_lossy(t));
            }
            if let Ok(text) = std::str::from_utf8(t) {
                let compact = read_call_failed::<false>(text).map(|(h, c)| (h, format!("{c:?}")));
                if compact.is_some() {
                    let spaced = read_call_failed::<true>(text).map(|(h, c)| (h, format!("{c:?}")));
                    assert_eq!(compact, spaced, "{text}");
                }
            }
        }
        assert!(answered > 1000, "{answered}");
    }
}
