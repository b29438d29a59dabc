//! Small formatting helpers shared by the renderers and the report builder.

/// `2025-11-30T02:42:00Z` (UTC, whole seconds) for nanoseconds since the Unix epoch.
pub(crate) fn timestamp(ts_ns: u64) -> String {
    let secs = ts_ns / 1_000_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `850 ms`, `12.5 s`, `3m 05s`, `2h 07m`, `3d 04h`.
pub(crate) fn duration(ns: u64) -> String {
    let ms = ns / 1_000_000;
    let s = ns / 1_000_000_000;
    if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{:.1} s", ns as f64 / 1e9)
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h {:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600)
    }
}

/// `1,234,567`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `512 B`, `1.5 KiB`, `141.0 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// [`bytes`] followed by the exact number: `2.0 GiB (2,147,483,648 bytes)`; `512 B` below
/// 1 KiB.
pub(crate) fn bytes_exact(n: u64) -> String {
    if n < 1024 {
        bytes(n)
    } else {
        format!("{} ({} bytes)", bytes(n), count(n))
    }
}

/// `-4,096`, `12`.
pub(crate) fn signed(n: i64) -> String {
    if n < 0 {
        format!("-{}", count(n.unsigned_abs()))
    } else {
        count(n as u64)
    }
}

/// `13.0` for a driver version of 13000, `12.8` for 12080.
pub(crate) fn driver_version(v: i32) -> String {
    format!("{}.{}", v / 1000, v % 1000 / 10)
}

/// Percentage with one decimal, or `-` when the base is zero.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Splits `text` into lines of at most `width` characters (words longer than that stay
/// whole).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// `1 call`, `2 calls`, `1,234 calls`: the count ([`count`]) and the noun in the number it
/// needs, as the text report writes them.
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(1_764_470_520_000_000_000), "2025-11-30T02:42:00Z");
        assert_eq!(timestamp(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(bytes(150_754_820_096), "140.4 GiB");
        assert_eq!(bytes(u64::MAX - 4095), "16.0 EiB");
        assert_eq!(bytes_exact(2 << 30), "2.0 GiB (2,147,483,648 bytes)");
        assert_eq!(bytes_exact(0), "0 B");
        assert_eq!(signed(-4096), "-4,096");
        assert_eq!(signed(i64::MIN), "-9,223,372,036,854,775,808");
        assert_eq!(duration(185_000_000_000), "3m 05s");
        assert_eq!(duration(1_500_000_000), "1.5 s");
        assert_eq!(driver_version(13000), "13.0");
        assert_eq!(driver_version(12080), "12.8");
        assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
    }
}
