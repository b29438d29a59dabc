//! Byte counts as users write them in `SEEDANCE_*` variables (`512MiB`, `2GiB`, `1.5G`).

/// Parses a byte count (`SEEDANCE_MIN_FREE_MEMORY`): a number, optionally with a fraction
/// and a unit, spaces allowed between. Units are binary and case-insensitive: `B`;
/// `K`, `KB`, `KiB` = 2^10; `M`, `MB`, `MiB` = 2^20; `G`, `GB`, `GiB` = 2^30; `T`, `TB`,
/// `TiB` = 2^40; `P`, `PB`, `PiB` = 2^50 (so `2G` and `2GB` mean 2 GiB, as GPU tools use
/// them). A fraction is rounded down to whole bytes (`1.5GiB` = 1610612736); a plain number
/// must be whole bytes. Errors name the value: empty, negative, not a number, unknown unit,
/// or more than `u64::MAX` bytes.
pub fn parse_bytes(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    // The value as messages show it: clipped and escaped (crate::text).
    let q = crate::text::quoted(s);
    if s.is_empty() {
        return Err("empty value; expected a byte count such as 1073741824, 512MiB or 2GiB".into());
    }
    if s.starts_with('-') {
        return Err(format!(
            "{q} is negative; expected a byte count such as 512MiB"
        ));
    }
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(num_end);
    let not_a_number = || format!("{q} is not a number of bytes");
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(not_a_number());
    }
    let unit = unit.trim();
    let shift: u32 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        _ => {
            return Err(format!(
                "{q}: unknown unit {}; use B, KiB, MiB, GiB, TiB or PiB (or K, M, G, T, P)",
                crate::text::quoted(unit)
            ))
        }
    };
    let too_big = || format!("{q} is more than {} bytes", u64::MAX);
    let int = int.trim_start_matches('0');
    if int.len() > 20 {
        return Err(too_big());
    }
    let int_value: u128 = if int.is_empty() {
        0
    } else {
        int.parse::<u128>().map_err(|_| not_a_number())?
    };
    let mult: u128 = 1u128 << shift;
    let mut total = int_value.checked_mul(mult).ok_or_else(too_big)?;
    // Fraction: the first 18 digits count (finer parts are below one byte for every unit
    // up to PiB), rounded down.
    let digits: &str = &frac[..frac.len().min(18)];
    if !digits.is_empty() {
        if shift == 0 && frac.bytes().any(|b| b != b'0') {
            return Err(format!("{q} is not a whole number of bytes"));
        }
        let f: u128 = digits.parse().map_err(|_| not_a_number())?;
        total = total
            .checked_add(f * mult / 10u128.pow(digits.len() as u32))
            .ok_or_else(too_big)?;
    }
    u64::try_from(total).map_err(|_| too_big())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("1073741824"), Ok(1 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("2 gb"), Ok(2 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Ok(1_610_612_736));
        assert_eq!(parse_bytes(".5K"), Ok(512));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes(" 0B "), Ok(0));
        assert_eq!(parse_bytes("3.0"), Ok(3));
        assert_eq!(parse_bytes("16383PiB"), Ok(16383 << 50));
        assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_bytes("18446744073709551616"),
            Err("\"18446744073709551616\" is more than 18446744073709551615 bytes".into())
        );
        assert_eq!(
            parse_bytes("16384PiB"),
            Err("\"16384PiB\" is more than 18446744073709551615 bytes".into())
        );
        assert_eq!(
            parse_bytes(""),
            Err("empty value; expected a byte count such as 1073741824, 512MiB or 2GiB".into())
        );
        assert_eq!(
            parse_bytes("-1"),
            Err("\"-1\" is negative; expected a byte count such as 512MiB".into())
        );
        assert_eq!(
            parse_bytes("12 apples"),
            Err("\"12 apples\": unknown unit \"apples\"; use B, KiB, MiB, GiB, TiB or PiB (or K, M, G, T, P)".into())
        );
        assert_eq!(
            parse_bytes("1.5"),
            Err("\"1.5\" is not a whole number of bytes".into())
        );
        assert_eq!(
            parse_bytes("."),
            Err("\".\" is not a number of bytes".into())
        );
        assert_eq!(
            parse_bytes("1.2.3G"),
            Err("\"1.2.3G\" is not a number of bytes".into())
        );
        assert_eq!(
            parse_bytes("GiB"),
            Err("\"GiB\" is not a number of bytes".into())
        );
        assert!(parse_bytes("nan").is_err());
        assert!(parse_bytes("inf").is_err());
        assert!(parse_bytes("1e9").is_err());
    }

    proptest! {
        #[test]
        fn bytes_never_panic(raw in any::<String>(), num in "[0-9]{0,25}(\\.[0-9]{0,25})?", unit in "( ?(b|k|kb|kib|m|MiB|g|G|GiB|t|TiB|p|PiB|x))?") {
            let _ = parse_bytes(&raw);
            let _ = parse_bytes(&format!("{num}{unit}"));
        }

        #[test]
        fn whole_units_are_exact(n in 0u64..(1 << 20), unit_idx in 0usize..5) {
            let (unit, shift) = [("B", 0), ("KiB", 10), ("MiB", 20), ("GiB", 30), ("TiB", 40)][unit_idx];
            prop_assert_eq!(parse_bytes(&format!("{n}{unit}")), Ok(n << shift));
        }
    }
}
