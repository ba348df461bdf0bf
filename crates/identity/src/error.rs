//! Why a request's credential does not get it through: the one error of this crate's checks.
//! The server answers each variant with its own status; the message says what to do.

/// A refused credential or signed URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that does not verify: a bad signature, expired, made by an older
    /// server, or an identity provider's token refused (HTTP 401).
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid credential (or signed URL) that may not do this: too small a scope, a transfer
    /// token on a user route, a tampered or expired URL (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// A repository the credential does not reach at all: answered as missing, whether it
    /// exists or not, so that a credential learns nothing of repositories it cannot see
    /// (HTTP 404).
    #[error("{0}")]
    NotReached(String),
}
