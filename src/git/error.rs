//! The error type of the git layer.

use std::path::PathBuf;

use thiserror::Error;

/// What can go wrong integrating with git. Messages name the command or file involved and,
/// where the user can fix something, say how.
#[derive(Debug, Error)]
pub enum GitError {
    /// `git` (or `git lfs`) could not be started at all.
    #[error("cannot run `{program}`: {source} (is it installed and on PATH?)")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// A git command exited with an error.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    /// Not inside a git repository.
    #[error("{0} is not inside a git repository (run this command in a clone)")]
    NotARepository(PathBuf),
    /// A configuration problem the user must fix.
    #[error("{0}")]
    Config(String),
    /// The repository has no such remote or it has no URL.
    #[error("remote {0:?} is not configured (see `git remote -v`)")]
    NoRemote(String),
    /// `git-lfs-authenticate` over ssh gave no answer; `kind` says why.
    #[error("ssh authentication to {destination} failed ({kind}): {detail}")]
    SshAuthenticate {
        destination: String,
        kind: crate::git::ssh::SshFailure,
        detail: String,
    },
    /// git has no credentials for a URL.
    #[error("no credentials for {url}: {reason}")]
    Credentials { url: String, reason: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Lfs(#[from] crate::lfs::LfsError),
    /// Anything from an HTTP exchange with an LFS or XET server.
    #[error("{0}")]
    Http(String),
    /// git sent something the long-running filter protocol does not allow.
    #[error("filter protocol error: {0}")]
    FilterProtocol(String),
    /// A step of migrate/quickstart failed; the message says which and what to do.
    #[error("{0}")]
    Failed(String),
}

impl GitError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> GitError {
        GitError::Io {
            context: context.into(),
            source,
        }
    }
}
