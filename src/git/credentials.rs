//! Credentials through git's credential helpers (`git credential fill`), the same source
//! git-lfs uses, so the agent authenticates exactly as git-lfs did.

use std::fmt;

use base64::Engine;

use crate::git::command::Git;
use crate::git::GitError;

/// A user name and password (for our server: any name, and a token as the password).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credential {{ username: {:?}, password: <redacted> }}",
            self.username
        )
    }
}

impl Credential {
    /// The value of an HTTP `Authorization` header.
    pub fn basic_auth(&self) -> String {
        let raw = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// Asks git's credential helpers for `url`'s credentials, without prompting on a terminal.
pub fn fill(git: &Git, url: &str) -> Result<Credential, GitError> {
    let input = format!("url={url}\n\n");
    let out = git
        .run_with_input(["credential", "fill"], Some(input.as_bytes()))
        .map_err(|e| GitError::Credentials {
            url: strip_userinfo(url),
            reason: format!(
                "{e} (configure a credential helper, or put the token in the remote URL)"
            ),
        })?;
    let mut username = String::new();
    let mut password = None;
    for line in out.lines() {
        if let Some(v) = line.strip_prefix("username=") {
            username = v.to_string();
        } else if let Some(v) = line.strip_prefix("password=") {
            password = Some(v.to_string());
        }
    }
    let password = password.ok_or_else(|| GitError::Credentials {
        url: strip_userinfo(url),
        reason: "the credential helper returned no password".into(),
    })?;
    Ok(Credential { username, password })
}

/// The `Authorization` header for `url`: credentials written into the remote URL
/// (`http://user:token@host/...`, which git-lfs uses for that host), else git's credential
/// helpers.
pub fn authorization(git: &Git, remote_url: Option<&str>, url: &str) -> Result<String, GitError> {
    if let Some(c) = remote_url.and_then(|r| userinfo_for(r, url)) {
        return Ok(c.basic_auth());
    }
    fill(git, url).map(|c| c.basic_auth())
}

/// Credentials in `remote_url`'s authority, when `url` is on the same scheme and host.
pub fn userinfo_for(remote_url: &str, url: &str) -> Option<Credential> {
    let (scheme, rest) = remote_url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (userinfo, host) = authority.rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':')?;
    let (url_scheme, url_rest) = url.split_once("://")?;
    let url_host = url_rest.split('/').next()?;
    let url_host = url_host
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(url_host);
    (scheme == url_scheme && host == url_host).then(|| Credential {
        username: user.to_string(),
        password: password.to_string(),
    })
}

/// `url` without `user:password@`, for messages.
pub fn strip_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest
                .split_once('/')
                .map(|(a, p)| (a, format!("/{p}")))
                .unwrap_or((rest, String::new()));
            let host = authority
                .rsplit_once('@')
                .map(|(_, h)| h)
                .unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_stripped_from_messages() {
        assert_eq!(strip_userinfo("http://u:secret@h:1/a/b"), "http://h:1/a/b");
        assert_eq!(strip_userinfo("http://h"), "http://h");
    }

    #[test]
    fn remote_url_credentials_apply_to_the_same_host_only() {
        let c = userinfo_for(
            "http://x:tok@127.0.0.1:9/org/r.git",
            "http://127.0.0.1:9/org/r.git/info/lfs/t",
        );
        assert_eq!(c.unwrap().password, "tok");
        assert!(userinfo_for("http://x:tok@127.0.0.1:9/r", "http://127.0.0.1:10/r").is_none());
        assert!(userinfo_for("http://127.0.0.1:9/r", "http://127.0.0.1:9/r").is_none());
    }

    #[test]
    fn basic_auth_header() {
        let c = Credential {
            username: "x".into(),
            password: "tok".into(),
        };
        assert_eq!(c.basic_auth(), "Basic eDp0b2s=");
        assert!(!format!("{c:?}").contains("tok"));
    }
}
