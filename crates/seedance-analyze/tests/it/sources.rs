//! The shape of the crate's own sources: no function longer than [`MAX_FN_LINES`] lines
//! (in `src/` and `tests/`), at most [`MAX_TOP_ENTRIES`] entries at the top of `src/` (a
//! folder counts as one, together with its `foo.rs` if it has one), and a row in the kinds
//! table of `docs/analyzer.md` for every problem kind (`ProblemKind::ALL`).
//!
//! The sources are rustfmt-formatted (`cargo fmt --all` is part of every check), so a
//! function is found by its `fn` line and ends at the first line holding only `}` at the
//! indentation of that line.

use std::path::{Path, PathBuf};

/// Most lines of one function, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 150;

/// Most entries at the top of `src/`.
const MAX_TOP_ENTRIES: usize = 12;

/// The name of the function an `fn` item starts on `line` (after `pub`, `pub(crate)`,
/// `const`, `async`, `unsafe`, `extern "C"`), or `None`.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("fn ") {
            let end = r
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(r.len());
            return Some(&r[..end]);
        }
        let end = rest.find(' ')?;
        let word = &rest[..end];
        let qualifier = word == "pub"
            || word.starts_with("pub(")
            || matches!(word, "const" | "async" | "unsafe" | "extern" | "\"C\"");
        if !qualifier {
            return None;
        }
        rest = rest[end..].trim_start();
    }
}

/// The functions of `text` longer than `max` lines: name, line of the `fn`, lines.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The signature ends at the first line ending in `{` (a body follows), `;` (a
        // declaration) or `}` (a body on one line).
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';') || t.ends_with('}')
        }) else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let close = format!("{indent}}}");
        let end = (open + 1..lines.len())
            .find(|&j| lines[j] == close)
            .unwrap_or(lines.len() - 1);
        let n = end - i + 1;
        if n > max {
            out.push((name.to_string(), i + 1, n));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_function_over_150_lines() {
    let root = super::crate_dir();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    files.sort();
    assert!(files.len() > 40, "{files:?}");
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (name, line, n) in long_functions(&text, MAX_FN_LINES) {
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            long.push(format!("{rel}:{line}: fn {name}: {n} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_scanner_measures_bodies() {
    let text = "\
fn one_line() -> u8 { 1 }
pub(crate) fn four(
    a: u8,
) -> u8 {
    a
}
trait T {
    fn declared(&self);
    fn body(&self) {
        let f = |x: u8| {
            x
        };
    }
}
const fn later() {}
pub async fn three() {
}
";
    let all = long_functions(text, 0);
    let names: Vec<(&str, usize, usize)> =
        all.iter().map(|(n, l, c)| (n.as_str(), *l, *c)).collect();
    assert_eq!(names, [("four", 2, 5), ("body", 9, 5), ("three", 16, 2)]);
    assert!(long_functions(text, 5).is_empty());
    assert_eq!(long_functions(text, 4).len(), 2);
    assert_eq!(fn_name("    pub(crate) const fn x<T>()"), Some("x"));
    assert_eq!(fn_name("/// fn x()"), None);
    assert_eq!(fn_name("let fn_x = 1;"), None);
}

#[test]
fn at_most_12_entries_at_the_top_of_src() {
    let src = super::crate_dir().join("src");
    let mut entries: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            // `foo.rs` beside `foo/` is one module.
            match name.strip_suffix(".rs") {
                Some(stem) if src.join(stem).is_dir() => stem.to_string(),
                _ => name,
            }
        })
        .collect();
    entries.sort();
    entries.dedup();
    assert!(
        entries.len() <= MAX_TOP_ENTRIES,
        "{} entries at the top of src/ (at most {MAX_TOP_ENTRIES}): {entries:?}",
        entries.len()
    );
}

#[test]
fn every_problem_kind_has_its_row_in_docs_analyzer_md() {
    use seedance_analyze::report::ProblemKind;
    let docs = std::fs::read_to_string(super::crate_dir().join("../../docs/analyzer.md")).unwrap();
    assert!(ProblemKind::ALL.len() >= 19, "the kind list lost kinds");
    let missing: Vec<String> = ProblemKind::ALL
        .iter()
        .map(|k| k.name())
        .filter(|name| {
            !docs
                .lines()
                .any(|l| l.starts_with(&format!("| `{name}` |")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "problem kinds without a row in the kinds table of docs/analyzer.md: {missing:?}"
    );
}
