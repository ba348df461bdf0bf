//! The error type of the lfs layer.

use thiserror::Error;

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
