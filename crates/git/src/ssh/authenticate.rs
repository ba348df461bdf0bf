//! `git-lfs-authenticate <path> <operation>` over ssh, as git-lfs runs it (its
//! `lfshttp/ssh.go`): the answer's `href` replaces the LFS endpoint and its `header` goes on
//! the Batch API request; it is kept per destination, path and operation until
//! `expires_in`/`expires_at` (or `lfs.defaulttokenttl`) says otherwise, so a command logs in
//! once however many objects it moves.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::ssh::command::{self, SshSettings};
use crate::ssh::url::SshRemote;
use crate::GitError;

/// What `git-lfs-authenticate` answered.
#[derive(Clone, PartialEq, Eq)]
pub struct SshAuth {
    /// The LFS endpoint to use instead of the one derived from the URL.
    pub href: Option<String>,
    /// Headers for the Batch API request (usually `Authorization`).
    pub header: BTreeMap<String, String>,
    /// When the answer stops being good; `None`: for the whole command.
    pub expires: Option<SystemTime>,
}

impl fmt::Debug for SshAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are credentials: names only.
        f.debug_struct("SshAuth")
            .field("href", &self.href)
            .field("header", &self.header.keys().collect::<Vec<_>>())
            .field("expires", &self.expires)
            .finish()
    }
}

/// Why `git-lfs-authenticate` gave no answer (the filter hands the object to git-lfs on
/// each of them; the variant says why in its log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SshFailure {
    /// The ssh program could not be started.
    NotStarted,
    /// The server has no `git-lfs-authenticate` (exit 127 or a "not found" message):
    /// it may speak only `git-lfs-transfer`, which git-lfs does.
    Unavailable,
    /// ssh or the command failed (login refused, no such repository, ...).
    Failed,
    /// It answered something that is not the JSON git-lfs expects.
    BadAnswer,
    /// `lfs.sshtransfer` (or `lfs.<url>.sshtransfer`) asks for the pure ssh protocol
    /// (`git-lfs-transfer`) only, which git-lfs speaks.
    Disabled,
}

impl fmt::Display for SshFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SshFailure::NotStarted => "ssh could not be started",
            SshFailure::Unavailable => "the server has no git-lfs-authenticate",
            SshFailure::Failed => "git-lfs-authenticate failed",
            SshFailure::BadAnswer => "git-lfs-authenticate answered something unreadable",
            SshFailure::Disabled => "git-lfs-authenticate is disabled by lfs.sshtransfer",
        })
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    href: String,
    #[serde(default)]
    header: BTreeMap<String, String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    expires_in: Option<i64>,
}

/// Messages of servers that lack the command but exit with another status (git-lfs's list).
const NOT_FOUND: [&str; 4] = [
    "git-lfs-authenticate: not found",
    "git-lfs-authenticate: command not found",
    "git-lfs-authenticate: no such file",
    "command not found: git-lfs-authenticate",
];

/// Runs `git-lfs-authenticate` for `operation` (`upload` or `download`) on `remote`.
/// `default_ttl` is `lfs.defaulttokenttl` (seconds), used when the answer names no expiry.
pub fn run(
    settings: &SshSettings,
    remote: &SshRemote,
    operation: &str,
    default_ttl: Option<u64>,
) -> Result<SshAuth, GitError> {
    let remote_command = format!("git-lfs-authenticate {} {operation}", remote.path);
    let cmd = command::build(settings, remote, &remote_command);
    let fail = |kind: SshFailure, detail: String| GitError::SshAuthenticate {
        destination: remote.display_host(),
        kind,
        detail,
    };
    tracing::debug!(program = %cmd.program, args = ?cmd.args, "running git-lfs-authenticate");
    let started = SystemTime::now();
    let out = Command::new(&cmd.program)
        .args(&cmd.args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(SshFailure::NotStarted, format!("{}: {e}", cmd.program)))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let lower = stderr.to_ascii_lowercase();
        let kind = if out.status.code() == Some(127) || NOT_FOUND.iter().any(|m| lower.contains(m))
        {
            SshFailure::Unavailable
        } else {
            SshFailure::Failed
        };
        return Err(fail(kind, format!("{}: {stderr}", out.status)));
    }
    parse_answer(&out.stdout, started, default_ttl)
        .map_err(|e| fail(SshFailure::BadAnswer, e.to_string()))
}

/// What is wrong with git-lfs-authenticate's answer.
#[derive(Debug, thiserror::Error)]
enum AnswerError {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("href {0:?} is not an http(s) URL")]
    Href(String),
    #[error("expires_at {0:?} is not RFC 3339")]
    ExpiresAt(String),
}

/// The JSON answer; `now` is when the command was started (what `expires_in` counts from).
fn parse_answer(
    stdout: &[u8],
    now: SystemTime,
    default_ttl: Option<u64>,
) -> Result<SshAuth, AnswerError> {
    let answer: Answer = serde_json::from_slice(stdout).map_err(AnswerError::NotJson)?;
    let href = Some(answer.href.trim().to_string()).filter(|h| !h.is_empty());
    if let Some(h) = &href {
        if !(h.starts_with("http://") || h.starts_with("https://")) {
            return Err(AnswerError::Href(h.clone()));
        }
    }
    // As git-lfs: `expires_in` wins over `expires_at`; Go's zero time means none.
    let expires = match (answer.expires_in, answer.expires_at.as_deref()) {
        (Some(secs), _) if secs != 0 => Some(offset(now, secs)),
        (_, Some(at)) if !at.starts_with("0001-01-01") && !at.is_empty() => {
            Some(parse_rfc3339(at).ok_or_else(|| AnswerError::ExpiresAt(at.to_string()))?)
        }
        _ => default_ttl
            .filter(|&t| t > 0)
            .map(|t| now + Duration::from_secs(t)),
    };
    Ok(SshAuth {
        href,
        header: answer.header,
        expires,
    })
}

