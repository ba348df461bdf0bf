//! The protocol core's error type: what was malformed, and where.

/// Everything the protocol core can reject. Messages name the structure and position so
/// that a user (or a server's 400 response) can say exactly what is wrong.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    #[error("invalid hash string: {0}")]
    HashString(String),
    #[error("invalid xorb: {0}")]
    Xorb(String),
    #[error("invalid shard: {0}")]
    Shard(String),
    #[error("invalid compressed chunk: {0}")]
    Compression(String),
    #[error("xorb limit reached: {0}")]
    XorbFull(String),
    #[error("invalid reconstruction: {0}")]
    Reconstruction(String),
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;
