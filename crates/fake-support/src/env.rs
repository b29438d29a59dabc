//! Comma-list environment parsing shared by the fakes.
//!
//! The rules: a value is either one entry for every device or a comma list with one entry
//! per physical device; entries are trimmed of surrounding blanks; an empty or missing entry
//! keeps the default for that device; entries past the device count are ignored. A value
//! that cannot be parsed keeps the default and adds one warning line per variable, made by
//! [`bad_value`].

use std::collections::BTreeMap;
use std::io::Write;
use std::str::FromStr;

/// Physical device count when `FAKE_CUDA_DEVICE_COUNT` is unset or bad.
pub const DEFAULT_DEVICE_COUNT: u32 = 1;
/// Largest accepted `FAKE_CUDA_DEVICE_COUNT` (PCI bus numbers `0x10 + p` must fit a byte).
pub const MAX_DEVICE_COUNT: u32 = 64;
/// Bytes per device when `FAKE_CUDA_TOTAL_MEM` is unset or bad: 80 GiB.
pub const DEFAULT_TOTAL_MEM: u64 = 85_899_345_920;

/// The process environment's variables whose name `keep` accepts. Variables whose name or
/// value is not UTF-8 are skipped.
pub fn vars(keep: impl Fn(&str) -> bool) -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| keep(k))
        .collect()
}

/// Prints warning lines on stderr, one line each.
pub fn print_warnings(warnings: &[String]) {
    let mut err = std::io::stderr().lock();
    for w in warnings {
        // Nothing sensible to do when stderr is closed.
        let _ = writeln!(err, "{w}");
    }
}

/// Parses `FAKE_CUDA_DEVICE_COUNT` (`raw`, blanks allowed): 0..=[`MAX_DEVICE_COUNT`],
/// [`DEFAULT_DEVICE_COUNT`] when unset; a bad or too large value is the default with one
/// warning ([`bad_value`] with `who`).
pub fn device_count(who: &str, raw: Option<&str>, warnings: &mut Vec<String>) -> u32 {
    match raw {
        None => DEFAULT_DEVICE_COUNT,
        Some(raw) => match raw.trim().parse::<u32>() {
            Ok(n) if n <= MAX_DEVICE_COUNT => n,
            _ => {
                warnings.push(bad_value(who, "FAKE_CUDA_DEVICE_COUNT", raw));
                DEFAULT_DEVICE_COUNT
            }
        },
    }
}

/// The warning line for an unparseable variable, e.g.
/// `fake-cuda: ignoring bad FAKE_CUDA_TOTAL_MEM="lots" (using the default)`.
///
/// `who` is the fake's name, the prefix of the line; `raw` is written in Rust's `{:?}`
/// (quoted, escaped) form.
pub fn bad_value(who: &str, name: &str, raw: &str) -> String {
    format!("{who}: ignoring bad {name}={raw:?} (using the default)")
}

/// Parses a value that is either one number for every device or a comma list with one entry
/// per physical device.
///
/// Returns `count` entries; `None` keeps the default (variable unset, empty or missing
/// entry, or a bad entry). Any bad entry adds one warning ([`bad_value`] with `who`) for the
/// whole variable `name`. Entries past `count` are ignored.
pub fn per_device<T: FromStr + Copy>(
    who: &str,
    name: &str,
    raw: Option<&str>,
    count: usize,
    warnings: &mut Vec<String>,
) -> Vec<Option<T>> {
    let Some(raw) = raw else {
        return vec![None; count];
    };
    let mut any_bad = false;
    let parsed: Vec<Option<T>> = raw
        .split(',')
        .map(str::trim)
        .map(|e| {
            if e.is_empty() {
                return None;
            }
            let v = e.parse::<T>().ok();
            any_bad |= v.is_none();
            v
        })
        .collect();
    if any_bad {
        warnings.push(bad_value(who, name, raw));
    }
    if let [single] = parsed[..] {
        return vec![single; count];
    }
    (0..count)
        .map(|i| parsed.get(i).copied().flatten())
        .collect()
}

/// Parses a names variable (`FAKE_CUDA_NAMES`): one name for every device, or a comma list
/// by physical index.
///
/// Returns `count` entries; an empty or missing entry (or an unset variable) is `None`, the
/// default name. Entries are trimmed of surrounding blanks. Never warns.
pub fn names(raw: Option<&str>, count: usize) -> Vec<Option<String>> {
    let Some(raw) = raw else {
        return vec![None; count];
    };
    let entries: Vec<Option<String>> = raw
        .split(',')
        .map(str::trim)
        .map(|e| (!e.is_empty()).then(|| e.to_string()))
        .collect();
    if let [single] = &entries[..] {
        return vec![single.clone(); count];
    }
    (0..count)
        .map(|i| entries.get(i).cloned().flatten())
        .collect()
}

/// Parses a comma list of physical indices (`FAKE_CUDA_BUSY`) into one flag per device.
///
/// Empty entries are skipped and indices `>= count` ignored; any non-number makes the whole
/// variable ignored (all `false`) with one warning ([`bad_value`] with `who`).
pub fn index_set(
    who: &str,
    name: &str,
    raw: Option<&str>,
    count: usize,
    warnings: &mut Vec<String>,
) -> Vec<bool> {
    let mut set = vec![false; count];
    let Some(raw) = raw else {
        return set;
    };
    let parsed: Result<Vec<usize>, _> = raw
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::parse::<usize>)
        .collect();
    match parsed {
        Ok(indices) => {
            for i in indices.into_iter().filter(|&i| i < count) {
                set[i] = true;
            }
        }
        Err(_) => warnings.push(bad_value(who, name, raw)),
    }
    set
}

