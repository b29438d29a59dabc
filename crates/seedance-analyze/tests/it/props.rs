//! Arbitrary input never panics the parser or the reader.

use proptest::prelude::*;
use seedance_analyze::input::{parse_line, read_file, read_line_bounded, Line, Options};
use std::io::BufReader;

fn record_like() -> impl Strategy<Value = String> {
    // Lines close to real records: a real prefix with an arbitrary tail, or fields of the
    // wrong types.
    let prefix = r#"{"v":1,"seq":1,"ts_ns":1,"pid":1,"tid":1,"event":""#;
    prop_oneof![
        ("[a-z_]{0,16}", ".{0,80}").prop_map(move |(k, t)| format!("{prefix}{k}\",{t}")),
        (
            prop_oneof![
                Just("session_start"),
                Just("call_failed"),
                Just("exit_summary"),
                Just("x")
            ],
            prop_oneof![
                Just("1"),
                Just("\"s\""),
                Just("null"),
                Just("[]"),
                Just("{}"),
                Just("-1"),
                Just("1e400")
            ],
            prop_oneof![
                Just("function"),
                Just("result"),
                Just("args"),
                Just("functions"),
                Just("devices"),
                Just("v"),
                Just("pid")
            ],
        )
            .prop_map(move |(k, val, field)| format!("{prefix}{k}\",\"{field}\":{val}}}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_line_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_line(&bytes);
    }

    #[test]
    fn parse_line_never_panics_on_text(s in ".{0,300}") {
        let _ = parse_line(s.as_bytes());
    }

    #[test]
    fn parse_line_never_panics_on_near_records(s in record_like()) {
        if let Line::CallFailed(h, c) = parse_line(s.as_bytes()) {
            prop_assert_eq!(h.pid, 1);
            prop_assert!(!c.function.is_empty() || c.function.is_empty());
        }
    }

    #[test]
    fn reader_splits_exactly(data in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..2000), cap in 1usize..64, max in 1usize..40) {
        let mut r = BufReader::with_capacity(cap, &data[..]);
        let mut buf = Vec::new();
        let mut total = 0u64;
        let mut lines = 0usize;
        while let Some(l) = read_line_bounded(&mut r, &mut buf, max).unwrap() {
            prop_assert!(buf.len() <= max);
            total += l.len;
            lines += 1;
        }
        prop_assert_eq!(total, data.len() as u64);
        let expected = data.split(|b| *b == b'\n').count() - usize::from(data.last() == Some(&b'\n') || data.is_empty());
        prop_assert_eq!(lines, expected);
    }

    #[test]
    fn whole_files_never_panic(lines in proptest::collection::vec(prop_oneof![record_like(), ".{0,60}".prop_map(String::from)], 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.jsonl");
        std::fs::write(&p, lines.join("\n")).unwrap();
        let agg = read_file(&p, &Options::default());
        let r = seedance_analyze::build_report(agg, &[]);
        let _ = seedance_analyze::render_text::render(&r);
        let _ = seedance_analyze::render_html::render(&r);
        prop_assert!(r.input.records + r.input.malformed_lines + r.input.truncated_lines <= r.input.lines);
    }
}
