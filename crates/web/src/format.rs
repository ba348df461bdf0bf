//! Numbers and dates as the pages show them: sizes in binary units next to exact byte
//! counts, dedup ratios, UTC timestamps. Kept here so every page reads the same.

/// A size for people: bytes up to 1 KiB, then KiB, MiB, GiB, TiB with one decimal (the
/// formatter the programs print sizes with).
pub use git_xet_core::human::human_bytes;

/// Logical bytes per stored byte with two decimals and a times sign; a dash when nothing
/// is stored.
pub fn ratio(logical: u64, stored: u64) -> String {
    match stored {
        0 => "–".into(),
        _ => format!("{:.2}×", logical as f64 / stored as f64),
    }
}

/// A share as a whole percentage (`part` of `whole`), a dash for an empty whole.
pub fn percent(part: u64, whole: u64) -> String {
    match whole {
        0 => "–".into(),
        _ => format!("{:.0}%", part as f64 * 100.0 / whole as f64),
    }
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// `secs` since the Unix epoch as a date, `YYYY-MM-DD` (chart axes).
pub fn day(secs: i64) -> String {
    let (y, mo, d, ..) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}")
}

/// `secs` as an RFC 3339 instant, for `<time datetime>`.
pub fn rfc3339(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Calendar date and time of day in UTC (days to civil date after Howard Hinnant's
/// public-domain algorithm: eras of 400 years starting on March 1st).
fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (y, m, d, h as u32, mi as u32, s as u32)
}

/// The first `n` characters of a commit id (or any hex), for display.
pub fn short(hex: &str) -> &str {
    &hex[..hex.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_ratios_and_dates_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(5 << 40), "5.0 TiB");
        assert_eq!(human_bytes(u64::MAX), "16777216.0 TiB");
        assert_eq!(ratio(300, 100), "3.00×");
        assert_eq!(ratio(0, 0), "–");
        assert_eq!(percent(1, 4), "25%");
        assert_eq!(percent(1, 0), "–");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(-1), "1969-12-31 23:59:59 UTC");
        assert_eq!(day(1_700_000_000), "2023-11-14");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(short("0123456789abcdef"), "0123456789");
        assert_eq!(short("ab"), "ab");
    }
}