/// Whether an on/off variable (`FAKE_CUDA_STUB`, `FAKE_NVML_ABSENT`) is on: `1`, `true`,
/// `yes` or `on`, case-insensitive, surrounding blanks allowed. Anything else, or unset, is
/// off.
pub fn flag_enabled(raw: Option<&str>) -> bool {
    raw.map(str::trim).is_some_and(|v| {
        ["1", "true", "yes", "on"]
            .iter()
            .any(|t| v.eq_ignore_ascii_case(t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_value_text() {
        assert_eq!(
            bad_value("fake-cuda", "FAKE_CUDA_TOTAL_MEM", "lots"),
            "fake-cuda: ignoring bad FAKE_CUDA_TOTAL_MEM=\"lots\" (using the default)"
        );
        assert_eq!(
            bad_value("fake-nvml", "X", "a\"b"),
            "fake-nvml: ignoring bad X=\"a\\\"b\" (using the default)"
        );
    }

    #[test]
    fn device_counts() {
        let mut w = Vec::new();
        assert_eq!(device_count("f", None, &mut w), DEFAULT_DEVICE_COUNT);
        assert_eq!(device_count("f", Some(" 4 "), &mut w), 4);
        assert_eq!(device_count("f", Some("0"), &mut w), 0);
        assert_eq!(device_count("f", Some("64"), &mut w), MAX_DEVICE_COUNT);
        assert!(w.is_empty());
        assert_eq!(device_count("fake-cuda", Some("65"), &mut w), 1);
        assert_eq!(device_count("fake-cuda", Some("two"), &mut w), 1);
        assert_eq!(
            w,
            [
                "fake-cuda: ignoring bad FAKE_CUDA_DEVICE_COUNT=\"65\" (using the default)",
                "fake-cuda: ignoring bad FAKE_CUDA_DEVICE_COUNT=\"two\" (using the default)",
            ]
        );
    }

    #[test]
    fn vars_filter() {
        let v = vars(|k| k == "PATH");
        assert!(v.keys().all(|k| k == "PATH"));
    }

    #[test]
    fn per_device_values() {
        let mut w = Vec::new();
        assert_eq!(per_device::<u64>("f", "V", None, 3, &mut w), [None; 3]);
        assert_eq!(
            per_device::<u64>("f", "V", Some("42"), 3, &mut w),
            [Some(42); 3]
        );
        assert_eq!(
            per_device::<u64>("f", "V", Some("100,,300,5000"), 3, &mut w),
            [Some(100), None, Some(300)]
        );
        assert_eq!(
            per_device::<u64>("f", "V", Some(" 1 , 2"), 3, &mut w),
            [Some(1), Some(2), None]
        );
        assert_eq!(
            per_device::<i32>("f", "V", Some(",3"), 2, &mut w),
            [None, Some(3)]
        );
        assert_eq!(per_device::<u64>("f", "V", Some(""), 2, &mut w), [None; 2]);
        assert!(w.is_empty());
    }

    #[test]
    fn per_device_bad_entries_warn_once() {
        let mut w = Vec::new();
        assert_eq!(
            per_device::<u64>("fake-cuda", "V", Some("x,7,y"), 3, &mut w),
            [None, Some(7), None]
        );
        assert_eq!(
            per_device::<u64>("fake-cuda", "V", Some("lots"), 2, &mut w),
            [None; 2]
        );
        assert_eq!(
            w,
            [
                "fake-cuda: ignoring bad V=\"x,7,y\" (using the default)",
                "fake-cuda: ignoring bad V=\"lots\" (using the default)",
            ]
        );
    }

    #[test]
    fn name_lists() {
        assert_eq!(names(None, 2), [None, None]);
        assert_eq!(
            names(Some("Same"), 2),
            [Some("Same".to_string()), Some("Same".to_string())]
        );
        assert_eq!(
            names(Some(" NVIDIA H200 ,, Other GPU"), 4),
            [
                Some("NVIDIA H200".to_string()),
                None,
                Some("Other GPU".to_string()),
                None
            ]
        );
        assert_eq!(names(Some("a,b,c"), 1), [Some("a".to_string())]);
    }

    #[test]
    fn index_sets() {
        let mut w = Vec::new();
        assert_eq!(index_set("f", "B", None, 2, &mut w), [false, false]);
        assert_eq!(index_set("f", "B", Some(""), 2, &mut w), [false, false]);
        assert_eq!(
            index_set("f", "B", Some("3, 1,,9"), 4, &mut w),
            [false, true, false, true]
        );
        assert!(w.is_empty());
        assert_eq!(
            index_set("fake-nvml", "FAKE_CUDA_BUSY", Some("0,x"), 2, &mut w),
            [false, false]
        );
        assert_eq!(
            w,
            ["fake-nvml: ignoring bad FAKE_CUDA_BUSY=\"0,x\" (using the default)"]
        );
    }

    #[test]
    fn flags() {
        assert!(flag_enabled(Some("1")));
        assert!(flag_enabled(Some("TRUE")));
        assert!(flag_enabled(Some(" Yes ")));
        assert!(flag_enabled(Some("on")));
        assert!(!flag_enabled(Some("0")));
        assert!(!flag_enabled(Some("")));
        assert!(!flag_enabled(None));
    }
}
