//! The error type of the git layer.

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

use git_xet_lfs::pointer::Oid;

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
    /// The repository has no remote, so none can be chosen.
    #[error("this repository has no remote (add one with `git remote add origin URL`)")]
    NoRemotes,
    /// Several remotes and none is `origin`: the user must name one.
    #[error("several remotes ({}) and none is `origin`: name one", .0.join(", "))]
    SeveralRemotes(Vec<String>),
    /// A git config value that does not parse as its key's type.
    #[error("bad {expected} config value {value:?} for {key:?}")]
    BadConfigValue {
        key: String,
        value: String,
        expected: &'static str,
    },
    /// A setting the command needs is set neither in the environment nor in git config.
    #[error("no {what} configured (set {env} or git config {key})")]
    NotConfigured {
        what: &'static str,
        env: &'static str,
        key: &'static str,
    },
    /// A command-line option out of its range.
    #[error("{option} {requirement}")]
    BadOption {
        option: &'static str,
        requirement: &'static str,
    },
    /// Too little disk space for what the command would write; nothing was written.
    #[error(
        "{dir} has {} free; {what} needs about {}: free some space, or choose another \
         directory{hint}",
        git_xet_io::human::human_bytes(*.available),
        git_xet_io::human::human_bytes(*.needed),
        dir = .dir.display()
    )]
    NoSpace {
        dir: PathBuf,
        what: &'static str,
        needed: u64,
        available: u64,
        hint: &'static str,
    },
    /// The repository has no such remote or it has no URL.
    #[error("remote {0:?} is not configured (see `git remote -v`)")]
    NoRemote(String),
    /// `git-lfs-authenticate` over ssh gave no answer; `kind` says why.
    #[error("ssh authentication to {destination} failed ({kind}): {detail}")]
    SshAuthenticate {
        destination: String,
        kind: crate::ssh::SshFailure,
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
    Lfs(#[from] git_xet_lfs::LfsError),
    /// An HTTP exchange with a server failed; `source` says how.
    #[error("reading {url}: {source}")]
    Http {
        url: String,
        source: git_xet_client::transport::TransportError,
    },
    /// A server answered an HTTP request with an error status.
    #[error("reading {url}: the server answered HTTP {status}")]
    HttpStatus { url: String, status: u16 },
    /// git sent something the long-running filter protocol does not allow.
    #[error("filter protocol error: {0}")]
    FilterProtocol(String),
    /// The async runtime (tokio) could not be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// One failure that several files share (the objects of one checkout when the fetcher
    /// could not start, the files of one object).
    #[error(transparent)]
    Shared(Arc<GitError>),
    /// Bringing the object of a file into the store failed.
    #[error("downloading {path}: {source}")]
    Fetch {
        path: String,
        source: Box<git_xet_lfs::LfsError>,
    },
    /// An object of `migrate` was refused by the LFS server or could not be moved.
    #[error("{path}: {source}")]
    Object {
        path: String,
        source: Box<git_xet_lfs::LfsError>,
    },
    /// `migrate --verify` could not download an object it had uploaded.
    #[error("verification of {path} ({oid}) failed: {source}")]
    Verification {
        path: String,
        oid: Oid,
        source: Box<git_xet_lfs::LfsError>,
    },
    /// The LFS server chose another transfer than `xet` where only `xet` will do.
    #[error(
        "the LFS server at {endpoint} does not offer the `xet` transfer (it chose `{chosen}`); \
         migrate needs a XET-enabled server such as `git xet server`"
    )]
    NoXetTransfer { endpoint: String, chosen: String },
    /// Objects that no remote's LFS server has (`examples` names some).
    #[error(
        "{count} LFS objects are on no LFS server this repository's remotes reach, e.g. \
         {examples}; add the remote that has them (`git remote add old URL`) and re-run"
    )]
    ObjectsUnreachable { count: usize, examples: String },
    /// A smudged file streamed to git while it downloaded was retried, and the retry
    /// differed from what git had received.
    #[error(
        "the download was retried and differed from what git had already received; the \
         object is stored now, so checking the file out again will work"
    )]
    StreamDiverged,
    /// A file streamed to git ended early.
    #[error("sent {sent} of {size} bytes")]
    StreamIncomplete { sent: u64, size: u64 },
    /// `quickstart`: the file the demo cloned is not the one it pushed.
    #[error("{what}: the clone's file differs from the original")]
    ContentMismatch { what: String },
    /// `quickstart`: its server did not start.
    #[error("the server did not start; its log:\n{log}")]
    ServerStart { log: String },
    /// The commits a push may send hold more objects than the agent lists to check what the
    /// push contains (`outgoing`); it then uploads only what git-lfs hands over.
    #[error("the commits this push may send hold more than {limit} blobs and commits")]
    TooManyOutgoing { limit: usize },
}

impl GitError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> GitError {
        GitError::Io {
            context: context.into(),
            source,
        }
    }

    /// Configuration the user must fix (reported, never worked around).
    pub fn is_misconfiguration(&self) -> bool {
        matches!(
            self,
            GitError::NoRemotes
                | GitError::SeveralRemotes(_)
                | GitError::BadConfigValue { .. }
                | GitError::NotConfigured { .. }
                | GitError::BadOption { .. }
        )
    }
}
