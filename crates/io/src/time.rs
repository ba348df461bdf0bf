//! The server's clock, and timestamps as git-lfs's locking API and `token list` show them.

/// Seconds since the Unix epoch, as the server dates tokens, fetch URLs, locks and records.
///
/// Debug builds only: `GIT_XET_TEST_CLOCK_FILE` names a file holding a number of seconds to
/// add, read at each call, so that tests see tokens and fetch URLs expire without waiting.
/// Release builds ignore it, so it cannot move a deployed server's clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .saturating_add(test_offset())
}

#[cfg(debug_assertions)]
fn test_offset() -> u64 {
    static FILE: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| std::env::var_os("GIT_XET_TEST_CLOCK_FILE"))
        .as_ref()
        .and_then(|file| std::fs::read_to_string(file).ok())
        .and_then(|secs| secs.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(not(debug_assertions))]
fn test_offset() -> u64 {
    0
}

/// Debug builds only: waits `GIT_XET_TEST_HANDLER_DELAY_MS` milliseconds, so that tests
/// can make a real route slow (the Hub's repository info and `paths-info`, once they have
/// read their request). Release builds do not wait.
pub async fn test_delay() {
    #[cfg(debug_assertions)]
    {
        static DELAY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let delay = DELAY.get_or_init(|| {
            std::env::var("GIT_XET_TEST_HANDLER_DELAY_MS")
                .ok()
                .and_then(|ms| ms.trim().parse().ok())
        });
        if let Some(ms) = delay {
            tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
        }
    }
}

/// `secs` since the Unix epoch as RFC 3339 in UTC with second precision.
pub fn rfc3339(secs: u64) -> String {
    let (year, month, day, h, m, s) = civil(secs as i64);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC` (the status page).
pub fn utc(secs: i64) -> String {
    let (year, month, day, h, m, s) = civil(secs);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02} UTC")
}

/// The UTC calendar date and time of `secs` since the Unix epoch (negative: before it).
fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_463_500_146), "2016-05-17T15:49:06Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
