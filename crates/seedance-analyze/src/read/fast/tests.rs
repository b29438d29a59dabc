//! The fast path against serde, on the shim's shapes and on random edits of them.

use super::*;

type Owned = Option<(Head, String, u32, Option<String>, Option<String>)>;

fn slow(line: &[u8]) -> Owned {
    match crate::read::parse::parse_line_serde(line) {
        crate::read::line::Line::CallFailed(h, c) => Some((
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
