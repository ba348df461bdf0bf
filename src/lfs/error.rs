//! The error type of the lfs layer.

use thiserror::Error;

/// How a Batch API request failed (callers decide by this, e.g. the filter's hand-off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchFailure {
    /// No HTTP answer: connection refused, DNS, TLS handshake, timeout.
    Unreachable(String),
    /// An HTTP error status (after retries for 5xx).
    Status { status: u16, message: String },
    /// An answer that is not a Batch API response.
    BadAnswer(String),
}

impl std::fmt::Display for BatchFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchFailure::Unreachable(e) => write!(f, "no answer: {e}"),
            BatchFailure::Status { status, message } => {
                let hint = match status {
                    401 | 403 => " (check the credentials git uses for this remote: a token in the remote URL or a credential helper)",
                    404 => " (is this an LFS server? `git xet status` shows the endpoint in use)",
                    _ => "",
                };
                write!(f, "HTTP {status}: {message}{hint}")
            }
            BatchFailure::BadAnswer(e) => write!(f, "the answer is not valid: {e}"),
        }
    }
}

/// Everything that can go wrong in the lfs layer. Messages say what was wrong with which
/// input, so that git-lfs (which shows them to the user) and logs are useful as they are.
#[derive(Debug, Error)]
pub enum LfsError {
    /// A message from git-lfs that does not follow the custom transfer protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A pointer file that does not follow the git-lfs pointer specification.
    #[error("invalid LFS pointer: {0}")]
    Pointer(String),
    /// The batch API action for an object lacks what the `xet` transfer needs.
    #[error("invalid xet action from the LFS server: {0}")]
    Action(String),
    /// Moving an object failed; the message says why and what to do.
    #[error("{0}")]
    Transfer(String),
    /// A Batch API request got no usable answer; `failure` says how it failed.
    #[error("LFS batch request to {url}: {failure}")]
    Batch { url: String, failure: BatchFailure },
    /// A bug: the message asks the user to report it.
    #[error("{0}")]
    Internal(String),
    /// The XET client engine failed; its message says what and why.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// Reading stdin or writing stdout failed: the connection to git-lfs is gone.
    #[error("i/o with git-lfs failed: {0}")]
    Io(#[from] std::io::Error),
}
