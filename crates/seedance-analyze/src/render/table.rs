//! Building blocks of the text forms (the report's and the diff's): aligned tables and
//! wrapped lines.

use crate::render::fmt;

/// Widest cell; longer values are shortened with `...` (paths keep their end).
const MAX_CELL: usize = 48;

/// A plain text table: left-aligned text columns, right-aligned number columns.
pub(crate) struct Table {
    headers: Vec<&'static str>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns named by `headers`; a header starting with `>` is right-aligned (the `>` is
    /// not printed).
    pub(crate) fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.trim_start_matches('>')).collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| shorten(&c, MAX_CELL)).collect());
    }

    pub(crate) fn render(&self, indent: &str) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let mut s = String::from(indent);
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if self.right[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < cells.len() {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(self.headers.to_vec(), &mut out);
        for r in &self.rows {
            line(r.iter().map(|s| s.as_str()).collect(), &mut out);
        }
        out
    }
}

/// Shortens `s` to `max` characters; the end is kept (it names the file, for paths).
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(n - (max - 3)).collect();
        format!("...{tail}")
    }
}

/// Appends `text` wrapped to 100 columns, the first line after `lead`, the others indented
/// as far.
pub(crate) fn push_wrapped(out: &mut String, lead: &str, text: &str) {
    let indent = " ".repeat(lead.chars().count());
    let width = 100usize.saturating_sub(indent.len()).max(40);
    let lines = fmt::wrap(text, width);
    if lines.is_empty() {
        out.push_str(lead.trim_end());
        out.push('\n');
    }
    for (i, l) in lines.iter().enumerate() {
        out.push_str(if i == 0 { lead } else { &indent });
        out.push_str(l);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&["A", ">N", "C"]);
        t.row(vec!["xx".into(), "1".into(), "".into()]);
        t.row(vec!["y".into(), "100".into(), "z".into()]);
        assert_eq!(t.render(""), "A     N  C\nxx    1\ny   100  z\n");
        assert_eq!(shorten("/a/very/long/path", 10), "...ng/path");
    }
}
