//! A remote's LFS Batch API endpoint, the headers its requests carry, and how it
//! authenticates: `git-lfs-authenticate` over ssh for ssh remotes (as git-lfs), git's
//! credentials for http ones.

use std::sync::Arc;

use crate::http::{self, RemoteHttp};
use crate::repo::{lfs_endpoint_from_remote_url, Repo};
use crate::ssh::{self, SshRemote};
use crate::GitError;
use git_xet_client::transport::{Authenticator, HeaderSource, TransportError};
use git_xet_lfs::batch::Endpoint;
use git_xet_lfs::protocol::Operation;

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

/// The endpoint to send Batch API requests to, their headers, and how they authenticate;
/// `None` for a server only git-lfs can reach. An http endpoint authenticates with git's
/// credentials; an ssh one with `git-lfs-authenticate`'s answer only (git's credentials
/// are never asked for it). An ssh remote whose `git-lfs-authenticate` fails is an error
/// ([`GitError::SshAuthenticate`]): git-lfs may still reach it (`git-lfs-transfer`).
pub fn resolve(
    repo: &Repo,
    remote: &str,
    operation: Operation,
) -> Result<Option<RemoteHttp>, GitError> {
    let (endpoint, auth) = match source(repo, remote, operation)? {
        Source::Http(url) => {
            let remote_url = repo.remote_url(remote).ok();
            let auth = http::authenticator(repo, remote_url.as_deref(), &url)?;
            (Endpoint::new(&url), auth)
        }
        Source::Ssh {
            remote,
            fallback,
            url,
        } => {
            let answer = ssh::authenticate(&repo.config(), &url, &remote, operation.as_str())?;
            let mut endpoint = Endpoint {
                url: answer
                    .href
                    .unwrap_or(fallback)
                    .trim_end_matches('/')
                    .to_string(),
                header: answer.header,
            };
            // The Authorization is asked again (from the cache, or over ssh once it
            // expired) for each request.
            let _ = endpoint.take_authorization();
            (endpoint, ssh_authenticator(repo, url, remote, operation))
        }
        Source::Other(_) => return Ok(None),
    };
    Ok(Some(RemoteHttp {
        endpoint,
        http: http::factory(repo)?,
        auth,
    }))
}

/// How the requests of `remote` (a name or URL) authenticate, found only when a request
/// is made (the agent's token refresh): `git-lfs-authenticate` for an ssh remote, else
/// git's credentials for the request's URL.
pub fn authenticator(
    repo: &Repo,
    remote: &str,
    operation: Operation,
) -> Result<Arc<Authenticator>, GitError> {
    match source(repo, remote, operation) {
        Ok(Source::Ssh { remote, url, .. }) => Ok(ssh_authenticator(repo, url, remote, operation)),
        Ok(Source::Http(url)) => {
            let remote_url = repo.remote_url(remote).ok();
            http::authenticator(repo, remote_url.as_deref(), &url)
        }
        // A local path: no credentials.
        Ok(Source::Other(_)) => Ok(Arc::new(Authenticator::anonymous())),
        Err(e) => Err(e),
    }
}

/// An authenticator sending the `Authorization` header of `git-lfs-authenticate`'s
/// answer for `remote` (kept until it expires, see [`ssh::authenticate`]).
fn ssh_authenticator(
    repo: &Repo,
    url: String,
    remote: SshRemote,
    operation: Operation,
) -> Arc<Authenticator> {
    let config = repo.config();
    let source: HeaderSource = Arc::new(move || {
        let failed = |reason: String| TransportError::NoCredentials {
            url: remote.display_host(),
            reason,
        };
        let mut answer = ssh::authenticate(&config, &url, &remote, operation.as_str())
            .map_err(|e| failed(e.to_string()))?;
        let endpoint_header = std::mem::take(&mut answer.header);
        Endpoint {
            url: String::new(),
            header: endpoint_header,
        }
        .take_authorization()
        .ok_or_else(|| failed("git-lfs-authenticate gave no Authorization header".into()))
    });
    Arc::new(Authenticator::with_header_source(source))
}
