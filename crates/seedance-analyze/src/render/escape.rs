//! Control characters out of terminal output. A trace's strings (a program name, its
//! arguments, a host name, an explanation) are the traced program's to choose: printed as
//! they are, an escape could clear the screen and a newline could forge a line of the report
//! (a `REPAIRS` heading). The text forms escape every control character of every string
//! they show ([`strings`], one pass over the report before rendering), and the finished
//! text once more, keeping only its own line breaks ([`terminal`]). The JSON form escapes
//! them as JSON does; the HTML form as HTML does.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1) written as an escape: `\n`, `\r`, `\t`,
/// `\u{1b}`.
pub fn controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A copy of `value` with the control characters of every string in it (map keys
/// included) escaped ([`controls`]); `None` when it has none, or the copy cannot be made.
pub fn strings<T: Serialize + DeserializeOwned>(value: &T) -> Option<T> {
    let mut v = serde_json::to_value(value).ok()?;
    if !escape_value(&mut v) {
        return None;
    }
    serde_json::from_value(v).ok()
}

/// Escapes the strings of `v` in place; whether any changed.
fn escape_value(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => match controls(s) {
            Cow::Owned(e) => {
                *s = e;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Array(a) => a.iter_mut().fold(false, |c, x| escape_value(x) | c),
        Value::Object(m) => {
            let mut changed = false;
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let Some(mut x) = m.remove(&k) else { continue };
                changed |= escape_value(&mut x);
                let key = controls(&k).into_owned();
                changed |= key != k;
                m.insert(key, x);
            }
            changed
        }
        _ => false,
    }
}

/// `text` with every control character but its line breaks escaped: the last guard of a
/// text form, whatever a string's way into it.
pub fn terminal(text: &str) -> String {
    text.split('\n')
        .map(controls)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_control_character_is_escaped() {
        assert_eq!(
            controls("a\u{1b}[2J\r\nREPAIRS"),
            "a\\u{1b}[2J\\r\\nREPAIRS"
        );
        assert_eq!(controls("plain é"), "plain é");
        assert_eq!(controls("\u{9b}\u{7f}\t"), "\\u{9b}\\u{7f}\\t");
        assert_eq!(terminal("a\u{1b}\nb\r\n"), "a\\u{1b}\nb\\r\n");
    }

    #[test]
    fn strings_and_keys_of_a_value_are_escaped() {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        m.insert("k\n".into(), vec!["v\u{1b}".into(), "ok".into()]);
        let e = strings(&m).unwrap();
        assert_eq!(e.keys().collect::<Vec<_>>(), ["k\\n"]);
        assert_eq!(e["k\\n"], ["v\\u{1b}", "ok"]);
        let clean: BTreeMap<String, u32> = [("a".to_string(), 1)].into();
        assert!(strings(&clean).is_none());
    }
}
