//! When and how long to wait before trying a request again.
//!
//! Transient failures (connection errors, timeouts, 408, 429, 500, 502, 503, 504) are retried with exponential
//! backoff and full jitter, bounded both in attempts and in total time, so a dead server
//! fails a command in bounded time and a flapping one does not fail it at all.

use std::time::Duration;

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
                Duration::from_micros(rand::thread_rng().gen_range(ceiling / 2..=ceiling.max(1)))
            }
        };
        if elapsed + delay > self.max_elapsed {
            return Verdict::GiveUp;
        }
        Verdict::RetryAfter(delay)
    }
}

/// Parses a `Retry-After` header given in seconds (the HTTP-date form is ignored).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn jitter_stays_within_half_to_full_ceiling() {
        let p = RetryPolicy::default();
        for attempt in 1..5 {
            for _ in 0..100 {
                let Verdict::RetryAfter(d) = p.verdict(attempt, Duration::ZERO, None) else {
                    panic!("should retry")
                };
                assert!(
                    d <= p.ceiling(attempt) && d >= p.ceiling(attempt) / 2,
                    "{d:?}"
                );
            }
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
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
