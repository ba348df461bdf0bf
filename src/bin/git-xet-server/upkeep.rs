//! What the upkeep commands (`gc`, `check`, `repo delete`) share: opening an existing
//! deployment (never creating one on a mistyped `--data`), and a runtime to drive it.

use anyhow::Context;

use super::deployment::DeploymentArgs;
use git_xet_deployment::{Deployment, IndexLocation};

/// Opens the deployment `args` name, refusing one that does not exist yet.
pub(super) fn open_existing(args: &DeploymentArgs) -> anyhow::Result<Deployment> {
    let config = args.config()?;
    if let IndexLocation::Sqlite(path) = &config.index {
        anyhow::ensure!(
            path.exists(),
            "no index at {}: pass the data directory the server uses (--data or \
             GIT_XET_SERVER_DATA), or --index",
            path.display()
        );
    }
    // Admin commands stage nothing; the server's start-up cleanup of `tmp/` cannot hurt them.
    Ok(git_xet_deployment::open(&config, &config.tmp_dir(), true)?)
}

/// The process's runtime (which the PostgreSQL index's connections run on too).
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Handle> {
    git_xet_io::runtime::handle().context("starting the async runtime")
}

/// A duration option that [`parse_duration`] refused (clap shows it with the option's name).
/// Each variant but `Empty` holds the text as shown (without surrounding spaces); byte
/// offsets count in it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum BadDuration {
    #[error("empty: expected e.g. 24h, 30m, 1h 30m or plain seconds")]
    Empty,
    /// Where a number should start.
    #[error("{0:?}: expected a number at byte {1}, e.g. 24h")]
    NumberExpected(String, usize),
    /// A byte that is neither a digit, a letter nor a space.
    #[error("{0:?}: byte {1} is neither a digit, a unit nor a space")]
    InvalidCharacter(String, usize),
    /// A number without a unit, after the first (a lone number is seconds).
    #[error("{0:?}: {1} has no unit (s, m, h, d, w...); only a lone number is seconds")]
    NoUnit(String, u64),
    /// A unit humantime does not know.
    #[error("{0:?}: unknown unit {1:?} (s, m, h, d, w, ms, min, hours, days...)")]
    Unit(String, String),
    #[error("{0:?} is out of range: too long, or a fraction finer than its unit allows")]
    OutOfRange(String),
}

/// `24h`, `30m`, `1h 30m`, `7d`, `1w`... (humantime's units), or plain seconds.
pub(super) fn parse_duration(text: &str) -> Result<std::time::Duration, BadDuration> {
    use humantime::DurationError as E;
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: an overflow is the one way `parse` fails.
        return text
            .parse()
            .map(std::time::Duration::from_secs)
            .map_err(|_| BadDuration::OutOfRange(text.to_string()));
    }
    humantime::parse_duration(text).map_err(|e| {
        let text = text.to_string();
        match e {
            E::Empty => BadDuration::Empty,
            E::NumberExpected(at) => BadDuration::NumberExpected(text, at),
            E::InvalidCharacter(at) => BadDuration::InvalidCharacter(text, at),
            E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
                BadDuration::NoUnit(text, value)
            }
            E::UnknownUnit { unit, .. } => BadDuration::Unit(text, unit),
            E::NumberOverflow => BadDuration::OutOfRange(text),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, BadDuration::*};
    use std::time::Duration;

    #[test]
    fn durations() {
        let secs = Duration::from_secs;
        for (text, want) in [
            ("24h", secs(86400)),
            (" 24h ", secs(86400)),
            ("0", Duration::ZERO),
            ("90", secs(90)),
            ("90s", secs(90)),
            ("30m", secs(1800)),
            ("7d", secs(7 * 86400)),
            ("1w", secs(7 * 86400)),
            ("2 days", secs(2 * 86400)),
            ("1h 30m", secs(5400)),
            ("1h30m", secs(5400)),
            ("1.5h", secs(5400)),
            ("500ms", Duration::from_millis(500)),
            ("18446744073709551615", secs(u64::MAX)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refused_durations() {
        let s = String::from;
        for (text, want) in [
            ("", Empty),
            ("  ", Empty),
            ("h", NumberExpected(s("h"), 0)),
            ("-1h", NumberExpected(s("-1h"), 0)),
            ("1h+30m", InvalidCharacter(s("1h+30m"), 2)),
            ("1.", InvalidCharacter(s("1."), 1)),
            ("1h 30", NoUnit(s("1h 30"), 30)),
            ("1x", Unit(s("1x"), s("x"))),
            (
                "18446744073709551616",
                OutOfRange(s("18446744073709551616")),
            ),
            (
                "18446744073709551616s",
                OutOfRange(s("18446744073709551616s")),
            ),
            ("0.5ns", OutOfRange(s("0.5ns"))),
        ] {
            assert_eq!(parse_duration(text), Err(want), "{text}");
        }
    }
}
