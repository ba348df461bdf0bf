//! What the upkeep commands (`gc`, `check`, `repo delete`) share: opening an existing
//! deployment (never creating one on a mistyped `--data`), and a runtime to drive it.

use anyhow::Context;

use super::deployment::DeploymentArgs;
use git_xet_server::deployment::{self, Deployment, IndexLocation};

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
    Ok(deployment::open(&config, &config.tmp_dir(), true)?)
}

/// The process's runtime (which the PostgreSQL index's connections run on too).
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Handle> {
    git_xet_io::runtime::handle().context("starting the async runtime")
}

/// A duration option that [`parse_duration`] refused (clap shows it with the option's name).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum BadDuration {
    #[error("{0:?}: expected a number with s, m, h or d, e.g. 24h")]
    NotANumber(String),
    #[error("{0:?}: unit must be s, m, h or d, e.g. 24h")]
    Unit(String),
    #[error("{0:?} is too long")]
    TooLong(String),
}

/// `24h`, `30m`, `90s`, `7d`, or plain seconds.
pub(super) fn parse_duration(text: &str) -> Result<std::time::Duration, BadDuration> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| BadDuration::NotANumber(text.to_string()))?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(BadDuration::Unit(text.to_string())),
    };
    n.checked_mul(scale)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| BadDuration::TooLong(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
        for bad in ["", "h", "1w", "-1h", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
