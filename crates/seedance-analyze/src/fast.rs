//! The fast path of [`crate::input::parse_line`] for the common case: a `call_failed` record
//! as the shim writes it.
//!
//! Most lines of a big trace are `call_failed` records with strings without escapes,
//! non-negative integers and a small `args` object. [`call_failed`] reads such a line in one
//! pass over the bytes, without serde: the envelope fields, `event`, `function`, `result`,
//! `result_name` (borrowed from the line) and the raw text of `args` (validated as JSON, not
//! built). It accepts only a strict subset of what the serde path accepts, and gives the
//! same answer on it; for anything else (another event kind, an unknown or repeated field,
//! a `null`, an escape or control character in a string outside `args`, bytes that are not
//! UTF-8, a number that is not a plain non-negative integer of the field's type, any syntax
//! error) it returns `None` and the
//! caller falls back to the serde path, which decides.

use crate::input::{CallFailedRef, Head};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Nesting allowed inside `args` before giving up (serde_json's own limit is 128).
const MAX_DEPTH: usize = 64;

struct Cursor<'a> {
    /// The line, checked to be UTF-8 once.
    text: &'a str,
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
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

    /// A string without escapes or control characters (the opening quote is next),
    /// borrowed.
    #[inline]
    fn plain_str(&mut self) -> Option<&'a str> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let rest = self.s.get(start..)?;
        let len = memchr::memchr(b'"', rest)?;
        let body = &rest[..len];
        if body.iter().any(|&b| b < 0x20 || b == b'\\') {
            return None;
        }
        self.i = start + len + 1;
        self.text.get(start..start + len)
    }

    /// A plain non-negative integer (no sign, fraction, exponent or leading zero).
    #[inline]
    fn uint(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let len = self.i - start;
        if len == 0 || (len > 1 && self.s[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        Some(v)
    }

    #[inline]
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.uint()?).ok()
    }

    /// Skips one JSON value, validating it strictly; returns its text.
    fn value(&mut self, depth: usize) -> Option<&'a str> {
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
        self.text.get(start..self.i)
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        if self.s.get(self.i..self.i + w.len())? == w {
            self.i += w.len();
            Some(())
        } else {
            None
        }
    }

    /// A string in `args`, with the escapes JSON allows.
    fn json_str(&mut self) -> Option<()> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        loop {
            let b = self.peek()?;
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
                0..=0x1f => return None,
                _ => {}
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

/// Reads `line` (trimmed, starting with `{`) as a `call_failed` record, or gives up.
pub(crate) fn call_failed(line: &[u8]) -> Option<(Head, CallFailedRef<'_>)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut c = Cursor {
        text,
        s: line,
        i: 0,
    };
    c.eat(b'{')?;
    let (mut v, mut seq, mut ts_ns, mut pid, mut tid) = (None, None, None, None, None);
    let (mut event, mut function, mut result, mut result_name, mut args) =
        (None, None, None, None, None);
    // Sets a field once; a repeated field is left to serde (which rejects it).
    fn set<T>(slot: &mut Option<T>, v: T) -> Option<()> {
        if slot.is_some() {
            return None;
        }
        *slot = Some(v);
        Some(())
    }
    c.ws();
    if c.peek()? == b'}' {
        return None;
    }
    loop {
        let key = c.plain_str()?;
        c.eat(b':')?;
        match key {
            "v" => set(&mut v, c.u32()?)?,
            "seq" => set(&mut seq, c.uint()?)?,
            "ts_ns" => set(&mut ts_ns, c.uint()?)?,
            "pid" => set(&mut pid, c.u32()?)?,
            "tid" => set(&mut tid, c.uint()?)?,
            "event" => {
                let e = c.plain_str()?;
                if e != "call_failed" {
                    return None;
                }
                set(&mut event, e)?
            }
            "function" => set(&mut function, c.plain_str()?)?,
            "result" => set(&mut result, c.u32()?)?,
            "result_name" => set(&mut result_name, c.plain_str()?)?,
            "args" => {
                c.ws();
                if c.peek()? == b'n' {
                    return None;
                }
                // Validated and delimited here; serde makes the borrowed raw value.
                let raw = c.value(0)?;
                set(&mut args, serde_json::from_str::<&RawValue>(raw).ok()?)?
            }
            _ => return None,
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
    if c.i != line.len() {
        return None;
    }
    event?;
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
        match crate::input::parse_line_serde(line) {
            crate::input::Line::CallFailed(h, c) => Some((
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
        call_failed(line).map(|(h, c)| {
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
}
