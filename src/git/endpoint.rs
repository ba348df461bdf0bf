//! A remote's LFS Batch API endpoint, the headers its requests carry, and how it
//! authenticates: `git-lfs-authenticate` over ssh for ssh remotes (as git-lfs), git's
//! credentials for http ones.

use crate::git::credentials;
use crate::git::repo::{lfs_endpoint_from_remote_url, Repo};
use crate::git::ssh::{self, SshRemote};
use crate::git::GitError;
use crate::lfs::batch::Endpoint;
use crate::lfs::protocol::Operation;

/// Where a remote's LFS server is, before anything is asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An http(s) endpoint.
    Http(String),
    /// An ssh remote: `git-lfs-authenticate` names the endpoint; `fallback` is git-lfs's
    /// guess when it names none.
    Ssh {
        remote: SshRemote,
        fallback: String,
        /// The URL as configured (for `lfs.<url>.*` settings).
        url: String,
    },
    /// Neither (a local path, `file://`): only git-lfs can move its objects.
    Other(String),
}

impl Source {
    /// How requests to it authenticate, for `git xet status`.
    pub fn auth_method(&self) -> String {
        match self {
            Source::Http(_) => "http credentials (URL or git credential helper)".into(),
            Source::Ssh { remote, .. } => {
                format!("ssh git-lfs-authenticate on {}", remote.display_host())
            }
            Source::Other(_) => "none (git-lfs reads it directly)".into(),
        }
    }
}

/// The LFS server of `remote` (a name or URL) for `operation`, by git-lfs's rules.
pub fn source(repo: &Repo, remote: &str, operation: Operation) -> Result<Source, GitError> {
    let upload = operation == Operation::Upload;
    let is_http = |u: &str| u.starts_with("http://") || u.starts_with("https://");
    if let Some(url) = repo.configured_lfs_url(remote, upload)? {
        return Ok(if is_http(&url) {
            Source::Http(url)
        } else if let Some(ssh) = SshRemote::parse(&url) {
            // Configured endpoints are used as they are (no `/info/lfs` added).
            let fallback = ssh.https_url();
            Source::Ssh {
                remote: ssh,
                fallback,
                url,
            }
        } else {
            Source::Other(url)
        });
    }
    let url = repo.remote_url_for(remote, upload)?;
    Ok(if is_http(&url) {
        Source::Http(lfs_endpoint_from_remote_url(&url))
    } else if let Some(ssh) = SshRemote::parse(&url) {
        Source::Ssh {
            fallback: ssh.https_endpoint(),
            remote: ssh,
            url,
        }
    } else {
        Source::Other(url)
    })
}

/// The endpoint to send Batch API requests to and their headers; `None` for a server
/// only git-lfs can reach. An ssh remote whose `git-lfs-authenticate` fails is an error
/// ([`GitError::SshAuthenticate`]): git-lfs may still reach it (`git-lfs-transfer`).
pub fn resolve(
    repo: &Repo,
    remote: &str,
    operation: Operation,
) -> Result<Option<Endpoint>, GitError> {
    match source(repo, remote, operation)? {
        Source::Http(url) => {
            let remote_url = repo.remote_url(remote).ok();
            let authorization =
                credentials::authorization(repo.git(), remote_url.as_deref(), &url).ok();
            Ok(Some(Endpoint::new(&url).with_authorization(authorization)))
        }
        Source::Ssh {
            remote,
            fallback,
            url,
        } => {
            let auth = ssh::authenticate(&repo.config(), &url, &remote, operation.as_str())?;
            let url = auth.href.unwrap_or(fallback);
            Ok(Some(Endpoint {
                url: url.trim_end_matches('/').to_string(),
                header: auth.header,
            }))
        }
        Source::Other(_) => Ok(None),
    }
}

/// The `Authorization` header for a request to `url` (the agent's token refresh): from
/// `git-lfs-authenticate` for an ssh remote, else git's credentials.
pub fn authorization(
    repo: &Repo,
    remote: &str,
    operation: Operation,
    url: &str,
) -> Result<String, GitError> {
    // No remote (git-lfs gave none) or an unreadable one: git's credentials for the URL.
    if let Ok(Source::Ssh {
        remote,
        url: ssh_url,
        ..
    }) = source(repo, remote, operation)
    {
        let auth = ssh::authenticate(&repo.config(), &ssh_url, &remote, operation.as_str())?;
        return auth
            .header
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v)
            .ok_or_else(|| GitError::Credentials {
                url: credentials::strip_userinfo(url),
                reason: format!(
                    "git-lfs-authenticate on {} gave no Authorization header",
                    remote.display_host()
                ),
            });
    }
    let remote_url = repo.remote_url(remote).ok();
    credentials::authorization(repo.git(), remote_url.as_deref(), url)
}
