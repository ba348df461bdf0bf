//! Numbers for people: sizes and ratios as every command prints them, and the one syntax of
//! sizes people write (settings such as `xet.storeSize`, options such as `--cache-size`).

/// `logical / stored` as a dedup ratio (`1.63x`), or why there is none.
pub fn dedup_ratio(logical: u64, stored: u64) -> String {
    if stored > 0 {
        format!("{:.2}x", logical as f64 / stored as f64)
    } else {
        "n/a (nothing new stored)".into()
    }
}

/// `1.5 GiB`-style sizes for people (the core's, which the web pages use too).
pub use git_xet_core::human::human_bytes;

/// Why a written size is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("no size given (write e.g. 500M or 20G)")]
    Empty,
    #[error("{0:?} is not a size: a whole number of bytes, then maybe a unit (e.g. 500M, 20G)")]
    NotASize(String),
    #[error("unknown size unit {unit:?} in {input:?} (use K, M, G or T: powers of 1024)")]
    UnknownUnit { input: String, unit: String },
    #[error("{0:?} is too large (at most 16 EiB)")]
    TooLarge(String),
}

/// A size as people write it: a whole number of bytes, then optionally a unit, which is
/// `k`, `m`, `g` or `t` (powers of 1024, as git reads integers), alone or followed by `b`
/// or `ib` (`KB`, `MiB`), or `b` alone; any case, with spaces around the number and the
/// unit. `1048576`, `512K`, `500 MiB`, `20g`, ` 2t `.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(SizeError::Empty);
    }
    let unsigned = trimmed.strip_prefix('+').unwrap_or(trimmed);
    let digits_end = unsigned
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(unsigned.len());
    let (digits, unit) = (&unsigned[..digits_end], unsigned[digits_end..].trim_start());
    if digits.is_empty() || !unit.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(SizeError::NotASize(trimmed.to_string()));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(SizeError::UnknownUnit {
                input: trimmed.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    // Only digits are left, so the one way to fail is a number past u64.
    let too_large = || SizeError::TooLarge(trimmed.to_string());
    digits
        .parse::<u64>()
        .map_err(|_| too_large())?
        .checked_mul(1u64 << shift)
        .ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_git_integers() {
        assert_eq!(parse_size("1024").ok(), Some(1024));
        assert_eq!(parse_size("10k").ok(), Some(10 << 10));
        assert_eq!(parse_size("3G").ok(), Some(3 << 30));
        assert_eq!(parse_size(" 2t ").ok(), Some(2 << 40));
        assert_eq!(parse_size("g").ok(), None);
        assert_eq!(parse_size("-1").ok(), None);
        assert_eq!(parse_size("99999999999999999999t").ok(), None);
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("20g"), Ok(20 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        for bad in ["", "M", "5X", "-1G", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_spelling_of_a_unit_is_read() {
        for (text, bytes) in [
            ("7b", 7),
            ("7 B", 7),
            ("+7", 7),
            ("1kb", 1 << 10),
            ("1 KiB", 1 << 10),
            ("1 mB", 1 << 20),
            ("1\tmib", 1 << 20),
            ("1GB", 1 << 30),
            ("1 t", 1 << 40),
            ("1TiB", 1 << 40),
            ("16777215T", 16_777_215 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text:?}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(parse_size("  "), Err(SizeError::Empty));
        assert_eq!(parse_size("-1G"), Err(SizeError::NotASize("-1G".into())));
        assert_eq!(parse_size("1.5G"), Err(SizeError::NotASize("1.5G".into())));
        assert_eq!(
            parse_size("5 G B"),
            Err(SizeError::NotASize("5 G B".into()))
        );
        assert_eq!(
            parse_size("5X"),
            Err(SizeError::UnknownUnit {
                input: "5X".into(),
                unit: "X".into()
            })
        );
        assert_eq!(
            parse_size("5iB").map_err(|e| matches!(e, SizeError::UnknownUnit { .. })),
            Err(true)
        );
        assert_eq!(
            parse_size("16777216T"),
            Err(SizeError::TooLarge("16777216T".into()))
        );
        assert_eq!(
            parse_size("99999999999999999999"),
            Err(SizeError::TooLarge("99999999999999999999".into()))
        );
        assert!(parse_size("5X")
            .unwrap_err()
            .to_string()
            .contains("K, M, G or T"));
        // Bytes that are not ASCII are never cut in the middle of a character.
        assert!(parse_size("5\u{e9}").is_err());
        assert!(parse_size("\u{e9}").is_err());
    }
}