fn offset(now: SystemTime, secs: i64) -> SystemTime {
    if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now.checked_sub(Duration::from_secs(secs.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let zone = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let mins = rest[1..3].parse::<i64>().ok()? * 60 + rest[4..6].parse::<i64>().ok()?;
            if rest.starts_with('-') {
                -mins * 60
            } else {
                mins * 60
            }
        }
        _ => return None,
    };
    let unix = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - zone;
    Some(offset(UNIX_EPOCH, unix))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Answers kept for this process, per destination, port, path and operation.
#[derive(Default)]
pub struct SshAuthCache {
    answers: Mutex<HashMap<(SshRemote, String), SshAuth>>,
}

/// An answer this close to expiry is asked for again (git-lfs's margin).
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);

impl SshAuthCache {
    /// The kept answer for `remote` and `operation` while it is good, else a new one from
    /// `authenticate` (kept when it succeeds).
    pub fn get_or(
        &self,
        remote: &SshRemote,
        operation: &str,
        authenticate: impl FnOnce() -> Result<SshAuth, GitError>,
    ) -> Result<SshAuth, GitError> {
        let key = (remote.clone(), operation.to_string());
        let lock = || self.answers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(auth) = lock().get(&key) {
            let good = auth
                .expires
                .is_none_or(|at| at > SystemTime::now() + EXPIRY_MARGIN);
            if good {
                tracing::debug!(destination = %remote.display_host(), operation, "ssh authenticate: cached");
                return Ok(auth.clone());
            }
        }
        let fresh = authenticate()?;
        lock().insert(key, fresh.clone());
        Ok(fresh)
    }
}

/// The process's cache: the filter and the agent each live for one git command.
pub fn cache() -> &'static SshAuthCache {
    static CACHE: std::sync::OnceLock<SshAuthCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(SshAuthCache::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn answers_and_their_expiry() {
        let now = at(1_000_000);
        let a = parse_answer(
            br#"{"href":"http://h/r.git/info/lfs","header":{"Authorization":"Bearer t"},"expires_in":60}"#,
            now,
            None,
        )
        .unwrap();
        assert_eq!(a.href.as_deref(), Some("http://h/r.git/info/lfs"));
        assert_eq!(a.header["Authorization"], "Bearer t");
        assert_eq!(a.expires, Some(at(1_000_060)));
        assert!(!format!("{a:?}").contains("Bearer"), "no secrets in Debug");

        let a = parse_answer(
            br#"{"header":{},"expires_at":"2026-11-23T22:00:30.5+01:00"}"#,
            now,
            None,
        )
        .unwrap();
        assert_eq!(a.href, None);
        assert_eq!(a.expires, Some(at(1_795_467_630)));
        // expires_in wins; Go's zero time is no expiry; the default TTL fills in.
        let a = parse_answer(
            br#"{"expires_in":10,"expires_at":"2030-01-01T00:00:00Z"}"#,
            now,
            None,
        )
        .unwrap();
        assert_eq!(a.expires, Some(at(1_000_010)));
        let a = parse_answer(br#"{"expires_at":"0001-01-01T00:00:00Z"}"#, now, None).unwrap();
        assert_eq!(a.expires, None);
        let a = parse_answer(br#"{}"#, now, Some(30)).unwrap();
        assert_eq!(a.expires, Some(at(1_000_030)));

        for bad in [
            &b"not json"[..],
            br#"{"href":"ssh://h/x"}"#,
            br#"{"expires_at":"yesterday"}"#,
            br#"{"header":{"a":1}}"#,
        ] {
            assert!(parse_answer(bad, now, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_against_known_instants() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(at(0)));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(at(951_868_800)));
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00-00:30"),
            Some(at(1_709_209_800))
        );
        for bad in [
            "2024-13-01T00:00:00Z",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_cache_keeps_answers_per_operation_until_they_expire() {
        let cache = SshAuthCache::default();
        let remote = SshRemote::parse("git@h:org/r.git").unwrap();
        let calls = std::cell::Cell::new(0);
        let answer = |expires: Option<SystemTime>| {
            calls.set(calls.get() + 1);
            Ok(SshAuth {
                href: None,
                header: BTreeMap::from([("n".into(), calls.get().to_string())]),
                expires,
            })
        };
        let long = Some(SystemTime::now() + Duration::from_secs(3600));
        let a = cache.get_or(&remote, "download", || answer(long)).unwrap();
        let b = cache.get_or(&remote, "download", || answer(long)).unwrap();
        assert_eq!((a.header["n"].as_str(), b.header["n"].as_str()), ("1", "1"));
        // Another operation is another login.
        cache.get_or(&remote, "upload", || answer(None)).unwrap();
        assert_eq!(calls.get(), 2);
        // An answer expiring within the margin is asked for again.
        let soon = Some(SystemTime::now() + Duration::from_secs(2));
        cache.get_or(&remote, "x", || answer(soon)).unwrap();
        cache.get_or(&remote, "x", || answer(soon)).unwrap();
        assert_eq!(calls.get(), 4);
        // A failure is not kept.
        let err = cache.get_or(&remote, "y", || {
            Err(GitError::SshAuthenticate {
                destination: "h".into(),
                kind: SshFailure::Failed,
                detail: String::new(),
            })
        });
        assert!(err.is_err());
        cache.get_or(&remote, "y", || answer(None)).unwrap();
        assert_eq!(calls.get(), 5);
    }
}
