//! Credentials through git's credential helpers (`git credential fill|approve|reject`), the
//! same source and the same protocol git-lfs uses, so that the agent and the filter
//! authenticate exactly as git-lfs would.

use std::io::IsTerminal;

use crate::command::Git;
use git_xet_client::transport::{shown_url, CredentialStore, TransportError};
use git_xet_io::url::percent_decode;

pub use git_xet_client::transport::Credential;

/// git's credential helpers, through `git credential`.
pub struct GitCredentials {
    git: Git,
    /// Whether `fill` may prompt (git asks on the terminal when no helper answers).
    prompt: bool,
    /// The user named in the remote URL (`https://user@host/...`), given to `fill`.
    username: Option<String>,
}

impl GitCredentials {
    /// Prompts only where git would: a terminal is there and `GIT_TERMINAL_PROMPT` allows.
    pub fn new(git: Git) -> GitCredentials {
        let allowed = std::env::var("GIT_TERMINAL_PROMPT")
            .map(|v| {
                !matches!(
                    v.to_ascii_lowercase().as_str(),
                    "0" | "false" | "no" | "off"
                )
            })
            .unwrap_or(true);
        GitCredentials {
            git,
            prompt: allowed && has_terminal(),
            username: None,
        }
    }

    /// Asks for `user`'s credentials (the user named in the remote URL).
    pub fn for_user(mut self, user: Option<String>) -> GitCredentials {
        self.username = user.filter(|u| !u.is_empty());
        self
    }

    /// The `git credential` description of `url` (git reads the parts from `url=`).
    fn describe(&self, url: &str, credential: Option<&Credential>) -> String {
        let mut out = match credential {
            Some(c) if !c.attributes.is_empty() => c
                .attributes
                .iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect(),
            _ => format!("url={url}\n"),
        };
        if let (None, Some(user)) = (credential, &self.username) {
            out.push_str(&format!("username={user}\n"));
        }
        if let Some(c) = credential {
            if c.attributes.is_empty() {
                out.push_str(&format!(
                    "username={}\npassword={}\n",
                    c.username, c.password
                ));
            }
        }
        out.push('\n');
        out
    }
}

/// Whether the process has a controlling terminal git could prompt on.
fn has_terminal() -> bool {
    std::io::stderr().is_terminal()
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .is_ok()
}

impl CredentialStore for GitCredentials {
    fn fill(&self, url: &str) -> Result<Credential, TransportError> {
        let input = self.describe(url, None);
        let git = if self.prompt {
            self.git.clone().allowing_prompt()
        } else {
            self.git.clone()
        };
        let out = git
            .run_with_input(["credential", "fill"], Some(input.as_bytes()))
            .map_err(|e| TransportError::NoCredentials {
                url: shown_url(url),
                reason: format!(
                    "{e} (configure a credential helper, or put the token in the remote URL)"
                ),
            })?;
        parse_fill(&out).ok_or_else(|| TransportError::NoCredentials {
            url: shown_url(url),
            reason: "the credential helper returned no password".into(),
        })
    }

    fn approve(&self, url: &str, credential: &Credential) {
        let input = self.describe(url, Some(credential));
        if let Err(e) = self
            .git
            .run_with_input(["credential", "approve"], Some(input.as_bytes()))
        {
            tracing::debug!("git credential approve for {}: {e}", shown_url(url));
        }
    }

    fn reject(&self, url: &str, credential: &Credential) {
        let input = self.describe(url, Some(credential));
        if let Err(e) = self
            .git
            .run_with_input(["credential", "reject"], Some(input.as_bytes()))
        {
            tracing::debug!("git credential reject for {}: {e}", shown_url(url));
        }
    }
}

/// The answer of `git credential fill`; `None` without a password.
fn parse_fill(out: &str) -> Option<Credential> {
    let attributes: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let get = |key: &str| {
        attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    Some(Credential {
        username: get("username").unwrap_or_default(),
        password: get("password")?,
        attributes,
    })
}

/// Credentials in `remote_url`'s authority (percent-decoded, as git reads them), when `url`
/// is on the same scheme and host.
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
    (scheme.eq_ignore_ascii_case(url_scheme) && host.eq_ignore_ascii_case(url_host))
        .then(|| Credential::new(percent_decode(user), percent_decode(password)))
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
        let c = userinfo_for("https://me%40corp:p%3Aw%2Fd@h/r", "https://h/r").unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("me@corp", "p:w/d")
        );
    }

    #[test]
    fn fill_answers_are_kept_for_approve_and_reject() {
        let c = parse_fill("protocol=https\nhost=h\nusername=u\npassword=p=q\n").unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p=q"));
        let store = GitCredentials::new(Git::new());
        assert_eq!(
            store.describe("https://h/r", Some(&c)),
            "protocol=https\nhost=h\nusername=u\npassword=p=q\n\n"
        );
        assert!(parse_fill("username=u\n").is_none());
        assert_eq!(
            store.describe("https://h/r", Some(&Credential::new("a", "b"))),
            "url=https://h/r\nusername=a\npassword=b\n\n"
        );
        let store = store.for_user(Some("me@corp".into()));
        assert_eq!(
            store.describe("https://h/r", None),
            "url=https://h/r\nusername=me@corp\n\n"
        );
    }
}
