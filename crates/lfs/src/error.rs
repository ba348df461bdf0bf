//! The error type of the lfs layer.

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

use crate::pointer::Oid;

/// Everything that can go wrong in the lfs layer. Messages say what was wrong with which
/// input, so that git-lfs (which shows them to the user) and logs are useful as they are.
#[derive(Debug, Error)]
pub enum LfsError {
    /// A message from git-lfs that does not follow the custom transfer protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A pointer file that does not follow the git-lfs pointer specification.
    #[error(transparent)]
    Pointer(#[from] git_xet_core::lfs::pointer::PointerError),
    /// The batch API action for an object lacks what the `xet` transfer needs.
    #[error("invalid xet action from the LFS server: {0}")]
    Action(String),
    /// The repository the transfer runs in could not be worked out (git, its configuration,
    /// credentials): the source, an error of the layer that looked, says what.
    #[error(transparent)]
    Setup(Arc<dyn std::error::Error + Send + Sync>),
    /// The objects a push may contain could not be listed (git failed): the source, an
    /// error of the git layer, says why. Nothing is read ahead of git-lfs then.
    #[error("cannot list the LFS objects this push may contain: {0}")]
    Outgoing(Arc<dyn std::error::Error + Send + Sync>),
    /// A local file or directory (git-lfs's store or temp directory, a file to upload)
    /// could not be read or written.
    #[error("{context} {}: {source}", .path.display())]
    LocalIo {
        /// What was being done: `cannot read`, `cannot create`.
        context: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file to upload does not have the size git-lfs announced.
    #[error(
        "{} is {actual} bytes but git-lfs announced {announced}; was it modified during the push?",
        .path.display()
    )]
    UploadSizeMismatch {
        path: PathBuf,
        actual: u64,
        announced: u64,
    },
    /// The file changed while it was read for upload; nothing was registered.
    #[error(
        "{} changed while it was being uploaded (its sha256 is now {now}); retry the push",
        .path.display()
    )]
    UploadChanged { path: PathBuf, now: Oid },
    /// The server's reconstruction of an object is not as long as the object; nothing was
    /// stored.
    #[error("the server's reconstruction of {oid} has {got} bytes, git-lfs expects {expected}")]
    WrongSize { oid: Oid, got: u64, expected: u64 },
    /// The LFS server refused one object of a Batch API answer (missing, forbidden...).
    #[error("{0}")]
    ObjectRefused(Box<ObjectRefusal>),
    /// The LFS server's Batch API answer has no download action for an object it did not
    /// refuse.
    #[error("the LFS server at {endpoint} gave no download for {oid}")]
    NoDownload { endpoint: String, oid: Oid },
    /// A Batch API answer that is not one (not JSON, missing fields).
    #[error("LFS batch answer from {url} is not valid: {detail}")]
    BadAnswer { url: String, detail: String },
    /// The async runtime (tokio) could not be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(Arc<std::io::Error>),
    /// The push's coordinating agent (see `coordinator`) uploaded this object for this agent
    /// and it failed there; its message says why.
    #[error("{0}")]
    Coordinated(String),
    /// A bug: the message asks the user to report it.
    #[error("{0}")]
    Internal(String),
    /// The XET client engine failed; its message says what and why.
    #[error(transparent)]
    Client(#[from] git_xet_client::ClientError),
    /// An HTTP request to the LFS server could not be made or was refused: TLS, proxy,
    /// unreachable, credentials (see the variants of [`TransportError`]).
    ///
    /// [`TransportError`]: git_xet_client::TransportError
    #[error(transparent)]
    Http(Box<git_xet_client::TransportError>),
    /// The LFS server answered a request with an error status (other than 401).
    #[error("{}", .0)]
    Status(Box<StatusError>),
    /// Reading stdin or writing stdout failed: the connection to git-lfs is gone.
    #[error("i/o with git-lfs failed: {0}")]
    Io(#[from] std::io::Error),
}

impl From<git_xet_client::TransportError> for LfsError {
    fn from(e: git_xet_client::TransportError) -> Self {
        LfsError::Http(Box::new(e))
    }
}

/// One object the LFS server refused in a Batch API answer, with its reasons.
#[derive(Debug, Error)]
#[error("the LFS server at {endpoint} refused {oid}: {message} (code {code})")]
pub struct ObjectRefusal {
    pub endpoint: String,
    pub oid: Oid,
    /// The Batch API's per-object error code (404: not there, 403: forbidden...).
    pub code: u32,
    pub message: String,
}

/// An error status from the LFS server.
#[derive(Debug, Error)]
#[error("{what} at {url}: HTTP {status}: {message}{}", status_hint(*.status))]
pub struct StatusError {
    /// The request: `LFS batch request`, `verify`, `token refresh`.
    pub what: &'static str,
    pub url: String,
    pub status: u16,
    /// The server's own explanation.
    pub message: String,
}

impl LfsError {
    pub fn object_refused(endpoint: String, oid: Oid, code: u32, message: String) -> LfsError {
        LfsError::ObjectRefused(Box::new(ObjectRefusal {
            endpoint,
            oid,
            code,
            message,
        }))
    }

    pub fn status(what: &'static str, url: String, status: u16, message: String) -> LfsError {
        LfsError::Status(Box::new(StatusError {
            what,
            url,
            status,
            message,
        }))
    }
}

fn status_hint(status: u16) -> String {
    match status {
        401 | 403 => format!(" ({})", git_xet_client::transport::CREDENTIALS_HINT),
        404 => " (is this an LFS server? `git xet status` shows the endpoint in use)".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_client::transport::{TransportError, CREDENTIALS_HINT};

    /// A refused request says what to check in one wording, whether it was a 401 the
    /// transport saw or a 403 the server answered.
    #[test]
    fn one_credentials_hint() {
        let refused = TransportError::AuthRefused {
            url: "https://h/info/lfs".into(),
            status: 401,
        };
        let forbidden = LfsError::status("verify", "https://h/x".into(), 403, "no".into());
        assert!(refused.to_string().ends_with(CREDENTIALS_HINT), "{refused}");
        assert!(
            forbidden.to_string().contains(CREDENTIALS_HINT),
            "{forbidden}"
        );
        assert!(CREDENTIALS_HINT.contains("credential helper, or user:token"));
    }
}
