//! The server's clock, and timestamps as git-lfs's locking API and `token list` show them.

/// Seconds since the Unix epoch, as the server dates tokens, fetch URLs, locks and records.
///
/// With the `test-hooks` feature only: `GIT_XET_TEST_CLOCK_FILE` names a file holding a
/// number of seconds to add, read at each call, so that tests see tokens and fetch URLs
/// expire without waiting. Installed programs are built without it, so it cannot move a
/// deployed server's clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .saturating_add(test_offset())
}

/// A monotonic instant, as the server's caches age their entries (revoked tokens, the OIDC
/// issuer's keys, the policy file). With the `test-hooks` feature moved forward by the same
/// offset as [`now_secs`], so that a test sees an entry age without waiting for it.
pub fn instant_now() -> std::time::Instant {
    let now = std::time::Instant::now();
    now.checked_add(std::time::Duration::from_secs(test_offset()))
        .unwrap_or(now)
}

#[cfg(feature = "test-hooks")]
fn test_offset() -> u64 {
    static FILE: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| std::env::var_os("GIT_XET_TEST_CLOCK_FILE"))
        .as_ref()
        .and_then(|file| std::fs::read_to_string(file).ok())
        .and_then(|secs| secs.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(not(feature = "test-hooks"))]
fn test_offset() -> u64 {
    0
}

/// With the `test-hooks` feature only: waits `GIT_XET_TEST_HANDLER_DELAY_MS` milliseconds,
/// so that tests can make a real route slow (the Hub's repository info and `paths-info`,
/// once they have read their request). Without it, returns at once.
pub async fn test_delay() {
    #[cfg(feature = "test-hooks")]
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

/// `secs` since the Unix epoch as RFC 3339 in UTC with second precision. RFC 3339 years
/// have four digits: a later instant (a commit or token dated past 9999) shows as the last
/// second of 9999.
pub fn rfc3339(secs: u64) -> String {
    // The last second humantime formats; past it its Display fails and to_string would panic.
    const LAST: u64 = 253_402_300_799;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.min(LAST));
    humantime::format_rfc3339_seconds(at).to_string()
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

    #[test]
    fn timestamps_past_9999_show_its_last_second() {
        assert_eq!(rfc3339(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(253_402_300_800), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
    }
}
