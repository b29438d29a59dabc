//! Bounds on what the shim echoes of a value it did not choose (an environment variable,
//! an entry of one): a hostile or broken setting must not flood stderr or the trace.
//! `CUDA_VISIBLE_DEVICES` or a `SEEDANCE_*` variable can be as long as the kernel allows one
//! environment string (128 KiB, `MAX_ARG_STRLEN`); a warning shows at most [`MAX_SHOWN`]
//! bytes of it, and a setting with many bad entries warns about at most
//! [`MAX_WARNINGS_PER_SETTING`] of them. On a terminal, control characters (a newline, a
//! carriage return, an escape) are shown as escapes (`\n`, `\r`, `\u{1b}`): the shim's
//! stderr lines pass through [`escape_controls`] (an echoed value never starts a line of
//! its own or moves the cursor); [`quoted`] escapes them itself. [`clip`] keeps them: its
//! result also goes into trace fields, which JSON escapes.

/// Most bytes of a value a message or trace field repeats.
pub const MAX_SHOWN: usize = 200;

/// Most warnings one setting gives; the rest are counted in one more line.
pub const MAX_WARNINGS_PER_SETTING: usize = 5;

/// `value` with every control character (C0, DEL, C1) written as an escape: `\n`, `\r`,
/// `\t`, `\u{1b}`; anything else unchanged.
pub fn escape_controls(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `value` itself when at most [`MAX_SHOWN`] bytes, else its first [`MAX_SHOWN`] bytes (cut
/// at a character boundary) followed by `... (N bytes)`, N being the whole value's length.
pub fn clip(value: &str) -> String {
    if value.len() <= MAX_SHOWN {
        return value.to_string();
    }
    let mut end = MAX_SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &value[..end], value.len())
}

/// [`clip`]ped and quoted as Rust's `{:?}` quotes a string: `"turbo"`, or
/// `"xxxx..."... (131072 bytes)` for a long one (the length outside the quotes).
pub fn quoted(value: &str) -> String {
    if value.len() <= MAX_SHOWN {
        return format!("{value:?}");
    }
    let mut end = MAX_SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &value[..end], value.len())
}

/// Keeps the first [`MAX_WARNINGS_PER_SETTING`] of `warnings` and replaces the rest by one
/// line, `<setting>: N more bad entries skipped (not shown)`.
pub fn cap_warnings(setting: &str, mut warnings: Vec<String>) -> Vec<String> {
    if warnings.len() > MAX_WARNINGS_PER_SETTING {
        let more = warnings.len() - MAX_WARNINGS_PER_SETTING;
        warnings.truncate(MAX_WARNINGS_PER_SETTING);
        warnings.push(format!(
            "{setting}: {more} more bad {} skipped (not shown)",
            if more == 1 { "entry" } else { "entries" }
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_values_are_unchanged() {
        assert_eq!(clip("0,1"), "0,1");
        assert_eq!(quoted("turbo"), "\"turbo\"");
        assert_eq!(clip(&"x".repeat(200)), "x".repeat(200));
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let long = "7".repeat(131_072);
        assert_eq!(
            clip(&long),
            format!("{}... (131072 bytes)", "7".repeat(200))
        );
        assert_eq!(
            quoted(&long),
            format!("\"{}\"... (131072 bytes)", "7".repeat(200))
        );
        // A multi-byte character across the limit is not split.
        let s = format!("{}é{}", "a".repeat(199), "b".repeat(10));
        assert_eq!(clip(&s), format!("{}... (211 bytes)", "a".repeat(199)));
    }

    #[test]
    fn warnings_are_capped_with_a_count() {
        let w: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
        assert_eq!(
            cap_warnings("S", w),
            [
                "w0",
                "w1",
                "w2",
                "w3",
                "w4",
                "S: 3 more bad entries skipped (not shown)"
            ]
        );
        let w: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
        assert_eq!(cap_warnings("S", w.clone()), w);
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            escape_controls("a\nseedance: b\r\u{1b}[2J"),
            "a\\nseedance: b\\r\\u{1b}[2J"
        );
        assert_eq!(quoted("a\nb"), "\"a\\nb\"");
        let long = format!("\n{}", "x".repeat(300));
        assert!(escape_controls(&clip(&long)).starts_with("\\nxxx"));
    }

    proptest! {
        #[test]
        fn clip_is_bounded_and_never_panics(s in ".{0,600}") {
            prop_assert!(!escape_controls(&s).chars().any(char::is_control));
            prop_assert!(clip(&s).len() <= MAX_SHOWN + 32);
            prop_assert!(quoted(&s).len() <= 6 * MAX_SHOWN + 32);
        }
    }
}
