//! What the shim repeats of a value it did not choose: at most 200 bytes of it, with its
//! control characters escaped, so a long or hostile setting can neither flood stderr nor
//! forge a `seedance:` line of its own.

use seedance_e2e::Run;

/// Every setting that is echoed, each 100,000 bytes long: no stderr line is longer than
/// 200 bytes of the value plus its message, and the program's output is unchanged. Before,
/// the trace directory, the two bad values and the metrics file were echoed whole. (Same
/// output and exit status as the run without them.)
#[test]
fn a_100000_byte_value_is_echoed_as_200_bytes() {
    let plain = Run::new("linked", true).finish();
    let long = |c: &str| format!("/{}", c.repeat(99_999));
    let r = Run::new("linked", true)
        .env("SEEDANCE_TRACE_DIR", long("t"))
        .env("SEEDANCE_HOST_GUARD", long("g"))
        .env("SEEDANCE_STRAY_CONTEXT", long("s"))
        .env("SEEDANCE_METRICS_FILE", long("m"))
        .env("SEEDANCE_MIN_FREE_MEMORY", long("f"))
        .finish();
    assert_eq!(r.output.status.code(), plain.output.status.code());
    assert_eq!(r.stdout(), plain.stdout());
    let err = r.stderr();
    for (name, c) in [
        ("SEEDANCE_TRACE_DIR", "t"),
        ("SEEDANCE_HOST_GUARD", "g"),
        ("SEEDANCE_STRAY_CONTEXT", "s"),
        ("SEEDANCE_METRICS_FILE", "m"),
        ("SEEDANCE_MIN_FREE_MEMORY", "f"),
    ] {
        let run = c.repeat(199);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(&run)).collect();
        assert!(!lines.is_empty(), "{name}: no line shows it:\n{err}");
        for l in lines {
            assert!(!l.contains(&c.repeat(201)), "{name}: {} bytes", l.len());
            assert!(l.contains("... (100000 bytes)"), "{name}: {l}");
            assert!(l.len() < 1_000, "{name}: {} bytes", l.len());
        }
    }
    assert!(err.lines().all(|l| l.starts_with("seedance: ")), "{err}");
}

/// A newline, a carriage return and an escape in a setting's value are shown as escapes:
/// the value cannot start a line of its own (a forged `seedance:` line) or move the
/// terminal's cursor. Before, the trace directory's and the two bad values' newlines
/// reached stderr as they were.
#[test]
fn control_characters_in_a_value_cannot_forge_a_line() {
    let forged = "x\nseedance: forged\r\u{1b}[2J";
    let r = Run::new("linked", true)
        .env("SEEDANCE_TRACE_DIR", format!("/proc/{forged}"))
        .env("SEEDANCE_HOST_GUARD", forged)
        .env("SEEDANCE_STRAY_CONTEXT", forged)
        .env("SEEDANCE_MIN_FREE_MEMORY", forged)
        .finish();
    let err = r.stderr();
    assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");
    assert!(
        !err.lines().any(|l| l.starts_with("seedance: forged")),
        "{err}"
    );
    // Each of the four is still named, its newline written `\n`.
    for name in [
        "SEEDANCE_HOST_GUARD",
        "SEEDANCE_STRAY_CONTEXT",
        "SEEDANCE_MIN_FREE_MEMORY",
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(name) && l.contains("x\\nseedance: forged\\r")),
            "{name}: {err}"
        );
    }
    assert!(
        err.lines()
            .any(|l| l.starts_with("seedance: no trace will be written: ")
                && l.contains("/proc/x\\nseedance: forged\\r\\u{1b}[2J")),
        "{err}"
    );
}
