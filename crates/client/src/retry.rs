//! When and how long to wait before trying a request again: the one policy of every request
//! git-xet's client side makes (the CAS client's and the Batch API client's).
//!
//! Transient failures (connection errors, timeouts, 408, 429, 500, 502, 503, 504) are
//! retried with exponential backoff and full jitter, or after the server's `Retry-After`
//! (seconds or an HTTP date, capped), bounded both in attempts and in total time, so a dead
//! server fails a command in bounded time and a flapping one does not fail it at all.
//! Anything else (501, 507, other 4xx) is final.

use std::time::{Duration, SystemTime};

use rand::Rng;

/// Retry limits. The defaults ride out a server restart or a short outage (about a minute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first one included.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// No single wait is longer than this.
    pub max_delay: Duration,
    /// No retry starts after this much time since the first attempt.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(15),
            max_elapsed: Duration::from_secs(90),
        }
    }
}

impl RetryPolicy {
    /// For requests with a fallback waiting behind them: the Batch API, whose failure hands
    /// the objects to git-lfs (which retries on its own). Three attempts within ~5 s instead
    /// of the default's 90 s, so an unreachable LFS server costs a checkout seconds, not
    /// minutes; a `Retry-After` longer than 2 s is not waited for.
    pub fn quick() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            max_elapsed: Duration::from_secs(5),
        }
    }
}

/// What to do about one failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Try again after this delay.
    RetryAfter(Duration),
    /// Stop: the failure is permanent or the budget is spent.
    GiveUp,
}

/// Whether an HTTP status is worth retrying: only the transient ones. A full disk (507),
/// a method or version the server does not implement (501, 505), a loop (508) and the like
/// do not go away by asking again.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

impl RetryPolicy {
    /// A policy for tests: many quick attempts.
    pub fn fast() -> Self {
        RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(300),
            max_elapsed: Duration::from_secs(20),
        }
    }

    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff ceiling for the `retry`-th retry (1-based), before jitter.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// Decides after `attempts` failed attempts, `elapsed` since the first. `server_hint` is a
    /// `Retry-After` delay, honoured (up to `max_delay`) when present.
    pub fn verdict(
        &self,
        attempts: u32,
        elapsed: Duration,
        server_hint: Option<Duration>,
    ) -> Verdict {
        if attempts >= self.max_attempts {
            return Verdict::GiveUp;
        }
        let delay = match server_hint {
            Some(hint) => hint.min(self.max_delay),
            // Full jitter: uniformly in [0, ceiling], which spreads retrying clients apart.
            None => {
                let ceiling = self.ceiling(attempts).as_micros() as u64;
                Duration::from_micros(rand::thread_rng().gen_range(0..=ceiling))
            }
        };
        if elapsed + delay > self.max_elapsed {
            return Verdict::GiveUp;
        }
        Verdict::RetryAfter(delay)
    }
}

/// The delay a response's `Retry-After` header asks for, if it has a valid one.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

/// Parses a `Retry-After` value (RFC 9110 10.2.3): delay-seconds, or an HTTP date in any of
/// the three forms recipients accept (RFC 9110 5.6.7), which gives the time from `now` until
/// then (zero if it is past). Anything else, a malformed date included, is no value.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // A number too long for u64 is still "a long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn statuses() {
        for s in [429, 500, 502, 503, 504, 408] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 416, 200, 501, 505, 507, 508, 511] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.ceiling(1), Duration::from_millis(250));
        assert_eq!(p.ceiling(2), Duration::from_millis(500));
        assert_eq!(p.ceiling(4), Duration::from_secs(2));
        assert_eq!(p.ceiling(30), p.max_delay);
    }

    /// Full jitter: every delay within [0, ceiling], and not only the upper half of it.
    #[test]
    fn full_jitter_spreads_delays_over_zero_to_the_ceiling() {
        let p = RetryPolicy::default();
        for attempt in 1..5 {
            let delays: Vec<Duration> = (0..200)
                .map(|_| match p.verdict(attempt, Duration::ZERO, None) {
                    Verdict::RetryAfter(d) => d,
                    Verdict::GiveUp => panic!("should retry"),
                })
                .collect();
            let ceiling = p.ceiling(attempt);
            assert!(delays.iter().all(|d| *d <= ceiling), "{delays:?}");
            assert!(delays.iter().any(|d| *d < ceiling / 2), "{delays:?}");
        }
    }

    #[test]
    fn attempts_and_elapsed_time_are_bounded() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.verdict(p.max_attempts, Duration::ZERO, None),
            Verdict::GiveUp
        );
        assert_eq!(p.verdict(1, p.max_elapsed, None), Verdict::GiveUp);
        assert_eq!(
            RetryPolicy::none().verdict(1, Duration::ZERO, None),
            Verdict::GiveUp
        );
    }

    #[test]
    fn retry_after_is_honoured_but_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.verdict(1, Duration::ZERO, Some(Duration::from_secs(2))),
            Verdict::RetryAfter(Duration::from_secs(2))
        );
        assert_eq!(
            p.verdict(1, Duration::ZERO, Some(Duration::from_secs(3600))),
            Verdict::RetryAfter(p.max_delay)
        );
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        // 1994-11-06T08:49:37Z
        let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let before = date - Duration::from_secs(90);
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after(form, before),
                Some(Duration::from_secs(90)),
                "{form}"
            );
            let after = date + Duration::from_secs(5);
            assert_eq!(
                parse_retry_after(form, after),
                Some(Duration::ZERO),
                "{form}"
            );
        }
        let now = SystemTime::now();
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse_retry_after("Thu, 29 Feb 2024 00:00:00 GMT", UNIX_EPOCH),
            Some(Duration::from_secs(1_709_164_800))
        );
        for junk in [
            "",
            "-1",
            "1.5",
            "soon",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1994 08:49:37:1 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 ::: GMT",
        ] {
            assert_eq!(parse_retry_after(junk, now), None, "{junk:?}");
        }
    }

    /// A date that is not one (wrong weekday, bytes that are not ASCII, a cut-off value) is
    /// treated as no `Retry-After` at all: the usual backoff applies.
    #[test]
    fn a_malformed_retry_after_date_is_treated_as_absent() {
        let now = SystemTime::now();
        for junk in [
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:3",
            "Sunday, 06-Nov-9",
            "Sun Nov  6 08:49:37 199",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
            "Sun, 06 Nov 10000 08:49:37 GMT",
            "Fri, 31 Dec 9999 23:59:60 GMT",
            "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
        ] {
            assert_eq!(parse_retry_after(junk, now), None, "{junk:?}");
        }
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::RETRY_AFTER,
            reqwest::header::HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 PST"),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
